//===- Annotate.h - Exact counts per source line of a function --*- C++ -*-===//
//
// `magic-trace report --annotate FUNCTION`: for every source line of a
// function, in source order, the instructions that ran there (exact: every
// instruction of the snapshot's window, decoded again), how many times the
// line was entered, and its self time. What perf annotate samples, counted.
// Host-neutral: the LLDB plugin and the GDB host print what this returns.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_ANNOTATE_H
#define MAGIC_TRACE_ANNOTATE_H

#include "magic_trace/Snapshot.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceModel.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// Rows a view prints by default; the rest is counted ("... 12 more").
constexpr size_t kDefaultViewRows = 50;

struct AnnotateOptions {
  /// A function's name as `report` prints it, or without its parameter
  /// list ("fib" for "fib(int)"), or 0xADDRESS: the function there.
  std::string function;
  /// Only this thread (0: every thread of the window).
  uint64_t tid = 0;
  /// Each instruction with its count and disassembly (`--insns`).
  bool instructions = false;
};

/// One instruction of an annotated line.
struct AnnotatedInstruction {
  uint64_t address = 0;
  uint64_t count = 0;
  std::string text; ///< Disassembly (AT&T), empty when unreadable.
};

/// One source line of the function, or, for code without line
/// information (JIT code, a stripped library), one instruction.
struct AnnotatedLine {
  std::string file; ///< Absolute path as DWARF names it; empty: no line.
  uint32_t line = 0;
  /// The lowest address that ran on the line (the instruction's, for a row
  /// without a line).
  uint64_t address = 0;
  /// The function inlined there ("square(int)"), empty for the annotated
  /// function's own lines.
  std::string inlined;
  uint64_t instructions = 0; ///< Executed there, exactly.
  /// Times execution came to the line from elsewhere: the first
  /// instruction of each run of consecutive instructions on it (after a
  /// jump, a call or return, a fall-through from another line).
  uint64_t entries = 0;
  /// Time of its instructions: each instruction's share of its block's
  /// time (the block's start to the next item's).
  uint64_t selfNs = 0;
  /// Some of that time came from instruction counts, not timing packets.
  bool estimated = false;
  std::string source; ///< The line's text when its file is readable.
  std::vector<AnnotatedInstruction> insns; ///< With `instructions` only.
};

struct Annotation {
  std::string function; ///< Its full name.
  std::string file;     ///< Where it is defined, when known.
  uint32_t line = 0;
  uint64_t calls = 0;   ///< Its frames in the window (as --top counts).
  uint64_t threads = 0; ///< Threads in which it ran.
  uint64_t instructions = 0, selfNs = 0;
  bool estimated = false;
  /// The lines in source order: the function's own file first, then each
  /// file inlined into it; rows without a line last, by address.
  std::vector<AnnotatedLine> lines;
  /// Instructions whose code could not be read again (0 normally): they
  /// count where reading it stopped.
  uint64_t unwalked = 0;
};

/// Counts every instruction of `model`'s window (the snapshot's kept
/// window, or another one decoded from it) that ran in FUNCTION's code:
/// its own and every function inlined into it (on their own file and
/// line), in every copy (a function inlined elsewhere counts there too).
/// `cache` is the session's (its lock held). Errors, one line each:
/// FUNCTION names nothing in the snapshot's modules; it did not run in the
/// window; it names several functions; no such thread; the decoder's.
llvm::Expected<Annotation> annotateFunction(const Snapshot &snapshot,
                                            const TraceModel &model,
                                            SymbolCache *cache,
                                            const AnnotateOptions &options);

/// The annotation for the terminal: a header line, then one row per line
/// (instructions, entries, self time, FILE:LINE, the source text); with
/// instructions, each one under its line; at most `rows` rows in all and
/// a count of the rest.
std::string renderAnnotation(const Annotation &annotation, unsigned snapshot,
                             size_t rows);

/// {snapshot, function, file, line, calls, threads, instructions, self_ns,
/// estimated, lines: [{file, line, address, inlined, instructions, entries,
/// self_ns, estimated, insns?: [{address, count, text}]}], more}: at most
/// `rows` lines, `more` counts the rest.
llvm::json::Value annotationJson(const Annotation &annotation,
                                 unsigned snapshot, size_t rows);

} // namespace magic_trace

#endif
