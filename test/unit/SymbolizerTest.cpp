//===- SymbolizerTest.cpp - Inline chains, range cache, fallbacks ---------===//
//
// Ground truth: LLVM's own symbolizer library (what llvm-symbolizer-22 runs)
// for chains, the ELF symbol table and notes read here for addresses and
// build-ids, and the dynamic loader (dladdr) for a shared library's load
// address. The programs are test/inputs/sym_inline.cpp and its copies.
//
//===----------------------------------------------------------------------===//

#include "SymbolizerTestSupport.h"

#include "magic_trace/Symbolizer.h"

#include "llvm/DebugInfo/Symbolize/Symbolize.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cstddef>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <random>
#include <set>
#include <string>

using namespace magic_trace;
using namespace magic_trace::symbolizer_test;

namespace {

const std::string Program = InputsDir + "sym_inline";
const std::string NoDebug = InputsDir + "sym_inline.nodebug";
const std::string Stripped = InputsDir + "sym_inline.stripped";
const std::string DebugLink = InputsDir + "sym_inline.debuglink";

struct Frame {
  std::string function, file;
  uint32_t line;
  bool operator==(const Frame &other) const {
    return function == other.function && file == other.file &&
           line == other.line;
  }
};

std::ostream &operator<<(std::ostream &os, const Frame &frame) {
  return os << frame.function << " " << frame.file << ":" << frame.line;
}

/// Our chain, innermost first like llvm-symbolizer, unknowns as "??". So
/// are functions named after their FDE (MODULE+0xENTRY), which
/// llvm-symbolizer does not know either (FunctionBoundsTest checks them).
std::vector<Frame> ourChain(const SymbolRange &range,
                            const StringTable &strings) {
  std::vector<Frame> chain;
  for (auto it = range.frames.rbegin(); it != range.frames.rend(); ++it) {
    std::string function = strings.get(it->function).str();
    if (llvm::StringRef(function).starts_with("[unknown @ ") ||
        isFunctionBoundsName(function, range, strings))
      function = "??";
    chain.push_back({function, strings.get(it->file).str(), it->line});
  }
  return chain;
}

/// LLVM's answer for a file address, innermost first.
std::vector<Frame> llvmChain(llvm::symbolize::LLVMSymbolizer &reference,
                             const std::string &path, uint64_t address) {
  auto info = reference.symbolizeInlinedCode(
      path, {address, llvm::object::SectionedAddress::UndefSection});
  std::vector<Frame> chain;
  if (!info) {
    ADD_FAILURE() << llvm::toString(info.takeError());
    return chain;
  }
  for (uint32_t i = 0; i < info->getNumberOfFrames(); ++i) {
    const llvm::DILineInfo &frame = info->getFrame(i);
    auto clean = [](const std::string &text) {
      return text == llvm::DILineInfo::BadString ? std::string() : text;
    };
    std::string function = clean(frame.FunctionName);
    chain.push_back({function.empty() ? "??" : function, clean(frame.FileName),
                     frame.Line});
  }
  return chain;
}

/// Every byte of .text, through the cache, gives LLVM's chain; every range
/// returned contains its address; DWARF ranges know their function's entry.
void expectEveryTextByteMatchesLlvm(const std::string &path) {
  ElfFacts facts = readElf(path);
  ASSERT_LT(facts.textBegin, facts.textEnd);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(path)}, strings);
  EXPECT_TRUE(symbolizer.moduleProblems().empty());
  llvm::symbolize::LLVMSymbolizer reference;
  unsigned mismatches = 0;
  for (uint64_t address = facts.textBegin; address < facts.textEnd; ++address) {
    const SymbolRange &range = symbolizer.lookup(address);
    ASSERT_LE(range.begin, address);
    ASSERT_GT(range.end, address);
    std::vector<Frame> ours = ourChain(range, strings);
    std::vector<Frame> theirs = llvmChain(reference, path, address);
    if (ours != theirs && ++mismatches <= 5) {
      ADD_FAILURE() << "at 0x" << llvm::utohexstr(address)
                    << " ours:" << ::testing::PrintToString(ours)
                    << " llvm:" << ::testing::PrintToString(theirs);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  const SymbolizerStats &stats = symbolizer.stats();
  EXPECT_EQ(stats.lookups, facts.textEnd - facts.textBegin);
  EXPECT_EQ(stats.hits + stats.distinctRanges, stats.lookups);
}

TEST(SymbolizerTest, EveryTextByteMatchesLlvmSymbolizerWithDebugInfo) {
  expectEveryTextByteMatchesLlvm(Program);
}

TEST(SymbolizerTest, EveryTextByteMatchesLlvmSymbolizerWithSymbolsOnly) {
  expectEveryTextByteMatchesLlvm(NoDebug);
}

TEST(SymbolizerTest, EveryTextByteMatchesLlvmSymbolizerWhenStripped) {
  expectEveryTextByteMatchesLlvm(Stripped);
}

TEST(SymbolizerTest, EveryTextByteMatchesLlvmSymbolizerWithDebugLink) {
  expectEveryTextByteMatchesLlvm(DebugLink);
}

TEST(SymbolizerTest, DebugLinkGivesTheSeparateFilesDwarf) {
  ElfFacts facts = readElf(DebugLink);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  ASSERT_NE(hotLoop, 0u);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(DebugLink)}, strings);
  size_t deepest = 0;
  for (uint64_t address = hotLoop; address < hotLoop + size; ++address) {
    const SymbolRange &range = symbolizer.lookup(address);
    EXPECT_TRUE(range.fromDebugInfo);
    deepest = std::max(deepest, range.frames.size());
  }
  EXPECT_GE(deepest, 3u);
}

