//===- TraceWriters.h - Chrome JSON, folded stacks, text tree ---*- C++ -*-===//
//
// The text formats written from a finished TraceModel, next to the Fuchsia
// trace (FxtWriter.h): Chrome trace-event JSON, folded stacks for flame
// graphs, and a call tree for the terminal. Formats: docs/formats.md.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TRACEWRITERS_H
#define MAGIC_TRACE_TRACEWRITERS_H

#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace magic_trace {

struct ChromeJsonOptions {
  std::string category = "magic-trace";
};

/// Writes Chrome trace-event JSON: one "X" (complete) event per frame, with
/// ts/dur in microseconds carrying all nanosecond digits, "i" (instant)
/// events for gaps and decode errors, and "M" metadata naming the process and
/// threads. Errors: the model violates its invariants.
llvm::Error writeChromeJson(const TraceModel &model, llvm::raw_ostream &os,
                            const ChromeJsonOptions &options = {});

struct FoldedOptions {
  /// Start every stack with "NAME-TID" of its thread.
  bool threadPrefix = false;
};

/// Writes folded stacks, one line per distinct stack: "root;caller;leaf N"
/// where N is the self time of the leaf frame in nanoseconds, summed over
/// every occurrence of that stack. Inlined frames carry flamegraph.pl's
/// "_[i]" suffix. Each stack appears once, in order of first occurrence;
/// stacks with no self time are left out.
/// Errors: the model violates its invariants.
llvm::Error writeFolded(const TraceModel &model, llvm::raw_ostream &os,
                        const FoldedOptions &options = {});

struct TreeOptions {
  /// Show only the final window of this many ns before the end of the trace
  /// (0: everything). Frames crossing into the window are clipped to it.
  uint64_t lastNs = 0;
  /// Show frames up to this depth, roots being depth 1 (0: all).
  unsigned maxDepth = 0;
};

/// Renders the call tree of every thread for the terminal, one frame per
/// line: total time, self time, the name indented by depth, "(file:line)",
/// and markers [inlined], [inferred], [clipped]; gaps between segments are
/// lines of their own.
std::string renderTree(const TraceModel &model,
                       const TreeOptions &options = {});

/// Parses "20us", "1.5ms", "300ns", "2s" (also "µs") into nanoseconds.
/// Errors: no number, no or unknown unit, overflow.
llvm::Expected<uint64_t> parseDuration(llvm::StringRef text);

/// "850ns", "12.345us", "1.234ms", "2.000s".
std::string formatDuration(uint64_t ns);

/// Writes `model` to `path` in the format its suffix names: .fxt, .fxt.gz,
/// .json, .folded, .txt (the text tree). Errors: unknown suffix, the file
/// cannot be written, the model violates its invariants.
llvm::Error writeTraceFile(const TraceModel &model, llvm::StringRef path);

} // namespace magic_trace

#endif
