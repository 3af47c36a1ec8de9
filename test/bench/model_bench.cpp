//===- model_bench.cpp - Model build throughput and bytes per instruction -===//
//
// Builds the model of a large synthetic item stream: 512 functions, each with
// an inlined callee, and a random walk of calls, returns and jumps (depth up
// to 24), blocks of 12 instructions, an overflow every 200,000 blocks.
// Reports items/s and instructions/s, and the model's bytes per traced
// instruction ("bytes_per_insn", target <= 4).
//
//===----------------------------------------------------------------------===//

#include "magic_trace/ModelBuilder.h"

#include "benchmark/benchmark.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace magic_trace;

namespace {

constexpr uint64_t CodeBase = 0x400000;
constexpr uint64_t FunctionSize = 0x200;
constexpr unsigned FunctionCount = 512;
constexpr uint32_t BlockInsns = 12;

/// Three ranges per function: [f], [f > f_inlined], [f].
class SyntheticSymbols {
public:
  explicit SyntheticSymbols(StringTable &strings) {
    StringId file = strings.intern("synthetic.c");
    for (unsigned i = 0; i < FunctionCount; ++i) {
      uint64_t entry = CodeBase + i * FunctionSize;
      StringId name = strings.intern("function_" + std::to_string(i));
      StringId inlined = strings.intern("inlined_" + std::to_string(i));
      uint64_t bounds[] = {0, 0x40, 0x80, FunctionSize};
      for (int r = 0; r < 3; ++r) {
        SymbolRange range;
        range.begin = entry + bounds[r];
        range.end = entry + bounds[r + 1];
        range.functionEntry = entry;
        range.fromDebugInfo = true;
        range.frames.push_back({name, file, uint32_t(10 + r), false});
        if (r == 1)
          range.frames.push_back({inlined, file, 3, true});
        ranges.push_back(std::move(range));
      }
    }
    unknown.frames.push_back({strings.intern("[unknown]"), 0, 0, false});
    unknown.unknown = true;
  }

  const SymbolRange &lookup(uint64_t address) {
    auto it = std::upper_bound(
        ranges.begin(), ranges.end(), address,
        [](uint64_t a, const SymbolRange &r) { return a < r.begin; });
    if (it != ranges.begin() && address < std::prev(it)->end)
      return *std::prev(it);
    unknown.begin = address;
    unknown.end = address + 1;
    return unknown;
  }

private:
  std::vector<SymbolRange> ranges;
  SymbolRange unknown;
};

ThreadDecode syntheticStream(size_t blocks) {
  ThreadDecode decode;
  decode.tid = 1;
  decode.items.reserve(blocks + blocks / 200000 + 1);
  uint64_t state = 0x9e3779b97f4a7c15;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return uint32_t(state >> 33);
  };
  std::vector<unsigned> stack = {0};
  uint64_t time = 1000;
  for (size_t i = 0; i < blocks; ++i) {
    if (i > 0 && i % 200000 == 0) {
      TraceItem loss;
      loss.kind = ItemKind::Overflow;
      loss.timeNs = time;
      decode.items.push_back(loss);
      time += 500;
    }
    uint64_t entry = CodeBase + stack.back() * FunctionSize;
    TraceItem block;
    block.ip = entry + (next() % 0x1c0);
    block.lastIp = block.ip + 0x30;
    block.timeNs = time;
    block.detail = BlockInsns;
    uint32_t choice = next() % 100;
    if (choice < 40 && stack.size() < 24) {
      block.lastClass = BranchClass::DirectCall;
      stack.push_back(next() % FunctionCount);
    } else if (choice < 80 && stack.size() > 1) {
      block.lastClass = BranchClass::Return;
      stack.pop_back();
    } else {
      block.lastClass = BranchClass::CondBranch;
    }
    decode.items.push_back(block);
    decode.instructions += BlockInsns;
    time += BlockInsns;
  }
  return decode;
}

void BM_BuildThreadModel(benchmark::State &state) {
  StringTable strings;
  SyntheticSymbols symbols(strings);
  ThreadDecode decode = syntheticStream(size_t(state.range(0)));
  auto lookup = [&](uint64_t address) -> const SymbolRange & {
    return symbols.lookup(address);
  };
  ModelStats stats;
  for (auto _ : state) {
    stats = {};
    ThreadModel model = buildThreadModel(decode, lookup, nullptr, strings,
                                         ModelOptions{}, &stats);
    benchmark::DoNotOptimize(model.segments.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations() * decode.items.size()));
  state.counters["insns/s"] = benchmark::Counter(double(decode.instructions) *
                                                     double(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.counters["bytes_per_insn"] =
      double(stats.modelBytes) / double(decode.instructions);
  state.counters["frames"] = double(stats.frames);
  state.counters["segments"] = double(stats.segments);
  state.counters["stitched"] = double(stats.stitchedJoins);
}
BENCHMARK(BM_BuildThreadModel)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

} // namespace