TEST(SymbolizerTest, HotLoopCostsOneComputationPerDistinctRange) {
  ElfFacts facts = readElf(Program);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  ASSERT_NE(hotLoop, 0u);
  ASSERT_GT(size, 16u);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(Program)}, strings);

  // A trace that runs the loop's bytes 1000 times.
  std::set<const SymbolRange *> seen;
  size_t deepest = 0;
  constexpr int Iterations = 1000;
  for (int i = 0; i < Iterations; ++i) {
    for (uint64_t address = hotLoop; address < hotLoop + size; ++address) {
      const SymbolRange &range = symbolizer.lookup(address);
      seen.insert(&range);
      deepest = std::max(deepest, range.frames.size());
      EXPECT_EQ(range.functionEntry, hotLoop);
      EXPECT_TRUE(range.fromDebugInfo);
    }
    if (i == 0)
      EXPECT_EQ(symbolizer.stats().distinctRanges, seen.size());
  }
  const SymbolizerStats &stats = symbolizer.stats();
  // One computation per distinct range, all of them in the first iteration.
  EXPECT_EQ(stats.distinctRanges, seen.size());
  EXPECT_EQ(stats.lookups, Iterations * size);
  EXPECT_EQ(stats.hits, stats.lookups - stats.distinctRanges);
  EXPECT_LT(seen.size(), size); // Fewer ranges than bytes: real ranges.
  // hotLoop -> Accum<long>::add or sumSquares -> square: inlining is there.
  EXPECT_GE(deepest, 3u);
}

TEST(SymbolizerTest, CacheServesLaterSymbolizersWithoutRecomputing) {
  ElfFacts facts = readElf(Program);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  ASSERT_NE(hotLoop, 0u);
  // The reference: a symbolizer with its own table and files.
  StringTable strings;
  Symbolizer alone({atFileAddresses(Program)}, strings);
  SymbolCache cache;
  for (int snapshot = 0; snapshot < 3; ++snapshot) {
    Symbolizer symbolizer({atFileAddresses(Program)}, cache);
    for (uint64_t address = hotLoop; address < hotLoop + size; ++address)
      EXPECT_EQ(ourChain(symbolizer.lookup(address), cache.strings()),
                ourChain(alone.lookup(address), strings))
          << "snapshot " << snapshot << " address 0x" << std::hex << address;
    if (snapshot == 0)
      EXPECT_GT(symbolizer.stats().distinctRanges, 0u);
    else
      EXPECT_EQ(symbolizer.stats().distinctRanges, 0u)
          << "snapshot " << snapshot << " recomputed cached ranges";
  }
  EXPECT_EQ(cache.objectCount(), 1u);
}

