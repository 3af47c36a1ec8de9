//===- FunctionBoundsTest.cpp - Stripped code's functions from FDEs -------===//
//
// Ground truth: the symbol table of the unstripped twin of each stripped
// file (same build, same code), read with llvm::object: its functions' start
// and size are what the stripped file's FDEs must give. The programs are
// test/inputs/emu_calls.cpp, sym_inline.cpp and shlib/emu_plugin.c, stripped
// by llvm-objcopy; damaged copies are made here.
//
//===----------------------------------------------------------------------===//

#include "SymbolizerTestSupport.h"

#include "magic_trace/Symbolizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

using namespace magic_trace;
using namespace magic_trace::symbolizer_test;

namespace {

const std::string Calls = InputsDir + "emu_calls";
const std::string CallsStripped = InputsDir + "emu_calls.stripped";
const std::string Plugin = InputsDir + "libemu_plugin.so";
const std::string PluginStripped = InputsDir + "libemu_plugin.stripped.so";
const std::string InlineProgram = InputsDir + "sym_inline";
const std::string InlineStrippedWithLink =
    InputsDir + "sym_inline.stripped-debuglink";

std::string fdeName(llvm::StringRef file, uint64_t entry) {
  return file.str() + "+0x" + llvm::utohexstr(entry, /*LowerCase=*/true);
}

/// Every function of the unstripped twin is, in the stripped copy at `path`
/// loaded at `base`, one range exactly its extent, named after its entry's
/// file address, with that entry (at runtime); distinct functions are
/// distinct ranges.
void expectFunctionsFromFdes(const std::string &path, const ElfFacts &twin,
                             uint64_t base) {
  Module module = atFileAddresses(path);
  module.loadAddress += base;
  StringTable strings;
  Symbolizer symbolizer({module}, strings);
  EXPECT_TRUE(symbolizer.moduleProblems().empty())
      << ::testing::PrintToString(symbolizer.moduleProblems());
  std::string file = llvm::sys::path::filename(path).str();
  std::set<const SymbolRange *> ranges;
  ASSERT_GE(twin.functions.size(), 10u);
  for (const auto &[begin, size] : twin.functions) {
    const SymbolRange &first = symbolizer.lookup(base + begin);
    EXPECT_EQ(names(first, strings),
              std::vector<std::string>{fdeName(file, begin)});
    EXPECT_EQ(first.begin, base + begin);
    EXPECT_EQ(first.end, base + begin + size);
    EXPECT_EQ(first.functionEntry, base + begin);
    EXPECT_FALSE(first.unknown);
    EXPECT_FALSE(first.fromDebugInfo);
    for (uint64_t address = begin; address < begin + size; ++address)
      EXPECT_EQ(&symbolizer.lookup(base + address), &first);
    ranges.insert(&first);
  }
  EXPECT_EQ(ranges.size(), twin.functions.size());
}

TEST(FunctionBoundsTest, StrippedFunctionsAreNamedAndBoundedByTheirFde) {
  expectFunctionsFromFdes(CallsStripped, readElf(Calls), 0);
}

TEST(FunctionBoundsTest, NamesGiveTheFileAddressWhereverTheFileIsLoaded) {
  expectFunctionsFromFdes(CallsStripped, readElf(Calls), 0x555555554000);
}

TEST(FunctionBoundsTest, TheOriginalIsNamedByItsSymbolTableOnly) {
  ElfFacts facts = readElf(Calls);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(Calls)}, strings);
  for (uint64_t address = facts.textBegin; address < facts.textEnd; ++address) {
    const SymbolRange &range = symbolizer.lookup(address);
    ASSERT_FALSE(range.frames.empty());
    std::string name = strings.get(range.frames[0].function).str();
    EXPECT_FALSE(isFunctionBoundsName(name, range, strings))
        << name << " at 0x" << llvm::utohexstr(address);
  }
}

