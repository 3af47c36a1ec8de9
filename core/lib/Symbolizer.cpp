//===- Symbolizer.cpp - Addresses to inline-aware frames ------------------===//
//
// The only core file that includes LLVM DebugInfo headers (STYLE.md rule 1).
//
// A lookup goes runtime address -> mapping (a loaded segment of a module) ->
// file address -> chain. Chains come from DWARF through the same calls
// llvm-symbolizer makes (DWARFContext::getInliningInfoForAddress, with the
// outermost name taken from the symbol table as SymbolizableObjectFile does
// for DWARF), so that `llvm-symbolizer-22 --inlining` is the reference.
//
// Each lookup that misses the cache computes the largest range around the
// address in which the chain cannot change: the intersection of
//   - the symbol-table interval that gives the outermost name,
//   - the address range of every scope in the inlined chain that contains
//     the address, minus the ranges of the innermost scope's nested inlined
//     callees,
//   - the line-table rows around the address that share its file and line.
// Ranges are cached per object file (keyed by build-id, so two modules with
// one build-id share them) in file addresses, and per loaded mapping in
// runtime addresses. docs/symbolizer.md describes the unknown ranges.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/Symbolizer.h"

#include "DwarfLineCheck.h"

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/DebugInfo/DIContext.h"
#include "llvm/DebugInfo/DWARF/DWARFCompileUnit.h"
#include "llvm/DebugInfo/DWARF/DWARFContext.h"
#include "llvm/DebugInfo/DWARF/DWARFDebugLine.h"
#include "llvm/DebugInfo/DWARF/DWARFDie.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/Object/BuildID.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Object/SymbolSize.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

using namespace llvm;

namespace magic_trace {
namespace {

/// Page size the loader aligns the first PT_LOAD to (x86-64).
constexpr uint64_t LoaderPageSize = 4096;
constexpr uint64_t NoEnd = UINT64_MAX;

/// A half-open interval of addresses that lookups narrow down.
struct Interval {
  uint64_t begin = 0;
  uint64_t end = NoEnd;

  void clipBelow(uint64_t address) { begin = std::max(begin, address); }
  void clipAbove(uint64_t address) { end = std::min(end, address); }
  /// Keeps only `address` itself: always correct, used when the debug info is
  /// too odd to reason about.
  void collapseTo(uint64_t address) {
    begin = address;
    end = address + 1;
  }
  /// Narrows to the part of [low, high) containing `address`, seen from
  /// `address`: a range below it raises begin, one above it lowers end.
  void excludeOther(uint64_t low, uint64_t high, uint64_t address) {
    if (low >= high)
      return;
    if (high <= address)
      clipBelow(high);
    else if (low > address)
      clipAbove(low);
    else
      collapseTo(address);
  }
};

/// One PT_LOAD program header.
struct LoadSegmentHeader {
  uint64_t vaddr = 0;
  uint64_t memSize = 0;
  uint64_t offset = 0;
  uint64_t fileSize = 0;
};

std::string hex(uint64_t value) {
  std::string text;
  raw_string_ostream(text) << format_hex(value, 0);
  return text;
}

/// One symbol of .symtab (or .dynsym when there is no .symtab).
struct TableSymbol {
  uint64_t address = 0;
  uint64_t size = 0;
  StringRef name;
  size_t order = 0; ///< Position in the symbol table.
  /// For a local ELF symbol, the STT_FILE symbol before it: the source file
  /// when there is no debug info (ELF's rule for local symbols).
  StringRef file;
  uint32_t localIndex = 0; ///< ELF symbol index if local, else 0.
};

/// The symbol-table half of a lookup: the symbol naming `address` (or none)
/// and the interval over which that answer is the same.
struct SymbolMatch {
  const TableSymbol *symbol = nullptr;
  Interval interval;
};

/// Function symbols sorted by address, one per address (the largest), with
/// the containment rule of llvm-symbolizer: a symbol of size 0 covers every
/// address up to the next symbol.
class SymbolTable {
public:
  void build(const object::ObjectFile &object) {
    for (const auto &[symbol, size] : object::computeSymbolSizes(object))
      addSymbol(symbol, size);
    if (const auto *elf = dyn_cast<object::ELF64LEObjectFile>(&object))
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
      if (i + 1 == symbols.size() ||
          symbols[i + 1].address != symbols[i].address)
        unique.push_back(symbols[i]);
    symbols = std::move(unique);
  }

