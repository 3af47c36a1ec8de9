//===- DebugFileLookup.cpp - Separate debug files -------------------------===//
#include "DebugFileLookup.h"
#include "ElfSymbolTable.h"

#include "llvm/Object/BuildID.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace magic_trace {
namespace {

/// Where Debian (and most distributions) install separate debug files.
constexpr const char *DebugRoot = "/usr/lib/debug";

/// True if `path` holds a file whose CRC-32 is `crc` (.gnu_debuglink's check).
bool hasCrc(const std::string &path, uint32_t crc) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return false;
  return llvm::crc32(arrayRefFromStringRef((*buffer)->getBuffer())) == crc;
}

} // namespace

std::string findDebugFile(const object::ObjectFile &object, StringRef path) {
  std::string id = lowerHex(object::getBuildID(&object));
  if (id.size() > 2) {
    std::string candidate = std::string(DebugRoot) + "/.build-id/" +
                            id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    if (sys::fs::exists(candidate))
      return candidate;
  }
  for (const object::SectionRef &section : object.sections()) {
    Expected<StringRef> name = section.getName();
    if (!name) {
      consumeError(name.takeError());
      continue;
    }
    if (*name != ".gnu_debuglink")
      continue;
    Expected<StringRef> contents = section.getContents();
    if (!contents) {
      consumeError(contents.takeError());
      return "";
    }
    // A NUL-terminated file name, padded to 4 bytes, then its CRC-32.
    StringRef link = contents->take_until([](char c) { return c == '\0'; });
    uint64_t crcOffset = alignTo(link.size() + 1, 4);
    if (link.empty() || crcOffset + 4 > contents->size())
      return "";
    uint32_t crc = support::endian::read32(contents->data() + crcOffset,
                                           object.isLittleEndian()
                                               ? llvm::endianness::little
                                               : llvm::endianness::big);
    SmallString<256> folder = path;
    sys::fs::make_absolute(folder);
    sys::path::remove_filename(folder);
    SmallString<256> candidates[3];
    sys::path::append(candidates[0], folder, link);
    sys::path::append(candidates[1], folder, ".debug", link);
    sys::path::append(candidates[2], DebugRoot, folder, link);
    for (const SmallString<256> &candidate : candidates)
      if (candidate != path && hasCrc(candidate.str().str(), crc))
        return candidate.str().str();
    return "";
  }
  return "";
}

} // namespace magic_trace