TEST(SymbolizerTest, AFileListedTwiceIsReadOnce) {
  // The QEMU recorder lists a program's code with its build-id, and the
  // program's own read-only mapping of its file without one.
  ElfFacts facts = readElf(Program);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  ASSERT_NE(hotLoop, 0u);
  constexpr uint64_t Code = 0x555555554000, Again = 0x7f0000000000;
  Module code;
  code.path = Program;
  code.buildId = facts.buildId;
  code.loadAddress = Code;
  Module again = code;
  again.buildId.clear();
  again.loadAddress = Again;
  StringTable strings;
  Symbolizer alone({atFileAddresses(Program)}, strings);
  SymbolCache cache;
  Symbolizer both({code, again}, cache);
  EXPECT_TRUE(both.moduleProblems().empty());
  EXPECT_EQ(cache.objectCount(), 1u);
  for (uint64_t address = hotLoop; address < hotLoop + size; ++address) {
    auto expected = ourChain(alone.lookup(address), strings);
    EXPECT_EQ(ourChain(both.lookup(Code + address), cache.strings()), expected);
    EXPECT_EQ(ourChain(both.lookup(Again + address), cache.strings()),
              expected);
  }
  // A copy at another path is another file, read on its own.
  llvm::SmallString<128> copyPath;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("mt-copy", "", copyPath));
  ASSERT_FALSE(llvm::sys::fs::copy_file(Program, copyPath));
  Module copy = again;
  copy.path = std::string(copyPath);
  {
    Symbolizer apart({code, copy}, cache);
    EXPECT_EQ(cache.objectCount(), 2u);
    EXPECT_EQ(ourChain(apart.lookup(Again + hotLoop), cache.strings()),
              ourChain(alone.lookup(hotLoop), strings));
  }
  llvm::sys::fs::remove(copyPath);
}

TEST(SymbolizerTest, CacheRereadsAFileRebuiltAtTheSamePath) {
  // No build-id in the module: the cache must notice the new file.
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("mt-rebuilt", "", path));
  auto install = [&](const std::string &from) {
    ASSERT_FALSE(llvm::sys::fs::copy_file(from, path));
  };
  auto moduleAt = [&]() {
    Module module = atFileAddresses(std::string(path));
    module.buildId.clear();
    return module;
  };
  SymbolCache cache;
  install(NoDebug);
  ElfFacts before = readElf(std::string(path));
  uint64_t hotLoop = before.symbolAddress("_ZN6shapes7hotLoopEi");
  ASSERT_NE(hotLoop, 0u);
  {
    Symbolizer symbolizer({moduleAt()}, cache);
    EXPECT_EQ(names(symbolizer.lookup(hotLoop), cache.strings()),
              std::vector<std::string>{"shapes::hotLoop(int)"});
  }
  install(InputsDir + "emu_calls");
  ElfFacts after = readElf(std::string(path));
  uint64_t fib = after.symbolAddress("_Z3fibi");
  ASSERT_NE(fib, 0u);
  {
    Symbolizer symbolizer({moduleAt()}, cache);
    EXPECT_EQ(names(symbolizer.lookup(fib), cache.strings()),
              std::vector<std::string>{"fib(int)"});
  }
  EXPECT_EQ(cache.objectCount(), 2u);
  llvm::sys::fs::remove(path);
}

