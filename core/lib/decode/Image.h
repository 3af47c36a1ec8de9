//===- Image.h - Module list -> libipt image --------------------*- C++ -*-===//
//
// Internal to core/lib/decode/. Builds a libipt image from a module list (or
// from sections already placed) through a process-wide
// pt_image_section_cache (so a file section is mapped once however many
// snapshots, images or decode threads use it), and hands each decode thread
// its own copy (pt_image keeps an LRU list and is not thread-safe; the
// section cache is). ImageTimeline.h keeps one image per set of files a
// code history has in force.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PT_IMAGE_H
#define MAGIC_TRACE_PT_IMAGE_H

#include "magic_trace/Decoder.h"

#include <intel-pt.h>

#include <memory>

namespace magic_trace {

struct PtImageDeleter {
  void operator()(pt_image *image) const { pt_image_free(image); }
};
using PtImageHandle = std::unique_ptr<pt_image, PtImageDeleter>;

/// A file section in the shared section cache, at its runtime address.
struct CachedSection {
  uint64_t begin = 0;
  uint64_t end = 0;
  int isid = 0;
};

/// Adds `module`'s executable segments to the shared section cache. What
/// went wrong (missing file, build-id mismatch, unreadable ELF, a section
/// libipt rejects) is in `status.problem`; the sections that were added are
/// returned (and counted in `status.sections`).
std::vector<CachedSection> cacheModuleSections(const Module &module,
                                               ModuleImageStatus &status);

class PtImage {
public:
  /// Adds every executable segment of every module. Problems (missing file,
  /// build-id mismatch, unreadable ELF) go to `report`, one entry per module;
  /// fails only when libipt cannot allocate.
  static llvm::Expected<std::unique_ptr<PtImage>>
  build(const std::vector<Module> &modules, ReadMemoryFn readMemory,
        std::vector<ModuleImageStatus> &report);

  /// An image of sections already in the shared cache. Errors: libipt
  /// cannot allocate.
  static llvm::Expected<std::unique_ptr<PtImage>>
  fromSections(const std::vector<CachedSection> &sections,
               ReadMemoryFn readMemory);

  /// A private copy for one decoder. Memory no section covers is read
  /// through `reader` (which must outlive the copy), else through the
  /// image's own callback.
  llvm::Expected<PtImageHandle>
  copy(const ReadMemoryFn *reader = nullptr) const;

  /// Reads up to `size` bytes at `address`: from section `isid` when it is
  /// non-zero, else from the section there, else through `reader` (the
  /// image's own callback when null). Returns the bytes read.
  size_t read(uint64_t address, int isid, uint8_t *buffer, size_t size,
              const ReadMemoryFn *reader = nullptr) const;

private:
  PtImage() = default;
  /// Adds one cached section to the image; fails with libipt's status.
  int add(const CachedSection &section);
  PtImageHandle image;
  ReadMemoryFn readMemory;
  /// Where each file section went, sorted by address, to read without a
  /// section id (libipt's image has no public read).
  std::vector<CachedSection> mapped;
};

} // namespace magic_trace

#endif