TEST(FunctionBoundsTest, ARealSymbolWinsOverTheFde) {
  // The stripped library keeps its export in .dynsym; its static helper has
  // only an FDE.
  ElfFacts twin = readElf(Plugin);
  uint64_t entrySize = 0, helperSize = 0;
  uint64_t entry = twin.symbolAddress("emu_plugin_entry", &entrySize);
  uint64_t helper = twin.symbolAddress("helper", &helperSize);
  ASSERT_NE(entry, 0u);
  ASSERT_NE(helper, 0u);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(PluginStripped)}, strings);
  const SymbolRange &exported = symbolizer.lookup(entry + entrySize / 2);
  EXPECT_EQ(names(exported, strings),
            std::vector<std::string>{"emu_plugin_entry"});
  EXPECT_EQ(exported.begin, entry);
  EXPECT_EQ(exported.end, entry + entrySize);
  const SymbolRange &local = symbolizer.lookup(helper + helperSize / 2);
  EXPECT_EQ(names(local, strings), std::vector<std::string>{fdeName(
                                       "libemu_plugin.stripped.so", helper)});
  EXPECT_EQ(local.begin, helper);
  EXPECT_EQ(local.end, helper + helperSize);
  EXPECT_EQ(local.functionEntry, helper);
}

/// The file offset of st_size of .dynsym's symbol `name` in `path`.
uint64_t dynamicSymbolSizeOffset(const std::string &path,
                                 llvm::StringRef name) {
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(path));
  const auto &elf =
      llvm::cast<llvm::object::ELF64LEObjectFile>(binary.getBinary())
          ->getELFFile();
  for (const auto &section : llvm::cantFail(elf.sections())) {
    if (section.sh_type != llvm::ELF::SHT_DYNSYM)
      continue;
    auto symbols = llvm::cantFail(elf.symbols(&section));
    auto strings = llvm::cantFail(elf.getStringTableForSymtab(section));
    for (size_t i = 0; i < symbols.size(); ++i)
      if (llvm::cantFail(symbols[i].getName(strings)) == name)
        return section.sh_offset + i * sizeof(symbols[i]) +
               offsetof(llvm::object::ELF64LE::Sym, st_size);
  }
  return 0;
}

TEST(FunctionBoundsTest, ASymbolSmallerThanItsFdeLeavesTheRestToTheFde) {
  // emu_plugin_entry's .dynsym size cut to 8: those 8 bytes keep the
  // symbol's name, the rest of its FDE is named after the FDE but has the
  // same entry, so the model sees one function.
  ElfFacts twin = readElf(Plugin);
  uint64_t size = 0;
  uint64_t entry = twin.symbolAddress("emu_plugin_entry", &size);
  ASSERT_GT(size, 8u);
  std::string bytes = readBytes(PluginStripped);
  uint64_t offset = dynamicSymbolSizeOffset(PluginStripped, "emu_plugin_entry");
  ASSERT_NE(offset, 0u);
  uint64_t cut = 8;
  memcpy(&bytes[offset], &cut, sizeof(cut));
  std::string edited = ::testing::TempDir() + "libemu_plugin.cut.so";
  writeBytes(edited, bytes);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(edited)}, strings);
  const SymbolRange &symbol = symbolizer.lookup(entry + 2);
  EXPECT_EQ(names(symbol, strings),
            std::vector<std::string>{"emu_plugin_entry"});
  EXPECT_EQ(symbol.end, entry + cut);
  const SymbolRange &rest = symbolizer.lookup(entry + cut);
  EXPECT_EQ(names(rest, strings),
            std::vector<std::string>{fdeName("libemu_plugin.cut.so", entry)});
  EXPECT_EQ(rest.begin, entry + cut);
  EXPECT_EQ(rest.end, entry + size);
  EXPECT_EQ(rest.functionEntry, symbol.functionEntry);
  std::remove(edited.c_str());
}