TEST(SymbolizerTest, ChainsAreOutermostFirstAndDemangled) {
  ElfFacts facts = readElf(Program);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(Program)}, strings);
  std::set<std::string> inlined;
  for (uint64_t address = hotLoop; address < hotLoop + size; ++address) {
    const SymbolRange &range = symbolizer.lookup(address);
    ASSERT_FALSE(range.frames.empty());
    EXPECT_EQ(strings.get(range.frames[0].function), "shapes::hotLoop(int)");
    EXPECT_FALSE(range.frames[0].inlined);
    for (size_t i = 1; i < range.frames.size(); ++i) {
      EXPECT_TRUE(range.frames[i].inlined);
      inlined.insert(strings.get(range.frames[i].function).str());
    }
  }
  EXPECT_TRUE(inlined.count("shapes::Accum<long>::add(long)"));
  EXPECT_TRUE(inlined.count("shapes::sumSquares(int const*, int)"));
  EXPECT_TRUE(inlined.count("shapes::square(int)"));

  uint64_t rust = facts.symbolAddress("_RNvCs1234_7mycrate6worker");
  ASSERT_NE(rust, 0u);
  EXPECT_EQ(names(symbolizer.lookup(rust), strings),
            std::vector<std::string>{"mycrate::worker"});
  uint64_t twice = facts.symbolAddress("_ZN6shapes5twiceIlEET_S1_");
  ASSERT_NE(twice, 0u);
  EXPECT_EQ(names(symbolizer.lookup(twice), strings),
            std::vector<std::string>{"long shapes::twice<long>(long)"});

  Symbolizer::Options raw;
  raw.demangle = false;
  Symbolizer mangled({atFileAddresses(Program)}, strings, raw);
  EXPECT_EQ(names(mangled.lookup(twice), strings),
            std::vector<std::string>{"_ZN6shapes5twiceIlEET_S1_"});
}

TEST(SymbolizerTest, SymbolTableRangeIsTheSymbolsExtent) {
  ElfFacts facts = readElf(NoDebug);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  ASSERT_NE(hotLoop, 0u);
  for (bool fromNoDebugFile : {true, false}) {
    StringTable strings;
    Symbolizer::Options options;
    options.useDebugInfo = false;
    Symbolizer symbolizer(
        {atFileAddresses(fromNoDebugFile ? NoDebug : Program)}, strings,
        options);
    const SymbolRange &range = symbolizer.lookup(hotLoop + size / 2);
    EXPECT_EQ(range.begin, hotLoop);
    EXPECT_EQ(range.end, hotLoop + size);
    EXPECT_EQ(range.functionEntry, hotLoop);
    EXPECT_FALSE(range.fromDebugInfo);
    EXPECT_EQ(names(range, strings),
              std::vector<std::string>{"shapes::hotLoop(int)"});
    for (uint64_t address = hotLoop; address < hotLoop + size; ++address)
      EXPECT_EQ(&symbolizer.lookup(address), &range);
    EXPECT_EQ(symbolizer.stats().distinctRanges, 1u);
  }
}

TEST(SymbolizerTest, PieLoadedHighMapsThroughItsLoadAddress) {
  ElfFacts facts = readElf(Program);
  uint64_t size = 0;
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi", &size);
  constexpr uint64_t Base = 0x555555554000;
  StringTable strings;
  Symbolizer files({atFileAddresses(Program)}, strings);

  Module derived; // Segments from the ELF headers.
  derived.path = Program;
  derived.buildId = facts.buildId;
  derived.loadAddress = Base;
  Module reported = derived; // Segments as a debugger reports them.
  for (const LoadedSegment &load : facts.loads)
    reported.segments.push_back(
        {Base + load.address, load.size, load.fileOffset, load.executable});

  for (const Module &module : {derived, reported}) {
    Symbolizer runtime({module}, strings);
    EXPECT_TRUE(runtime.moduleProblems().empty());
    for (uint64_t address = hotLoop; address < hotLoop + size; ++address) {
      const SymbolRange &atFile = files.lookup(address);
      const SymbolRange &atRun = runtime.lookup(Base + address);
      EXPECT_EQ(atRun.begin, Base + atFile.begin);
      EXPECT_EQ(atRun.end, Base + atFile.end);
      EXPECT_EQ(atRun.functionEntry, Base + hotLoop);
      EXPECT_EQ(ourChain(atRun, strings), ourChain(atFile, strings));
      EXPECT_EQ(strings.get(atRun.module), Program);
    }
  }
}

