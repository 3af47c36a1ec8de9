//===- PerfDataOutput.cpp - magic-trace-emulate --perf-data ---------------===//
#include "PerfDataOutput.h"

#include "magic_trace/PerfData.h"

using namespace llvm;

namespace magic_trace {

cl::OptionCategory &perfDataCategory() {
  static cl::OptionCategory category("magic-trace-emulate perf.data output");
  return category;
}

static cl::opt<std::string> perfDataPath(
    "perf-data",
    cl::desc("Also write the recording as a per-thread Intel PT perf.data "
             "that `perf script --itrace` decodes"),
    cl::value_desc("FILE"), cl::cat(perfDataCategory()));

Error writePerfDataOption(const Snapshot &snapshot,
                          const PacketWriter::Options &writer) {
  if (perfDataPath.empty())
    return Error::success();
  PerfDataWriteOptions options;
  options.noRetComp = writer.noRetComp;
  options.cyc = writer.timer != TimerResolution::Low;
  return writePerfData(snapshot, perfDataPath, options);
}

} // namespace magic_trace
