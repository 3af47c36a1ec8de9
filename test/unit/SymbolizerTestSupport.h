//===- SymbolizerTestSupport.h - ELF facts and damaged copies ---*- C++ -*-===//
//
// What the symbolizer tests share: the facts of an ELF file read with
// llvm::object (the ground truth for addresses, sizes and build-ids), modules
// at file addresses, and damaged copies of files with the sanity sweep every
// damaged-file test runs.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_SYMBOLIZERTESTSUPPORT_H
#define MAGIC_TRACE_TEST_SYMBOLIZERTESTSUPPORT_H

#include "magic_trace/Symbolizer.h"

#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Format.h"

#include "gtest/gtest.h"

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace magic_trace::symbolizer_test {

inline const std::string InputsDir = MT_TEST_BINARY_DIR "/inputs/";

/// Where a section lies in its file, and where its header is.
struct SectionFacts {
  uint64_t address = 0, offset = 0, size = 0;
  uint64_t headerOffset = 0; ///< File offset of its Elf64_Shdr.
};

/// The facts of an ELF file the tests need, read with llvm::object.
struct ElfFacts {
  uint64_t textBegin = 0, textEnd = 0;
  std::string buildId;
  std::vector<LoadedSegment> loads; ///< PT_LOADs as file addresses.

  uint64_t symbolAddress(llvm::StringRef name, uint64_t *size = nullptr) const {
    auto found = symbols.find(name.str());
    if (found == symbols.end())
      return 0;
    if (size)
      *size = found->second.second;
    return found->second.first;
  }

  std::map<std::string, std::pair<uint64_t, uint64_t>> symbols;
  /// STT_FUNC symbols with a size, as (address, size), sorted.
  std::vector<std::pair<uint64_t, uint64_t>> functions;
  std::map<std::string, SectionFacts> sections;
};

inline ElfFacts readElf(const std::string &path) {
  ElfFacts facts;
  auto binary = llvm::object::ObjectFile::createObjectFile(path);
  if (!binary) {
    ADD_FAILURE() << llvm::toString(binary.takeError());
    return facts;
  }
  auto *elf =
      llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(binary->getBinary());
  if (!elf) {
    ADD_FAILURE() << path << " is not ELF64LE";
    return facts;
  }
  uint64_t index = 0;
  for (const llvm::object::SectionRef &section : elf->sections()) {
    llvm::StringRef name = llvm::cantFail(section.getName());
    const auto &header = elf->getELFFile().getHeader();
    facts.sections[name.str()] = {
        section.getAddress(),
        elf->getSection(section.getRawDataRefImpl())->sh_offset,
        section.getSize(), header.e_shoff + index++ * header.e_shentsize};
    if (name == ".text") {
      facts.textBegin = section.getAddress();
      facts.textEnd = section.getAddress() + section.getSize();
    }
    if (name == ".note.gnu.build-id") {
      // Elf64_Nhdr: namesz, descsz, type (4 bytes each), "GNU\0", the id.
      llvm::StringRef bytes = llvm::cantFail(section.getContents());
      for (unsigned char byte : bytes.drop_front(16))
        facts.buildId += llvm::utohexstr(byte, /*LowerCase=*/true, 2);
    }
  }
  for (const llvm::object::SymbolRef &symbol : elf->symbols()) {
    auto name = symbol.getName();
    auto address = symbol.getAddress();
    if (name && address) {
      uint64_t size = llvm::object::ELFSymbolRef(symbol).getSize();
      facts.symbols[name->str()] = {*address, size};
      if (llvm::object::ELFSymbolRef(symbol).getELFType() ==
              llvm::ELF::STT_FUNC &&
          size != 0)
        facts.functions.push_back({*address, size});
    } else {
      llvm::consumeError(name.takeError());
      llvm::consumeError(address.takeError());
    }
  }
  std::sort(facts.functions.begin(), facts.functions.end());
  facts.functions.erase(
      std::unique(facts.functions.begin(), facts.functions.end()),
      facts.functions.end());
  auto headers = elf->getELFFile().program_headers();
  if (!headers) {
    ADD_FAILURE() << llvm::toString(headers.takeError());
    return facts;
  }
  for (const auto &header : *headers)
    if (header.p_type == llvm::ELF::PT_LOAD)
      facts.loads.push_back({header.p_vaddr, header.p_memsz, header.p_offset,
                             (header.p_flags & llvm::ELF::PF_X) != 0});
  return facts;
}

/// A module whose runtime addresses are its file addresses.
inline Module atFileAddresses(const std::string &path) {
  Module module;
  module.path = path;
  module.loadAddress = llvm::cantFail(Symbolizer::preferredLoadAddress(path));
  return module;
}

inline std::vector<std::string> names(const SymbolRange &range,
                                      const StringTable &strings) {
  std::vector<std::string> result;
  for (const SymbolFrame &frame : range.frames)
    result.push_back(strings.get(frame.function).str());
  return result;
}

/// True if `name` is the one frame of an FDE-bounded range of the module:
/// "<file name of the module>+0x<entry as a file address>".
inline bool isFunctionBoundsName(llvm::StringRef name, const SymbolRange &range,
                                 const StringTable &strings) {
  llvm::StringRef module = strings.get(range.module);
  module = module.substr(module.rfind('/') + 1);
  uint64_t entry = 0;
  return range.frames.size() == 1 && name.consume_front(module) &&
         name.consume_front("+0x") && !name.getAsInteger(16, entry) &&
         range.functionEntry != 0;
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeBytes(const std::string &path, llvm::StringRef bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
}

/// Symbolizes every byte of the original .text (and of [alsoBegin,
/// alsoEnd), e.g. the PLT) against a damaged copy: each answer must be a
/// range containing its address with at least one frame.
inline void expectSaneAnswers(const std::string &path, const ElfFacts &facts,
                              uint64_t alsoBegin = 0, uint64_t alsoEnd = 0) {
  Module module;
  module.path = path;
  module.loadAddress = 0;
  for (const LoadedSegment &load : facts.loads)
    module.segments.push_back(load); // PIE: runtime == file addresses.
  StringTable strings;
  Symbolizer symbolizer({module}, strings);
  auto sweep = [&](uint64_t begin, uint64_t end) {
    for (uint64_t address = begin; address < end; ++address) {
      const SymbolRange &range = symbolizer.lookup(address);
      ASSERT_LE(range.begin, address) << path;
      ASSERT_GT(range.end, address) << path;
      ASSERT_FALSE(range.frames.empty()) << path;
    }
  };
  sweep(facts.textBegin, facts.textEnd);
  sweep(alsoBegin, alsoEnd);
}

/// `original` with `count` random bytes written at random places of
/// [offset, offset + size).
inline std::string scribble(const std::string &original, uint64_t offset,
                            uint64_t size, int count, std::mt19937 &random) {
  std::string bytes = original;
  for (int i = 0; i < count && size > 0; ++i)
    bytes[offset + random() % size] = char(random());
  return bytes;
}

} // namespace magic_trace::symbolizer_test

#endif
