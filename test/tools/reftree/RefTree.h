//===- RefTree.h - The reference call tree from emulator ground truth -*- C++
//-*-===//
//
// The call tree a thread really had, derived only from the emulator's ground
// truth (every executed address, and the kind of each control transfer) and
// the modules' ELF symbol tables read here with llvm::object. It shares no
// code with the decoder, the symbolizer or the model builder: it is what
// their combined output is checked against (docs/model.md, "Ground truth").
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TOOLS_REFTREE_REFTREE_H
#define MAGIC_TRACE_TOOLS_REFTREE_REFTREE_H

#include "magic_trace/GroundTruth.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/TraceModel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {
namespace reftree {

class RefCode;

/// A function of the symbol tables, or a stretch of code between two
/// symbols (`unknown`).
struct RefFunction {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string name;
  /// Every (demangled) name of a symbol at `begin`: DWARF may pick another.
  std::vector<std::string> aliases;
  bool unknown = false;
};

/// Every FUNC symbol (.symtab and .dynsym) of every module, at run time.
class RefSymbols {
public:
  explicit RefSymbols(const std::vector<Module> &modules);
  /// The function containing `address`; code between symbols is one
  /// unknown function per gap.
  RefFunction lookup(uint64_t address) const;
  size_t size() const { return functions.size(); }

private:
  std::vector<RefFunction> functions; ///< Sorted, non-overlapping.
};

/// One frame of a call tree, reduced to what the comparison uses. `key` is
/// the function's entry address (0 for unknown code).
struct TreeFrame {
  uint64_t key = 0;
  std::string name;
  uint64_t begin = 0;
  uint64_t end = 0;
  unsigned depth = 0;
  /// Reference frames: every name of the function (see RefFunction).
  std::vector<std::string> aliases;
  /// Reference frames: opened at the stop, by the last instruction's call
  /// (or tail call) into a function that never ran (a zero-length leaf).
  bool atStop = false;
  /// Reference frames: every instruction of it (and its callees) ran inside
  /// one injected loss, so no decoder can see it.
  bool lost = false;
};

/// The same function: equal entry addresses, or (when the model's entry
/// differs, e.g. a function split into hot and cold parts whose DWARF entry
/// is its lowest address) the model's name is one of the symbol's names.
bool sameFunction(const TreeFrame &reference, const TreeFrame &model);

/// The reference tree of one thread in pre-order; times are the emulator's
/// virtual clock converted by `time` (one cycle per instruction). The
/// function the thread stopped at the entry of, when its last instruction
/// called (or tail-called) it, ends the tree as a zero-length frame marked
/// `atStop` (docs/model.md, "Ground truth").
/// With `code`, an indirect jump into the middle of a function not on the
/// stack makes that function a caller from before the trace (as the model
/// does); without, the jumping frame is replaced.
std::vector<TreeFrame> referenceTree(const ThreadTruth &truth,
                                     const RefSymbols &symbols,
                                     const TimeConversion &time,
                                     uint64_t startTsc,
                                     const RefCode *code = nullptr);

/// The physical frames of `model` in pre-order (inlined frames and spans
/// left out). With `mergeStitched`, a frame continued across a stitched gap
/// is one frame.
std::vector<TreeFrame> modelTree(const ThreadModel &model,
                                 const StringTable &strings,
                                 bool mergeStitched);

/// How many reference frames have a model frame of the same function whose
/// begin and end are both within `tolerance` ns (each model frame used once).
size_t matchingFrames(const std::vector<TreeFrame> &reference,
                      const std::vector<TreeFrame> &model, uint64_t tolerance);

/// Empty when the two trees have the same shape and functions in pre-order
/// and every time is within `tolerance`; else the first difference.
std::string firstDifference(const std::vector<TreeFrame> &reference,
                            const std::vector<TreeFrame> &model,
                            uint64_t tolerance);

} // namespace reftree
} // namespace magic_trace

#endif
