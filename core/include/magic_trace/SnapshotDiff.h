//===- SnapshotDiff.h - Two snapshots of one program side by side -*- C++
//-*-===//
//
// `magic-trace diff K1 K2`: what a slow iteration did that a fast one did
// not. Per function, its calls, instructions, total and self time in each
// snapshot's window (TopFunctions.h) and the difference, the largest
// change first; and the call paths that ran in one snapshot and not in the
// other. Host-neutral.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SNAPSHOTDIFF_H
#define MAGIC_TRACE_SNAPSHOTDIFF_H

#include "magic_trace/SnapshotLog.h"
#include "magic_trace/TopFunctions.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// A function in both snapshots (zero counts where it did not run).
struct FunctionChange {
  FunctionStats first, second;
  /// second minus first.
  int64_t calls() const { return int64_t(second.calls - first.calls); }
  int64_t instructions() const {
    return int64_t(second.instructions - first.instructions);
  }
  int64_t selfNs() const { return int64_t(second.selfNs - first.selfNs); }
  int64_t totalNs() const { return int64_t(second.totalNs - first.totalNs); }
};

/// A call path ("main;round;slow_path") that ran in one snapshot only,
/// where it leaves the paths of the other: its caller's path ran in both.
struct CallPathChange {
  std::string path;
  uint64_t calls = 0; ///< Frames on that path.
};

struct SnapshotDiff {
  unsigned first = 0, second = 0; ///< The snapshots' numbers.
  std::string program;
  /// Every function of either, the largest change first: in self time,
  /// then instructions, then calls.
  std::vector<FunctionChange> functions;
  std::vector<CallPathChange> onlyFirst, onlySecond;
  uint64_t unwalked = 0; ///< As FunctionTable's, both snapshots.
};

/// Compares snapshots `first` and `second` of `log` (0: the last), each in
/// the window it keeps. `cache` is the session's (its lock held). Errors,
/// one line each: the same snapshot twice; a snapshot that does not exist
/// or was released (SnapshotLog::findDecoded's); snapshots of two
/// programs; the decoder's.
llvm::Expected<SnapshotDiff> diffSnapshots(SnapshotLog &log, unsigned first,
                                           unsigned second, SymbolCache *cache);

/// For the terminal: a header line, at most `rows` functions and a count
/// of the rest, then the call paths of each snapshot only (at most `rows`
/// each).
std::string renderDiff(const SnapshotDiff &diff, size_t rows);

/// {first, second, program, functions: [{name, file, line, kind, first:
/// {calls, instructions, self_ns, total_ns, estimated}, second: {...},
/// delta: {calls, instructions, self_ns, total_ns}}], more, only_first:
/// [{path, calls}], only_second: [...], more_only_first,
/// more_only_second}.
llvm::json::Value diffJson(const SnapshotDiff &diff, size_t rows);

} // namespace magic_trace

#endif