TEST(SymbolizerTest, SharedLibraryAtTheLoadersAddress) {
  // libc as the dynamic loader mapped it into this test: its .dynsym names
  // printf at the address the loader resolved.
  Dl_info info;
  void *printfAddress = reinterpret_cast<void *>(&printf);
  ASSERT_NE(dladdr(printfAddress, &info), 0);
  Module libc;
  libc.path = info.dli_fname;
  libc.loadAddress = reinterpret_cast<uint64_t>(info.dli_fbase);
  StringTable strings;
  Symbolizer symbolizer({libc}, strings);
  EXPECT_TRUE(symbolizer.moduleProblems().empty());
  uint64_t address = reinterpret_cast<uint64_t>(printfAddress);
  const SymbolRange &range = symbolizer.lookup(address + 1);
  EXPECT_EQ(range.functionEntry, address);
  EXPECT_EQ(range.begin, address);
  ASSERT_EQ(range.frames.size(), 1u);
  // printf has aliases (_IO_printf); any name at that address is right.
  std::string name = strings.get(range.frames[0].function).str();
  EXPECT_TRUE(name == "printf" || name == info.dli_sname ||
              llvm::StringRef(name).ends_with("printf"))
      << name;
}

TEST(SymbolizerTest, UnusableModulesAreReportedAndUnknown) {
  ElfFacts facts = readElf(Program);
  Module missing;
  missing.path = InputsDir + "no-such-lib.so";
  missing.loadAddress = 0x7000;
  missing.segments.push_back({0x7000, 0x1000, 0, true});

  Module wrongId;
  wrongId.path = Program;
  wrongId.buildId = "00112233";
  wrongId.loadAddress = 0x100000;

  Module rightId; // Upper-case hex still matches.
  rightId.path = Program;
  rightId.buildId = llvm::StringRef(facts.buildId).upper();
  rightId.loadAddress = 0x200000;
  ASSERT_FALSE(facts.buildId.empty());

  StringTable strings;
  Symbolizer symbolizer({missing, wrongId, rightId}, strings);
  std::vector<std::string> problems = symbolizer.moduleProblems();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("no-such-lib.so: cannot read"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("sym_inline: build-id " + facts.buildId +
                             " differs from the module's 00112233"),
            std::string::npos)
      << problems[1];

  const SymbolRange &inMissing = symbolizer.lookup(0x7123);
  EXPECT_EQ(names(inMissing, strings),
            std::vector<std::string>{"[unknown @ 0x7000 (no-such-lib.so)]"});
  EXPECT_EQ(inMissing.begin, 0x7000u);
  EXPECT_EQ(inMissing.end, 0x8000u);
  EXPECT_EQ(&symbolizer.lookup(0x7fff), &inMissing);

  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi");
  const SymbolRange &inWrong = symbolizer.lookup(0x100000 + hotLoop);
  EXPECT_TRUE(
      llvm::StringRef(names(inWrong, strings)[0]).starts_with("[unknown @ 0x"));
  const SymbolRange &inRight = symbolizer.lookup(0x200000 + hotLoop);
  EXPECT_EQ(names(inRight, strings)[0], "shapes::hotLoop(int)");
}

