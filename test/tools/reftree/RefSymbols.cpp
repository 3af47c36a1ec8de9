//===- RefSymbols.cpp - The reference tree's own symbols ------------------===//
//
// Function bounds for the reference tree (RefTree.h, RefSymbols), found
// apart from the symbolizer's: ELF symbol tables through LLVM's object
// reader, PLT stubs through LLVM's PLT reader, and stripped code's
// functions from .eh_frame through LLVM's CFI parser (RefFunctionBounds).
//
//===----------------------------------------------------------------------===//

#include "RefCode.h"
#include "RefFunctionBounds.h"
#include "RefTree.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/BuildID.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <cstdlib>
#include <map>

using namespace llvm;
using namespace magic_trace;
using namespace magic_trace::reftree;

namespace {

/// PLT stubs as objdump names them: "<target>@plt", each ending where the
/// next symbol starts. LLVM's PLT reader (MCInstrAnalysis::findPltEntries,
/// the one llvm-objdump uses; magic-trace's symbolizer has its own) finds
/// each stub's GOT slot; the slot's dynamic relocation names the target, or
/// for an IRELATIVE slot the IFUNC whose resolver is the addend. A PLT
/// section's start with no stub there (PLT0, IBT's lazy-binding stubs) is
/// named after the section.
void addPltStubs(const object::ELFObjectFileBase &elf, uint64_t bias,
                 std::vector<RefFunction> &out) {
  static const bool initialized = [] {
    InitializeAllTargetInfos();
    InitializeAllTargetMCs();
    return true;
  }();
  (void)initialized;
  Triple triple = elf.makeTriple();
  std::string error;
  const Target *target = TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return;
  std::unique_ptr<MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "", ""));
  std::unique_ptr<MCInstrInfo> instructions(target->createMCInstrInfo());
  if (!subtarget || !instructions)
    return;
  std::unique_ptr<MCInstrAnalysis> analysis(
      target->createMCInstrAnalysis(instructions.get()));
  if (!analysis)
    return;

  auto nameOf = [](const object::SymbolRef &symbol) -> std::string {
    Expected<StringRef> name = symbol.getName();
    if (!name) {
      consumeError(name.takeError());
      return {};
    }
    return name->str();
  };
  // IFUNC symbols by value: .dynsym's, and .symtab's for a static
  // executable, which has only that.
  std::map<uint64_t, std::string> resolvers;
  auto addResolvers =
      [&](object::ELFObjectFileBase::elf_symbol_iterator_range symbols) {
        for (const object::ELFSymbolRef &symbol : symbols) {
          if (symbol.getELFType() != ELF::STT_GNU_IFUNC)
            continue;
          if (Expected<uint64_t> value = symbol.getValue())
            resolvers.emplace(*value, nameOf(symbol));
          else
            consumeError(value.takeError());
        }
      };
  addResolvers(elf.getDynamicSymbolIterators());
  addResolvers(object::ELFObjectFileBase::elf_symbol_iterator_range(
      elf.symbol_begin(), elf.symbol_end()));
  // The dynamic relocations; a static executable has no dynamic section,
  // and its IRELATIVE slots are in an allocated .rela.plt that libc's
  // start-up code applies (__libc_setup_irel, from __rela_iplt_start).
  std::vector<object::SectionRef> relocationSections =
      elf.dynamic_relocation_sections();
  if (relocationSections.empty())
    for (const object::SectionRef &section : elf.sections())
      if (object::ELFSectionRef(section).getType() == ELF::SHT_RELA &&
          (object::ELFSectionRef(section).getFlags() & ELF::SHF_ALLOC))
        relocationSections.push_back(section);
  std::map<uint64_t, std::string> slotTargets;
  for (const object::SectionRef &section : relocationSections)
    for (const object::RelocationRef &relocation : section.relocations()) {
      std::string name;
      uint64_t type = relocation.getType();
      if (type == ELF::R_X86_64_JUMP_SLOT || type == ELF::R_X86_64_GLOB_DAT) {
        object::symbol_iterator symbol = relocation.getSymbol();
        if (symbol != elf.symbol_end())
          name = nameOf(*symbol);
      } else if (type == ELF::R_X86_64_IRELATIVE) {
        Expected<int64_t> addend =
            object::ELFRelocationRef(relocation).getAddend();
        if (!addend) {
          consumeError(addend.takeError());
          continue;
        }
        auto resolver = resolvers.find(uint64_t(*addend));
        if (resolver != resolvers.end())
          name = resolver->second;
      }
      if (!name.empty())
        slotTargets[relocation.getOffset()] = name;
    }

  for (const object::SectionRef &section : elf.sections()) {
    Expected<StringRef> name = section.getName();
    Expected<StringRef> contents = section.getContents();
    if (!name || !contents) {
      if (!name)
        consumeError(name.takeError());
      if (!contents)
        consumeError(contents.takeError());
      continue;
    }
    if (*name != ".plt" && *name != ".plt.sec" && *name != ".plt.got")
      continue;
    bool stubAtStart = false;
    size_t first = out.size();
    for (auto [stub, slot] : analysis->findPltEntries(
             section.getAddress(), arrayRefFromStringRef(*contents),
             *subtarget)) {
      auto found = slotTargets.find(slot);
      if (found == slotTargets.end())
        continue;
      stubAtStart |= stub == section.getAddress();
      std::string stubName = demangle(found->second) + "@plt";
      out.push_back({stub + bias, 0, stubName, {stubName}, false});
    }
    if (!stubAtStart && !contents->empty())
      out.push_back(
          {section.getAddress() + bias, 0, name->str(), {name->str()}, false});
    // Each stub ends where the next begins, the last with its section (the
    // code after it, .text in a stripped file, is no part of it).
    std::sort(out.begin() + first, out.end(),
              [](const RefFunction &a, const RefFunction &b) {
                return a.begin < b.begin;
              });
    uint64_t sectionEnd = section.getAddress() + section.getSize() + bias;
    for (size_t i = first; i < out.size(); ++i)
      out[i].end = i + 1 < out.size() ? out[i + 1].begin : sectionEnd;
  }
}

