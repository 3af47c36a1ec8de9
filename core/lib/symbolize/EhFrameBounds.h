//===- EhFrameBounds.h - Function extents from FDEs -------------*- C++ -*-===//
//
// Stripped code has no symbols, but every function the compiler emitted
// unwind information for has a Frame Description Entry in .eh_frame whose
// [pc_begin, pc_begin + pc_range) is the function's extent. LLDB synthesizes
// symbols from them the same way (ObjectFileELF's unwind symbols); perf
// prints [unknown]. Read from .eh_frame_hdr's sorted table when it has one,
// else by walking .eh_frame; format: the LSB's "Exception Frame Header" and
// ".eh_frame" sections. Every read is bounds-checked: damage is an error for
// a warning line, never a crash. Internal to core/lib/symbolize/; includes no
// DebugInfo header (LLVM's CFI parser decodes every CFA program and is not
// hardened against damaged files; we need two fields per FDE).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLIZE_EHFRAMEBOUNDS_H
#define MAGIC_TRACE_SYMBOLIZE_EHFRAMEBOUNDS_H

#include "ElfSymbolTable.h"

#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace magic_trace {

/// One function's extent, [begin, end) in file addresses.
struct FunctionBounds {
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// The FDE naming `address` (or none) and the interval over which that
/// answer is the same.
struct FunctionMatch {
  const FunctionBounds *function = nullptr;
  Interval interval;
};

/// Where the bounds came from.
enum class FunctionBoundsSource { None, FrameHeader, FrameSection };

/// The FDEs of one object file, sorted by begin, disjoint, none empty.
class EhFrameBounds {
public:
  /// Reads `object`'s .eh_frame_hdr table (each entry's FDE read and
  /// checked against it), or walks .eh_frame when there is no table or the
  /// table is damaged. Fails with one line per damaged section, e.g.
  /// "damaged .eh_frame_hdr: table entry 3 is not sorted (bounds from
  /// .eh_frame)"; the bounds read before the damage are kept. A file
  /// without either section has no bounds and no error.
  llvm::Error read(const llvm::object::ObjectFile &object);

  /// The FDE containing `address`, and where that answer holds: the FDE,
  /// or the gap between its neighbours.
  FunctionMatch find(uint64_t address) const;

  const std::vector<FunctionBounds> &functions() const { return bounds; }
  FunctionBoundsSource source() const { return from; }

private:
  void normalize();

  std::vector<FunctionBounds> bounds;
  FunctionBoundsSource from = FunctionBoundsSource::None;
};

} // namespace magic_trace

#endif
