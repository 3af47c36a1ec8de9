//===- RefImage.cpp - Bundle modules -> libipt image ----------------------===//
//
// Reads ELF program headers with llvm::object (32- and 64-bit, little
// endian) and adds the executable PT_LOADs to a pt_image.
//
//===----------------------------------------------------------------------===//
#include "RefImage.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"

using namespace llvm;

namespace ref_decode {

namespace {

/// The GNU build-id of `elf`, lower-case hex; empty when it has none.
template <class ELFT>
Expected<std::string> buildIdOf(const object::ELFFile<ELFT> &elf) {
  auto headers = elf.program_headers();
  if (!headers)
    return headers.takeError();
  for (const auto &phdr : *headers) {
    if (phdr.p_type != ELF::PT_NOTE)
      continue;
    Error err = Error::success();
    for (const auto &note : elf.notes(phdr, err))
      if (note.getType() == ELF::NT_GNU_BUILD_ID && note.getName() == "GNU") {
        consumeError(std::move(err));
        return toHex(note.getDesc(phdr.p_align), /*LowerCase=*/true);
      }
    if (err)
      return std::move(err);
  }
  return std::string();
}

/// Fails when the module names a uuid and the file has a different build-id
/// (a file without one cannot be checked). LLDB may shorten or lengthen the
/// uuid, so a prefix match either way is enough.
template <class ELFT>
Error checkBuildId(const object::ELFFile<ELFT> &elf, const RefModule &module) {
  if (module.uuid.empty())
    return Error::success();
  Expected<std::string> buildId = buildIdOf(elf);
  if (!buildId)
    return buildId.takeError();
  if (buildId->empty() || StringRef(*buildId).starts_with(module.uuid) ||
      StringRef(module.uuid).starts_with(*buildId))
    return Error::success();
  return createStringError("build-id " + *buildId +
                           " differs from the "
                           "module's uuid " +
                           module.uuid);
}

template <class ELFT>
Expected<std::vector<ImageSection>> segmentsOf(const object::ELFFile<ELFT> &elf,
                                               const RefModule &module) {
  if (Error error = checkBuildId(elf, module))
    return std::move(error);
  auto headers = elf.program_headers();
  if (!headers)
    return headers.takeError();
  std::vector<ImageSection> sections;
  std::optional<uint64_t> offsetZeroVaddr;
  for (const auto &phdr : *headers) {
    if (phdr.p_type != ELF::PT_LOAD)
      continue;
    // The first PT_LOAD fixes the link-time address of file offset 0.
    if (!offsetZeroVaddr)
      offsetZeroVaddr = phdr.p_vaddr - phdr.p_offset;
    if (!(phdr.p_flags & ELF::PF_X) || !phdr.p_filesz)
      continue;
    uint64_t address = module.loadAddress + (phdr.p_vaddr - *offsetZeroVaddr);
    sections.push_back({module.path, phdr.p_offset, phdr.p_filesz, address});
  }
  if (!offsetZeroVaddr)
    return createStringError("no PT_LOAD segment");
  return sections;
}

} // namespace

Expected<std::vector<ImageSection>>
executableSections(const RefModule &module) {
  auto binary = object::ObjectFile::createObjectFile(module.path);
  if (!binary)
    return createStringError(module.path + ": " + toString(binary.takeError()));
  object::ObjectFile *file = binary->getBinary();
  Expected<std::vector<ImageSection>> sections =
      createStringError("not a little-endian ELF file");
  if (auto *elf = dyn_cast<object::ELF64LEObjectFile>(file))
    sections = segmentsOf(elf->getELFFile(), module);
  else if (auto *elf = dyn_cast<object::ELF32LEObjectFile>(file))
    sections = segmentsOf(elf->getELFFile(), module);
  if (!sections)
    return createStringError(module.path + ": " +
                             toString(sections.takeError()));
  return sections;
}

/// The sections of every image, kept mapped as ptxed keeps them (its
/// --image-cache): without it libipt maps a file section again at each
/// switch between files (47,000 open/mmap/munmap in a 10 M-instruction
/// CPython trace, most of the decode's time). Lives as long as the tool.
pt_image_section_cache *sectionCache() {
  static pt_image_section_cache *cache = [] {
    pt_image_section_cache *made = pt_iscache_alloc("ref-decode");
    if (made)
      pt_iscache_set_limit(made, uint64_t(1) << 30);
    return made;
  }();
  return cache;
}

Expected<PtImagePtr> buildImage(const std::vector<RefModule> &modules) {
  PtImagePtr image(pt_image_alloc("ref-decode"));
  pt_image_section_cache *cache = sectionCache();
  if (!image || !cache)
    return createStringError("libipt could not allocate an image");
  for (const RefModule &module : modules) {
    auto sections = executableSections(module);
    if (!sections)
      return sections.takeError();
    for (const ImageSection &section : *sections) {
      int status =
          pt_iscache_add_file(cache, section.path.c_str(), section.fileOffset,
                              section.size, section.address);
      if (status >= 0)
        status = pt_image_add_cached(image.get(), cache, status,
                                     /*asid=*/nullptr);
      if (status < 0)
        return createStringError(
            section.path + ": libipt rejected the segment at file offset 0x" +
            utohexstr(section.fileOffset, true) + " mapped at 0x" +
            utohexstr(section.address, true) + ": " +
            pt_errstr(pt_errcode(status)));
    }
  }
  return image;
}

} // namespace ref_decode
