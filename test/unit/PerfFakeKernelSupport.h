//===- PerfFakeKernelSupport.h - The perf tests' recordings -----*- C++ -*-===//
//
// What the perf backend's tests on FakeKernel share: the Skylake PMU
// fixture, a recorder on a fake kernel, and real PT to feed it (what the
// emulator recorded of test programs, once per test binary, cut at its PSBs
// into the stretches a thread runs on a CPU), decoded against its ground
// truth.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_PERFFAKEKERNELSUPPORT_H
#define MAGIC_TRACE_TEST_PERFFAKEKERNELSUPPORT_H

#include "FakeKernel.h"

#include "magic_trace/Decoder.h"
#include "magic_trace/PerfRecorder.h"
#include "magic_trace/PtraceStepper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace perf_fake {

using namespace magic_trace;
using magic_trace::testing::FakeKernel;

constexpr uint32_t kPid = 4000;
constexpr uint64_t kAuxTruncated = 0x01, kAuxPartial = 0x04;

inline std::string fixture(const char *name) {
  return std::string(MT_TEST_SOURCE_DIR) + "/unit/fixtures/" + name;
}

/// A PSB packet (Intel SDM Vol. 3C §32.4.2.17: 02 82 repeated 8 times), the
/// smallest stretch a fake CPU can write.
inline std::vector<uint8_t> psbPacket() {
  std::vector<uint8_t> psb(16);
  for (int i = 0; i < 16; i += 2)
    psb[i] = 0x02, psb[i + 1] = 0x82;
  return psb;
}

inline FakeKernel::Options skylake() {
  FakeKernel::Options options;
  options.sysRoot = fixture("sysfs-skylake");
  return options;
}

inline std::unique_ptr<PerfRecorder>
makeRecorder(std::shared_ptr<FakeKernel> kernel, uint64_t auxSize = 1 << 20) {
  PerfRecorder::Options options;
  options.kernel = kernel;
  options.auxSize = auxSize;
  auto recorder = PerfRecorder::create(options);
  EXPECT_TRUE(bool(recorder)) << llvm::toString(recorder.takeError());
  return recorder ? std::move(*recorder) : nullptr;
}

/// What the emulator recorded of a test program, with a PSB every
/// `psbPeriod` bytes (more stretches to cut).
inline EmulateResult record(std::vector<std::string> argv, uint64_t psbPeriod) {
  EmulateOptions options;
  argv[0] = std::string(MT_TEST_BINARY_DIR) + "/inputs/" + argv[0];
  options.argv = argv;
  options.stop = "stop_here";
  options.maxInsns = 2'000'000;
  options.writer.psbPeriod = psbPeriod;
  auto run = emulateProgram(options);
  EXPECT_TRUE(bool(run)) << llvm::toString(run.takeError());
  return run ? std::move(*run) : EmulateResult();
}

/// emu_thread: main and a worker it starts; once per test binary run.
inline const EmulateResult &threadRecording() {
  static const EmulateResult *result =
      new EmulateResult(record({"emu_thread"}, 256));
  return *result;
}

/// emu_bench: one thread, more PT than an 8 KiB ring holds.
inline const EmulateResult &longRecording() {
  static const EmulateResult *result =
      new EmulateResult(record({"emu_bench", "20"}, 1024));
  return *result;
}

/// `bytes` cut at its PSBs (FakeKernel.h).
inline std::vector<std::vector<uint8_t>>
stretches(const std::vector<uint8_t> &bytes) {
  return magic_trace::testing::psbStretches(bytes);
}

inline const ThreadTrace *traceOf(const std::vector<ThreadTrace> &traces,
                                  uint64_t tid) {
  for (const ThreadTrace &trace : traces)
    if (trace.tid == tid)
      return &trace;
  return nullptr;
}

/// Decodes `trace` with the recording's modules as thread `truthIndex`.
inline ThreadDecode decodeAs(const EmulateResult &run, const ThreadTrace &trace,
                             size_t truthIndex, std::vector<uint64_t> *insns) {
  Snapshot snapshot = run.snapshot;
  snapshot.threads = {trace};
  snapshot.threads[0].tid = run.truth[truthIndex].tid;
  DecodeOptions options;
  options.threads = 1;
  auto result = decodeSnapshot(snapshot, options);
  EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
  if (!result)
    return {};
  auto expanded = expandInstructions(snapshot, result->threads[0], options);
  EXPECT_TRUE(bool(expanded)) << llvm::toString(expanded.takeError());
  if (expanded && insns)
    *insns = *expanded;
  return result->threads[0];
}

inline size_t countKind(const ThreadDecode &decode, ItemKind kind) {
  return std::count_if(
      decode.items.begin(), decode.items.end(),
      [&](const TraceItem &item) { return item.kind == kind; });
}

} // namespace perf_fake

#endif
