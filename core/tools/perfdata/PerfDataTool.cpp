//===- PerfDataTool.cpp - magic-trace-perfdata: perf.data in and out ------===//
//
//   magic-trace-perfdata INPUT [--sideband]
//       prints the Snapshot our reader makes of INPUT, a perf.data or a
//       bundle: process, CPU, time conversion, threads and their PT byte
//       counts, modules with build-id, file and segments. --sideband reads a
//       perf.data without Intel PT (`perf record -e cpu-clock --per-thread`).
//       --records also prints the data section's records by type and, for a
//       per-CPU recording, each CPU's AUX bytes and how they were split.
//   magic-trace-perfdata INPUT -o FILE [--snapshots N:OVERLAP]
//       writes INPUT's Snapshot as a per-thread Intel PT perf.data that
//       `perf script --itrace` decodes (a perf.data INPUT: a round trip).
//       --snapshots writes each thread as N snapshot-mode buffers, each
//       overlapping the one before by OVERLAP bytes, as `perf record
//       --snapshot` signalled N times writes them (for reader tests).
//       --per-cpu N writes a per-CPU recording, perf record's default: the
//       threads cut at their PSBs and scheduled onto N virtual CPUs, with
//       context-switch, AUX and ITRACE_START records (PerCpuLayout.h).
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/PerfData.h"

#include "llvm/ADT/StringRef.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace llvm;
using namespace magic_trace;

namespace {

const char *const kUsage =
    "usage: magic-trace-perfdata PERF_DATA|BUNDLE [--sideband] [--records] "
    "[--symfs DIR] [-o PERF_DATA [--snapshots N:OVERLAP | --per-cpu N]]\n";

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

/// --records: the data section's records by type, and a per-CPU recording's
/// AUX bytes per CPU and how its AUX records split them.
void printRecords(const PerfDataStats &stats) {
  std::map<std::string, uint64_t> byName;
  for (const auto &[type, count] : stats.records)
    byName[perfRecordName(type)] += count;
  for (const auto &[name, count] : byName)
    outs() << "records " << name << " " << count << "\n";
  for (const auto &[cpu, bytes] : stats.auxBytesByCpu)
    outs() << "cpu " << cpu << " aux " << bytes << " bytes\n";
  outs() << "aux pieces " << stats.piecesUsed << " used, " << stats.piecesLost
         << " lost, " << stats.wholeStreams << " whole streams\n";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<StringRef> args(argv + 1, argv + argc);
  StringRef input, output;
  PerfDataReadOptions options;
  PerfDataWriteOptions writeOptions;
  PerfDataStats stats;
  options.stats = &stats;
  bool records = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" && i + 1 < args.size())
      output = args[++i];
    else if (args[i] == "--snapshots" && i + 1 < args.size()) {
      auto [pieces, overlap] = args[++i].split(':');
      if (pieces.getAsInteger(10, writeOptions.snapshotPieces) ||
          overlap.getAsInteger(10, writeOptions.snapshotOverlap) ||
          writeOptions.snapshotPieces == 0)
        return fail("--snapshots takes N:OVERLAP, e.g. 3:4096");
    } else if (args[i] == "--per-cpu" && i + 1 < args.size()) {
      if (args[++i].getAsInteger(10, writeOptions.cpus) ||
          writeOptions.cpus == 0)
        return fail("--per-cpu takes a number of CPUs, e.g. 4");
    } else if (args[i] == "--sideband")
      options.requireTrace = false;
    else if (args[i] == "--records")
      records = true;
    else if (args[i] == "--symfs" && i + 1 < args.size())
      options.symfs = args[++i].str();
    else if (input.empty() && !args[i].starts_with("-"))
      input = args[i];
    else
      input = "";
  }
  if (input.empty()) {
    errs() << kUsage;
    return 2;
  }
  Expected<Snapshot> snapshot =
      isPerfDataFile(input) ? readPerfData(input, options) : loadBundle(input);
  if (!snapshot)
    return fail(toString(snapshot.takeError()));
  if (output.empty()) {
    printSnapshot(*snapshot);
    if (records)
      printRecords(stats);
    return 0;
  }
  if (Error err = writePerfData(*snapshot, output, writeOptions))
    return fail(toString(std::move(err)));
  return 0;
}
