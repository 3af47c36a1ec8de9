//===- RefCode.cpp - The reference's view of an instruction --------------===//

#include "RefCode.h"

#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

using namespace llvm;
using namespace magic_trace;
using namespace magic_trace::reftree;

uint64_t reftree::linkBase(const object::ObjectFile &file) {
  constexpr uint64_t PageSize = 4096;
  const auto *elf = dyn_cast<object::ELF64LEObjectFile>(&file);
  if (!elf)
    return 0;
  auto headers = elf->getELFFile().program_headers();
  if (!headers) {
    consumeError(headers.takeError());
    return 0;
  }
  uint64_t lowest = UINT64_MAX;
  for (const auto &header : *headers)
    if (header.p_type == ELF::PT_LOAD)
      lowest = std::min<uint64_t>(lowest, header.p_vaddr);
  return lowest == UINT64_MAX ? 0 : lowest & ~(PageSize - 1);
}

namespace {

/// One module's code sections, read on first use.
struct ModuleCode {
  const Module *module = nullptr;
  bool loaded = false;
  object::OwningBinary<object::ObjectFile> binary;
  uint64_t bias = 0;
  /// Executable sections: link address, bytes.
  std::vector<std::pair<uint64_t, StringRef>> sections;
};

} // namespace

struct RefCode::Impl {
  std::vector<ModuleCode> modules;
  std::unique_ptr<MCRegisterInfo> registers;
  std::unique_ptr<MCAsmInfo> asmInfo;
  std::unique_ptr<MCSubtargetInfo> subtarget;
  std::unique_ptr<MCInstrInfo> instructions;
  std::unique_ptr<MCContext> context;
  std::unique_ptr<MCDisassembler> disassembler;
  std::unique_ptr<MCInstrAnalysis> analysis;

  bool setUp() {
    if (disassembler)
      return true;
    InitializeAllTargetInfos();
    InitializeAllTargetMCs();
    InitializeAllDisassemblers();
    Triple triple("x86_64-unknown-linux-gnu");
    std::string error;
    const Target *target = TargetRegistry::lookupTarget(triple, error);
    if (!target)
      return false;
    registers.reset(target->createMCRegInfo(triple));
    MCTargetOptions options;
    if (registers)
      asmInfo.reset(target->createMCAsmInfo(*registers, triple, options));
    subtarget.reset(target->createMCSubtargetInfo(triple, "", ""));
    instructions.reset(target->createMCInstrInfo());
    if (!registers || !asmInfo || !subtarget || !instructions)
      return false;
    context = std::make_unique<MCContext>(triple, asmInfo.get(),
                                          registers.get(), subtarget.get());
    disassembler.reset(target->createMCDisassembler(*subtarget, *context));
    analysis.reset(target->createMCInstrAnalysis(instructions.get()));
    return disassembler && analysis;
  }

  /// The instruction in the first module's code section that holds
  /// `address`: is it an indirect jump?
  bool decodeIndirectJump(uint64_t address) {
    for (ModuleCode &code : modules) {
      if (address < code.module->loadAddress)
        continue;
      if (!code.loaded)
        load(code);
      uint64_t link = address - code.bias;
      for (auto [begin, bytes] : code.sections) {
        if (link < begin || link >= begin + bytes.size())
          continue;
        MCInst inst;
        uint64_t size = 0;
        ArrayRef<uint8_t> rest =
            arrayRefFromStringRef(bytes.substr(link - begin));
        return disassembler->getInstruction(inst, size, rest, link, nulls()) ==
                   MCDisassembler::Success &&
               analysis->isIndirectBranch(inst);
      }
    }
    return false;
  }

  void load(ModuleCode &code) {
    code.loaded = true;
    auto binary =
        object::ObjectFile::createObjectFile(code.module->fileToRead());
    if (!binary) {
      consumeError(binary.takeError());
      return;
    }
    code.binary = std::move(*binary);
    const object::ObjectFile &file = *code.binary.getBinary();
    code.bias = code.module->loadAddress - linkBase(file);
    for (const object::SectionRef &section : file.sections()) {
      if (!section.isText())
        continue;
      Expected<StringRef> contents = section.getContents();
      if (!contents) {
        consumeError(contents.takeError());
        continue;
      }
      code.sections.push_back({section.getAddress(), *contents});
    }
  }
};

RefCode::RefCode(const std::vector<Module> &modules)
    : impl(std::make_unique<Impl>()) {
  for (const Module &module : modules)
    impl->modules.emplace_back().module = &module;
}

RefCode::~RefCode() = default;

bool RefCode::isIndirectJump(uint64_t address) const {
  auto cached = known.find(address);
  if (cached != known.end())
    return cached->second;
  bool indirect = false;
  if (impl->setUp())
    indirect = impl->decodeIndirectJump(address);
  known[address] = indirect;
  return indirect;
}
