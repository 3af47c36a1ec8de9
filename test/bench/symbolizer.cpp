//===- symbolizer.cpp - Range-cached symbolization vs per-address ---------===//
//
// The same address lists symbolized three ways:
//   - reference (llvm): LLVMSymbolizer::symbolizeInlinedCode for every address
//   (what a
//     per-address cache like the seed's pays on each new address; its module
//     and DWARF stay loaded across iterations, so only lookups are timed),
//   - ours/cold: a new Symbolizer per pass (DWARF parse, range computation),
//   - ours/warm: one Symbolizer, later passes all cache hits.
// Address lists: "hot" runs sym_inline's hotLoop byte by byte 1000 times (a
// trace of a hot loop); "sweep" visits every 4th byte of this program's own
// .text once (a large C++ program, deep inlining, almost no repeats: the
// cache's worst case). The program ends with a table of ratios to llvm.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/Symbolizer.h"

#include "llvm/DebugInfo/Symbolize/Symbolize.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

using namespace magic_trace;

namespace {

struct AddressList {
  std::string path;
  std::vector<uint64_t> addresses; ///< File addresses.
};

/// The .text bounds and a named symbol's extent, read with llvm::object.
bool readText(const std::string &path, llvm::StringRef symbolName,
              uint64_t &begin, uint64_t &end) {
  auto binary = llvm::object::ObjectFile::createObjectFile(path);
  if (!binary) {
    llvm::errs() << "error: " << llvm::toString(binary.takeError()) << "\n";
    return false;
  }
  for (const llvm::object::SectionRef &section :
       binary->getBinary()->sections())
    if (symbolName.empty() && llvm::cantFail(section.getName()) == ".text") {
      begin = section.getAddress();
      end = begin + section.getSize();
      return true;
    }
  for (const llvm::object::SymbolRef &symbol : binary->getBinary()->symbols()) {
    auto name = symbol.getName();
    if (name && *name == symbolName) {
      begin = llvm::cantFail(symbol.getAddress());
      end = begin + llvm::object::ELFSymbolRef(symbol).getSize();
      return true;
    }
    if (!name)
      llvm::consumeError(name.takeError());
  }
  return false;
}

const AddressList &hotList() {
  static AddressList list = [] {
    AddressList result{MT_TEST_BINARY_DIR "/inputs/sym_inline", {}};
    uint64_t begin = 0, end = 0;
    if (readText(result.path, "_ZN6shapes7hotLoopEi", begin, end))
      for (int pass = 0; pass < 1000; ++pass)
        for (uint64_t address = begin; address < end; ++address)
          result.addresses.push_back(address);
    return result;
  }();
  return list;
}

const AddressList &sweepList() {
  static AddressList list = [] {
    AddressList result{"/proc/self/exe", {}};
    uint64_t begin = 0, end = 0;
    if (readText(result.path, "", begin, end))
      for (uint64_t address = begin; address < end; address += 4)
        result.addresses.push_back(address);
    return result;
  }();
  return list;
}

const AddressList &listFor(int64_t which) {
  return which == 0 ? hotList() : sweepList();
}

Module moduleFor(const AddressList &list) {
  Module module;
  module.path = list.path;
  module.loadAddress =
      llvm::cantFail(Symbolizer::preferredLoadAddress(list.path));
  return module;
}

void setCounters(benchmark::State &state, const AddressList &list) {
  state.SetItemsProcessed(state.iterations() * list.addresses.size());
  state.SetLabel(state.range(0) == 0 ? "hot" : "sweep");
}

void referenceLlvmPerAddress(benchmark::State &state) {
  const AddressList &list = listFor(state.range(0));
  llvm::symbolize::LLVMSymbolizer symbolizer;
  // Load the module before timing.
  llvm::consumeError(
      symbolizer.symbolizeInlinedCode(list.path, {0, 0}).takeError());
  for (auto _ : state) {
    for (uint64_t address : list.addresses) {
      auto info = symbolizer.symbolizeInlinedCode(
          list.path, {address, llvm::object::SectionedAddress::UndefSection});
      if (!info) {
        state.SkipWithError(llvm::toString(info.takeError()).c_str());
        return;
      }
      benchmark::DoNotOptimize(info->getNumberOfFrames());
    }
  }
  setCounters(state, list);
}

void oursCold(benchmark::State &state) {
  const AddressList &list = listFor(state.range(0));
  Module module = moduleFor(list);
  for (auto _ : state) {
    StringTable strings;
    Symbolizer symbolizer({module}, strings);
    for (uint64_t address : list.addresses)
      benchmark::DoNotOptimize(symbolizer.lookup(address).frames.size());
    state.counters["ranges"] = double(symbolizer.stats().distinctRanges);
  }
  setCounters(state, list);
}

void oursWarm(benchmark::State &state) {
  const AddressList &list = listFor(state.range(0));
  StringTable strings;
  Symbolizer symbolizer({moduleFor(list)}, strings);
  for (uint64_t address : list.addresses)
    symbolizer.lookup(address);
  for (auto _ : state)
    for (uint64_t address : list.addresses)
      benchmark::DoNotOptimize(symbolizer.lookup(address).frames.size());
  setCounters(state, list);
}

BENCHMARK(referenceLlvmPerAddress)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(oursCold)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(oursWarm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

/// Prints as usual, and keeps each run's CPU time (all in ms) for the
/// ratios.
class RatioReporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run> &runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run &run : runs)
      if (run.run_type == Run::RT_Iteration && !run.error_occurred)
        // CPU time: this machine is shared, wall time is noise.
        times[run.benchmark_name()] = run.GetAdjustedCPUTime();
  }
  std::map<std::string, double> times;
};

} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  if (hotList().addresses.empty() || sweepList().addresses.empty()) {
    llvm::errs() << "error: cannot read the benchmark's programs (build "
                    "test/inputs first)\n";
    return 1;
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  llvm::outs() << "\nCPU time of llvm-symbolizer's per-address lookup "
                  "divided by ours (same addresses):\n";
  for (const char *list : {"0", "1"}) {
    std::string name = list[0] == '0' ? "hot  " : "sweep";
    auto time = [&](const char *bench) {
      auto found = reporter.times.find(std::string(bench) + "/" + list);
      return found == reporter.times.end() ? 0.0 : found->second;
    };
    double llvm = time("referenceLlvmPerAddress");
    size_t count = (list[0] == '0' ? hotList() : sweepList()).addresses.size();
    if (llvm == 0)
      continue;
    llvm::outs() << "  " << name << " (" << count << " addresses): cold "
                 << llvm::format("%.1fx", llvm / time("oursCold")) << ", warm "
                 << llvm::format("%.1fx", llvm / time("oursWarm")) << "\n";
  }
  benchmark::Shutdown();
  return 0;
}
