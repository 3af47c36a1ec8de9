//===- StackUnwinder.cpp - CFI unwinding of a stopped thread --------------===//
#include "magic_trace/StackUnwinder.h"

#include "magic_trace/ProcessModules.h"

#include "llvm/DebugInfo/DWARF/DWARFContext.h"
#include "llvm/DebugInfo/DWARF/DWARFDebugFrame.h"
#include "llvm/DebugInfo/DWARF/LowLevel/DWARFUnwindTable.h"
#include "llvm/Object/ObjectFile.h"

#include <map>
#include <memory>
#include <optional>
#include <sys/uio.h>

using namespace llvm;

namespace magic_trace {
namespace {

// DWARF register numbers for x86-64 (System V psABI, figure 3.36).
constexpr uint32_t DwarfRbp = 6;
constexpr uint32_t DwarfRsp = 7;
constexpr uint32_t DwarfReturnAddress = 16;
constexpr int MaxFrames = 256;

/// One module's .eh_frame, opened once per unwindStack call.
struct ModuleCfi {
  object::OwningBinary<object::ObjectFile> binary;
  std::unique_ptr<DWARFContext> context;
  const DWARFDebugFrame *ehFrame = nullptr;
  uint64_t bias = 0; ///< Runtime address - link-time address.
};

std::optional<uint64_t> readWord(pid_t tid, uint64_t address) {
  uint64_t value;
  iovec local{&value, sizeof(value)};
  iovec remote{reinterpret_cast<void *>(address), sizeof(value)};
  if (process_vm_readv(tid, &local, 1, &remote, 1, 0) != sizeof(value))
    return std::nullopt;
  return value;
}

const Module *moduleAt(const std::vector<Module> &modules, uint64_t address) {
  for (const Module &module : modules)
    for (const LoadedSegment &segment : module.segments)
      if (segment.executable && address >= segment.address &&
          address - segment.address < segment.size)
        return &module;
  return nullptr;
}

ModuleCfi *openCfi(const Module &module,
                   std::map<std::string, std::unique_ptr<ModuleCfi>> &cache) {
  auto [it, inserted] = cache.try_emplace(module.path);
  if (!inserted)
    return it->second.get();
  auto binary = object::ObjectFile::createObjectFile(module.fileToRead());
  if (!binary) {
    consumeError(binary.takeError());
    return nullptr;
  }
  Expected<ElfLoadInfo> loadInfo = readElfLoadInfo(module.fileToRead());
  if (!loadInfo) {
    consumeError(loadInfo.takeError());
    return nullptr;
  }
  auto cfi = std::make_unique<ModuleCfi>();
  cfi->binary = std::move(*binary);
  cfi->context = DWARFContext::create(*cfi->binary.getBinary());
  Expected<const DWARFDebugFrame *> ehFrame = cfi->context->getEHFrame();
  if (!ehFrame) {
    consumeError(ehFrame.takeError());
    return nullptr;
  }
  cfi->ehFrame = *ehFrame;
  cfi->bias = loadInfo->positionIndependent
                  ? module.loadAddress - loadInfo->firstLoadVaddr
                  : 0;
  it->second = std::move(cfi);
  return it->second.get();
}

/// The unwind row in effect at link-time address `address`.
std::optional<dwarf::UnwindRow> rowAt(const DWARFDebugFrame &frames,
                                      uint64_t address) {
  for (const dwarf::FrameEntry &entry : frames) {
    const auto *fde = dyn_cast<dwarf::FDE>(&entry);
    if (!fde || address < fde->getInitialLocation() ||
        address - fde->getInitialLocation() >= fde->getAddressRange())
      continue;
    Expected<dwarf::UnwindTable> table = dwarf::createUnwindTable(fde);
    if (!table) {
      consumeError(table.takeError());
      return std::nullopt;
    }
    std::optional<dwarf::UnwindRow> found;
    for (const dwarf::UnwindRow &row : *table)
      if (row.hasAddress() && row.getAddress() <= address)
        found = row;
    return found;
  }
  return std::nullopt;
}

} // namespace

std::vector<uint64_t> unwindStack(pid_t tid, uint64_t pc, uint64_t sp,
                                  uint64_t fp,
                                  const std::vector<Module> &modules) {
  std::vector<uint64_t> frames{pc};
  std::map<std::string, std::unique_ptr<ModuleCfi>> cache;
  while (int(frames.size()) < MaxFrames) {
    const Module *module = moduleAt(modules, pc);
    if (!module)
      break;
    ModuleCfi *cfi = openCfi(*module, cache);
    if (!cfi)
      break;
    // A return address points after its call; look up the call itself.
    uint64_t lookup = pc - cfi->bias - (frames.size() > 1 ? 1 : 0);
    std::optional<dwarf::UnwindRow> row = rowAt(*cfi->ehFrame, lookup);
    if (!row)
      break;
    const dwarf::UnwindLocation &cfaRule = row->getCFAValue();
    if (cfaRule.getLocation() != dwarf::UnwindLocation::RegPlusOffset ||
        cfaRule.getDereference())
      break;
    uint64_t base;
    if (cfaRule.getRegister() == DwarfRsp)
      base = sp;
    else if (cfaRule.getRegister() == DwarfRbp)
      base = fp;
    else
      break;
    uint64_t cfa = base + int64_t(cfaRule.getOffset());
    auto ruleOf = [&](uint32_t reg) {
      return row->getRegisterLocations().getRegisterLocation(reg);
    };
    auto savedAt = [&](uint32_t reg) -> std::optional<uint64_t> {
      std::optional<dwarf::UnwindLocation> rule = ruleOf(reg);
      if (!rule ||
          rule->getLocation() != dwarf::UnwindLocation::CFAPlusOffset ||
          !rule->getDereference())
        return std::nullopt;
      return readWord(tid, cfa + int64_t(rule->getOffset()));
    };
    std::optional<uint64_t> returnAddress = savedAt(DwarfReturnAddress);
    // _start marks the outermost frame with an undefined return address.
    if (!returnAddress || *returnAddress == 0)
      break;
    if (std::optional<uint64_t> savedFp = savedAt(DwarfRbp))
      fp = *savedFp;
    sp = cfa;
    pc = *returnAddress;
    frames.push_back(pc);
  }
  return frames;
}

} // namespace magic_trace
