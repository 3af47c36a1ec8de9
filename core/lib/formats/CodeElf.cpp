//===- CodeElf.cpp - Code outside files, as an ELF file others load -------===//
#include "CodeElf.h"
#include "magic_trace/PrivateFiles.h"

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace llvm;

namespace magic_trace {
namespace {

/// Appends `value`'s bytes (little-endian, as on x86-64).
template <typename T> void put(std::string &out, const T &value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(value));
}

void padTo(std::string &out, uint64_t offset) {
  if (out.size() < offset)
    out.append(offset - out.size(), '\0');
}

/// A string table: "\0" then each name with its terminator.
struct StringTable {
  std::string bytes = std::string(1, '\0');
  uint32_t add(StringRef name) {
    uint32_t at = bytes.size();
    bytes.append(name.data(), name.size());
    bytes.push_back('\0');
    return at;
  }
};

ELF::Elf64_Shdr section(uint32_t name, uint32_t type, uint64_t flags,
                        uint64_t address, uint64_t offset, uint64_t size) {
  ELF::Elf64_Shdr header;
  std::memset(&header, 0, sizeof(header));
  header.sh_name = name;
  header.sh_type = type;
  header.sh_flags = flags;
  header.sh_addr = address;
  header.sh_offset = offset;
  header.sh_size = size;
  header.sh_addralign = 1;
  return header;
}

} // namespace

std::string codeElf(uint64_t address, ArrayRef<uint8_t> code,
                    ArrayRef<JitSymbol> symbols) {
  uint64_t end = address + code.size();
  std::vector<ELF::Elf64_Sym> functions;
  StringTable sectionNames, symbolNames;
  for (const JitSymbol &symbol : symbols) {
    if (symbol.address < address || symbol.address >= end ||
        symbol.name.empty())
      continue;
    ELF::Elf64_Sym function;
    std::memset(&function, 0, sizeof(function));
    function.st_name = symbolNames.add(symbol.name);
    function.setBindingAndType(ELF::STB_GLOBAL, ELF::STT_FUNC);
    function.st_shndx = 1; // .text
    function.st_value = symbol.address;
    function.st_size = std::min(symbol.size, end - symbol.address);
    functions.push_back(function);
  }
  bool named = !functions.empty();
  uint32_t textName = sectionNames.add(".text");
  uint32_t symtabName = named ? sectionNames.add(".symtab") : 0;
  uint32_t strtabName = named ? sectionNames.add(".strtab") : 0;
  uint32_t shstrtabName = sectionNames.add(".shstrtab");

  // Layout: headers, the code at the page offset of its address (so that
  // the segment's offset and address agree modulo the page size), then the
  // symbol table, the string tables and the section headers.
  uint64_t codeOffset = codeElfFileOffset(address);
  std::string out;
  out.reserve(codeOffset + code.size() + 512);
  padTo(out, sizeof(ELF::Elf64_Ehdr) + sizeof(ELF::Elf64_Phdr));
  padTo(out, codeOffset);
  out.append(reinterpret_cast<const char *>(code.data()), code.size());

  uint64_t symtabOffset = 0;
  if (named) {
    padTo(out, alignTo(out.size(), 8));
    symtabOffset = out.size();
    ELF::Elf64_Sym null;
    std::memset(&null, 0, sizeof(null));
    put(out, null);
    for (const ELF::Elf64_Sym &function : functions)
      put(out, function);
  }
  uint64_t strtabOffset = out.size();
  if (named)
    out += symbolNames.bytes;
  uint64_t shstrtabOffset = out.size();
  out += sectionNames.bytes;

  padTo(out, alignTo(out.size(), 8));
  uint64_t sectionsOffset = out.size();
  std::vector<ELF::Elf64_Shdr> sections;
  sections.push_back(section(0, ELF::SHT_NULL, 0, 0, 0, 0));
  sections.push_back(section(textName, ELF::SHT_PROGBITS,
                             ELF::SHF_ALLOC | ELF::SHF_EXECINSTR, address,
                             codeOffset, code.size()));
  if (named) {
    ELF::Elf64_Shdr symtab =
        section(symtabName, ELF::SHT_SYMTAB, 0, 0, symtabOffset,
                (functions.size() + 1) * sizeof(ELF::Elf64_Sym));
    symtab.sh_link = 3; // .strtab
    symtab.sh_info = 1; // The first global symbol.
    symtab.sh_entsize = sizeof(ELF::Elf64_Sym);
    symtab.sh_addralign = 8;
    sections.push_back(symtab);
    sections.push_back(section(strtabName, ELF::SHT_STRTAB, 0, 0, strtabOffset,
                               symbolNames.bytes.size()));
  }
  sections.push_back(section(shstrtabName, ELF::SHT_STRTAB, 0, 0,
                             shstrtabOffset, sectionNames.bytes.size()));
  for (const ELF::Elf64_Shdr &header : sections)
    put(out, header);

  ELF::Elf64_Ehdr header;
  std::memset(&header, 0, sizeof(header));
  std::memcpy(header.e_ident, ELF::ElfMagic, 4);
  header.e_ident[ELF::EI_CLASS] = ELF::ELFCLASS64;
  header.e_ident[ELF::EI_DATA] = ELF::ELFDATA2LSB;
  header.e_ident[ELF::EI_VERSION] = ELF::EV_CURRENT;
  header.e_ident[ELF::EI_OSABI] = ELF::ELFOSABI_NONE;
  header.e_type = ELF::ET_EXEC;
  header.e_machine = ELF::EM_X86_64;
  header.e_version = ELF::EV_CURRENT;
  header.e_entry = address;
  header.e_phoff = sizeof(ELF::Elf64_Ehdr);
  header.e_shoff = sectionsOffset;
  header.e_ehsize = sizeof(ELF::Elf64_Ehdr);
  header.e_phentsize = sizeof(ELF::Elf64_Phdr);
  header.e_phnum = 1;
  header.e_shentsize = sizeof(ELF::Elf64_Shdr);
  header.e_shnum = sections.size();
  header.e_shstrndx = sections.size() - 1;
  ELF::Elf64_Phdr load;
  std::memset(&load, 0, sizeof(load));
  load.p_type = ELF::PT_LOAD;
  load.p_flags = ELF::PF_R | ELF::PF_X;
  load.p_offset = codeOffset;
  load.p_vaddr = address;
  load.p_paddr = address;
  load.p_filesz = code.size();
  load.p_memsz = code.size();
  load.p_align = 0x1000;
  std::memcpy(out.data(), &header, sizeof(header));
  std::memcpy(out.data() + sizeof(header), &load, sizeof(load));
  return out;
}

Error writeCodeElf(StringRef path, uint64_t address, ArrayRef<uint8_t> code,
                   ArrayRef<JitSymbol> symbols) {
  return writeOutputFile(path, codeElf(address, code, symbols));
}

} // namespace magic_trace