TEST(FunctionBoundsTest, AStrippedFileTakesTheDebugFilesSymbolTable) {
  // sym_inline.stripped-debuglink has no .symtab; its .gnu_debuglink file
  // has the original's. Code DWARF does not describe (crt's functions) is
  // named by that table, with DWARF or without.
  ElfFacts twin = readElf(InlineProgram);
  for (bool useDebugInfo : {true, false}) {
    Symbolizer::Options options;
    options.useDebugInfo = useDebugInfo;
    StringTable strings;
    Symbolizer symbolizer({atFileAddresses(InlineStrippedWithLink)}, strings,
                          options);
    EXPECT_TRUE(symbolizer.moduleProblems().empty());
    for (llvm::StringRef name : {"_start", "register_tm_clones", "frame_dummy",
                                 "_ZN6shapes7hotLoopEi"}) {
      uint64_t address = twin.symbolAddress(name);
      ASSERT_NE(address, 0u) << name.str();
      const SymbolRange &range = symbolizer.lookup(address);
      ASSERT_FALSE(range.frames.empty());
      std::string expected =
          name == "_ZN6shapes7hotLoopEi" ? "shapes::hotLoop(int)" : name.str();
      EXPECT_EQ(strings.get(range.frames[0].function), expected);
      EXPECT_EQ(range.functionEntry, address);
    }
  }
}

TEST(FunctionBoundsTest, LibcTakesItsDebugPackagesSymbolTable) {
  // libc.so.6 has only .dynsym; libc6-dbg's build-id file has every local
  // function. Each must be named by one of that file's names for its
  // address (aliases share addresses).
  std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  ElfFacts facts = readElf(libc);
  ASSERT_GT(facts.buildId.size(), 2u);
  std::string debug = "/usr/lib/debug/.build-id/" + facts.buildId.substr(0, 2) +
                      "/" + facts.buildId.substr(2) + ".debug";
  if (!llvm::sys::fs::exists(debug))
    GTEST_SKIP() << debug
                 << " is missing (scripts/setup.sh installs libc6-dbg)";
  // Every name at each function address: static names repeat across files.
  std::map<uint64_t, std::set<std::string>> namesAt;
  auto debugBinary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(debug));
  for (const llvm::object::SymbolRef &symbol :
       debugBinary.getBinary()->symbols())
    if (llvm::object::ELFSymbolRef(symbol).getELFType() ==
            llvm::ELF::STT_FUNC &&
        llvm::object::ELFSymbolRef(symbol).getSize() != 0)
      namesAt[llvm::cantFail(symbol.getAddress())].insert(
          llvm::cantFail(symbol.getName()).str());
  std::set<uint64_t> exported; // Named by .dynsym before the debug file.
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(libc));
  auto *elf = llvm::cast<llvm::object::ELFObjectFileBase>(binary.getBinary());
  for (const llvm::object::ELFSymbolRef &symbol :
       elf->getDynamicSymbolIterators())
    exported.insert(llvm::cantFail(symbol.getAddress()));
  StringTable strings;
  Symbolizer::Options options;
  options.useDebugInfo = false; // The names, not DWARF's.
  Symbolizer symbolizer({atFileAddresses(libc)}, strings, options);
  unsigned checked = 0;
  for (const auto &[address, functionNames] : namesAt) {
    if (exported.count(address) || checked == 200)
      continue;
    ++checked;
    const SymbolRange &range = symbolizer.lookup(address);
    ASSERT_FALSE(range.frames.empty());
    std::string name = strings.get(range.frames[0].function).str();
    EXPECT_TRUE(functionNames.count(name))
        << name << " at 0x" << llvm::utohexstr(address);
  }
  EXPECT_EQ(checked, 200u);
}

/// libc and its libc6-dbg build-id file, or empty if the package is missing.
std::pair<std::string, std::string> libcAndDebugFile() {
  std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  ElfFacts facts = readElf(libc);
  if (facts.buildId.size() <= 2)
    return {};
  std::string debug = "/usr/lib/debug/.build-id/" + facts.buildId.substr(0, 2) +
                      "/" + facts.buildId.substr(2) + ".debug";
  if (!llvm::sys::fs::exists(debug))
    return {};
  return {libc, debug};
}

