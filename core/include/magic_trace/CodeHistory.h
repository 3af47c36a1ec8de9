//===- CodeHistory.h - The code a process ran, over time --------*- C++ -*-===//
//
// docs/architecture.md, "Image over time": the code as it was when it ran, not
// as it is at the stop. A recorder logs every change of the code a process
// runs, in order: a file mapped where code ran (Load), a range unmapped
// (Unload), and code outside files (JIT, vdso, code rewritten in place) as the
// bytes of each version (Bytes). Each thread's trace says, at PSBs, which
// changes its code has seen so far (ImageMark); a recording whose clock is
// global (perf) gives each change its time instead. The decoder reads each
// stretch of trace with the code of its own moment (decode/ImageTimeline.cpp),
// so a library unloaded before the stop, or JIT code rewritten since, still
// decodes. Names for code outside files come from perf maps and jitdump
// (JitSymbol).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_CODEHISTORY_H
#define MAGIC_TRACE_CODEHISTORY_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace magic_trace {

/// One mapping of a module's file into the process.
struct LoadedSegment {
  uint64_t address = 0;    ///< Runtime start address.
  uint64_t size = 0;       ///< Bytes mapped.
  uint64_t fileOffset = 0; ///< Offset in the file of the first mapped byte.
  bool executable = false;
};

/// A loaded module as the debugger (or a bundle) knows it.
struct Module {
  std::string path;     ///< Path at run time ("systemPath" in LLDB bundles).
  std::string fileCopy; ///< A copy to read instead of `path`; empty if none.
  std::string
      buildId; ///< Lower-case hex GNU build-id / LLDB UUID; may be empty.
  uint64_t loadAddress = 0; ///< Lowest mapped address (file offset 0).
  std::vector<LoadedSegment> segments; ///< Empty: derive from the ELF headers.

  /// The file to open: the copy when there is one.
  const std::string &fileToRead() const {
    return fileCopy.empty() ? path : fileCopy;
  }
};

/// One change of the code at [address, address + size).
struct CodeChange {
  enum class Kind : uint8_t {
    Load,   ///< `module`'s file is mapped there (its code ran).
    Unload, ///< The range was unmapped: nothing runs there until a change.
    Bytes,  ///< `bytes` are the code there from this change on.
  };
  Kind kind = Kind::Load;
  /// The change's place in the order of all changes, from 1. A thread whose
  /// mark says `seq` has seen every change up to it.
  uint64_t seq = 0;
  /// When, on the trace's clock in nanoseconds (TimeConversion), for a
  /// recording whose clock every thread shares; 0 when unknown.
  uint64_t timeNs = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  Module module;              ///< Load only.
  std::vector<uint8_t> bytes; ///< Bytes only: `size` of them.

  uint64_t end() const { return address + size; }
  bool overlaps(uint64_t begin, uint64_t endAddress) const {
    return address < endAddress && begin < end();
  }
};

/// From the PSB at byte `offset` of a thread's trace on, the thread's code is
/// that of every change up to `seq`. A recorder writes a PSB at each mark, so
/// that no stretch between two PSBs runs code of two versions.
struct ImageMark {
  uint64_t offset = 0;
  uint64_t seq = 0;
};

/// A name for code outside files: a line of /tmp/perf-PID.map, or a
/// jitdump CODE_LOAD (with its first DEBUG_INFO line, if any).
struct JitSymbol {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string name;
  std::string file; ///< Source file, or empty.
  uint32_t line = 0;
};

struct CodeHistory {
  std::vector<CodeChange> changes; ///< Ascending seq.
  /// Names for code outside files; where two overlap, the later one in the
  /// list wins (a perf map's later line, a later CODE_LOAD).
  std::vector<JitSymbol> symbols;
  /// A recorder's own bundle (a QEMU trigger snapshot) may leave its changes
  /// in the recorder's code log: those up to `logLastSeq` in `logDir`
  /// (QemuRings.h). loadBundle reads them into `changes`; nothing else sees
  /// this form.
  std::string logDir;
  uint64_t logLastSeq = 0;

  bool empty() const {
    return changes.empty() && symbols.empty() && logDir.empty();
  }
  /// The largest seq, 0 when there is no change.
  uint64_t lastSeq() const { return changes.empty() ? 0 : changes.back().seq; }
};

/// Limits on what a history may hold, so that a hostile or damaged input
/// costs a bounded time and memory (issue 50):
///  - a range of code is at most 2^47 bytes, the x86-64 user half (no
///    mapping of a real process is larger), and never wraps past 2^64;
///  - at most kMaxHistoryLoads file mappings: each becomes sections in
///    libipt's section cache and images, which search their sections one
///    by one (a real process maps a few hundred files);
///  - the bytes of all versions of code outside files are at most
///    kMaxHistoryCodeBytes (their file, code.bin, holds each once).
constexpr uint64_t kMaxCodeRange = uint64_t(1) << 47;
constexpr size_t kMaxHistoryLoads = 4096;
constexpr uint64_t kMaxHistoryCodeBytes = uint64_t(512) << 20;

/// Why [address, address + size) is no range of code, or "" when it is one.
std::string badCodeRange(uint64_t address, uint64_t size);

/// Why `history` is inconsistent, or "" when it is not: seqs not strictly
/// ascending, a range badCodeRange refuses, a Bytes change whose bytes are
/// not `size`, more loads or code bytes than the limits above. One line,
/// naming the change by its seq.
std::string historyProblem(const CodeHistory &history);

/// Whether `change` may hold code for a stretch marked `seq`: one up to
/// `seq`, or a later one without a time (code a recorder first saw after the
/// mark was there before it: recorders mark only changes that replace
/// code). A change with a time (a jitdump's load, code the kernel saw made
/// executable) holds nothing before it: the code was not there yet.
bool codeChangeCanHold(const CodeChange &change, uint64_t seq);

/// Which of two changes whose ranges overlap holds the code a thread whose
/// mark is `seq` ran there: one that can hold it (codeChangeCanHold) over
/// one that cannot; the latest change up to `seq`; when both came after it,
/// the earlier one.
bool codeChangeWins(const CodeChange &candidate, const CodeChange &other,
                    uint64_t seq);

/// The addresses [begin, end) a module covers: its segments', else its load
/// address alone.
std::pair<uint64_t, uint64_t> moduleExtent(const Module &module);

/// The modules to name code with, over the whole history: every module the
/// history loaded (a later load wins where two overlap), then each module of
/// `atStop` (the debugger's list at the stop) that overlaps none of them.
/// A library unloaded before the stop keeps its names.
std::vector<Module> modulesOverTime(const std::vector<Module> &atStop,
                                    const CodeHistory &history);

} // namespace magic_trace

#endif