/// The module's code symbols, named the way llvm-symbolizer (and so the
/// user) names code: FUNC, IFUNC and untyped symbols of .symtab, or of
/// .dynsym when there is no .symtab; one per address (the largest); a symbol
/// of size 0 covers everything up to the next one, the last one up to the
/// end of its section; the PLT stubs (addPltStubs); and in stripped code one
/// function per FDE (addFdeFunctions).
void addSymbols(const Module &module, std::vector<RefFunction> &out) {
  auto binary = object::ObjectFile::createObjectFile(module.fileToRead());
  if (!binary) {
    consumeError(binary.takeError());
    return;
  }
  const auto *elf = dyn_cast<object::ELFObjectFileBase>(binary->getBinary());
  if (!elf)
    return;
  uint64_t bias = module.loadAddress - linkBase(*elf);
  // A stripped library's full .symtab lives in its separate debug file,
  // found by build-id where debuggers look (same link-time addresses).
  // MT_DEBUG_FILE_DIRS replaces /usr/lib/debug as for the symbolizer
  // (docs/symbolizer.md): empty, the reference is that of a machine without
  // debug packages.
  object::OwningBinary<object::ObjectFile> debugBinary;
  std::string id = toHex(object::getBuildID(elf), /*LowerCase=*/true);
  const char *dirs = std::getenv("MT_DEBUG_FILE_DIRS");
  SmallVector<StringRef, 4> roots;
  StringRef(dirs ? dirs : "/usr/lib/debug").split(roots, ':', -1, false);
  for (StringRef root : roots) {
    if (id.size() <= 2 || debugBinary.getBinary())
      break;
    std::string path = root.str() + "/.build-id/" + id.substr(0, 2) + "/" +
                       id.substr(2) + ".debug";
    auto debug = object::ObjectFile::createObjectFile(path);
    if (debug) {
      const auto *debugElf =
          dyn_cast<object::ELFObjectFileBase>(debug->getBinary());
      if (debugElf && !debugElf->symbols().empty()) {
        debugBinary = std::move(*debug);
        elf = debugElf;
      }
    } else {
      consumeError(debug.takeError());
    }
  }
  std::vector<RefFunction> symbols;
  uint64_t lastSectionEnd = 0;
  auto add = [&](const object::ELFSymbolRef &symbol) {
    uint8_t type = symbol.getELFType();
    if (type != ELF::STT_FUNC && type != ELF::STT_GNU_IFUNC &&
        type != ELF::STT_NOTYPE)
      return;
    Expected<uint64_t> address = symbol.getAddress();
    Expected<StringRef> name = symbol.getName();
    Expected<object::section_iterator> section = symbol.getSection();
    if (!address || !name || !section || *section == elf->section_end() ||
        !(*section)->isText() || name->empty()) {
      if (!address)
        consumeError(address.takeError());
      if (!name)
        consumeError(name.takeError());
      if (!section)
        consumeError(section.takeError());
      return;
    }
    uint64_t size = symbol.getSize();
    symbols.push_back({*address + bias,
                       size ? *address + bias + size : 0,
                       name->str(),
                       {demangle(name->split('@').first)},
                       false});
    lastSectionEnd = std::max(lastSectionEnd, (*section)->getAddress() +
                                                  (*section)->getSize() + bias);
  };
  auto table = elf->symbols();
  if (table.begin() == table.end())
    table = elf->getDynamicSymbolIterators();
  for (const object::SymbolRef &symbol : table)
    add(object::ELFSymbolRef(symbol));
  // The loaded file has the PLT (a debug file's copy is empty).
  addPltStubs(*cast<object::ELFObjectFileBase>(binary->getBinary()), bias,
              symbols);

  std::sort(symbols.begin(), symbols.end(),
            [](const RefFunction &a, const RefFunction &b) {
              if (a.begin != b.begin)
                return a.begin < b.begin;
              uint64_t sizeA = a.end ? a.end - a.begin : 0;
              uint64_t sizeB = b.end ? b.end - b.begin : 0;
              return sizeA > sizeB; // The largest first.
            });
  size_t first = out.size();
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (out.size() > first && symbols[i].begin == out.back().begin) {
      out.back().aliases.push_back(symbols[i].aliases.front());
      continue;
    }
    RefFunction function = symbols[i];
    if (function.end == 0) {
      size_t next = i + 1;
      while (next < symbols.size() && symbols[next].begin == function.begin)
        ++next;
      function.end =
          next < symbols.size() ? symbols[next].begin : lastSectionEnd;
    }
    out.push_back(std::move(function));
  }
  // Stripped code: a function per FDE no symbol covers, from the loaded
  // file (a debug file has no .eh_frame bytes).
  addFdeFunctions(*binary->getBinary(), sys::path::filename(module.path), bias,
                  first, out);
}

} // namespace