/// The sized functions of `path`'s .symtab: (begin, end), sorted.
std::vector<std::pair<uint64_t, uint64_t>>
sizedFunctions(const std::string &path) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(path));
  for (const llvm::object::SymbolRef &symbol : binary.getBinary()->symbols()) {
    llvm::object::ELFSymbolRef elf(symbol);
    if (elf.getELFType() == llvm::ELF::STT_FUNC && elf.getSize() != 0) {
      uint64_t begin = llvm::cantFail(symbol.getAddress());
      out.push_back({begin, begin + elf.getSize()});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Sets an environment variable for the scope, then restores it.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *was = std::getenv(name))
      old = was;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

TEST(FunctionBoundsTest, AStrippedCopyIsNotNamedFromItsOriginalsKeptRanges) {
  // The stripped copy has its original's build-id: ranges kept for the
  // original (RangeDiskCache.h) must not name it.
  llvm::SmallString<128> cache;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-ranges", cache));
  ScopedEnv env("XDG_CACHE_HOME", cache.c_str());
  ElfFacts twin = readElf(Calls);
  {
    StringTable strings;
    Symbolizer original({atFileAddresses(Calls)}, strings);
    for (const auto &[begin, size] : twin.functions)
      (void)original.lookup(begin);
    original.keepRanges();
  }
  llvm::SmallString<128> kept(cache);
  llvm::sys::path::append(kept, "magic-trace", "ranges");
  std::error_code error;
  size_t files = 0;
  for (llvm::sys::fs::directory_iterator it(kept, error), end;
       !error && it != end; it.increment(error))
    ++files;
  EXPECT_EQ(files, 1u) << "the original's ranges were not kept in "
                       << kept.c_str();
  expectFunctionsFromFdes(CallsStripped, twin, 0);
  llvm::sys::fs::remove_directories(cache);
}

TEST(FunctionBoundsTest, EmptyDebugFileDirsSymbolizesAsWithoutTheDebugPackage) {
  // MT_DEBUG_FILE_DIRS= (docs/symbolizer.md): libc6-dbg stays installed but
  // is not looked up, so a local function of libc (in the debug file's
  // .symtab, not in .dynsym) is named after its FDE, as without the package.
  auto [libc, debug] = libcAndDebugFile();
  if (debug.empty())
    GTEST_SKIP() << "libc6-dbg is missing (scripts/setup.sh installs it)";
  std::set<uint64_t> exported;
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(libc));
  auto *elf = llvm::cast<llvm::object::ELFObjectFileBase>(binary.getBinary());
  for (const llvm::object::ELFSymbolRef &symbol :
       elf->getDynamicSymbolIterators())
    exported.insert(llvm::cantFail(symbol.getAddress()));
  unsigned checked = 0;
  ScopedEnv hidden("MT_DEBUG_FILE_DIRS", "");
  StringTable strings;
  Symbolizer::Options options;
  options.useDebugInfo = false;
  Symbolizer symbolizer({atFileAddresses(libc)}, strings, options);
  for (auto [begin, end] : sizedFunctions(debug)) {
    if (exported.count(begin) || checked == 50)
      continue;
    ++checked;
    const SymbolRange &range = symbolizer.lookup(begin);
    ASSERT_FALSE(range.frames.empty());
    llvm::StringRef name = strings.get(range.frames[0].function);
    EXPECT_TRUE(name.starts_with("libc.so.6+0x") ||
                name.starts_with("[unknown @ "))
        << name.str() << " at 0x" << llvm::utohexstr(begin);
  }
  EXPECT_EQ(checked, 50u);
}

