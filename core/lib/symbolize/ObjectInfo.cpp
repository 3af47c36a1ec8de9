//===- ObjectInfo.cpp - DWARF inline chains and their ranges --------------===//
//
// The only core file that includes LLVM DebugInfo headers for symbols
// (docs/architecture.md, "Layering").
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
#include "ObjectInfo.h"
#include "DebugFileLookup.h"
#include "DwarfLineCheck.h"
#include "EhFrameBounds.h"
#include "RangeDiskCache.h"

#include "magic_trace/InputFiles.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/DebugInfo/DIContext.h"
#include "llvm/DebugInfo/DWARF/DWARFCompileUnit.h"
#include "llvm/DebugInfo/DWARF/DWARFContext.h"
#include "llvm/DebugInfo/DWARF/DWARFDebugLine.h"
#include "llvm/DebugInfo/DWARF/DWARFDie.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/Object/BuildID.h"
#include "llvm/Support/Path.h"

#include <optional>

using namespace llvm;

namespace magic_trace {
namespace {

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
/// DW_AT_entry_pc, else the start of its first range. Not the lowest: GCC
/// splits a function into DW_AT_ranges {hot part, .cold part}, the entry's
/// range first, and the .cold part may lie below it (libc's
/// __pthread_create_2_1 at 0x89380 has its .cold part at 0x26dd2).
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
  for (const DWARFAddressRange &range : *ranges)
    if (range.LowPC < range.HighPC)
      return range.LowPC;
  return 0;
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

/// The buffer `binary` reads (OwningBinary only hands it over whole).
const MemoryBuffer &bufferOf(object::OwningBinary<object::ObjectFile> &binary) {
  auto [file, buffer] = binary.takeBinary();
  const MemoryBuffer &held = *buffer;
  binary = object::OwningBinary<object::ObjectFile>(std::move(file),
                                                    std::move(buffer));
  return held;
}

} // namespace

ObjectInfo::ObjectInfo(const Module &module, const Symbolizer::Options &options,
                       StringTable &strings)
    : strings(strings), moduleName(sys::path::filename(module.path).str()),
      demangle(options.demangle) {
  const std::string &name = moduleName;
  if (Error notAFile = checkRegularFile(module.fileToRead())) {
    problem = name + ": " + toString(std::move(notAFile));
    return;
  }
  Expected<object::OwningBinary<object::ObjectFile>> binary =
      object::ObjectFile::createObjectFile(module.fileToRead());
  if (!binary) {
    problem = name + ": cannot read " + module.fileToRead() + ": " +
              toString(binary.takeError()) +
              " (give the module's file or a copy of it)";
    return;
  }
  owner = std::move(*binary);
  const MemoryBuffer &mapped = bufferOf(owner);
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
  // A separate debug file (by build-id, else .gnu_debuglink) gives DWARF,
  // and its .symtab when this file has none: a stripped distribution binary
  // keeps only .dynsym, its -dbg package the whole table (gdb and LLDB read
  // it too; llvm-symbolizer does not, so `--obj=DEBUGFILE` is its match).
  std::string debugPath = findDebugFile(object, module.fileToRead());
  const MemoryBuffer *debugMapped = nullptr;
  if (!debugPath.empty()) {
    auto debugBinary = object::ObjectFile::createObjectFile(debugPath);
    if (debugBinary) {
      debugOwner = std::move(*debugBinary);
      debugMapped = &bufferOf(debugOwner);
    } else {
      consumeError(debugBinary.takeError());
    }
  }
  // What the tables below read of the files (a big library's .dynstr and
  // .eh_frame: 10-20 MB of pages) is not read again: the mappings give
  // those pages back once the tables are built, and a later read of a name
  // maps its page again from the page cache.
  scope_exit releasePages([&] {
    releaseReadPages(mapped);
    if (debugMapped)
      releaseReadPages(*debugMapped);
  });
  const object::ObjectFile *debugFile = debugOwner.getBinary();
  readSymbols(object, debugFile, debugPath);
  // Ranges earlier runs computed for this build-id, with this debug file.
  cachePath = rangeCachePath(lowerHex(object::getBuildID(&object)),
                             module.fileToRead(), debugPath, options);
  cachedRanges = loadRangeCache(cachePath, strings, ranges);
  // Function bounds for code no symbol covers; the debug file has no bytes
  // of .eh_frame, so they come from the file itself.
  if (Error error = functions.read(object))
    handleAllErrors(std::move(error), [&](const ErrorInfoBase &info) {
      warnings.push_back(moduleName + ": " + info.message());
    });
  if (!options.useDebugInfo)
    return;
  // DWARF from the separate debug file when there is one (llvm-symbolizer
  // prefers it too).
  const object::ObjectFile *debugObject = debugFile ? debugFile : &object;
  // LLVM's line-table parser crashes on some damaged prologues: check
  // them first, and keep to the symbol table if they are damaged.
  if (std::optional<DwarfLineSections> sections = lineSections(*debugObject))
    if (Error error = checkDwarfLineTables(*sections)) {
      warnings.push_back(name + ": damaged DWARF in " +
                         (debugFile ? debugPath : module.fileToRead()) + ": " +
                         toString(std::move(error)) +
                         " (symbolizing from the symbol table)");
      return;
    }
  // Reading DWARF (decompressing a distribution's debug file) is the
  // dearest part of a module: done on the first lookup inside it, so
  // modules the trace never enters cost only their symbol table.
  pendingDebugObject = debugObject;
}

/// The cached range containing `address`, computing it on a miss.
const FileRange &ObjectInfo::rangeFor(uint64_t address,
                                      SymbolizerStats &stats) {
  auto next = ranges.upper_bound(address);
  if (next != ranges.begin() &&
      address < std::prev(next)->second.interval.end) {
    FileRange &found = std::prev(next)->second;
    if (found.fromCache) {
      found.fromCache = false;
      ++stats.distinctRanges;
    } else {
      ++stats.hits;
    }
    return found;
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

FileRange ObjectInfo::compute(uint64_t address) {
  FileRange range;
  SymbolMatch match = symbols.find(address);
  range.interval = match.interval;
  if (pendingDebugObject)
    loadDebugInfo();
  if (dwarf && addDebugInfo(address, match, range))
    return range;
  if (dwarf)
    clipToCodeWithoutDwarf(address, range.interval);
  if (!match.symbol) {
    addFunctionBounds(address, range);
    return range;
  }
  StringId file =
      match.symbol->file.empty() ? 0 : strings.intern(match.symbol->file);
  range.frames.push_back({internName(match.symbol->name), file, 0, false});
  range.functionEntry = match.symbol->address;
  return range;
}

/// Symbols from `object`'s .symtab, else from `debugFile`'s, else from
/// `object`'s .dynsym; PLT stubs always from `object`.
void ObjectInfo::readSymbols(const object::ObjectFile &object,
                             const object::ObjectFile *debugFile,
                             const std::string &debugPath) {
  const object::ObjectFile *symbolObject = &object;
  if (debugFile && !hasFullSymbolTable(object) &&
      hasFullSymbolTable(*debugFile)) {
    if (Error error = checkSymbolTables(*debugFile))
      warnings.push_back(moduleName + ": damaged symbol table in " + debugPath +
                         ": " + toString(std::move(error)) +
                         " (symbolizing with the file's own symbols)");
    else
      symbolObject = debugFile;
  }
  if (Error error = checkSymbolTables(*symbolObject))
    warnings.push_back(moduleName +
                       ": damaged symbol table: " + toString(std::move(error)) +
                       " (symbolizing without symbols)");
  else
    symbols.build(*symbolObject, object);
}

/// Code no symbol covers: an FDE gives its function's extent and entry,
/// named "<module>+0x<entry>" with the entry's file address (what
/// llvm-symbolizer --obj, addr2line -e and objdump --start-address take).
void ObjectInfo::addFunctionBounds(uint64_t address, FileRange &range) {
  FunctionMatch match = functions.find(address);
  range.interval.clipBelow(match.interval.begin);
  range.interval.clipAbove(match.interval.end);
  if (!match.function)
    return;
  range.frames.push_back(
      {strings.intern(moduleName + "+" + hex(match.function->begin)), 0, 0,
       false});
  range.functionEntry = match.function->begin;
}

void ObjectInfo::loadDebugInfo() {
  dwarf = DWARFContext::create(
      *pendingDebugObject, DWARFContext::ProcessDebugRelocations::Process,
      nullptr, "", [](Error error) { consumeError(std::move(error)); },
      [](Error error) { consumeError(std::move(error)); });
  pendingDebugObject = nullptr;
  if (dwarf->getNumCompileUnits() == 0)
    dwarf.reset();
}

/// Fills `range` from DWARF; false if DWARF knows nothing of `address`.
bool ObjectInfo::addDebugInfo(uint64_t address, const SymbolMatch &match,
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
  if (chain.empty() && !match.symbol) {
    // Lines but no function: an assembler unit, e.g. the nop padding of
    // glibc's memmove-vec-unaligned-erms.S between __memmove_chk_* and the
    // __memmove_* it falls through into. The code is the FDE's function or
    // unknown, as without DWARF (and as magic-trace-reftree says); a "??"
    // shared by every such stretch would make them all one function.
    FileRange bounds;
    bounds.interval = range.interval;
    addFunctionBounds(address, bounds);
    range.interval = bounds.interval;
    range.functionEntry = bounds.functionEntry;
    if (bounds.frames.empty())
      range.noFunction = true;
    else
      range.frames.front().function = bounds.frames.front().function;
    return true;
  }
  if (!chain.empty())
    range.functionEntry = entryOf(chain.back());
  else if (match.symbol)
    range.functionEntry = match.symbol->address;
  return true;
}

/// Narrows a symbol-table range to the code no compile unit covers, so that
/// it never spans code DWARF describes; inside a unit (DWARF that knows
/// nothing of this address) it keeps the address alone.
void ObjectInfo::clipToCodeWithoutDwarf(uint64_t address, Interval &interval) {
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
  auto above =
      std::upper_bound(unitRanges.begin(), unitRanges.end(), address,
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

StringId ObjectInfo::internName(StringRef name) {
  if (!demangle)
    return strings.intern(name);
  // A PLT stub's name is its target's, demangled, with objdump's suffix.
  if (name.consume_back("@plt"))
    return strings.intern(llvm::demangle(name) + "@plt");
  return strings.intern(llvm::demangle(name));
}

ObjectInfo::~ObjectInfo() = default;

void ObjectInfo::keepRanges() {
  // What this run computed beyond what the cache holds, for the next.
  if (ranges.size() <= cachedRanges)
    return;
  saveRangeCache(cachePath, strings, ranges);
  cachedRanges = ranges.size();
}

} // namespace magic_trace
