//===- Image.h - Module list -> libipt image --------------------*- C++ -*-===//
//
// Internal to core/lib/decode/. Builds one libipt image from a Snapshot's
// module list through a process-wide pt_image_section_cache (so a file section
// is mapped once however many snapshots or decode threads use it), and hands
// each decode thread its own copy (pt_image keeps an LRU list and is not
// thread-safe; the section cache is).
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

class PtImage {
public:
  /// Adds every executable segment of every module. Problems (missing file,
  /// build-id mismatch, unreadable ELF) go to `report`, one entry per module;
  /// fails only when libipt cannot allocate.
  static llvm::Expected<std::unique_ptr<PtImage>>
  build(const std::vector<Module> &modules, ReadMemoryFn readMemory,
        std::vector<ModuleImageStatus> &report);

  /// A private copy for one decoder, with the read-memory callback.
  llvm::Expected<PtImageHandle> copy() const;

  /// Reads up to `size` bytes at `address`: from section `isid` when it is
  /// non-zero, else through the callback. Returns the bytes read.
  size_t read(uint64_t address, int isid, uint8_t *buffer, size_t size) const;

private:
  PtImage() = default;
  /// Where each file section went, sorted by address, to read without a
  /// section id (libipt's image has no public read).
  struct MappedSection {
    uint64_t begin = 0;
    uint64_t end = 0;
    int isid = 0;
  };
  PtImageHandle image;
  ReadMemoryFn readMemory;
  std::vector<MappedSection> mapped;
};

} // namespace magic_trace

#endif
