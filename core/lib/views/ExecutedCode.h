//===- ExecutedCode.h - A kept window's instructions, by symbol range -*- C++
//-*-===//
//
// Private to core/lib/views. The model keeps calls and times, not the
// instructions; the views that count instructions (report --annotate,
// --top, diff) decode the snapshot's window again and walk every executed
// instruction in stretches that share one symbol range (one chain of
// functions, files and lines: Symbolizer.h), with their share of the
// block's time and whether the instruction clock made it.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_VIEWS_EXECUTEDCODE_H
#define MAGIC_TRACE_LIB_VIEWS_EXECUTEDCODE_H

#include "magic_trace/Decoder.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/StringTable.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>

namespace magic_trace::views {

/// Consecutive instructions of one block that share one symbol range.
struct CodeRun {
  const SymbolRange *range = nullptr;
  uint64_t ip = 0;    ///< The first instruction's address.
  uint32_t count = 0; ///< Instructions.
  ExecMode mode = ExecMode::Bits64;
  /// Their share of the block's time: the time from the block's start to
  /// the next item's, split evenly over the block's instructions.
  uint64_t selfNs = 0;
  /// Some of them were timed by the instruction clock (no timing packet
  /// around them: ItemSink::estimatedRange).
  bool estimated = false;
};

/// What a walk reports, thread by thread, in execution order.
class RunVisitor {
public:
  virtual ~RunVisitor() = default;
  /// A thread of the model starts (its runs follow).
  virtual void beginThread(uint64_t tid) { (void)tid; }
  /// A run in the window. The walker reads the code of its moment.
  virtual void run(const CodeRun &run, InstructionWalker &walker) = 0;
  /// A decode error or an overflow: what ran there is not known.
  virtual void gap() {}
};

/// One snapshot's code and symbols, for walks over its kept windows.
class ExecutedCode {
public:
  /// Symbolizes with `cache` when given (its strings, which the caller's
  /// lock guards), as the pipeline does. Errors: the decoder's (an
  /// unknown CPU, libipt cannot allocate an image).
  static llvm::Expected<std::unique_ptr<ExecutedCode>>
  create(const Snapshot &snapshot, SymbolCache *cache);
  ~ExecutedCode();

  /// The string of an id in this code's SymbolRanges.
  llvm::StringRef text(StringId id) const { return strings->get(id); }
  Symbolizer &symbols() { return *symbolizer; }

  /// Decodes each thread of `model` (only `onlyTid` when not 0) again from
  /// the PSB its window needs and reports every instruction from its
  /// window's start on (ThreadModel::windowStart; an instruction is in the
  /// window when the time it starts is) to `visitor`. Errors: libipt
  /// cannot allocate a decoder, interrupted.
  llvm::Error walk(const TraceModel &model, uint64_t onlyTid,
                   RunVisitor &visitor);

  /// Instructions whose code could not be read to walk them (counted in
  /// the range where reading stopped); 0 in a sound snapshot.
  uint64_t unwalked() const { return unwalkedInstructions; }

private:
  ExecutedCode(const Snapshot &snapshot) : snapshot(snapshot) {}
  const Snapshot &snapshot;
  std::unique_ptr<SnapshotDecoder> decoder;
  std::unique_ptr<InstructionWalker> walker;
  /// The symbolizer's strings: the cache's, or ownStrings.
  StringTable ownStrings;
  StringTable *strings = &ownStrings;
  std::optional<Symbolizer> symbolizer;
  uint64_t unwalkedInstructions = 0;
};

/// The file and line of the innermost frame of `range` (the line table's
/// row for its addresses, as llvm-symbolizer's first frame); file 0 when
/// the range has no debug information.
inline const SymbolFrame *innermostFrame(const SymbolRange &range) {
  return range.frames.empty() ? nullptr : &range.frames.back();
}

/// `name` without its parameter list ("fib(int)" -> "fib",
/// "ns::twice<long>(long) const" -> "ns::twice<long>"); names in brackets
/// ("[syscall]", "[jit 0x...]") as they are.
llvm::StringRef withoutParameters(llvm::StringRef name);

/// A user's FUNCTION names `name`: exactly, or without its parameter list.
bool namesFunction(llvm::StringRef query, llvm::StringRef name);

} // namespace magic_trace::views

#endif
