// Throughput of the writers on a large synthetic model (2 million frames by
// default; MT_BENCH_FRAMES overrides), with bytes of output per frame. The
// baseline is memcpy of the same number of bytes as the FXT output, the
// floor for any writer producing that much data.
//
//   build/bin/magic-trace-bench-writers-bench
#include "SyntheticModel.h"
#include "magic_trace/FxtWriter.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/raw_ostream.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace magic_trace;

namespace {

size_t frameCount(const TraceModel &model) {
  size_t frames = 0;
  for (const ThreadModel &thread : model.threads)
    for (const Segment &segment : thread.segments)
      frames += segment.frames.size();
  return frames;
}

const TraceModel &largeModel() {
  static TraceModel model = [] {
    test::SyntheticOptions options;
    options.threads = 4;
    size_t total = 2000000;
    if (const char *env = std::getenv("MT_BENCH_FRAMES"))
      total = std::strtoull(env, nullptr, 10);
    options.framesPerThread = total / options.threads;
    options.framesPerSegment = 100000;
    options.maxDepth = 40;
    options.names = 20000;
    return test::makeSyntheticModel(options);
  }();
  return model;
}

/// Counts bytes and throws them away.
class CountingStream : public llvm::raw_ostream {
public:
  CountingStream() { SetUnbuffered(); }
  uint64_t bytes = 0;

private:
  void write_impl(const char *ptr, size_t size) override {
    benchmark::DoNotOptimize(ptr);
    bytes += size;
  }
  uint64_t current_pos() const override { return bytes; }
};

template <typename Write> void runWriter(benchmark::State &state, Write write) {
  const TraceModel &model = largeModel();
  uint64_t bytes = 0;
  for (auto _ : state) {
    CountingStream os;
    if (llvm::Error err = write(model, os)) {
      state.SkipWithError(toString(std::move(err)).c_str());
      return;
    }
    bytes = os.bytes;
  }
  size_t frames = frameCount(model);
  state.SetItemsProcessed(int64_t(state.iterations() * frames));
  state.SetBytesProcessed(int64_t(state.iterations() * bytes));
  state.counters["bytes_per_frame"] = double(bytes) / double(frames);
  state.counters["frames"] = double(frames);
}

void BM_WriteFxt(benchmark::State &state) {
  runWriter(state, [](const TraceModel &model, llvm::raw_ostream &os) {
    return writeFxt(model, os);
  });
}

void BM_WriteFxtGzip(benchmark::State &state) {
  if (!fxtGzipAvailable()) {
    state.SkipWithError("no zlib in libLLVM");
    return;
  }
  runWriter(state, [](const TraceModel &model, llvm::raw_ostream &os) {
    FxtOptions options;
    options.gzip = true;
    return writeFxt(model, os, options);
  });
}

void BM_WriteChromeJson(benchmark::State &state) {
  runWriter(state, [](const TraceModel &model, llvm::raw_ostream &os) {
    return writeChromeJson(model, os);
  });
}

void BM_WriteFolded(benchmark::State &state) {
  runWriter(state, [](const TraceModel &model, llvm::raw_ostream &os) {
    return writeFolded(model, os);
  });
}

/// memcpy of as many bytes as the FXT output, from a 1 MiB chunk (like the
/// writer's buffer) into one buffer of the output's full size.
void BM_MemcpyFxtBytes(benchmark::State &state) {
  const TraceModel &model = largeModel();
  CountingStream counter;
  if (llvm::Error err = writeFxt(model, counter)) {
    state.SkipWithError(toString(std::move(err)).c_str());
    return;
  }
  std::vector<char> source(1 << 20, 'x'), target(counter.bytes);
  benchmark::DoNotOptimize(source.data());
  benchmark::DoNotOptimize(target.data());
  for (auto _ : state) {
    for (uint64_t done = 0; done < counter.bytes; done += source.size()) {
      std::memcpy(target.data() + done, source.data(),
                  std::min<uint64_t>(source.size(), counter.bytes - done));
      benchmark::DoNotOptimize(target.data());
      benchmark::ClobberMemory();
    }
  }
  size_t frames = frameCount(model);
  state.SetItemsProcessed(int64_t(state.iterations() * frames));
  state.SetBytesProcessed(int64_t(state.iterations() * counter.bytes));
}

BENCHMARK(BM_WriteFxt)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WriteFxtGzip)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WriteChromeJson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WriteFolded)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyFxtBytes)->Unit(benchmark::kMillisecond);

} // namespace
