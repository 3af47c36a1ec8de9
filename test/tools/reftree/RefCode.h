//===- RefCode.h - The reference's view of an instruction -------*- C++ -*-===//
//
// What kind of jump an executed instruction was, read from the module's file
// with LLVM's disassembler (MCDisassembler, MCInstrAnalysis), not with the
// recorders' instruction classifier: the ground truth records a jump, not
// whether it was indirect, and the reference tree's rule for a jump into the
// middle of a function not on the stack depends on it (docs/model.md).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TOOLS_REFTREE_REFCODE_H
#define MAGIC_TRACE_TOOLS_REFTREE_REFCODE_H

#include "magic_trace/Snapshot.h"

#include "llvm/Object/ObjectFile.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace magic_trace {
namespace reftree {

/// Lowest PT_LOAD address, page-aligned: what lands at Module::loadAddress.
uint64_t linkBase(const llvm::object::ObjectFile &file);

class RefCode {
public:
  explicit RefCode(const std::vector<Module> &modules);
  ~RefCode();
  /// Is the instruction at run-time `address` an indirect jump (JMP r/m)?
  /// False when no module's file has code there.
  bool isIndirectJump(uint64_t address) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  mutable std::map<uint64_t, bool> known;
};

} // namespace reftree
} // namespace magic_trace

#endif