TEST(FunctionBoundsTest, DwarfLinesWithoutAFunctionAreNotQuestionMarks) {
  // Between two sized symbols of libc6-dbg's .symtab (alignment padding, e.g.
  // after __memmove_chk_avx_unaligned_erms, where that function falls
  // through into __memmove_avx_unaligned_erms) an assembler unit's line
  // table may still have rows and no function: such code is unknown (or its
  // FDE's function), never "??", a name every such stretch would share.
  auto [libc, debug] = libcAndDebugFile();
  if (debug.empty())
    GTEST_SKIP() << "libc6-dbg is missing (scripts/setup.sh installs it)";
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(libc)}, strings);
  std::vector<std::pair<uint64_t, uint64_t>> functions = sizedFunctions(debug);
  unsigned gaps = 0, withLines = 0;
  uint64_t covered = 0;
  for (size_t i = 0; i + 1 < functions.size(); ++i) {
    covered = std::max(covered, functions[i].second);
    if (covered >= functions[i + 1].first)
      continue;
    ++gaps;
    const SymbolRange &range = symbolizer.lookup(covered);
    ASSERT_FALSE(range.frames.empty());
    llvm::StringRef name = strings.get(range.frames[0].function);
    EXPECT_NE(name, "??") << "at 0x" << llvm::utohexstr(covered);
    if (range.frames[0].file != 0 && range.unknown)
      ++withLines;
  }
  EXPECT_GT(gaps, 0u);
  EXPECT_GT(withLines, 0u) << "no padding with line rows left to check";
}

/// A copy of `path` with `edit` applied, and the symbolizer's problems and
/// answers on it.
struct EditedCopy {
  std::string path;
  ElfFacts facts;
  std::string bytes;

  EditedCopy(const std::string &original, llvm::StringRef suffix)
      : path(::testing::TempDir() + "emu_calls." + suffix.str()),
        facts(readElf(original)), bytes(readBytes(original)) {}
  ~EditedCopy() { std::remove(path.c_str()); }
  const SectionFacts &section(const std::string &name) {
    return facts.sections[name];
  }
  void write() { writeBytes(path, bytes); }
};

TEST(FunctionBoundsTest, DamagedFrameHeaderFallsBackToTheFrameSection) {
  ElfFacts twin = readElf(Calls);
  for (bool unsorted : {false, true}) {
    EditedCopy copy(CallsStripped, unsorted ? "unsorted" : "badhdr");
    const SectionFacts &header = copy.section(".eh_frame_hdr");
    ASSERT_GT(header.size, 28u);
    char *bytes = &copy.bytes[header.offset];
    // version, eh_frame_ptr_enc, fde_count_enc, table_enc as the linkers
    // write them: 1, pcrel|sdata4, udata4, datarel|sdata4. Then the 4-byte
    // eh_frame_ptr and fde_count, and 8-byte (location, FDE) entries.
    ASSERT_EQ(llvm::StringRef(bytes, 4), llvm::StringRef("\x01\x1b\x03\x3b"));
    // Entries 1 and 2 swapped: entry 2's location is now below entry 1's.
    int32_t swappedLocation = 0;
    if (unsorted) {
      std::swap_ranges(bytes + 12 + 8, bytes + 12 + 16, bytes + 12 + 16);
      memcpy(&swappedLocation, bytes + 12 + 16, 4);
    } else {
      bytes[0] = 2;
    }
    copy.write();
    StringTable strings;
    Symbolizer symbolizer({atFileAddresses(copy.path)}, strings);
    std::vector<std::string> problems = symbolizer.moduleProblems();
    ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
    EXPECT_EQ(problems[0],
              "emu_calls." + std::string(unsorted ? "unsorted" : "badhdr") +
                  ": damaged .eh_frame_hdr: " +
                  (unsorted ? "table entry 2 (0x" +
                                  llvm::utohexstr(
                                      header.address + swappedLocation, true) +
                                  ") is not above the one before it"
                            : std::string("version 2")) +
                  " (bounds from .eh_frame)");
    // The walk of .eh_frame gives every function all the same.
    std::string file = llvm::sys::path::filename(copy.path).str();
    for (const auto &[begin, size] : twin.functions) {
      const SymbolRange &range = symbolizer.lookup(begin + size - 1);
      EXPECT_EQ(names(range, strings),
                std::vector<std::string>{fdeName(file, begin)});
      EXPECT_EQ(range.begin, begin);
      EXPECT_EQ(range.end, begin + size);
    }
  }
}

