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
#include "magic_trace/Snapshot.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// Limits on what a JIT's files may hold (issue 50: a perf map of a million
/// lines took the recorder 3.8 GB): the files' size, a name's length, the
/// loads of a jitdump, and the names kept for one process (the latest).
constexpr uint64_t kMaxJitFileBytes = uint64_t(256) << 20;
constexpr size_t kMaxJitNameLength = 4096;
constexpr size_t kMaxJitLoads = 1000000;
constexpr size_t kMaxJitSymbols = 65536;

/// The lines of a perf map as symbols, in file order. Lines that do not
/// parse, or whose range badCodeRange refuses, are skipped (a JIT may be
/// writing the last one).
std::vector<JitSymbol> parsePerfMap(llvm::StringRef text);

/// parsePerfMap of the file PATH, in a shared place (InputFiles.h: the
/// user's or root's own regular file). Errors (one line, naming PATH): it
/// is missing, cannot be read, or is not to be trusted.
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
  /// The offset of a last record cut short (the JIT was writing it), or 0.
  uint64_t cutShortAt = 0;
};

/// Reads a jitdump, in a shared place (InputFiles.h). A record cut short at
/// the end (the JIT is still writing) ends the read. Errors (one line): the
/// file cannot be read or trusted, and those of parseJitDump.
llvm::Expected<JitDump> readJitDump(llvm::StringRef path);

/// A jitdump's bytes (PATH names them in messages). Errors (one line, with
/// the offset): no jitdump header ("JiTD"), a record's size is impossible,
/// a code load whose code is not in its record or whose range wraps, more
/// loads or code than the limits above.
llvm::Expected<JitDump> parseJitDump(llvm::ArrayRef<uint8_t> bytes,
                                     llvm::StringRef path);

/// What addJitRecords read, and what it skipped (one line each).
struct JitRecordNotes {
  /// "names from /tmp/perf-42.map (1,203 entries)", for the user.
  std::vector<std::string> read;
  /// Files not read and why (InputFiles.h: not the user's or root's, a
  /// FIFO, a link) or not understood: the user should hear of these.
  std::vector<std::string> skipped;
  /// Code a jitdump holds that could not be used, and why (its times are
  /// not on the trace's clock): the user should hear of this too.
  std::vector<std::string> unused;
};

/// Where a process's jitdump may be: its working directory (node writes
/// jit-PID.dump there), ours, /tmp.
std::vector<std::string> jitRecordDirs(uint64_t pid);

/// How addJitRecords uses a jitdump's code.
enum class JitCode {
  /// Names only, of code the history has (at most kMaxJitSymbols): the
  /// recorder logged the code itself.
  NamesOnly,
  /// Each load's bytes become a Bytes change at the load's time on the
  /// trace's clock, in time order, after the history's last: perf's rule
  /// (`perf inject --jit` puts each load at its time), so the code of each
  /// moment before the stop decodes. Only a jitdump whose times are the TSC
  /// (JITDUMP_FLAGS_ARCH_TIMESTAMP, as perf's JIT agents write under
  /// `JITDUMP_USE_ARCH_TIMESTAMP=1`) is on the trace's clock; one on the
  /// monotonic clock gives names only, and a note says why.
  ByTime,
};

/// The files a process `pid` may have written, where they are found: its
/// perf map in /tmp, its jitdump in `dirs` (the process's working
/// directory first; node writes jit-PID.dump there). Names and loads are
/// added to `history`'s symbols, and the jitdump's code as `code` says
/// (ByTime needs `clock`, the trace's TimeConversion). A missing file is no
/// problem; one in a shared place that is not the user's or root's own
/// regular file is skipped, never waited on, as perf does.
JitRecordNotes addJitRecords(uint64_t pid, const std::vector<std::string> &dirs,
                             JitCode code, CodeHistory &history,
                             const TimeConversion *clock = nullptr);

} // namespace magic_trace

#endif