RefSymbols::RefSymbols(const std::vector<Module> &modules) {
  for (const Module &module : modules)
    addSymbols(module, functions);
  // Modules do not overlap; a sized symbol inside another one's extent is
  // left to the outer one, so the list is a partition.
  std::sort(functions.begin(), functions.end(),
            [](const RefFunction &a, const RefFunction &b) {
              return a.begin < b.begin;
            });
  std::vector<RefFunction> clean;
  for (RefFunction &function : functions) {
    if (!clean.empty() && function.begin < clean.back().end) {
      // A symbol of size 0 ends where the next symbol starts.
      if (function.begin > clean.back().begin &&
          clean.back().end > function.end)
        continue;
      if (function.begin == clean.back().begin)
        continue;
      clean.back().end = function.begin;
    }
    clean.push_back(std::move(function));
  }
  functions = std::move(clean);
}

RefFunction RefSymbols::lookup(uint64_t address) const {
  auto next = std::upper_bound(
      functions.begin(), functions.end(), address,
      [](uint64_t a, const RefFunction &f) { return a < f.begin; });
  if (next != functions.begin() && address < std::prev(next)->end)
    return *std::prev(next);
  RefFunction gap;
  gap.unknown = true;
  gap.begin = next != functions.begin() ? std::prev(next)->end : 0;
  gap.end = next != functions.end() ? next->begin : UINT64_MAX;
  gap.name = "[unknown]";
  return gap;
}
