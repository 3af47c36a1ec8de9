//===- InsnClassifier.cpp - x86 instruction length and class --------------===//
#include "magic_trace/InsnClassifier.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>
#include <mutex>

// Only the X86 pieces of libLLVM are initialized: InitializeAllTargets would
// register every backend for nothing.
extern "C" {
void LLVMInitializeX86TargetInfo();
void LLVMInitializeX86TargetMC();
void LLVMInitializeX86Disassembler();
}

using namespace llvm;

namespace magic_trace {

struct InsnClassifier::Impl {
  std::unique_ptr<MCRegisterInfo> registers;
  std::unique_ptr<MCAsmInfo> asmInfo;
  std::unique_ptr<MCSubtargetInfo> subtarget;
  std::unique_ptr<MCContext> context;
  std::unique_ptr<MCDisassembler> disassembler;
  std::unique_ptr<MCInstrInfo> instrInfo;
  std::unique_ptr<MCInstrAnalysis> analysis;
  /// AT&T syntax, as LLDB's `disassemble` and objdump print by default.
  std::unique_ptr<MCInstPrinter> printer;
  ExecMode mode = ExecMode::Bits64;
};

InsnClassifier::InsnClassifier(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
InsnClassifier::~InsnClassifier() = default;

const char *execModeName(ExecMode mode) {
  switch (mode) {
  case ExecMode::Bits64:
    return "64-bit";
  case ExecMode::Bits32:
    return "32-bit";
  case ExecMode::Bits16:
    return "16-bit";
  }
  return "unknown";
}

Expected<std::unique_ptr<InsnClassifier>>
InsnClassifier::create(ExecMode mode) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86Disassembler();
  });

  // Compatibility-mode code is i386 code; 16-bit default operand size is
  // LLVM's "16bit-mode" (what `.code16` selects).
  Triple triple(mode == ExecMode::Bits64 ? "x86_64-unknown-linux-gnu"
                                         : "i386-unknown-linux-gnu");
  const char *features = mode == ExecMode::Bits16 ? "+16bit-mode" : "";
  std::string lookupError;
  const Target *target = TargetRegistry::lookupTarget(triple, lookupError);
  if (!target)
    return createStringError("cannot find LLVM's X86 target: " + lookupError +
                             " (use an LLVM built with the X86 backend)");

  auto impl = std::make_unique<Impl>();
  impl->mode = mode;
  impl->registers.reset(target->createMCRegInfo(triple));
  MCTargetOptions options;
  if (impl->registers)
    impl->asmInfo.reset(
        target->createMCAsmInfo(*impl->registers, triple, options));
  impl->subtarget.reset(target->createMCSubtargetInfo(triple, "", features));
  impl->instrInfo.reset(target->createMCInstrInfo());
  if (!impl->registers || !impl->asmInfo || !impl->subtarget ||
      !impl->instrInfo)
    return createStringError("cannot create LLVM's X86 MC layer (use an "
                             "LLVM built with the X86 backend)");
  impl->context =
      std::make_unique<MCContext>(triple, impl->asmInfo.get(),
                                  impl->registers.get(), impl->subtarget.get());
  impl->disassembler.reset(
      target->createMCDisassembler(*impl->subtarget, *impl->context));
  impl->analysis.reset(target->createMCInstrAnalysis(impl->instrInfo.get()));
  impl->printer.reset(
      target->createMCInstPrinter(triple, /*SyntaxVariant=*/0, *impl->asmInfo,
                                  *impl->instrInfo, *impl->registers));
  if (!impl->disassembler || !impl->analysis || !impl->printer)
    return createStringError("cannot create LLVM's X86 disassembler (use an "
                             "LLVM built with the X86 disassembler)");
  // Branch targets as addresses ("jmp 0x401136"), as objdump prints them.
  impl->printer->setPrintBranchImmAsAddress(true);
  // Immediates and displacements in hex, as llvm-objdump prints them.
  impl->printer->setPrintImmHex(true);
  return std::unique_ptr<InsnClassifier>(new InsnClassifier(std::move(impl)));
}

