//===- RefFunctionBounds.h - The reference's stripped functions -*- C++ -*-===//
//
// Code no symbol covers but an .eh_frame FDE does is one function per FDE,
// named MODULE+0xBEGIN with BEGIN its file address, as the symbolizer names
// it (docs/symbolizer.md, "Stripped code"). The reference reads the FDEs with
// LLVM's call-frame parser (DWARFContext::getEHFrame), not the symbolizer's
// own reader, so that the two are checked against each other.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TOOLS_REFTREE_REFFUNCTIONBOUNDS_H
#define MAGIC_TRACE_TOOLS_REFTREE_REFFUNCTIONBOUNDS_H

#include "RefTree.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Object/ObjectFile.h"

#include <cstdint>
#include <vector>

namespace magic_trace {
namespace reftree {

/// Adds to `out` a function for each FDE of `file` (loaded at `bias`) whose
/// first byte no function of out[first..] covers, ending at its FDE's end or
/// the next function's begin. out[first..] must be sorted by begin.
void addFdeFunctions(const llvm::object::ObjectFile &file,
                     llvm::StringRef moduleName, uint64_t bias, size_t first,
                     std::vector<RefFunction> &out);

} // namespace reftree
} // namespace magic_trace

#endif