TEST(SymbolizerTest, TruncatedAndCorruptedFilesNeverCrash) {
  ElfFacts facts = readElf(Program);
  std::string original = readBytes(Program);
  ASSERT_GT(original.size(), 4096u);
  std::string damaged = ::testing::TempDir() + "sym_inline.damaged";

  for (size_t size : {size_t(0), size_t(16), size_t(64), size_t(1000),
                      original.size() / 2, original.size() - 100}) {
    writeBytes(damaged, llvm::StringRef(original).take_front(size));
    expectSaneAnswers(damaged, facts);
  }

  // Random bytes written over the debug sections (and then over the whole
  // file after the ELF header), several seeds.
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(Program));
  std::vector<std::pair<uint64_t, uint64_t>> debugSections;
  for (const llvm::object::SectionRef &section : binary.getBinary()->sections())
    if (llvm::cantFail(section.getName()).starts_with(".debug_")) {
      auto *elf =
          llvm::cast<llvm::object::ELF64LEObjectFile>(binary.getBinary());
      auto header = elf->getSection(section.getRawDataRefImpl());
      debugSections.push_back({header->sh_offset, header->sh_size});
    }
  ASSERT_FALSE(debugSections.empty());
  debugSections.push_back({64, original.size() - 64});
  for (unsigned seed = 1; seed <= 6; ++seed) {
    std::mt19937 random(seed);
    for (const auto &[offset, size] : debugSections) {
      writeBytes(damaged, scribble(original, offset, size, 64, random));
      expectSaneAnswers(damaged, facts);
    }
  }
  std::remove(damaged.c_str());
}

/// PLT stub names come from the PLT's bytes, the dynamic relocations and
/// the dynamic symbol table: damage to any of them, or to their section
/// headers' links, offsets and sizes, leaves every answer sane.
TEST(SymbolizerTest, DamagedPltInputsNeverCrash) {
  ElfFacts facts = readElf(Program);
  std::string original = readBytes(Program);
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(Program));
  auto *elf = llvm::cast<llvm::object::ELF64LEObjectFile>(binary.getBinary());
  const auto &file = elf->getELFFile();
  uint64_t pltBegin = UINT64_MAX, pltEnd = 0;
  std::vector<std::pair<uint64_t, uint64_t>> contents; // offset, size
  std::vector<uint64_t> headers; // file offsets of their section headers
  uint64_t index = 0;
  for (const auto &section : llvm::cantFail(file.sections())) {
    llvm::StringRef name = llvm::cantFail(file.getSectionName(section));
    bool plt = name.starts_with(".plt");
    if (plt) {
      pltBegin = std::min<uint64_t>(pltBegin, section.sh_addr);
      pltEnd = std::max<uint64_t>(pltEnd, section.sh_addr + section.sh_size);
    }
    if (plt || name.starts_with(".rela") || name == ".dynsym" ||
        name == ".dynstr") {
      contents.push_back({section.sh_offset, section.sh_size});
      headers.push_back(file.getHeader().e_shoff +
                        index * file.getHeader().e_shentsize);
    }
    ++index;
  }
  ASSERT_LT(pltBegin, pltEnd) << "sym_inline has no PLT";
  {
    StringTable strings;
    Symbolizer symbolizer({atFileAddresses(Program)}, strings);
    EXPECT_NE(names(symbolizer.lookup(pltEnd - 1), strings)[0].find("@plt"),
              std::string::npos)
        << "the last PLT stub is named after its target";
  }
  std::string damaged = ::testing::TempDir() + "sym_inline.badplt";
  for (unsigned seed = 1; seed <= 8; ++seed) {
    std::mt19937 random(seed);
    for (const auto &[offset, size] : contents) {
      writeBytes(damaged, scribble(original, offset, size, 16, random));
      expectSaneAnswers(damaged, facts, pltBegin, pltEnd);
    }
    // sh_link, sh_offset and sh_size of one header at a time: small values
    // (another section), huge ones, and random ones.
    using Header = llvm::object::ELF64LE::Shdr;
    for (uint64_t header : headers)
      for (size_t field :
           {offsetof(Header, sh_link), offsetof(Header, sh_offset),
            offsetof(Header, sh_size)}) {
        std::string bytes = original;
        uint64_t value = seed % 3 == 0 ? random() % 64
                         : seed % 3 == 1
                             ? UINT64_MAX - random() % 64
                             : (uint64_t(random()) << 32) | random();
        size_t width = field == offsetof(Header, sh_link) ? 4 : 8;
        memcpy(&bytes[header + field], &value, width);
        writeBytes(damaged, bytes);
        expectSaneAnswers(damaged, facts, pltBegin, pltEnd);
      }
  }
  std::remove(damaged.c_str());
}

