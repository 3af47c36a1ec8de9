//===- ViewSupport.h - What the views share ---------------------*- C++ -*-===//
//
// Private to core/lib/views: the frames of a model summed per function,
// the error of a function that did not run, and the terminal table every
// view prints.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_VIEWS_VIEWSUPPORT_H
#define MAGIC_TRACE_LIB_VIEWS_VIEWSUPPORT_H

#include "magic_trace/Snapshot.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace magic_trace::views {

/// The time of instructions [0, j) of `n` that share `ns` evenly.
inline uint64_t shareUpTo(uint64_t ns, uint64_t j, uint64_t n) {
  return n ? uint64_t((unsigned __int128)ns * j / n) : 0;
}

/// Frames of code: a function or its inlined callee, or code no module
/// names (what --annotate can count lines of).
bool isCodeKind(FrameKind kind);

/// A function's frames in a model, summed.
struct FrameTotals {
  /// Frames: one per activation (a frame continued across a stitched gap
  /// counts once), as the call tree (`report`) lists them.
  uint64_t calls = 0;
  /// Time in its frames, less the time of the frames called from them.
  uint64_t selfNs = 0;
  /// Time in its outermost frames (a recursive call's time is in its
  /// caller's already).
  uint64_t totalNs = 0;
  FrameKind kind = FrameKind::Physical; ///< Of its first frame.
  std::string file;                     ///< Where it is, when known.
  uint32_t line = 0;
};

/// The frames of `model` (only thread `tid`'s when not 0) per function
/// name; decode-error frames are left out.
std::map<std::string, FrameTotals> frameTotals(const TraceModel &model,
                                               uint64_t tid);

/// Succeeds when `tid` is 0 (every thread) or a thread of `model`.
llvm::Error checkThread(const TraceModel &model, uint64_t tid);

/// The error for FUNCTION (`query`) that did not run in the window
/// (`where`: " in thread 12" or empty): it says whether any module of the
/// snapshot has such a function, and what to do.
llvm::Error notRunError(const Snapshot &snapshot, llvm::StringRef query,
                        llvm::StringRef where);

/// The first `most` names, comma-separated, and how many more.
std::string joinNames(const std::set<std::string> &names, size_t most);

/// The line under a view whose times timeText marked.
constexpr const char *kEstimatedNote =
    "  ~: some of this time was estimated from instruction counts (no "
    "timing packet there)\n";

/// The line under a view that counted `count` instructions it could not
/// walk (ExecutedCode::unwalked); empty when 0.
std::string unwalkedNote(uint64_t count);

/// "~" before a time the instruction clock made (some of it), else
/// nothing.
std::string timeText(uint64_t ns, bool estimated);

/// A table for the terminal: every column but the last right-aligned to
/// its widest cell, two spaces apart; the last one as it is.
class TextTable {
public:
  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }
  std::string render(llvm::StringRef indent = "") const;

private:
  std::vector<std::vector<std::string>> rows;
};

} // namespace magic_trace::views

#endif