  SymbolMatch find(uint64_t address) const {
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

  bool empty() const { return symbols.empty(); }

private:
  /// Function, data and untyped symbols of allocated sections, as
  /// SymbolizableObjectFile::addSymbol selects them.
  void addSymbol(const object::SymbolRef &symbol, uint64_t size) {
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
  void addPltStubs(const object::ELFFile<object::ELF64LE> &elf) {
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
      uint64_t stride = section.sh_entsize;
      if (stride < 8 || stride > 64)
        stride = 16;
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
  static std::optional<uint64_t> pltJumpSlot(ArrayRef<uint8_t> stub,
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
  static std::unordered_map<uint64_t, std::string>
  pltSlotTargets(const object::ELFFile<object::ELF64LE> &elf) {
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

  std::vector<TableSymbol> symbols;
  std::vector<std::pair<uint32_t, StringRef>> fileSymbols; ///< By index.
  BumpPtrAllocator names;
  UniqueStringSaver saver{names};
};

/// A chain computed for a range of file addresses. Unknown ranges have no
/// frames: their one frame names the runtime address, so it is made when the
/// range is placed at a runtime address.
struct FileRange {
  Interval interval;
  uint64_t functionEntry = 0; ///< File address; 0 if unknown.
  std::vector<SymbolFrame> frames;
  bool fromDebugInfo = false;
};

std::string lowerHex(ArrayRef<uint8_t> bytes) {
  std::string text;
  raw_string_ostream os(text);
  for (uint8_t byte : bytes)
    os << format_hex_no_prefix(byte, 2, /*Upper=*/false);
  return text;
}

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

/// The lowest address the file asks to be mapped at: its first PT_LOAD's
/// vaddr, page-aligned down as the loader maps it.
uint64_t preferredBase(const std::vector<LoadSegmentHeader> &loads) {
  uint64_t lowest = NoEnd;
  for (const LoadSegmentHeader &load : loads)
    lowest = std::min(lowest, load.vaddr);
  return lowest == NoEnd ? 0 : lowest & ~(LoaderPageSize - 1);
}

/// Where Debian (and most distributions) install separate debug files.
constexpr const char *DebugRoot = "/usr/lib/debug";

/// True if `path` holds a file whose CRC-32 is `crc` (.gnu_debuglink's check).
bool hasCrc(const std::string &path, uint32_t crc) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return false;
  return llvm::crc32(arrayRefFromStringRef((*buffer)->getBuffer())) == crc;
}

/// The separate debug file of `object` (read from `path`), looked up where
/// llvm-symbolizer looks by default: first by build-id under
/// /usr/lib/debug/.build-id/, then by .gnu_debuglink next to the file, in its
/// .debug/ folder, and under /usr/lib/debug/<its folder>. Empty if none.
std::string findDebugFile(const object::ObjectFile &object, StringRef path) {
  std::string id = lowerHex(object::getBuildID(&object));
  if (id.size() > 2) {
    std::string candidate = std::string(DebugRoot) + "/.build-id/" +
                            id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    if (sys::fs::exists(candidate))
      return candidate;
  }
  for (const object::SectionRef &section : object.sections()) {
    Expected<StringRef> name = section.getName();
    if (!name) {
      consumeError(name.takeError());
      continue;
    }
    if (*name != ".gnu_debuglink")
      continue;
    Expected<StringRef> contents = section.getContents();
    if (!contents) {
      consumeError(contents.takeError());
      return "";
    }
    // A NUL-terminated file name, padded to 4 bytes, then its CRC-32.
    StringRef link = contents->take_until([](char c) { return c == '\0'; });
    uint64_t crcOffset = alignTo(link.size() + 1, 4);
    if (link.empty() || crcOffset + 4 > contents->size())
      return "";
    uint32_t crc = support::endian::read32(contents->data() + crcOffset,
                                           object.isLittleEndian()
                                               ? llvm::endianness::little
                                               : llvm::endianness::big);
    SmallString<256> folder = path;
    sys::fs::make_absolute(folder);
    sys::path::remove_filename(folder);
    SmallString<256> candidates[3];
    sys::path::append(candidates[0], folder, link);
    sys::path::append(candidates[1], folder, ".debug", link);
    sys::path::append(candidates[2], DebugRoot, folder, link);
    for (const SmallString<256> &candidate : candidates)
      if (candidate != path && hasCrc(candidate.str().str(), crc))
        return candidate.str().str();
    return "";
  }
  return "";
}

/// The raw line-table sections of `object`; nullopt when one is compressed
/// (then there is nothing cheap to check).
std::optional<DwarfLineSections>
lineSections(const object::ObjectFile &object) {
  DwarfLineSections sections;
  sections.littleEndian = object.isLittleEndian();
  for (const object::SectionRef &section : object.sections()) {
    Expected<StringRef> name = section.getName();
    if (!name) {
      consumeError(name.takeError());
      continue;
    }
    StringRef *slot = *name == ".debug_line"       ? &sections.line
                      : *name == ".debug_line_str" ? &sections.lineStr
                      : *name == ".debug_str"      ? &sections.str
                                                   : nullptr;
    if (!slot)
      continue;
    if (section.isCompressed())
      return std::nullopt;
    Expected<StringRef> contents = section.getContents();
    if (!contents) {
      consumeError(contents.takeError());
      continue;
    }
    *slot = *contents;
  }
  return sections;
}

/// The entry of the physical function `subprogram`: DW_AT_low_pc, else
/// DW_AT_entry_pc, else its lowest range.
uint64_t entryOf(const DWARFDie &subprogram) {
  if (auto low = dwarf::toAddress(subprogram.find(dwarf::DW_AT_low_pc)))
    return *low;
  if (auto entry = dwarf::toAddress(subprogram.find(dwarf::DW_AT_entry_pc)))
    return *entry;
  Expected<DWARFAddressRangesVector> ranges = subprogram.getAddressRanges();
  if (!ranges) {
    consumeError(ranges.takeError());
    return 0;
  }
  uint64_t lowest = 0;
  for (const DWARFAddressRange &range : *ranges)
    if (range.LowPC < range.HighPC && (lowest == 0 || range.LowPC < lowest))
      lowest = range.LowPC;
  return lowest;
}

/// Narrows `interval` to the range of `scope` that contains `address`.
void intersectScope(const DWARFDie &scope, uint64_t address,
                    Interval &interval) {
  Expected<DWARFAddressRangesVector> ranges = scope.getAddressRanges();
  if (!ranges) {
    consumeError(ranges.takeError());
    interval.collapseTo(address);
    return;
  }
  for (const DWARFAddressRange &range : *ranges) {
    if (range.LowPC <= address && address < range.HighPC) {
      interval.clipBelow(range.LowPC);
      interval.clipAbove(range.HighPC);
      return;
    }
  }
  interval.collapseTo(address);
}

/// Cuts out of `interval` every inlined callee nested in `scope` (through
/// lexical blocks): inside one the chain has one more frame. Callees nest in
/// their caller's ranges, so only the first level of subroutines matters.
void excludeNestedCallees(const DWARFDie &scope, uint64_t address,
                          Interval &interval) {
  for (DWARFDie child = scope.getFirstChild(); child && !child.isNULL();
       child = child.getSibling()) {
    if (!child.isSubroutineDIE()) {
      excludeNestedCallees(child, address, interval);
      continue;
    }
    Expected<DWARFAddressRangesVector> ranges = child.getAddressRanges();
    if (!ranges) {
      consumeError(ranges.takeError());
      continue;
    }
    for (const DWARFAddressRange &range : *ranges)
      interval.excludeOther(range.LowPC, range.HighPC, address);
  }
}

bool sameSourceLine(const DWARFDebugLine::Row &a,
                    const DWARFDebugLine::Row &b) {
  return a.File == b.File && a.Line == b.Line;
}

/// Narrows `interval` to the line-table rows around `address` that give the
/// same file and line, following LineTable::lookupAddress's rules: the
/// sequence is the first whose end lies above the address, and the row is the
/// last one whose address is at most the address.
void intersectLineRows(const DWARFDebugLine::LineTable &table, uint64_t address,
                       Interval &interval) {
  const auto &sequences = table.Sequences;
  auto sequence = std::upper_bound(
      sequences.begin(), sequences.end(), address,
      [](uint64_t a, const DWARFDebugLine::Sequence &s) {
        return std::tie(object::SectionedAddress::UndefSection, a) <
               std::tie(s.SectionIndex, s.HighPC);
      });
  if (sequence != sequences.begin() &&
      sequence[-1].SectionIndex == object::SectionedAddress::UndefSection)
    interval.clipBelow(sequence[-1].HighPC);
  if (sequence == sequences.end() ||
      sequence->SectionIndex != object::SectionedAddress::UndefSection) {
    return; // No sequence lies above: no line info up to the next CU code.
  }
  if (address < sequence->LowPC) {
    interval.clipAbove(sequence->LowPC);
    return;
  }
  uint32_t row =
      table.lookupAddress({address, object::SectionedAddress::UndefSection});
  if (row == table.UnknownRowIndex || row < sequence->FirstRowIndex ||
      row + 1 >= sequence->LastRowIndex) {
    interval.collapseTo(address);
    return;
  }
  const auto &rows = table.Rows;
  const DWARFDebugLine::Row &here = rows[row];
  uint64_t begin = here.Address.Address;
  uint64_t end = rows[row + 1].Address.Address;
  // Backwards: the row chosen just below `begin` is the last one at the
  // previous address.
  for (uint32_t current = row;;) {
    uint32_t previous = current;
    while (previous > sequence->FirstRowIndex &&
           rows[previous - 1].Address.Address == rows[current].Address.Address)
      --previous;
    if (previous == sequence->FirstRowIndex)
      break;
    --previous;
    if (!sameSourceLine(rows[previous], here))
      break;
    begin = rows[previous].Address.Address;
    current = previous;
  }
  // Forwards: the row chosen at `end` is the last one at that address.
  for (uint32_t next = row + 1; next < sequence->LastRowIndex;) {
    while (next + 1 < sequence->LastRowIndex &&
           rows[next + 1].Address.Address == rows[next].Address.Address)
      ++next;
    if (rows[next].EndSequence || next + 1 >= sequence->LastRowIndex ||
        !sameSourceLine(rows[next], here))
      break;
    ++next;
    end = rows[next].Address.Address;
  }
  interval.clipBelow(begin);
  interval.clipAbove(end);
}

/// One object file (by build-id): the binary, its DWARF, its symbols, and the
/// ranges computed so far in file addresses.
class ObjectInfo {
public:
  ObjectInfo(const Module &module, const Symbolizer::Options &options,
             StringTable &strings)
      : strings(strings), demangle(options.demangle) {
    std::string name = sys::path::filename(module.path).str();
    Expected<object::OwningBinary<object::ObjectFile>> binary =
        object::ObjectFile::createObjectFile(module.fileToRead());
    if (!binary) {
      problem = name + ": cannot read " + module.fileToRead() + ": " +
                toString(binary.takeError()) +
                " (give the module's file or a copy of it)";
      return;
    }
    owner = std::move(*binary);
    const object::ObjectFile &object = *owner.getBinary();
    Expected<std::vector<LoadSegmentHeader>> headers = readLoadHeaders(object);
    if (!headers) {
      problem = name + ": " + toString(headers.takeError()) +
                " (only ELF modules can be symbolized)";
      return;
    }
    loads = std::move(*headers);
    if (!module.buildId.empty()) {
      std::string fileId = lowerHex(object::getBuildID(&object));
      if (fileId != StringRef(module.buildId).lower()) {
        problem = name + ": build-id " +
                  (fileId.empty() ? std::string("(none)") : fileId) +
                  " differs from the module's " + module.buildId +
                  " (give the file the process loaded)";
        return;
      }
    }
    if (Error error = checkSymbolTables(object))
      warnings.push_back(
          name + ": damaged symbol table: " + toString(std::move(error)) +
          " (symbolizing without symbols)");
    else
      symbols.build(object);
    if (!options.useDebugInfo)
      return;
    // DWARF from the separate debug file when there is one (llvm-symbolizer
    // prefers it too); names still come from this file's symbol table.
    const object::ObjectFile *debugObject = &object;
    std::string debugPath = findDebugFile(object, module.fileToRead());
    if (!debugPath.empty()) {
      auto debugBinary = object::ObjectFile::createObjectFile(debugPath);
      if (debugBinary) {
        debugOwner = std::move(*debugBinary);
        debugObject = debugOwner.getBinary();
      } else {
        consumeError(debugBinary.takeError());
      }
    }
    // LLVM's line-table parser crashes on some damaged prologues: check
    // them first, and keep to the symbol table if they are damaged.
    if (std::optional<DwarfLineSections> sections = lineSections(*debugObject))
      if (Error error = checkDwarfLineTables(*sections)) {
        warnings.push_back(
            name + ": damaged DWARF in " +
            (debugPath.empty() ? module.fileToRead() : debugPath) + ": " +
            toString(std::move(error)) +
            " (symbolizing from the symbol table)");
        return;
      }
    // Reading DWARF (decompressing a distribution's debug file) is the
    // dearest part of a module: done on the first lookup inside it, so
    // modules the trace never enters cost only their symbol table.
    pendingDebugObject = debugObject;
  }

  bool usable() const { return problem.empty(); }
  /// Problems that leave the module usable (damaged DWARF).
  const std::vector<std::string> &warningTexts() const { return warnings; }
  const std::string &problemText() const { return problem; }
  const std::vector<LoadSegmentHeader> &loadHeaders() const { return loads; }

  /// The cached range containing `address`, computing it on a miss.
  const FileRange &rangeFor(uint64_t address, SymbolizerStats &stats) {
    auto next = ranges.upper_bound(address);
    if (next != ranges.begin() &&
        address < std::prev(next)->second.interval.end) {
      ++stats.hits;
      return std::prev(next)->second;
    }
    ++stats.distinctRanges;
    FileRange range = compute(address);
    // Never overlap a cached neighbour (only odd debug info could).
    if (next != ranges.end())
      range.interval.clipAbove(next->first);
    if (next != ranges.begin())
      range.interval.clipBelow(std::prev(next)->second.interval.end);
    uint64_t begin = range.interval.begin;
    return ranges.emplace_hint(next, begin, std::move(range))->second;
  }

private:
  FileRange compute(uint64_t address) {
    FileRange range;
    SymbolMatch match = symbols.find(address);
    range.interval = match.interval;
    if (pendingDebugObject)
      loadDebugInfo();
    if (dwarf && addDebugInfo(address, match, range))
      return range;
    if (dwarf)
      clipToCodeWithoutDwarf(address, range.interval);
    if (match.symbol) {
      StringId file =
          match.symbol->file.empty() ? 0 : strings.intern(match.symbol->file);
      range.frames.push_back({internName(match.symbol->name), file, 0, false});
      range.functionEntry = match.symbol->address;
    }
    return range;
  }

  void loadDebugInfo() {
    dwarf = DWARFContext::create(
        *pendingDebugObject, DWARFContext::ProcessDebugRelocations::Process,
        nullptr, "", [](Error error) { consumeError(std::move(error)); },
        [](Error error) { consumeError(std::move(error)); });
    pendingDebugObject = nullptr;
    if (dwarf->getNumCompileUnits() == 0)
      dwarf.reset();
  }

  /// Fills `range` from DWARF; false if DWARF knows nothing of `address`.
  bool addDebugInfo(uint64_t address, const SymbolMatch &match,
                    FileRange &range) {
    DWARFCompileUnit *unit = dwarf->getCompileUnitForCodeAddress(address);
    if (!unit)
      return false;
    DILineInfoSpecifier spec(
        DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath,
        DILineInfoSpecifier::FunctionNameKind::LinkageName);
    DIInliningInfo info = dwarf->getInliningInfoForAddress(
        {address, object::SectionedAddress::UndefSection}, spec);
    uint32_t count = info.getNumberOfFrames();
    if (count == 0)
      return false;
    SmallVector<DWARFDie, 4> chain;
    unit->getInlinedChainForAddress(address, chain);
    for (const DWARFDie &scope : chain)
      intersectScope(scope, address, range.interval);
    // With no scope (line table only), any function of the unit is a
    // different chain.
    DWARFDie scope = chain.empty() ? unit->getUnitDIE() : chain.front();
    if (scope.isValid())
      excludeNestedCallees(scope, address, range.interval);
    if (const auto *table = dwarf->getLineTableForUnit(unit))
      intersectLineRows(*table, address, range.interval);

    // info lists the innermost frame first; ours is outermost first.
    for (uint32_t i = count; i-- > 0;) {
      const DILineInfo &line = info.getFrame(i);
      SymbolFrame frame;
      std::string function = line.FunctionName;
      // The outermost name comes from the symbol table when it has one, as
      // llvm-symbolizer does for DWARF (better for -gmlt).
      bool outermost = i + 1 == count;
      if (outermost && match.symbol)
        function = match.symbol->name.str();
      frame.function = function == DILineInfo::BadString ? strings.intern("??")
                                                         : internName(function);
      if (line.FileName != DILineInfo::BadString)
        frame.file = strings.intern(line.FileName);
      else if (outermost && match.symbol && !match.symbol->file.empty())
        frame.file = strings.intern(match.symbol->file);
      frame.line = line.Line;
      frame.inlined = i + 1 != count;
      range.frames.push_back(frame);
    }
    range.fromDebugInfo = true;
    if (!chain.empty())
      range.functionEntry = entryOf(chain.back());
    else if (match.symbol)
      range.functionEntry = match.symbol->address;
    return true;
  }

  /// Narrows a symbol-table range to the code no compile unit covers, so that
  /// it never spans code DWARF describes; inside a unit (DWARF that knows
  /// nothing of this address) it keeps the address alone.
  void clipToCodeWithoutDwarf(uint64_t address, Interval &interval) {
    if (!unitRangesBuilt) {
      unitRangesBuilt = true;
      for (const auto &unit : dwarf->compile_units()) {
        DWARFDie unitDie = unit->getUnitDIE();
        if (!unitDie.isValid())
          continue; // A unit too damaged to read.
        Expected<DWARFAddressRangesVector> ranges = unitDie.getAddressRanges();
        if (!ranges) {
          consumeError(ranges.takeError());
          continue;
        }
        for (const DWARFAddressRange &range : *ranges)
          if (range.LowPC < range.HighPC)
            unitRanges.push_back({range.LowPC, range.HighPC});
      }
      std::sort(unitRanges.begin(), unitRanges.end());
      uint64_t highest = 0;
      for (auto &[low, high] : unitRanges)
        highestEnd.push_back(highest = std::max(highest, high));
    }
    // The first unit range above the address bounds the end; the highest end
    // of those below it bounds the begin.
    auto above = std::upper_bound(
        unitRanges.begin(), unitRanges.end(), address,
        [](uint64_t a, const std::pair<uint64_t, uint64_t> &r) {
          return a < r.first;
        });
    if (above != unitRanges.end())
      interval.clipAbove(above->first);
    if (above == unitRanges.begin())
      return;
    uint64_t belowEnd = highestEnd[above - unitRanges.begin() - 1];
    if (belowEnd > address)
      interval.collapseTo(address);
    else
      interval.clipBelow(belowEnd);
  }

  StringId internName(StringRef name) {
    if (!demangle)
      return strings.intern(name);
    // A PLT stub's name is its target's, demangled, with objdump's suffix.
    if (name.consume_back("@plt"))
      return strings.intern(llvm::demangle(name) + "@plt");
    return strings.intern(llvm::demangle(name));
  }

  StringTable &strings;
  bool demangle;
  std::string problem;
  std::vector<std::string> warnings;
  object::OwningBinary<object::ObjectFile> owner;
  object::OwningBinary<object::ObjectFile> debugOwner; ///< Separate DWARF.
  std::vector<LoadSegmentHeader> loads;
  SymbolTable symbols;
  std::unique_ptr<DWARFContext> dwarf;
  /// The object whose DWARF loadDebugInfo reads, until it has.
  const object::ObjectFile *pendingDebugObject = nullptr;
  bool unitRangesBuilt = false;
  std::vector<std::pair<uint64_t, uint64_t>> unitRanges; ///< Sorted.
  std::vector<uint64_t> highestEnd;     ///< Max end of unitRanges[0..i].
  std::map<uint64_t, FileRange> ranges; ///< Keyed by begin.
};

/// A stretch of runtime addresses mapped linearly onto file addresses.
struct Mapping {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t fileBegin = 0;       ///< File address of `begin`.
  size_t module = 0;            ///< Index into the module list.
  ObjectInfo *object = nullptr; ///< Null when the module is unusable.
};

} // namespace

using ObjectMap = std::map<std::string, std::unique_ptr<ObjectInfo>>;

struct SymbolCache::Objects {
  ObjectMap map;
};

class Symbolizer::Impl {
public:
  /// With `shared` null the symbolizer keeps its own object files.
  Impl(std::vector<Module> moduleList, StringTable &strings, Options options,
       ObjectMap *shared = nullptr)
      : modules(std::move(moduleList)), strings(strings), options(options),
        objects(shared ? *shared : ownObjects), cached(shared != nullptr) {
    for (size_t index = 0; index < modules.size(); ++index)
      addModule(index);
    std::sort(
        mappings.begin(), mappings.end(),
        [](const Mapping &a, const Mapping &b) { return a.begin < b.begin; });
  }

  const SymbolRange &lookup(uint64_t address) {
    ++stats.lookups;
    if (last && last->begin <= address && address < last->end) {
      ++stats.hits;
      return *last;
    }
    // Block addresses repeat (loops, calls to the same functions): a small
    // direct-mapped table answers most lookups without the tree.
    const SymbolRange *&recent =
        recentRanges[(address * 0x9e3779b97f4a7c15ull) >> (64 - RecentBits)];
    if (recent && recent->begin <= address && address < recent->end) {
      ++stats.hits;
      last = recent;
      return *last;
    }
    auto next = byBegin.upper_bound(address);
    if (next != byBegin.begin() && address < std::prev(next)->second->end) {
      ++stats.hits;
      last = recent = std::prev(next)->second;
      return *last;
    }
    SymbolRange range = place(address);
    // Keep runtime ranges disjoint whatever the module list says.
    if (next != byBegin.end())
      range.end = std::min(range.end, next->first);
    if (next != byBegin.begin())
      range.begin = std::max(range.begin, std::prev(next)->second->end);
    stored.push_back(std::move(range));
    last = recent = &stored.back();
    byBegin.emplace_hint(next, last->begin, last);
    return *last;
  }

  SymbolizerStats stats;
  std::vector<std::string> problems;

private:
  void addModule(size_t index) {
    const Module &module = modules[index];
    ObjectInfo *object = objectFor(module);
    if (!object->usable())
      problems.push_back(object->problemText());
    for (const std::string &warning : object->warningTexts())
      if (std::find(problems.begin(), problems.end(), warning) ==
          problems.end())
        problems.push_back(warning);
    ObjectInfo *usable = object->usable() ? object : nullptr;
    const auto &loads = object->loadHeaders();
    if (!module.segments.empty()) {
      for (const LoadedSegment &segment : module.segments)
        addSegment(index, usable, loads, segment);
      return;
    }
    // No segments: the loader placed the PT_LOADs at one bias from the
    // lowest one, page-aligned, which is at the module's load address.
    uint64_t bias = module.loadAddress - preferredBase(loads);
    for (const LoadSegmentHeader &load : loads)
      if (load.memSize != 0)
        mappings.push_back({load.vaddr + bias, load.vaddr + bias + load.memSize,
                            load.vaddr, index, usable});
  }

  /// A debugger-reported segment: its file offset says which PT_LOAD (and so
  /// which file addresses) it shows.
  void addSegment(size_t index, ObjectInfo *object,
                  const std::vector<LoadSegmentHeader> &loads,
                  const LoadedSegment &segment) {
    if (segment.size == 0)
      return;
    Mapping mapping{segment.address, segment.address + segment.size, 0, index,
                    nullptr};
    for (const LoadSegmentHeader &load : loads) {
      if (load.offset <= segment.fileOffset &&
          segment.fileOffset <
              load.offset + std::max(load.fileSize, uint64_t(1))) {
        mapping.fileBegin = load.vaddr + (segment.fileOffset - load.offset);
        mapping.end =
            std::min(mapping.end, mapping.begin + (load.vaddr + load.memSize -
                                                   mapping.fileBegin));
        mapping.object = object;
        break;
      }
    }
    mappings.push_back(mapping);
  }

  ObjectInfo *objectFor(const Module &module) {
    std::string key = module.buildId.empty() ? "path:" + module.fileToRead()
                                             : "id:" + module.buildId;
    if (cached && module.buildId.empty()) {
      // Across snapshots a path may name a rebuilt file.
      sys::fs::file_status status;
      if (!sys::fs::status(module.fileToRead(), status))
        key += ":" + std::to_string(status.getSize()) + ":" +
               std::to_string(
                   status.getLastModificationTime().time_since_epoch().count());
    }
    auto found = objects.find(key);
    // A file that could not be used may have been fixed since.
    if (found != objects.end() && (found->second->usable() || !cached))
      return found->second.get();
    auto object = std::make_unique<ObjectInfo>(module, options, strings);
    ObjectInfo *result = object.get();
    objects[key] = std::move(object);
    return result;
  }

  /// Computes the runtime range of `address` (a cache miss here).
  SymbolRange place(uint64_t address) {
    auto next = std::upper_bound(
        mappings.begin(), mappings.end(), address,
        [](uint64_t a, const Mapping &m) { return a < m.begin; });
    const Mapping *mapping = nullptr;
    if (next != mappings.begin() && address < std::prev(next)->end)
      mapping = &*std::prev(next);
    if (!mapping)
      return placeUnmapped(address, next);
    const Module &module = modules[mapping->module];
    SymbolRange range;
    range.module = strings.intern(module.path);
    range.begin = mapping->begin;
    range.end = mapping->end;
    if (!mapping->object) {
      ++stats.distinctRanges;
      range.frames.push_back(unknownFrame(range.begin, module.path));
      range.unknown = true;
      return range;
    }
    uint64_t fileAddress = mapping->fileBegin + (address - mapping->begin);
    const FileRange &file = mapping->object->rangeFor(fileAddress, stats);
    // Clip in file addresses, where the mapping is [fileBegin, +size).
    uint64_t size = mapping->end - mapping->begin;
    uint64_t fileBegin = std::max(file.interval.begin, mapping->fileBegin);
    uint64_t fileEnd = std::min(file.interval.end, mapping->fileBegin + size);
    range.begin = mapping->begin + (fileBegin - mapping->fileBegin);
    range.end = mapping->begin + (fileEnd - mapping->fileBegin);
    range.fromDebugInfo = file.fromDebugInfo;
    range.frames = file.frames;
    if (file.functionEntry != 0)
      range.functionEntry =
          file.functionEntry - mapping->fileBegin + mapping->begin;
    if (range.frames.empty()) {
      range.frames.push_back(unknownFrame(range.begin, module.path));
      range.unknown = true;
    }
    return range;
  }

  /// Code no module covers (JIT, or a module without an extent): one range
  /// per page, within the gap between mappings.
  SymbolRange placeUnmapped(uint64_t address,
                            std::vector<Mapping>::const_iterator next) {
    ++stats.distinctRanges;
    SymbolRange range;
    range.begin = address & ~(LoaderPageSize - 1);
    range.end = range.begin + LoaderPageSize;
    if (range.end < range.begin)
      range.end = NoEnd;
    if (next != mappings.begin() && std::prev(next)->end <= address)
      range.begin = std::max(range.begin, std::prev(next)->end);
    if (next != mappings.end())
      range.end = std::min(range.end, next->begin);
    range.frames.push_back(unknownFrame(range.begin, ""));
    range.unknown = true;
    return range;
  }

  SymbolFrame unknownFrame(uint64_t address, StringRef modulePath) {
    std::string name = "[unknown @ " + hex(address);
    if (!modulePath.empty())
      name += " (" + sys::path::filename(modulePath).str() + ")";
    name += "]";
    return {strings.intern(name), 0, 0, false};
  }

  std::vector<Module> modules;
  StringTable &strings;
  Options options;
  ObjectMap ownObjects;
  ObjectMap &objects; ///< ownObjects or a SymbolCache's.
  bool cached;
  std::vector<Mapping> mappings;  ///< Sorted by begin.
  std::deque<SymbolRange> stored; ///< Stable addresses for returned refs.
  std::map<uint64_t, const SymbolRange *> byBegin;
  const SymbolRange *last = nullptr;
  static constexpr unsigned RecentBits = 12;
  std::array<const SymbolRange *, 1u << RecentBits> recentRanges = {};
};

Symbolizer::Symbolizer(std::vector<Module> modules, StringTable &strings,
                       Options options)
    : impl(std::make_unique<Impl>(std::move(modules), strings, options)) {}

Symbolizer::Symbolizer(std::vector<Module> modules, StringTable &strings)
    : Symbolizer(std::move(modules), strings, Options()) {}

Symbolizer::Symbolizer(std::vector<Module> modules, SymbolCache &cache)
    : impl(std::make_unique<Impl>(std::move(modules), cache.table,
                                  cache.options, &cache.objects->map)) {}

SymbolCache::SymbolCache(Symbolizer::Options options)
    : options(options), objects(std::make_unique<Objects>()) {}

SymbolCache::~SymbolCache() = default;

size_t SymbolCache::objectCount() const { return objects->map.size(); }

Symbolizer::~Symbolizer() = default;

const SymbolRange &Symbolizer::lookup(uint64_t address) {
  return impl->lookup(address);
}

const SymbolizerStats &Symbolizer::stats() const { return impl->stats; }

std::vector<std::string> Symbolizer::moduleProblems() const {
  return impl->problems;
}

Expected<uint64_t> Symbolizer::preferredLoadAddress(StringRef path) {
  Expected<object::OwningBinary<object::ObjectFile>> binary =
      object::ObjectFile::createObjectFile(path);
  if (!binary)
    return createStringError("cannot read " + path + ": " +
                             toString(binary.takeError()) +
                             " (check the path)");
  Expected<std::vector<LoadSegmentHeader>> loads =
      readLoadHeaders(*binary->getBinary());
  if (!loads)
    return createStringError(path + ": " + toString(loads.takeError()) +
                             " (only ELF files can be symbolized)");
  return preferredBase(*loads);
}

} // namespace magic_trace