TEST(SymbolizerTest, DamagedLineTableFallsBackToTheSymbolTable) {
  // A line-table header length past its unit: LLVM 22's parser (and so
  // llvm-symbolizer-22) crashes on this file, so its DWARF must not be used.
  ElfFacts facts = readElf(Program);
  std::string bytes = readBytes(Program);
  auto binary =
      llvm::cantFail(llvm::object::ObjectFile::createObjectFile(Program));
  auto *elf = llvm::cast<llvm::object::ELF64LEObjectFile>(binary.getBinary());
  uint64_t lineOffset = 0;
  for (const llvm::object::SectionRef &section : elf->sections())
    if (llvm::cantFail(section.getName()) == ".debug_line")
      lineOffset = elf->getSection(section.getRawDataRefImpl())->sh_offset;
  ASSERT_NE(lineOffset, 0u);
  // DWARF 5: unit_length (4), version (2), address and selector sizes (2),
  // then header_length (4).
  ASSERT_EQ(bytes[lineOffset + 4], 5);
  bytes[lineOffset + 11] = char(0xa8);
  std::string damaged = ::testing::TempDir() + "sym_inline.badline";
  writeBytes(damaged, bytes);

  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(damaged)}, strings);
  std::vector<std::string> problems = symbolizer.moduleProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("sym_inline.badline: damaged DWARF in "),
            std::string::npos)
      << problems[0];
  EXPECT_NE(problems[0].find("header ends past its unit (symbolizing from the "
                             "symbol table)"),
            std::string::npos)
      << problems[0];
  uint64_t hotLoop = facts.symbolAddress("_ZN6shapes7hotLoopEi");
  const SymbolRange &range = symbolizer.lookup(hotLoop + 4);
  EXPECT_FALSE(range.fromDebugInfo);
  EXPECT_EQ(names(range, strings),
            std::vector<std::string>{"shapes::hotLoop(int)"});
  std::remove(damaged.c_str());
}

TEST(SymbolizerTest, UnmappedCodeIsOneRangePerPage) {
  StringTable strings;
  Symbolizer symbolizer({atFileAddresses(Program)}, strings);
  const SymbolRange &jit = symbolizer.lookup(0x7f0000001234);
  EXPECT_EQ(jit.begin, 0x7f0000001000u);
  EXPECT_EQ(jit.end, 0x7f0000002000u);
  EXPECT_EQ(names(jit, strings),
            std::vector<std::string>{"[unknown @ 0x7f0000001000]"});
  EXPECT_EQ(&symbolizer.lookup(0x7f0000001fff), &jit);
  EXPECT_NE(&symbolizer.lookup(0x7f0000002000), &jit);
  EXPECT_EQ(symbolizer.stats().distinctRanges, 2u);
}

TEST(SymbolizerTest, NoModulesNeverFails) {
  StringTable strings;
  Symbolizer symbolizer({}, strings);
  EXPECT_TRUE(symbolizer.moduleProblems().empty());
  const SymbolRange &range = symbolizer.lookup(UINT64_MAX);
  EXPECT_EQ(range.frames.size(), 1u);
  EXPECT_LE(range.begin, UINT64_MAX);
  EXPECT_EQ(symbolizer.lookup(0).begin, 0u);
}

} // namespace
