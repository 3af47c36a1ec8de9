//===- JitRecords.h - What a JIT publishes for profilers ---------*- C++
//-*-===//
//
// The two files JIT runtimes write for perf, read for the code history
// (CodeHistory.h):
//  - /tmp/perf-PID.map: a text line "START SIZE NAME" per piece of code (hex,
//    "0x" optional; node --perf-basic-prof, V8, LuaJIT, the JVM's agents);
//    names only. A later line for the same code wins (the JIT reused it).
//  - jit-PID.dump, the jitdump format (perf's
//    tools/perf/Documentation/jitdump-specification.txt; node --perf-prof):
//    binary records, each CODE_LOAD with the code's name and bytes and a
//    time, DEBUG_INFO with source lines, CODE_MOVE when code moved.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_JITRECORDS_H
#define MAGIC_TRACE_JITRECORDS_H

#include "magic_trace/CodeHistory.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// The lines of a perf map as symbols, in file order. Lines that do not
/// parse are skipped (a JIT may be writing the last one). Errors: the file
/// cannot be read.
llvm::Expected<std::vector<JitSymbol>> readPerfMap(llvm::StringRef path);

/// One piece of code a jitdump loaded.
struct JitCodeLoad {
  uint64_t timestamp = 0; ///< The record's time (the JIT's clock).
  uint64_t address = 0;
  std::vector<uint8_t> bytes;
  JitSymbol symbol; ///< Its name and, from DEBUG_INFO, its first line.
};

struct JitDump {
  uint32_t pid = 0;
  /// The timestamps are TSC values (JITDUMP_FLAGS_ARCH_TIMESTAMP), not
  /// the monotonic clock in nanoseconds.
  bool tscTimestamps = false;
  std::vector<JitCodeLoad> loads; ///< In file order (CODE_MOVE: a load).
};

/// Reads a jitdump. A record cut short at the end (the JIT is still
/// writing) ends the read. Errors (one line): the file cannot be read, has
/// no jitdump header ("JiTD"), or a record's size is impossible.
llvm::Expected<JitDump> readJitDump(llvm::StringRef path);

/// The files a process `pid` may have written, where they are found: its
/// perf map in /tmp, its jitdump in `dirs` (the process's working
/// directory first; node writes jit-PID.dump there). Names and loads are
/// added to `history`'s symbols; with `withCode`, each load's bytes also
/// become a Bytes change after the history's last (for recorders that do
/// not see the code themselves). Returns one line per file read, for the
/// user ("names from /tmp/perf-42.map (1,203 entries)"); a file that is
/// missing is no problem.
std::vector<std::string> addJitRecords(uint64_t pid,
                                       const std::vector<std::string> &dirs,
                                       bool withCode, CodeHistory &history);

} // namespace magic_trace

#endif
