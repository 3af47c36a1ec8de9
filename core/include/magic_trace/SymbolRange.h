//===- SymbolRange.h - What the symbolizer says of a range of code -*- C++
//-*-===//
//
// The symbolizer's answer (Symbolizer.h), as the model builder reads it
// (ModelBuilder.h, SymbolLookup): a stretch of code and its chain of
// frames, physical function first, inlined callees after. Data only, so
// that the model depends on what symbolization gives, not on how.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLRANGE_H
#define MAGIC_TRACE_SYMBOLRANGE_H

#include "magic_trace/StringTable.h"

#include <cstdint>
#include <vector>

namespace magic_trace {

/// One frame of a chain. Strings are ids in the symbolizer's StringTable.
struct SymbolFrame {
  StringId function = 0; ///< Demangled name.
  StringId file = 0;     ///< Source file, or the empty string id.
  uint32_t line = 0;     ///< 0 when unknown.
  bool inlined = false;  ///< False for the outermost (physical) frame.
};

/// A range of runtime addresses [begin, end) that all share one chain.
struct SymbolRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  /// The physical function's entry address (runtime), 0 if unknown. Used to
  /// tell a jump into another function's entry (tail call) from a local jump.
  uint64_t functionEntry = 0;
  StringId module = 0; ///< Module path.
  /// Runtime address minus the module's file address here (the file's own
  /// addresses: what llvm-symbolizer --obj and objdump take); for a module
  /// whose file cannot be read, its load address. Names unknown code.
  uint64_t fileBias = 0;
  std::vector<SymbolFrame> frames; ///< Outermost (physical) first.
  bool fromDebugInfo = false;      ///< False: symbol table or unknown.
  /// No symbol, DWARF or FDE covers the range: its one frame is
  /// "[unknown @ ...]".
  bool unknown = false;
};

} // namespace magic_trace

#endif
