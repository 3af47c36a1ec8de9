//===- ModuleLookup.cpp - Find a recorded module's file here --------------===//
#include "magic_trace/PerfData.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <unistd.h>

using namespace llvm;

namespace magic_trace {
namespace {

std::optional<std::string> buildIdCacheFile(StringRef buildId) {
  std::optional<std::string> home = sys::Process::GetEnv("HOME");
  if (buildId.size() <= 2 || !home)
    return std::nullopt;
  for (const char *name : {"elf", "vdso"}) {
    SmallString<256> cached(*home);
    sys::path::append(cached, ".debug", ".build-id", buildId.take_front(2));
    sys::path::append(cached, buildId.drop_front(2), name);
    if (sys::fs::exists(cached))
      return cached.str().str();
  }
  return std::nullopt;
}

/// [start, end) of this process's vdso, from /proc/self/maps.
std::optional<std::pair<uint64_t, uint64_t>> ownVdsoRange() {
  auto maps = MemoryBuffer::getFileAsStream("/proc/self/maps");
  if (!maps)
    return std::nullopt;
  SmallVector<StringRef, 64> lines;
  (*maps)->getBuffer().split(lines, '\n');
  for (StringRef line : lines) {
    if (!line.ends_with("[vdso]"))
      continue;
    auto [start, rest] = line.split('-');
    StringRef end = rest.take_until([](char c) { return c == ' '; });
    uint64_t first = 0, last = 0;
    if (start.getAsInteger(16, first) || end.getAsInteger(16, last) ||
        last <= first || last - first > (1 << 20))
      return std::nullopt;
    return std::make_pair(first, last);
  }
  return std::nullopt;
}

/// This process's vdso copied to the user's cache directory
/// (~/.cache/magic-trace/vdso-<build-id>.so) when its build-id is
/// `buildId`: the kernel that recorded is this one. A copy there is trusted
/// only when it is this user's and nobody else can write it; a fixed name in
/// a shared directory could be anyone's file or link.
std::optional<std::string> ownVdsoCopy(StringRef buildId) {
  std::optional<std::pair<uint64_t, uint64_t>> range = ownVdsoRange();
  if (!range || buildId.empty())
    return std::nullopt;
  StringRef image(reinterpret_cast<const char *>(range->first),
                  range->second - range->first);
  auto buffer = MemoryBuffer::getMemBuffer(image, "[vdso]", false);
  auto binary = object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!binary) {
    consumeError(binary.takeError());
    return std::nullopt;
  }
  if (buildIdOf(**binary) != buildId)
    return std::nullopt;
  Expected<std::string> cache = userCacheDir();
  if (!cache) {
    consumeError(cache.takeError());
    return std::nullopt;
  }
  SmallString<256> path(*cache);
  sys::path::append(path, "vdso-" + buildId + ".so");
  if (Error notOurs = checkPrivate(path, /*directory=*/false))
    consumeError(std::move(notOurs));
  else if (readBuildId(path) == buildId)
    return path.str().str();
  // Written under a unique name and renamed, so a reader never sees half.
  SmallString<256> temp;
  int fd = -1;
  if (sys::fs::createUniqueFile(path + "-%%%%%%", fd, temp))
    return std::nullopt;
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << image;
    if (os.has_error()) {
      os.clear_error();
      sys::fs::remove(temp);
      return std::nullopt;
    }
  }
  if (sys::fs::rename(temp, path)) {
    sys::fs::remove(temp);
    return std::nullopt;
  }
  return path.str().str();
}

} // namespace

std::string lookUpModuleFile(StringRef path, StringRef buildId,
                             StringRef symfs) {
  if (!symfs.empty() && !path.starts_with("[")) {
    SmallString<256> under(symfs);
    sys::path::append(under, path);
    if (sys::fs::exists(under) &&
        (buildId.empty() || readBuildId(under) == buildId))
      return std::string(under);
  }
  bool exists = !path.starts_with("[") && sys::fs::exists(path);
  if (exists && (buildId.empty() || readBuildId(path) == buildId))
    return path.str();
  if (std::optional<std::string> cached = buildIdCacheFile(buildId))
    return *cached;
  if (path == "[vdso]")
    if (std::optional<std::string> copy = ownVdsoCopy(buildId))
      return *copy;
  return exists ? path.str() : "";
}

} // namespace magic_trace
