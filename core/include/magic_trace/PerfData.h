//===- PerfData.h - perf.data in and out ------------------------*- C++ -*-===//
//
// perf.data of a per-thread Intel PT recording (what `perf record -e
// intel_pt//u --per-thread` writes), written from a Snapshot so that Linux
// perf's own decoder (`perf script --itrace`) can check our PT, and read into
// a Snapshot so that our pipeline decodes perf's recordings. What is read and
// written: docs/formats.md, "perf.data".
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PERFDATA_H
#define MAGIC_TRACE_PERFDATA_H

#include "magic_trace/Snapshot.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace magic_trace {

struct PerfDataWriteOptions {
  /// attr.type and AUXTRACE_INFO's PMU type; perf only checks that they are
  /// equal (it never looks at sysfs), so any value decodes anywhere.
  uint32_t pmuType = 8;
  /// The attr's config says return compression is off (--noretcomp).
  bool noRetComp = false;
  /// The attr's config says CYC packets are on.
  bool cyc = true;
  /// More than 1: write each thread's trace as this many snapshot-mode
  /// AUXTRACE buffers (what `perf record --snapshot` writes when signalled
  /// several times), each overlapping the one before by `snapshotOverlap`
  /// bytes; for tests of a reader's de-duplication.
  unsigned snapshotPieces = 1;
  uint64_t snapshotOverlap = 0;
  /// More than 0: a per-CPU recording, as `perf record` writes by default,
  /// of the threads laid onto this many virtual CPUs (PerCpuLayout.h):
  /// one AUX area per CPU, SWITCH_CPU_WIDE, AUX and ITRACE_START records.
  unsigned cpus = 0;
};

/// The bytes of a perf.data for `snapshot`: one intel_pt attr, AUXTRACE_INFO
/// with the time conversion and timing facts, a COMM per thread, an MMAP2 per
/// executable segment (timed before the trace), one AUXTRACE record per
/// thread, and the HEADER_AUXTRACE, HEADER_BUILD_ID, HEADER_CPUID and
/// HEADER_ARCH features.
std::vector<uint8_t> buildPerfData(const Snapshot &snapshot,
                                   const PerfDataWriteOptions &options = {});

/// A per-CPU perf.data for `snapshot` (options.cpus > 0). Errors: a thread
/// whose trace cannot be cut at its PSBs (wrapped, lossy, untimed).
llvm::Expected<std::vector<uint8_t>>
buildPerCpuPerfData(const Snapshot &snapshot,
                    const PerfDataWriteOptions &options);

/// Writes buildPerfData's (or, with options.cpus, buildPerCpuPerfData's)
/// bytes to `path`.
/// Errors: the file cannot be created or written; buildPerCpuPerfData's.
llvm::Error writePerfData(const Snapshot &snapshot, llvm::StringRef path,
                          const PerfDataWriteOptions &options = {});

/// True if `path` is a regular file that is not JSON (a bundle is a directory
/// or a trace.json): a perf.data, or a file to refuse as a bad one.
bool isPerfDataFile(llvm::StringRef path);

/// What the reader met in a perf.data, for `magic-trace-perfdata --records`
/// (compared with `perf script -D` in test/lit/perf/).
struct PerfDataStats {
  /// Records of the data section by PERF_RECORD_* type.
  std::map<uint32_t, uint64_t> records;
  /// Per-CPU recordings: AUXTRACE bytes of each CPU.
  std::map<uint32_t, uint64_t> auxBytesByCpu;
  uint64_t piecesUsed = 0;   ///< AUX records a thread's trace was cut by.
  uint64_t piecesLost = 0;   ///< Truncated ones, or ones the file lacks.
  uint64_t wholeStreams = 0; ///< CPU streams that went whole to one thread.
};

/// perf's name of a record type ("PERF_RECORD_AUX"), or "type N".
std::string perfRecordName(uint32_t type);

struct PerfDataReadOptions {
  /// A file without Intel PT (no AUXTRACE_INFO or no AUXTRACE data) is an
  /// error; false reads only its sideband (modules, COMM, CPU), for files
  /// such as `perf record -e cpu-clock` writes.
  bool requireTrace = true;
  /// Look for each module's file under this directory first, at the path
  /// the recording names (perf's --symfs); empty: the paths as recorded.
  std::string symfs;
  /// When set, filled with what the reader met.
  PerfDataStats *stats = nullptr;
};

/// A Snapshot from a per-thread Intel PT perf.data held in memory: threads
/// and their PT (AUXTRACE buffers of one thread concatenated in file order),
/// time conversion and timing from AUXTRACE_INFO, modules from MMAP/MMAP2
/// with build-ids from HEADER_BUILD_ID (files looked up on this machine,
/// then in ~/.debug), COMM names, CPU from HEADER_CPUID.
/// A per-CPU recording (perf's default) is split into threads by its AUX
/// records (PerCpuTrace.h). Errors (one line, with the byte offset where it
/// applies): a truncated or malformed file, wrong magic, a per-CPU stream
/// several threads share with nothing to split it by, AUX data without
/// AUXTRACE_INFO, an AUXTRACE_INFO that is
/// not Intel PT or is too short, no Intel PT attr.
llvm::Expected<Snapshot> parsePerfData(llvm::ArrayRef<uint8_t> bytes,
                                       const PerfDataReadOptions &options = {});

/// parsePerfData on the contents of `path`.
/// Errors: as parsePerfData, or the file cannot be read.
llvm::Expected<Snapshot> readPerfData(llvm::StringRef path,
                                      const PerfDataReadOptions &options = {});

/// The file to read for a module a perf.data names as `path` with `buildId`
/// (may be empty): `path` when it exists with that build-id; else perf's
/// build-id cache, ~/.debug/.build-id/ab/cdef.../{elf,vdso}; for "[vdso]", a
/// copy of this process's own vdso when its build-id is `buildId` (the same
/// kernel); else `path` if it exists at all, else "". With `symfs`,
/// `symfs`/`path` is tried first, as perf's --symfs does.
std::string lookUpModuleFile(llvm::StringRef path, llvm::StringRef buildId,
                             llvm::StringRef symfs = "");

} // namespace magic_trace

#endif
