//===- ElfSymbolTable.cpp - ELF function symbols and PLT stubs ------------===//
#include "ElfSymbolTable.h"

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Object/SymbolSize.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>
#include <unordered_set>

using namespace llvm;

namespace magic_trace {

std::string hex(uint64_t value) {
  std::string text;
  raw_string_ostream(text) << format_hex(value, 0);
  return text;
}

std::string lowerHex(ArrayRef<uint8_t> bytes) {
  std::string text;
  raw_string_ostream os(text);
  for (uint8_t byte : bytes)
    os << format_hex_no_prefix(byte, 2, /*Upper=*/false);
  return text;
}

void SymbolTable::build(const object::ObjectFile &symbolObject,
                        const object::ObjectFile &codeObject) {
  for (const auto &[symbol, size] : object::computeSymbolSizes(symbolObject))
    addSymbol(symbol, size);
  if (const auto *elf = dyn_cast<object::ELF64LEObjectFile>(&codeObject))
    addPltStubs(elf->getELFFile());
  // Sorted by (address, size), stable: std::stable_sort warns with this
  // libstdc++, so the table index breaks ties instead.
  std::sort(symbols.begin(), symbols.end(),
            [](const TableSymbol &a, const TableSymbol &b) {
              return std::tie(a.address, a.size, a.order) <
                     std::tie(b.address, b.size, b.order);
            });
  std::sort(fileSymbols.begin(), fileSymbols.end());
  for (TableSymbol &symbol : symbols) {
    if (symbol.localIndex == 0)
      continue;
    auto file =
        std::upper_bound(fileSymbols.begin(), fileSymbols.end(),
                         std::make_pair(symbol.localIndex, StringRef()));
    if (file != fileSymbols.begin())
      symbol.file = file[-1].second;
  }
  // Keep the last (largest) symbol of each address.
  std::vector<TableSymbol> unique;
  for (size_t i = 0; i < symbols.size(); ++i)
    if (i + 1 == symbols.size() || symbols[i + 1].address != symbols[i].address)
      unique.push_back(symbols[i]);
  symbols = std::move(unique);
}

SymbolMatch SymbolTable::find(uint64_t address) const {
  SymbolMatch match;
  auto next = std::upper_bound(
      symbols.begin(), symbols.end(), address,
      [](uint64_t a, const TableSymbol &s) { return a < s.address; });
  if (next != symbols.end())
    match.interval.end = next->address;
  if (next == symbols.begin())
    return match;
  const TableSymbol &symbol = next[-1];
  uint64_t symbolEnd = symbol.address + symbol.size;
  if (symbol.size != 0 && symbolEnd <= address) {
    match.interval.begin = symbolEnd;
    return match;
  }
  match.symbol = &symbol;
  match.interval.begin = symbol.address;
  if (symbol.size != 0)
    match.interval.clipAbove(symbolEnd);
  return match;
}

bool SymbolTable::empty() const { return symbols.empty(); }

/// Function, data and untyped symbols of allocated sections, as
/// SymbolizableObjectFile::addSymbol selects them.
void SymbolTable::addSymbol(const object::SymbolRef &symbol, uint64_t size) {
  Expected<StringRef> name = symbol.getName();
  Expected<object::section_iterator> section = symbol.getSection();
  Expected<uint64_t> address = symbol.getAddress();
  Expected<uint32_t> flags = symbol.getFlags();
  if (!name || !section || !address || !flags) {
    consumeError(name.takeError());
    consumeError(section.takeError());
    consumeError(address.takeError());
    consumeError(flags.takeError());
    return;
  }
  bool isElf = isa<object::ELFObjectFileBase>(symbol.getObject());
  uint32_t index = isElf ? uint32_t(symbol.getRawDataRefImpl().d.b) : 0;
  if (*section == symbol.getObject()->section_end()) {
    if (isElf && object::ELFSymbolRef(symbol).getELFType() == ELF::STT_FILE)
      fileSymbols.emplace_back(index, *name);
    return;
  }
  if (*flags & object::SymbolRef::SF_FormatSpecific)
    return;
  if (isElf) {
    uint8_t type = object::ELFSymbolRef(symbol).getELFType();
    if (type != ELF::STT_NOTYPE && type != ELF::STT_FUNC &&
        type != ELF::STT_OBJECT && type != ELF::STT_GNU_IFUNC)
      return;
  }
  TableSymbol added{*address, size, *name, symbols.size(), {}};
  if (isElf && object::ELFSymbolRef(symbol).getBinding() == ELF::STB_LOCAL)
    added.localIndex = index;
  symbols.push_back(added);
}

/// PLT stubs have no symbols (llvm-symbolizer names them after the
/// symbol before them, usually `_init`). Names them as objdump does,
/// "<target>@plt": an x86-64 stub of .plt, .plt.sec or .plt.got is an
/// indirect jump through a GOT slot, and the slot's dynamic relocation
/// names the target. An IRELATIVE slot (glibc calling its own IFUNCs) is
/// named after the IFUNC whose resolver is the addend. What is left of a
/// PLT section (PLT0, IBT's lazy-binding stubs) is named after it.
void SymbolTable::addPltStubs(const object::ELFFile<object::ELF64LE> &elf) {
  if (elf.getHeader().e_machine != ELF::EM_X86_64)
    return;
  auto sections = elf.sections();
  if (!sections) {
    consumeError(sections.takeError());
    return;
  }
  std::unordered_map<uint64_t, std::string> slotTargets = pltSlotTargets(elf);
  if (slotTargets.empty())
    return;
  std::unordered_set<uint64_t> taken;
  for (const TableSymbol &symbol : symbols)
    taken.insert(symbol.address);
  auto add = [&](uint64_t address, uint64_t size, StringRef name) {
    if (taken.insert(address).second)
      symbols.push_back(
          {address, size, saver.save(name), symbols.size(), {}, 0});
  };
  for (const auto &section : *sections) {
    Expected<StringRef> name = elf.getSectionName(section);
    if (!name) {
      consumeError(name.takeError());
      continue;
    }
    if ((*name != ".plt" && *name != ".plt.sec" && *name != ".plt.got") ||
        section.sh_type != ELF::SHT_PROGBITS)
      continue;
    Expected<ArrayRef<uint8_t>> bytes = elf.getSectionContents(section);
    if (!bytes) {
      consumeError(bytes.takeError());
      continue;
    }
    // Without an entry size: 16 bytes (a lazy PLT, PLT0 first), or 8 when
    // the section is a run of bare `jmp *slot(%rip)` stubs, as GNU ld
    // writes a static executable's IFUNC PLT (.plt of R_X86_64_IRELATIVE
    // slots, sh_entsize 0).
    uint64_t stride = section.sh_entsize;
    if (stride < 8 || stride > 64)
      stride = bytes->size() % 8 == 0 && bytes->size() >= 16 &&
                       pltJumpSlot(bytes->slice(0, 8), section.sh_addr) &&
                       pltJumpSlot(bytes->slice(8, 8), section.sh_addr + 8)
                   ? 8
                   : 16;
    for (uint64_t offset = 0; offset + stride <= bytes->size();
         offset += stride) {
      std::optional<uint64_t> slot =
          pltJumpSlot(bytes->slice(offset, stride), section.sh_addr + offset);
      if (!slot)
        continue;
      auto target = slotTargets.find(*slot);
      if (target != slotTargets.end())
        add(section.sh_addr + offset, stride, target->second + "@plt");
    }
    add(section.sh_addr, section.sh_size, *name);
  }
}

/// The GOT slot a PLT stub jumps through: `jmp *disp(%rip)`, after an
/// optional endbr64 and an optional bnd prefix, at the stub's start.
std::optional<uint64_t> SymbolTable::pltJumpSlot(ArrayRef<uint8_t> stub,
                                                 uint64_t address) {
  static constexpr uint8_t EndBr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  size_t at = 0;
  if (stub.size() >= 4 && stub.take_front(4) == ArrayRef(EndBr64))
    at = 4;
  if (at < stub.size() && stub[at] == 0xf2) // bnd
    ++at;
  if (at + 6 > stub.size() || stub[at] != 0xff || stub[at + 1] != 0x25)
    return std::nullopt;
  int32_t displacement =
      support::endian::read32le(stub.data() + at + 2); // rel32
  return address + at + 6 + int64_t(displacement);
}

/// GOT slot -> the name of what its dynamic relocation binds it to.
std::unordered_map<uint64_t, std::string>
SymbolTable::pltSlotTargets(const object::ELFFile<object::ELF64LE> &elf) {
  std::unordered_map<uint64_t, std::string> targets;
  auto sections = elf.sections();
  if (!sections) {
    consumeError(sections.takeError());
    return targets;
  }
  for (const auto &section : *sections) {
    if (section.sh_type != ELF::SHT_RELA || section.sh_link == 0)
      continue;
    auto relas = elf.relas(section);
    auto symbolSection = elf.getSection(section.sh_link);
    if (!relas || !symbolSection) {
      consumeError(relas.takeError());
      consumeError(symbolSection.takeError());
      continue;
    }
    auto tableSymbols = elf.symbols(*symbolSection);
    auto names = elf.getStringTableForSymtab(**symbolSection);
    if (!tableSymbols || !names) {
      consumeError(tableSymbols.takeError());
      consumeError(names.takeError());
      continue;
    }
    auto nameOf = [&](const object::ELF64LE::Sym &symbol) -> StringRef {
      Expected<StringRef> name = symbol.getName(*names);
      if (!name) {
        consumeError(name.takeError());
        return {};
      }
      return *name;
    };
    // IFUNC symbols by resolver address, read at the first IRELATIVE.
    std::unordered_map<uint64_t, StringRef> resolvers;
    bool resolversRead = false;
    for (const auto &rela : *relas) {
      uint32_t type = rela.getType(/*IsMips64EL=*/false);
      uint32_t index = rela.getSymbol(/*IsMips64EL=*/false);
      StringRef name;
      if (type == ELF::R_X86_64_JUMP_SLOT || type == ELF::R_X86_64_GLOB_DAT) {
        if (index != 0 && index < tableSymbols->size())
          name = nameOf((*tableSymbols)[index]);
      } else if (type == ELF::R_X86_64_IRELATIVE) {
        if (!resolversRead)
          for (const auto &symbol : *tableSymbols)
            if (symbol.getType() == ELF::STT_GNU_IFUNC)
              resolvers.try_emplace(symbol.st_value, nameOf(symbol));
        resolversRead = true;
        auto resolver = resolvers.find(rela.r_addend);
        if (resolver != resolvers.end())
          name = resolver->second;
        if (name.empty()) {
          targets[rela.r_offset] = "*ABS*+" + hex(rela.r_addend);
          continue;
        }
      }
      if (!name.empty())
        targets[rela.r_offset] = name.str();
    }
  }
  return targets;
}

namespace {

template <typename ELFT>
Expected<std::vector<LoadSegmentHeader>>
readLoadHeaders(const object::ELFFile<ELFT> &elf) {
  auto headers = elf.program_headers();
  if (!headers)
    return headers.takeError();
  std::vector<LoadSegmentHeader> loads;
  for (const auto &header : *headers)
    if (header.p_type == ELF::PT_LOAD)
      loads.push_back(
          {header.p_vaddr, header.p_memsz, header.p_offset, header.p_filesz});
  return loads;
}

/// llvm::object's symbol accessors call report_fatal_error (abort) on a
/// symbol table whose header points outside the file: check each symbol
/// table and its string table with the calls that return errors instead.
template <typename ELFT>
Error checkSymbolTables(const object::ELFFile<ELFT> &elf) {
  auto sections = elf.sections();
  if (!sections)
    return sections.takeError();
  for (const auto &section : *sections) {
    if (section.sh_type != ELF::SHT_SYMTAB &&
        section.sh_type != ELF::SHT_DYNSYM)
      continue;
    auto symbols = elf.symbols(&section);
    if (!symbols)
      return symbols.takeError();
    auto names = elf.getStringTableForSymtab(section);
    if (!names)
      return names.takeError();
  }
  return Error::success();
}

} // namespace

Error checkSymbolTables(const object::ObjectFile &object) {
  if (auto *elf = dyn_cast<object::ELF64LEObjectFile>(&object))
    return checkSymbolTables(elf->getELFFile());
  if (auto *elf = dyn_cast<object::ELF32LEObjectFile>(&object))
    return checkSymbolTables(elf->getELFFile());
  if (auto *elf = dyn_cast<object::ELF64BEObjectFile>(&object))
    return checkSymbolTables(elf->getELFFile());
  if (auto *elf = dyn_cast<object::ELF32BEObjectFile>(&object))
    return checkSymbolTables(elf->getELFFile());
  return Error::success();
}

bool hasFullSymbolTable(const object::ObjectFile &object) {
  if (!isa<object::ELFObjectFileBase>(object))
    return object.symbol_begin() != object.symbol_end();
  // More than entry 0, the null symbol (Elf64_Sym or Elf32_Sym).
  uint64_t entrySize = object.getBytesInAddress() == 8 ? 24 : 16;
  for (const object::SectionRef &section : object.sections())
    if (object::ELFSectionRef(section).getType() == ELF::SHT_SYMTAB &&
        section.getSize() > entrySize)
      return true;
  return false;
}

Expected<std::vector<LoadSegmentHeader>>
readLoadHeaders(const object::ObjectFile &object) {
  if (auto *elf = dyn_cast<object::ELF64LEObjectFile>(&object))
    return readLoadHeaders(elf->getELFFile());
  if (auto *elf = dyn_cast<object::ELF32LEObjectFile>(&object))
    return readLoadHeaders(elf->getELFFile());
  if (auto *elf = dyn_cast<object::ELF64BEObjectFile>(&object))
    return readLoadHeaders(elf->getELFFile());
  if (auto *elf = dyn_cast<object::ELF32BEObjectFile>(&object))
    return readLoadHeaders(elf->getELFFile());
  return createStringError(Twine("not an ELF file"));
}

uint64_t preferredBase(const std::vector<LoadSegmentHeader> &loads) {
  uint64_t lowest = NoEnd;
  for (const LoadSegmentHeader &load : loads)
    lowest = std::min(lowest, load.vaddr);
  return lowest == NoEnd ? 0 : lowest & ~(LoaderPageSize - 1);
}

} // namespace magic_trace
