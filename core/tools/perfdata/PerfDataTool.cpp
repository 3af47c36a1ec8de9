//===- PerfDataTool.cpp - magic-trace-perfdata: perf.data in and out ------===//
//
//   magic-trace-perfdata FILE [--sideband]
//       prints the Snapshot our reader makes of a perf.data: process, CPU,
//       time conversion, threads and their PT byte counts, modules with
//       build-id, file and executable segments. --sideband reads a file
//       without Intel PT (e.g. `perf record -e cpu-clock --per-thread`).
//   magic-trace-perfdata --from-bundle DIR -o FILE
//       writes a bundle (ours or LLDB's `trace save`) as a per-thread Intel
//       PT perf.data that `perf script --itrace` decodes.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/PerfData.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace magic_trace;

namespace {

const char *const kUsage =
    "usage: magic-trace-perfdata FILE [--sideband]\n"
    "       magic-trace-perfdata --from-bundle DIR -o FILE\n";

int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-perfdata") << message << "\n";
  return 1;
}

void printSnapshot(const Snapshot &snapshot) {
  outs() << "process " << snapshot.pid << " \"" << snapshot.processName
         << "\"\n";
  outs() << "cpu " << snapshot.cpu.vendor << " " << snapshot.cpu.family << "/"
         << snapshot.cpu.model << "/" << snapshot.cpu.stepping << "\n";
  outs() << "time zero " << snapshot.time.timeZero << " mult "
         << snapshot.time.timeMult << " shift " << snapshot.time.timeShift
         << "\n";
  outs() << "timing mtc-freq " << unsigned(snapshot.timing.mtcFreq)
         << " nom-freq " << unsigned(snapshot.timing.nomFreq) << " ctc "
         << snapshot.timing.cpuid15Ebx << "/" << snapshot.timing.cpuid15Eax
         << "\n";
  for (const ThreadTrace &thread : snapshot.threads)
    outs() << "thread " << thread.tid << " " << thread.bytes.size() << " bytes"
           << (thread.wrapped ? " wrapped" : "") << "\n";
  for (const Module &module : snapshot.modules) {
    outs() << "module " << module.path << " build-id "
           << (module.buildId.empty() ? "-" : module.buildId) << " file "
           << (module.fileToRead().empty() ? "-" : module.fileToRead()) << "\n";
    for (const LoadedSegment &segment : module.segments)
      outs() << "  segment " << format_hex(segment.address, 0) << " size "
             << format_hex(segment.size, 0) << " offset "
             << format_hex(segment.fileOffset, 0)
             << (segment.executable ? " x" : "") << "\n";
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<StringRef> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "--from-bundle" && args[2] == "-o") {
    Expected<Snapshot> snapshot = loadBundle(args[1]);
    if (!snapshot)
      return fail(toString(snapshot.takeError()));
    if (Error err = writePerfData(*snapshot, args[3]))
      return fail(toString(std::move(err)));
    return 0;
  }
  if (args.empty() || args.size() > 2 || args[0].starts_with("-") ||
      (args.size() == 2 && args[1] != "--sideband")) {
    errs() << kUsage;
    return 2;
  }
  PerfDataReadOptions options;
  options.requireTrace = args.size() == 1;
  Expected<Snapshot> snapshot = readPerfData(args[0], options);
  if (!snapshot)
    return fail(toString(snapshot.takeError()));
  printSnapshot(*snapshot);
  return 0;
}
