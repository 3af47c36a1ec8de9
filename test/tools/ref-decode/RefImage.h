//===- RefImage.h - Bundle modules -> libipt image -------------*- C++ -*-===//
//
// Maps each module's executable PT_LOAD segments into a libipt image with
// pt_image_add_file, independently of the core library's Image.cpp but with
// the same address rule: a module's loadAddress is where its first PT_LOAD's
// file offset 0 lands, so every segment goes to
//   loadAddress + p_vaddr - (first.p_vaddr - first.p_offset).
// (For the usual first PT_LOAD at file offset 0 this is also LLDB's rule:
// loadAddress is the runtime address of the first PT_LOAD.)
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_REF_DECODE_REFIMAGE_H
#define MAGIC_TRACE_REF_DECODE_REFIMAGE_H

#include "RefBundle.h"

#include <intel-pt.h>

#include <memory>

namespace ref_decode {

struct PtImageDeleter {
  void operator()(pt_image *image) const { pt_image_free(image); }
};
using PtImagePtr = std::unique_ptr<pt_image, PtImageDeleter>;

/// One file-backed range of the image.
struct ImageSection {
  std::string path;
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t address = 0;
};

/// The executable PT_LOAD segments of the ELF file `module.path`, placed by
/// the rule above. Fails when the file is missing, is not a little-endian
/// ELF, or has a build-id other than the module's uuid.
llvm::Expected<std::vector<ImageSection>>
executableSections(const RefModule &module);

/// A libipt image holding every executable segment of `modules`. A module
/// that cannot be read or mapped is an error: the oracle must not silently
/// decode against a partial image.
llvm::Expected<PtImagePtr> buildImage(const std::vector<RefModule> &modules);

} // namespace ref_decode

#endif