TEST(FunctionBoundsTest, DamagedFrameSectionIsOneWarningAndUnknownCode) {
  // The first record, the CIE of crt1's _start alone, claims to run far past
  // the section. Through the header's table only _start's FDE is lost; a
  // walk of .eh_frame cannot find any record after it.
  ElfFacts twin = readElf(Calls);
  uint64_t start = twin.symbolAddress("_start");
  ASSERT_NE(start, 0u);
  for (bool withHeader : {true, false}) {
    EditedCopy copy(CallsStripped, withHeader ? "badcie" : "badcie-nohdr");
    uint32_t length = 0xfffffff0;
    memcpy(&copy.bytes[copy.section(".eh_frame").offset], &length, 4);
    if (!withHeader)
      copy.bytes[copy.section(".eh_frame_hdr").offset] = 2;
    copy.write();
    StringTable strings;
    Symbolizer symbolizer({atFileAddresses(copy.path)}, strings);
    std::vector<std::string> problems = symbolizer.moduleProblems();
    std::string file = llvm::sys::path::filename(copy.path).str();
    ASSERT_EQ(problems.size(), withHeader ? 1u : 2u)
        << ::testing::PrintToString(problems);
    EXPECT_EQ(problems.back(),
              file + ": damaged .eh_frame: " +
                  (withHeader ? "an unreadable FDE at offset 0x18: its CIE at "
                                "offset 0x0: record at offset 0x0: length runs "
                                "past the section's end (no bounds for its "
                                "function)"
                              : "record at offset 0x0: length runs past the "
                                "section's end (0 function bounds before it "
                                "kept)"));
    for (const auto &[begin, size] : twin.functions) {
      const SymbolRange &range = symbolizer.lookup(begin);
      bool lost = begin == start || !withHeader;
      EXPECT_EQ(range.unknown, lost) << "0x" << llvm::utohexstr(begin);
      EXPECT_EQ(range.functionEntry, lost ? 0u : begin);
    }
  }
}

TEST(FunctionBoundsTest, ScribbledFrameSectionsNeverCrash) {
  // Random bytes over .eh_frame_hdr and .eh_frame, and random values in
  // their section headers' offset and size: every answer stays sane and
  // every problem is one line.
  ElfFacts facts = readElf(CallsStripped);
  std::string original = readBytes(CallsStripped);
  std::string damaged = ::testing::TempDir() + "emu_calls.scribbled";
  using Header = llvm::object::ELF64LE::Shdr;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 random(seed);
    for (const char *name : {".eh_frame_hdr", ".eh_frame"}) {
      const SectionFacts &section = facts.sections[name];
      for (int count : {1, 4, 32}) {
        writeBytes(damaged, scribble(original, section.offset, section.size,
                                     count, random));
        expectSaneAnswers(damaged, facts);
      }
      for (size_t field :
           {offsetof(Header, sh_offset), offsetof(Header, sh_size)}) {
        std::string bytes = original;
        uint64_t value = seed % 3 == 0 ? random() % 64
                         : seed % 3 == 1
                             ? UINT64_MAX - random() % 64
                             : (uint64_t(random()) << 32) | random();
        memcpy(&bytes[section.headerOffset + field], &value, 8);
        writeBytes(damaged, bytes);
        expectSaneAnswers(damaged, facts);
        StringTable strings;
        Symbolizer symbolizer({atFileAddresses(damaged)}, strings);
        for (const std::string &problem : symbolizer.moduleProblems())
          EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
      }
    }
  }
  std::remove(damaged.c_str());
}

} // namespace
