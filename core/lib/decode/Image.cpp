//===- Image.cpp - Module list -> libipt image ----------------------------===//
#include "Image.h"
#include "LibiptError.h"

#include "magic_trace/InputFiles.h"
#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"

#include <mutex>

using namespace llvm;

namespace magic_trace {

namespace {

struct IscacheDeleter {
  void operator()(pt_image_section_cache *cache) const {
    pt_iscache_free(cache);
  }
};

/// One section cache for the whole process: files mapped for one snapshot
/// stay cached for the next, and decode threads share it (it locks).
pt_image_section_cache *sharedSectionCache() {
  static std::unique_ptr<pt_image_section_cache, IscacheDeleter> cache(
      pt_iscache_alloc("magic-trace"));
  return cache.get();
}

/// A file-backed piece of a module: [fileOffset, +size) mapped at address.
struct FileSection {
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t address = 0;
};

/// Executable PT_LOAD segments placed at `loadAddress` (the runtime address
/// of file offset 0, as Module::loadAddress defines it).
template <class ELFT>
std::vector<FileSection> executableSegments(const object::ELFFile<ELFT> &elf,
                                            uint64_t loadAddress) {
  std::vector<FileSection> sections;
  auto headers = elf.program_headers();
  if (!headers) {
    consumeError(headers.takeError());
    return sections;
  }
  // The segment holding file offset 0 fixes the bias; p_vaddr - p_offset is
  // the link-time address of file offset 0 for every PT_LOAD.
  bool haveBias = false;
  uint64_t bias = 0;
  for (const auto &phdr : *headers) {
    if (phdr.p_type != ELF::PT_LOAD)
      continue;
    if (!haveBias) {
      bias = loadAddress - (phdr.p_vaddr - phdr.p_offset);
      haveBias = true;
    }
    if (!(phdr.p_flags & ELF::PF_X) || !phdr.p_filesz)
      continue;
    sections.push_back({phdr.p_offset, phdr.p_filesz, phdr.p_vaddr + bias});
  }
  return sections;
}

struct ElfFacts {
  std::string buildId;
  std::vector<FileSection> segments;
};

Expected<ElfFacts> readElfFacts(StringRef path, uint64_t loadAddress) {
  if (Error notAFile = checkRegularFile(path))
    return std::move(notAFile);
  auto binary = object::ObjectFile::createObjectFile(path);
  if (!binary)
    return binary.takeError();
  object::ObjectFile *file = binary->getBinary();
  ElfFacts facts;
  if (auto *elf = dyn_cast<object::ELF64LEObjectFile>(file)) {
    facts.buildId = buildIdOf(*elf);
    facts.segments = executableSegments(elf->getELFFile(), loadAddress);
    return facts;
  }
  return createStringError("not an x86-64 ELF file");
}

} // namespace

std::vector<CachedSection> cacheModuleSections(const Module &module,
                                               ModuleImageStatus &status) {
  std::vector<CachedSection> cached;
  status.path = module.path;
  const std::string &file = module.fileToRead();
  auto facts = readElfFacts(file, module.loadAddress);
  if (!facts) {
    status.problem = file + ": " + toString(facts.takeError()) +
                     " (its code is decoded only through the memory "
                     "callback)";
    return cached;
  }
  if (!module.buildId.empty() && !facts->buildId.empty() &&
      !StringRef(module.buildId).starts_with_insensitive(facts->buildId) &&
      !StringRef(facts->buildId).starts_with_insensitive(module.buildId)) {
    status.problem = file + ": build-id " + facts->buildId +
                     " differs from the module's " + module.buildId +
                     " (point the module at the matching file)";
    return cached;
  }
  std::vector<FileSection> sections;
  if (module.segments.empty()) {
    sections = facts->segments;
  } else {
    for (const LoadedSegment &segment : module.segments)
      if (segment.executable)
        sections.push_back({segment.fileOffset, segment.size, segment.address});
  }
  pt_image_section_cache *cache = sharedSectionCache();
  for (const FileSection &section : sections) {
    int isid =
        cache ? pt_iscache_add_file(cache, file.c_str(), section.fileOffset,
                                    section.size, section.address)
              : -pte_nomem;
    if (isid < 0) {
      status.problem = file + ": libipt rejected a section at 0x" +
                       utohexstr(section.address) + " (" +
                       libiptStatusText(isid) +
                       "; its code is decoded only through the memory "
                       "callback)";
      continue;
    }
    ++status.sections;
    cached.push_back(
        {section.address, section.address + section.size, int(isid)});
  }
  return cached;
}

int PtImage::add(const CachedSection &section) {
  int added = pt_image_add_cached(image.get(), sharedSectionCache(),
                                  section.isid, nullptr);
  if (added >= 0)
    mapped.push_back(section);
  return added;
}

Expected<std::unique_ptr<PtImage>>
PtImage::build(const std::vector<Module> &modules, ReadMemoryFn readMemory,
               std::vector<ModuleImageStatus> &report) {
  std::unique_ptr<PtImage> result(new PtImage());
  result->image.reset(pt_image_alloc("snapshot"));
  if (!result->image || !sharedSectionCache())
    return decode_detail::allocationFailed("an image");
  result->readMemory = std::move(readMemory);

  for (const Module &module : modules) {
    ModuleImageStatus status;
    for (const CachedSection &section : cacheModuleSections(module, status))
      if (int added = result->add(section); added < 0) {
        // The section id is no status: the call that failed was adding it.
        status.problem =
            module.fileToRead() + ": libipt rejected a section at 0x" +
            utohexstr(section.begin) + " (" + libiptStatusText(added) +
            "; its code is decoded only through the memory "
            "callback)";
        --status.sections;
      }
    report.push_back(std::move(status));
  }
  llvm::sort(result->mapped,
             [](const CachedSection &a, const CachedSection &b) {
               return a.begin < b.begin;
             });
  return std::move(result);
}

Expected<std::unique_ptr<PtImage>>
PtImage::fromSections(const std::vector<CachedSection> &sections,
                      ReadMemoryFn readMemory) {
  std::unique_ptr<PtImage> result(new PtImage());
  result->image.reset(pt_image_alloc("snapshot"));
  if (!result->image || !sharedSectionCache())
    return decode_detail::allocationFailed("an image");
  result->readMemory = std::move(readMemory);
  for (const CachedSection &section : sections)
    if (int added = result->add(section); added < 0)
      return decode_detail::libiptBug(added,
                                      "libipt rejected a cached section");
  llvm::sort(result->mapped,
             [](const CachedSection &a, const CachedSection &b) {
               return a.begin < b.begin;
             });
  return std::move(result);
}

static int readMemoryCallback(uint8_t *buffer, size_t size,
                              const pt_asid * /*asid*/, uint64_t ip,
                              void *context) {
  auto *read = static_cast<const ReadMemoryFn *>(context);
  size_t got = (*read)(ip, buffer, size);
  if (!got)
    return -pte_nomap;
  return static_cast<int>(got);
}

Expected<PtImageHandle> PtImage::copy(const ReadMemoryFn *reader) const {
  PtImageHandle copy(pt_image_alloc("decode-thread"));
  if (!copy)
    return decode_detail::allocationFailed("an image");
  if (int status = pt_image_copy(copy.get(), image.get()); status < 0)
    return decode_detail::libiptBug(status, "libipt could not copy the image");
  if (!reader && readMemory)
    reader = &readMemory;
  if (reader && *reader)
    pt_image_set_callback(copy.get(), readMemoryCallback,
                          const_cast<ReadMemoryFn *>(reader));
  return std::move(copy);
}

size_t PtImage::read(uint64_t address, int isid, uint8_t *buffer, size_t size,
                     const ReadMemoryFn *reader) const {
  if (isid <= 0) {
    auto next = llvm::upper_bound(
        mapped, address,
        [](uint64_t value, const CachedSection &s) { return value < s.begin; });
    if (next != mapped.begin() && address < std::prev(next)->end)
      isid = std::prev(next)->isid;
  }
  if (isid > 0) {
    int got =
        pt_iscache_read(sharedSectionCache(), buffer, size, isid, address);
    if (got > 0)
      return static_cast<size_t>(got);
  }
  if (!reader)
    reader = &readMemory;
  if (*reader)
    return (*reader)(address, buffer, size);
  return 0;
}

} // namespace magic_trace
