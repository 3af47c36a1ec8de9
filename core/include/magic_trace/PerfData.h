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
};

/// The bytes of a perf.data for `snapshot`: one intel_pt attr, AUXTRACE_INFO
/// with the time conversion and timing facts, a COMM per thread, an MMAP2 per
/// executable segment (timed before the trace), one AUXTRACE record per
/// thread, and the HEADER_AUXTRACE, HEADER_BUILD_ID, HEADER_CPUID and
/// HEADER_ARCH features.
std::vector<uint8_t> buildPerfData(const Snapshot &snapshot,
                                   const PerfDataWriteOptions &options = {});

/// Writes buildPerfData's bytes to `path`.
/// Errors: the file cannot be created or written.
llvm::Error writePerfData(const Snapshot &snapshot, llvm::StringRef path,
                          const PerfDataWriteOptions &options = {});

/// True if `path` is a regular file that is not JSON (a bundle is a directory
/// or a trace.json): a perf.data, or a file to refuse as a bad one.
bool isPerfDataFile(llvm::StringRef path);

struct PerfDataReadOptions {
  /// A file without Intel PT (no AUXTRACE_INFO or no AUXTRACE data) is an
  /// error; false reads only its sideband (modules, COMM, CPU), for files
  /// such as `perf record -e cpu-clock` writes.
  bool requireTrace = true;
};

/// A Snapshot from a per-thread Intel PT perf.data held in memory: threads
/// and their PT (AUXTRACE buffers of one thread concatenated in file order),
/// time conversion and timing from AUXTRACE_INFO, modules from MMAP/MMAP2
/// with build-ids from HEADER_BUILD_ID (files looked up on this machine,
/// then in ~/.debug), COMM names, CPU from HEADER_CPUID.
/// Errors (one line, with the byte offset where it applies): a truncated or
/// malformed file, wrong magic, a per-CPU recording (record with
/// --per-thread), AUX data without AUXTRACE_INFO, an AUXTRACE_INFO that is
/// not Intel PT or is too short, no Intel PT attr.
llvm::Expected<Snapshot> parsePerfData(llvm::ArrayRef<uint8_t> bytes,
                                       const PerfDataReadOptions &options = {});

/// parsePerfData on the contents of `path`.
/// Errors: as parsePerfData, or the file cannot be read.
llvm::Expected<Snapshot> readPerfData(llvm::StringRef path,
                                      const PerfDataReadOptions &options = {});

} // namespace magic_trace

#endif
