//===- InsnClassifier.h - x86 instruction length and class ------*- C++ -*-===//
//
// Decodes one x86 instruction (64-bit by default; 32- and 16-bit code for
// compatibility mode) with LLVM's MC disassembler and says how it
// transfers control (BranchClass), its length, and the target of a relative
// branch. The emulator uses it to know which PT packets an instruction needs.
// It handles everything in glibc: AVX-512 (EVEX, opmask), endbr64, rep
// prefixes, `notrack jmp`, `bnd ret`.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_INSNCLASSIFIER_H
#define MAGIC_TRACE_INSNCLASSIFIER_H

#include "magic_trace/TraceItems.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace magic_trace {

/// One decoded instruction.
struct ClassifiedInsn {
  uint8_t size = 0;
  BranchClass branch = BranchClass::Other;
  /// Target of a relative jmp/call/jcc/jrcxz/loop, else 0.
  uint64_t directTarget = 0;
};

/// Length and control-flow class of x86-64 instructions. Classes:
///   SYSCALL, SYSENTER, INT n, INT3, INT1       -> Syscall
///   far CALL/JMP/RET, IRET, SYSRET, SYSEXIT, UD0/UD1/UD2 -> FarTransfer
///   Jcc, JRCXZ/JECXZ, LOOP/LOOPE/LOOPNE        -> CondBranch
///   RET / RET imm16 (with or without BND)      -> Return
///   CALL rel32 / JMP rel8|rel32                -> DirectCall / DirectJump
///   CALL r/m / JMP r/m (with or without NOTRACK) -> IndirectCall /
///   IndirectJump
/// Everything else (including REP string instructions) is Other.
class InsnClassifier {
public:
  /// Builds the X86 disassembler for code of `mode`. Fails only if LLVM
  /// lacks the X86 target.
  static llvm::Expected<std::unique_ptr<InsnClassifier>>
  create(ExecMode mode = ExecMode::Bits64);

  /// Decodes the instruction at `ip` from `bytes` (up to 15 bytes; fewer is
  /// fine when the instruction fits). Fails, naming `ip`, when the bytes are
  /// not a valid instruction of its mode or are cut short.
  llvm::Expected<ClassifiedInsn> classify(llvm::ArrayRef<uint8_t> bytes,
                                          uint64_t ip) const;

  /// The instruction at `ip` as text, in AT&T syntax with branch targets
  /// as addresses ("callq 0x401130"), as LLDB's `disassemble` and objdump
  /// print it. Fails as classify() does.
  llvm::Expected<std::string> disassemble(llvm::ArrayRef<uint8_t> bytes,
                                          uint64_t ip) const;

  ~InsnClassifier();

private:
  struct Impl;
  explicit InsnClassifier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace magic_trace

#endif
