//===- DebugFileLookup.cpp - Separate debug files -------------------------===//
#include "DebugFileLookup.h"
#include "ElfSymbolTable.h"

#include "llvm/Object/BuildID.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <vector>

using namespace llvm;

namespace magic_trace {
namespace {

/// Where Debian (and most distributions) install separate debug files.
constexpr const char *DefaultDebugRoot = "/usr/lib/debug";

/// The global debug-file directories: MT_DEBUG_FILE_DIRS (colon-separated,
/// like GDB's debug-file-directory; set but empty: none, which symbolizes a
/// machine with libc6-dbg installed as one without), else /usr/lib/debug.
std::vector<std::string> debugRoots() {
  const char *value = std::getenv("MT_DEBUG_FILE_DIRS");
  if (!value)
    return {DefaultDebugRoot};
  SmallVector<StringRef, 4> parts;
  StringRef(value).split(parts, ':', -1, /*KeepEmpty=*/false);
  return {parts.begin(), parts.end()};
}

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
  std::vector<std::string> roots = debugRoots();
  std::string id = lowerHex(object::getBuildID(&object));
  if (id.size() > 2)
    for (const std::string &root : roots) {
      std::string candidate = root + "/.build-id/" + id.substr(0, 2) + "/" +
                              id.substr(2) + ".debug";
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
    std::vector<SmallString<256>> candidates(2);
    sys::path::append(candidates[0], folder, link);
    sys::path::append(candidates[1], folder, ".debug", link);
    for (const std::string &root : roots)
      sys::path::append(candidates.emplace_back(), root, folder, link);
    for (const SmallString<256> &candidate : candidates)
      if (candidate != path && hasCrc(candidate.str().str(), crc))
        return candidate.str().str();
    return "";
  }
  return "";
}

} // namespace magic_trace
