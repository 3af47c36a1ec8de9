//===- TraceWriters.h - Chrome JSON, folded stacks, text tree ---*- C++ -*-===//
//
// The text formats written from a finished TraceModel, next to the Fuchsia
// trace (FxtWriter.h): Chrome trace-event JSON, folded stacks for flame
// graphs, and a call tree for the terminal. Formats: docs/formats.md.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TRACEWRITERS_H
#define MAGIC_TRACE_TRACEWRITERS_H

#include "magic_trace/FxtWriter.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/ArrayRef.h"
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

/// 1234567 -> "1,234,567".
std::string withCommas(uint64_t value);

/// 6291456 -> "6 MiB", 524288 -> "512 KiB", 1536 -> "1.5 KiB", 100 ->
/// "100 bytes".
std::string formatSize(uint64_t bytes);

/// The first time at or after `from` where a window may start so that the
/// writers display every later time of `thread` as they display the whole
/// model's (docs/formats.md, "Displayed times", "Windows"): no frame begins
/// or ends there, and the displayed clock, which runs ahead of the model's
/// where frames share a nanosecond, has caught up with it. A cut there
/// (ModelWindow.h) keeps exactly what a viewer of the whole model shows
/// from there on. Walks the thread's events up to that time.
uint64_t displaySafeCut(const ThreadModel &thread, uint64_t from);

/// One output format: the name hosts accept for it (`save --format`), the
/// file suffix that names it, its writer, and whether the file is
/// gzip-compressed. Every trace file is written through this table
/// (outputFormats(); docs/formats.md lists the formats).
struct OutputFormat {
  llvm::StringRef name;   ///< "fxt", "fxt.gz", "json", "json.gz", ...
  llvm::StringRef suffix; ///< ".fxt", ".fxt.gz", ".json", ".json.gz", ...
  /// Writes a model validateModel passed; `fxt` matters to FXT only.
  llvm::Error (*write)(const TraceModel &model, llvm::raw_ostream &os,
                       const FxtOptions &fxt, bool gzip);
  bool gzip;
};

/// Every output format: .fxt, .fxt.gz, .json, .json.gz, .folded, .txt (the
/// text tree).
llvm::ArrayRef<OutputFormat> outputFormats();

/// The format called `name`. Errors: no such name (the message lists them).
llvm::Expected<OutputFormat> outputFormatNamed(llvm::StringRef name);

/// The format `path`'s suffix names (the longest that matches). Errors: no
/// format has its suffix (the message lists the suffixes).
llvm::Expected<OutputFormat> outputFormatOf(llvm::StringRef path);

/// Writes `model` to `path` in `format` (`fxt`: the FXT options but gzip,
/// which the format decides). The model is validated once, before the file
/// is created. Errors: the model violates its invariants, the file cannot
/// be written, gzip wanted but this LLVM has no zlib.
llvm::Error writeTrace(const TraceModel &model, llvm::StringRef path,
                       const OutputFormat &format, const FxtOptions &fxt = {});

class OutputFile;
/// writeTrace into `file`, an output opened earlier (the dlfilter opens
/// its out= at start, before perf decodes), committed on success.
llvm::Error writeTrace(const TraceModel &model, OutputFile &file,
                       const OutputFormat &format,
                       const FxtOptions &fxt = FxtOptions());

/// writeTrace in the format `path`'s suffix names. Errors: those of
/// outputFormatOf and writeTrace.
llvm::Error writeTraceFile(const TraceModel &model, llvm::StringRef path,
                           const FxtOptions &fxt = {});

} // namespace magic_trace

#endif
