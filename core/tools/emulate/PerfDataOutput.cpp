//===- PerfDataOutput.cpp - magic-trace-emulate --perf-data ---------------===//
#include "PerfDataOutput.h"

#include "magic_trace/PerfData.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace magic_trace {

cl::OptionCategory &perfDataCategory() {
  static cl::OptionCategory category("magic-trace-emulate perf.data output");
  return category;
}

static cl::opt<std::string> perfDataPath(
    "perf-data",
    cl::desc("Also write the recording as a per-thread Intel PT perf.data "
             "that `perf script --itrace` decodes (default: none)"),
    cl::value_desc("FILE"), cl::cat(perfDataCategory()));

/// The bundle directory: the tool's -o option (a cl::opt<std::string> in
/// Emulate.cpp), looked up so that the main file needs no change for this.
static std::string bundleDir() {
  auto &options = cl::getRegisteredOptions();
  auto it = options.find("o");
  if (it == options.end())
    return "";
  return static_cast<cl::opt<std::string> *>(it->second)->getValue();
}

Error writePerfDataOption(const Snapshot &snapshot,
                          const PacketWriter::Options &writer) {
  if (perfDataPath.empty())
    return Error::success();
  // Module copies (the vdso) are named relative to the bundle.
  Snapshot resolved = snapshot;
  for (Module &module : resolved.modules)
    if (!module.fileCopy.empty() && sys::path::is_relative(module.fileCopy)) {
      SmallString<256> path(bundleDir());
      sys::path::append(path, module.fileCopy);
      sys::fs::make_absolute(path);
      module.fileCopy = path.str().str();
    }
  PerfDataWriteOptions options;
  options.noRetComp = writer.noRetComp;
  options.cyc = writer.timer != TimerResolution::Low;
  return writePerfData(resolved, perfDataPath, options);
}

} // namespace magic_trace