/// Classes the MC instruction descriptors get wrong or do not have: traps,
/// far transfers and the counter-conditional branches. `std::nullopt` when
/// the generic descriptor flags decide.
static std::optional<BranchClass> classifyByName(StringRef name) {
  // SYSCALL/SYSENTER and software interrupts leave user space: in user-only
  // tracing the CPU writes TIP.PGD (IP suppressed).
  if (name == "SYSCALL" || name == "SYSENTER" || name == "INT" ||
      name == "INT3" || name == "INT1" || name == "INTO")
    return BranchClass::Syscall;
  if (name.starts_with("FARCALL") || name.starts_with("FARJMP") ||
      name.starts_with("LRET") || name.starts_with("IRET") ||
      name.starts_with("SYSRET") || name.starts_with("SYSEXIT") ||
      name.starts_with("UIRET") || name == "TRAP" || name.starts_with("UD1") ||
      name.starts_with("UD0") || name == "UD2")
    return BranchClass::FarTransfer;
  if (name == "JCXZ" || name == "JECXZ" || name == "JRCXZ" || name == "LOOP" ||
      name == "LOOPE" || name == "LOOPNE")
    return BranchClass::CondBranch;
  return std::nullopt;
}

Expected<ClassifiedInsn> InsnClassifier::classify(ArrayRef<uint8_t> bytes,
                                                  uint64_t ip) const {
  MCInst inst;
  uint64_t size = 0;
  if (bytes.size() > 15)
    bytes = bytes.take_front(15);
  MCDisassembler::DecodeStatus status =
      impl->disassembler->getInstruction(inst, size, bytes, ip, nulls());
  if (status != MCDisassembler::Success || size == 0 || size > bytes.size())
    return createStringError(
        formatv("cannot decode the {0} instruction at {1:x} (bytes {2}; "
                "check the address and the memory read)",
                impl->mode == ExecMode::Bits64 ? "x86-64"
                                               : execModeName(impl->mode),
                ip, toHex(bytes, /*LowerCase=*/true))
            .str());

  // LLVM's X86 disassembler returns a LOCK (or REP/segment/...) prefix as an
  // instruction of its own ("LOCK_PREFIX", size 1): `lock cmpxchg` would be
  // two instructions. The CPU executes it as one, so decode on and add up.
  if (impl->instrInfo->getName(inst.getOpcode()).ends_with("_PREFIX") &&
      size < bytes.size()) {
    Expected<ClassifiedInsn> rest = classify(bytes.drop_front(size), ip + size);
    if (!rest)
      return rest.takeError();
    rest->size = static_cast<uint8_t>(rest->size + size);
    return rest;
  }

  ClassifiedInsn result;
  result.size = static_cast<uint8_t>(size);
  const MCInstrAnalysis &analysis = *impl->analysis;
  uint64_t target = 0;
  bool direct = analysis.evaluateBranch(inst, ip, size, target);

  if (std::optional<BranchClass> special =
          classifyByName(impl->instrInfo->getName(inst.getOpcode()))) {
    result.branch = *special;
  } else if (analysis.isReturn(inst)) {
    result.branch = BranchClass::Return;
  } else if (analysis.isCall(inst)) {
    result.branch =
        direct ? BranchClass::DirectCall : BranchClass::IndirectCall;
  } else if (analysis.isConditionalBranch(inst)) {
    result.branch = BranchClass::CondBranch;
  } else if (analysis.isBranch(inst) || analysis.isIndirectBranch(inst)) {
    result.branch =
        direct ? BranchClass::DirectJump : BranchClass::IndirectJump;
  }
  if (direct && (result.branch == BranchClass::CondBranch ||
                 result.branch == BranchClass::DirectJump ||
                 result.branch == BranchClass::DirectCall))
    result.directTarget = target;
  return result;
}

Expected<std::string> InsnClassifier::disassemble(ArrayRef<uint8_t> bytes,
                                                  uint64_t ip) const {
  Expected<ClassifiedInsn> insn = classify(bytes, ip);
  if (!insn)
    return insn.takeError();
  // classify() decoded it: the prefixes LLVM returns as instructions of
  // their own are printed before the rest, as one instruction.
  std::string text;
  raw_string_ostream os(text);
  uint64_t at = 0;
  while (at < insn->size) {
    MCInst inst;
    uint64_t size = 0;
    ArrayRef<uint8_t> rest = bytes.slice(at, insn->size - at);
    if (impl->disassembler->getInstruction(
            inst, size, rest, ip + at, nulls()) != MCDisassembler::Success ||
        size == 0)
      break;
    std::string part;
    raw_string_ostream partOs(part);
    // X86's printer adds a relative branch's displacement to the address
    // it is given: the next instruction's, as llvm-objdump passes it.
    impl->printer->printInst(&inst, ip + at + size, "", *impl->subtarget,
                             partOs);
    // The printer starts with a tab and puts one between the mnemonic and
    // the operands.
    if (!text.empty())
      os << ' ';
    os << StringRef(part).trim();
    at += size;
  }
  std::replace(text.begin(), text.end(), '\t', ' ');
  return text;
}

} // namespace magic_trace
