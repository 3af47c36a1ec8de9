//===- ProcessModules.cpp - Modules of a live process from /proc ----------===//
#include "magic_trace/ProcessModules.h"
#include "magic_trace/InputFiles.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/Magic.h"
#include "llvm/Object/BuildID.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <optional>

using namespace llvm;
using namespace llvm::object;

namespace magic_trace {

std::vector<MapsEntry> parseProcMaps(StringRef text) {
  std::vector<MapsEntry> entries;
  SmallVector<StringRef, 0> lines;
  text.split(lines, '\n', -1, false);
  for (StringRef line : lines) {
    // "start-end perms offset dev inode   path"
    StringRef range, perms, offset, dev, inode;
    std::tie(range, line) = line.split(' ');
    std::tie(perms, line) = line.split(' ');
    std::tie(offset, line) = line.split(' ');
    std::tie(dev, line) = line.split(' ');
    std::tie(inode, line) = line.split(' ');
    MapsEntry entry;
    auto [startText, endText] = range.split('-');
    if (startText.getAsInteger(16, entry.start) ||
        endText.getAsInteger(16, entry.end) ||
        offset.getAsInteger(16, entry.fileOffset) || perms.size() < 4)
      continue;
    entry.executable = perms[2] == 'x';
    entry.path = line.trim().str();
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::vector<Module>
modulesFromMaps(const std::vector<MapsEntry> &maps,
                const std::map<std::string, std::string> &buildIds) {
  std::vector<Module> modules;
  std::map<std::string, size_t> indexByPath;
  for (const MapsEntry &entry : maps) {
    // Only real files: "[vdso]", "[heap]" and deleted files are not modules
    // a decoder can read.
    if (!StringRef(entry.path).starts_with("/") ||
        StringRef(entry.path).ends_with(" (deleted)"))
      continue;
    auto [it, inserted] = indexByPath.try_emplace(entry.path, modules.size());
    if (inserted) {
      Module module;
      module.path = entry.path;
      module.loadAddress = entry.start;
      modules.push_back(std::move(module));
    }
    Module &module = modules[it->second];
    LoadedSegment segment;
    segment.address = entry.start;
    segment.size = entry.end - entry.start;
    segment.fileOffset = entry.fileOffset;
    segment.executable = entry.executable;
    module.segments.push_back(segment);
  }
  for (Module &module : modules) {
    // LLDB's bundle wants the address where file offset 0 is mapped.
    for (const LoadedSegment &segment : module.segments)
      if (segment.fileOffset == 0) {
        module.loadAddress = segment.address;
        break;
      }
    auto known = buildIds.find(module.path);
    module.buildId =
        known != buildIds.end() ? known->second : readBuildId(module.path);
  }
  return modules;
}

Expected<std::vector<MapsEntry>> readProcMaps(int pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/maps";
  // /proc files report size 0: read them as a stream.
  auto buffer = MemoryBuffer::getFileAsStream(path);
  if (!buffer)
    return createStringError(buffer.getError(),
                             "cannot read %s: %s (is the process alive?)",
                             path.c_str(), buffer.getError().message().c_str());
  return parseProcMaps((*buffer)->getBuffer());
}

static Expected<OwningBinary<ObjectFile>> openElf(StringRef path) {
  if (Error notAFile = checkRegularFile(path))
    return std::move(notAFile);
  file_magic magic;
  if (std::error_code ec = identify_magic(path, magic))
    return createStringError(ec, "cannot read '%s': %s (check the path)",
                             path.str().c_str(), ec.message().c_str());
  if (magic != file_magic::elf && magic != file_magic::elf_executable &&
      magic != file_magic::elf_shared_object &&
      magic != file_magic::elf_relocatable && magic != file_magic::elf_core)
    return createStringError(inconvertibleErrorCode(),
                             "'%s' is not an ELF program (give a compiled "
                             "program; for a script, trace its interpreter)",
                             path.str().c_str());
  auto binary = ObjectFile::createObjectFile(path);
  if (!binary)
    return createStringError(
        inconvertibleErrorCode(), "cannot read '%s': %s (check the path)",
        path.str().c_str(), toString(binary.takeError()).c_str());
  if (!isa<ELFObjectFileBase>(binary->getBinary()))
    return createStringError(inconvertibleErrorCode(),
                             "'%s' is not an ELF file (give a Linux program)",
                             path.str().c_str());
  return std::move(*binary);
}

std::string buildIdOf(const ObjectFile &object) {
  return toHex(getBuildID(&object), /*LowerCase=*/true);
}

std::string readBuildId(StringRef path) {
  if (Error notAFile = checkRegularFile(path)) {
    consumeError(std::move(notAFile));
    return "";
  }
  auto binary = ObjectFile::createObjectFile(path);
  if (!binary) {
    consumeError(binary.takeError());
    return "";
  }
  return buildIdOf(*binary->getBinary());
}

Error checkX86_64Elf(StringRef path) {
  auto binary = openElf(path);
  if (!binary)
    return binary.takeError();
  const ObjectFile &object = *binary->getBinary();
  if (object.getArch() != Triple::x86_64)
    return createStringError(
        inconvertibleErrorCode(),
        "'%s' is built for %s; the emulator traces x86-64 programs only "
        "(build it for x86-64)",
        path.str().c_str(),
        Triple::getArchTypeName(object.getArch()).str().c_str());
  return Error::success();
}

Expected<uint64_t> findElfSymbol(StringRef path, StringRef name) {
  auto binary = openElf(path);
  if (!binary)
    return binary.takeError();
  auto *elf = cast<ELFObjectFileBase>(binary->getBinary());
  auto search = [&](auto symbols) -> std::optional<uint64_t> {
    for (const SymbolRef &symbol : symbols) {
      Expected<StringRef> symbolName = symbol.getName();
      if (!symbolName) {
        consumeError(symbolName.takeError());
        continue;
      }
      if (*symbolName != name)
        continue;
      Expected<uint64_t> address = symbol.getAddress();
      if (!address) {
        consumeError(address.takeError());
        continue;
      }
      if (*address != 0)
        return *address;
    }
    return std::nullopt;
  };
  if (auto address = search(elf->symbols()))
    return *address;
  if (auto address = search(elf->getDynamicSymbolIterators()))
    return *address;
  return createStringError(inconvertibleErrorCode(),
                           "symbol '%s' not found in '%s' (give a function "
                           "name from its symbol table or a hex address)",
                           name.str().c_str(), path.str().c_str());
}

Expected<ElfLoadInfo> readElfLoadInfo(StringRef path) {
  auto binary = openElf(path);
  if (!binary)
    return binary.takeError();
  auto *elf = dyn_cast<ELF64LEObjectFile>(binary->getBinary());
  if (!elf)
    return createStringError(inconvertibleErrorCode(),
                             "'%s' is not a 64-bit little-endian ELF file "
                             "(build it for x86-64)",
                             path.str().c_str());
  const auto &file = elf->getELFFile();
  auto phdrs = file.program_headers();
  if (!phdrs)
    return phdrs.takeError();
  ElfLoadInfo info;
  info.positionIndependent = file.getHeader().e_type == ELF::ET_DYN;
  info.entry = file.getHeader().e_entry;
  bool found = false;
  for (const auto &phdr : *phdrs) {
    if (phdr.p_type != ELF::PT_LOAD)
      continue;
    uint64_t vaddr = phdr.p_vaddr & ~uint64_t(0xfff);
    if (!found || vaddr < info.firstLoadVaddr)
      info.firstLoadVaddr = vaddr;
    found = true;
  }
  if (!found)
    return createStringError(inconvertibleErrorCode(),
                             "'%s' has no loadable segment (give a program)",
                             path.str().c_str());
  return info;
}

/// The load bias that puts PT_LOAD `header` inside `mapped` if the mapping
/// shows part of its file pages: the kernel merges neighbouring mappings
/// of one file only where file and address advance together, so a whole
/// mapping has one `address - fileOffset`. A bias is page-aligned.
template <class Phdr>
static std::optional<uint64_t> biasIfMapped(const Phdr &header,
                                            const LoadedSegment &mapped) {
  uint64_t pageVaddr = header.p_vaddr & ~uint64_t(4095);
  uint64_t pageOffset = header.p_offset & ~uint64_t(4095);
  uint64_t fileEnd = header.p_offset + std::max<uint64_t>(header.p_filesz, 1);
  if (fileEnd <= mapped.fileOffset ||
      mapped.fileOffset + mapped.size <= pageOffset)
    return std::nullopt;
  uint64_t bias =
      (mapped.address - mapped.fileOffset) - (pageVaddr - pageOffset);
  if (bias & 4095)
    return std::nullopt;
  return bias;
}

/// PlacedElf of `headers` (an ELF's program headers) at load bias `bias`:
/// every PT_LOAD page-aligned, as the loader maps it. The one placement both
/// ways to find a bias share.
template <class Headers>
static PlacedElf placeHeaders(const Headers &headers, uint64_t bias) {
  PlacedElf placed;
  placed.bias = bias;
  bool first = true;
  for (const auto &header : headers) {
    if (header.p_type != ELF::PT_LOAD)
      continue;
    if (first)
      placed.loadAddress = bias + header.p_vaddr - header.p_offset;
    first = false;
    if (header.p_memsz == 0)
      continue;
    LoadedSegment segment;
    uint64_t pageOffset = header.p_vaddr & 4095;
    segment.address = bias + header.p_vaddr - pageOffset;
    segment.fileOffset = header.p_offset - pageOffset;
    segment.size = header.p_memsz + pageOffset;
    segment.executable = (header.p_flags & ELF::PF_X) != 0;
    placed.segments.push_back(segment);
  }
  return placed;
}

/// Opens ELF `path` and places it at the bias `chooseBias` finds in its
/// program headers (nullopt: no bias, an error saying why).
template <class ChooseBias>
static Expected<PlacedElf> placeElf(StringRef path, ChooseBias chooseBias) {
  auto binary = openElf(path);
  if (!binary)
    return binary.takeError();
  auto *elf = dyn_cast<ELF64LEObjectFile>(binary->getBinary());
  if (!elf)
    return createStringError("'%s' is not a 64-bit little-endian ELF file",
                             path.str().c_str());
  auto headers = elf->getELFFile().program_headers();
  if (!headers)
    return headers.takeError();
  Expected<uint64_t> bias = chooseBias(*headers);
  if (!bias)
    return bias.takeError();
  return placeHeaders(*headers, *bias);
}

Expected<PlacedElf>
placeElfByMappings(StringRef path, const std::vector<LoadedSegment> &mappings) {
  return placeElf(path, [&](const auto &headers) -> Expected<uint64_t> {
    for (const LoadedSegment &mapped : mappings)
      for (const auto &header : headers) {
        if (header.p_type != ELF::PT_LOAD || !(header.p_flags & ELF::PF_X) ||
            header.p_memsz == 0)
          continue;
        std::optional<uint64_t> candidate = biasIfMapped(header, mapped);
        if (!candidate)
          continue;
        uint64_t begin = *candidate + (header.p_vaddr & ~uint64_t(4095));
        uint64_t end = *candidate + header.p_vaddr + header.p_memsz;
        if (begin < mapped.address + mapped.size && mapped.address < end)
          return *candidate;
      }
    return createStringError("no mapping of '%s' shows one of its executable "
                             "segments (is it the file that was mapped?)",
                             path.str().c_str());
  });
}

Expected<PlacedElf> placeElfAtBias(StringRef path, uint64_t bias) {
  return placeElf(path,
                  [&](const auto &) -> Expected<uint64_t> { return bias; });
}

} // namespace magic_trace
