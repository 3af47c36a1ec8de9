//===- PrivateFiles.cpp - files and directories only their user can touch -===//

#include "magic_trace/PrivateFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;

namespace magic_trace {

namespace {

/// Field 22 of /proc/PID/stat (starttime, in clock ticks since boot), or
/// empty when the process is gone. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last ')'.
std::string processStartTime(int pid) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> stat =
      MemoryBuffer::getFileAsStream(formatv("/proc/{0}/stat", pid).str());
  if (!stat)
    return "";
  StringRef text = (*stat)->getBuffer();
  size_t close = text.rfind(')');
  if (close == StringRef::npos)
    return "";
  SmallVector<StringRef, 32> fields;
  text.substr(close + 1).split(fields, ' ', -1, /*KeepEmpty=*/false);
  // fields[0] is field 3 (state), so field 22 is fields[19].
  return fields.size() > 19 ? fields[19].trim().str() : "";
}

Error errnoError(const Twine &what) {
  return createStringError(std::error_code(errno, std::generic_category()),
                           what + ": " + std::strerror(errno));
}

} // namespace

/// Why DIR is no place for our temporary directories, or "": another user
/// (not root) owns it, or others can write it without the sticky bit, and
/// so could rename what we make there and put their own in its place.
std::string unsafeTempParent(StringRef dir) {
  struct stat info;
  if (stat(dir.str().c_str(), &info) != 0)
    return std::strerror(errno);
  if (!S_ISDIR(info.st_mode))
    return "it is not a directory";
  if (info.st_uid != geteuid() && info.st_uid != 0)
    return formatv("it belongs to user {0}", info.st_uid).str();
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) && !(info.st_mode & S_ISVTX))
    return formatv("others can write it and it has no sticky bit (mode {0})",
                   format("%o", unsigned(info.st_mode & 07777)))
        .str();
  return "";
}

namespace {

struct TempRootChoice {
  std::string root;
  std::string note;
};

TempRootChoice chooseTempRoot() {
  SmallString<128> wanted;
  sys::path::system_temp_directory(/*ErasedOnReboot=*/true, wanted);
  std::string problem = unsafeTempParent(wanted);
  if (problem.empty())
    return {wanted.str().str(), ""};
  // /tmp when it is safe, else a directory of the user's own.
  std::string fallback = "/tmp";
  if (!unsafeTempParent(fallback).empty()) {
    Expected<std::string> cache = userCacheDir();
    if (!cache) {
      consumeError(cache.takeError());
      return {wanted.str().str(), ""};
    }
    fallback = *cache + "/tmp";
    if (sys::fs::create_directory(fallback, /*IgnoreExisting=*/true,
                                  sys::fs::owner_all))
      return {wanted.str().str(), ""};
  }
  return {fallback,
          formatv("the temporary directory {0} is not used: {1}; using {2} "
                  "(set TMPDIR to a directory of your own)",
                  wanted, problem, fallback)
              .str()};
}

} // namespace

std::string tempRoot() { return chooseTempRoot().root; }

std::string tempRootNote() { return chooseTempRoot().note; }

Error claimTempDir(StringRef dir, int pid) {
  if (pid == 0)
    pid = getpid();
  std::string owner = (dir + "/" + kOwnerFileName).str();
  // O_EXCL and O_NOFOLLOW: the file is new, and not someone's link.
  int fd = ::open(owner.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return errnoError("cannot create " + owner);
  std::string text = formatv("{0} {1}\n", pid, processStartTime(pid)).str();
  bool written = ::write(fd, text.data(), text.size()) ==
                 static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written)
    return errnoError("cannot write " + owner);
  return Error::success();
}

Expected<std::string> makePrivateTempDir(StringRef prefix, StringRef parent) {
  std::string base = parent.empty() ? tempRoot() : parent.str();
  if (std::string problem = unsafeTempParent(base); !problem.empty())
    return createStringError(
        formatv("cannot make a private directory in {0}: {1} (set TMPDIR to "
                "a directory of your own)",
                base, problem)
            .str());
  std::string model = base + "/" + prefix.str() + "-XXXXXX";
  std::vector<char> buffer(model.begin(), model.end());
  buffer.push_back('\0');
  // mkdtemp: a new directory, 0700, under a name nobody could have taken.
  if (!mkdtemp(buffer.data()))
    return createStringError(
        std::error_code(errno, std::generic_category()),
        "cannot create a private directory in %s: %s (set TMPDIR to a "
        "writable directory)",
        base.c_str(), std::strerror(errno));
  std::string dir(buffer.data());
  if (Error error = claimTempDir(dir)) {
    removeTree(dir);
    return error;
  }
  return dir;
}

std::error_code removeTreeAt(int dir, StringRef name) {
  std::string entry = name.str();
  auto failed = [] { return std::error_code(errno, std::generic_category()); };
  struct stat info;
  if (fstatat(dir, entry.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0)
    return failed();
  if (!S_ISDIR(info.st_mode))
    return ::unlinkat(dir, entry.c_str(), 0) == 0 ? std::error_code()
                                                  : failed();
  // O_NOFOLLOW: a directory swapped for a link since the fstatat is not
  // entered; its entries are named relative to this descriptor, never by a
  // path someone could redirect.
  int fd = ::openat(dir, entry.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return ::unlinkat(dir, entry.c_str(), 0) == 0 ? std::error_code()
                                                  : failed();
  if (DIR *stream = fdopendir(fd)) {
    std::vector<std::string> entries;
    while (dirent *child = readdir(stream))
      if (StringRef(child->d_name) != "." && StringRef(child->d_name) != "..")
        entries.push_back(child->d_name);
    for (const std::string &child : entries)
      removeTreeAt(dirfd(stream), child);
    closedir(stream);
  } else {
    ::close(fd);
  }
  return ::unlinkat(dir, entry.c_str(), AT_REMOVEDIR) == 0 ? std::error_code()
                                                           : failed();
}

std::error_code removeTree(StringRef path) {
  SmallString<256> trimmed(path);
  while (trimmed.size() > 1 && trimmed.back() == '/')
    trimmed.pop_back();
  StringRef parent = sys::path::parent_path(trimmed);
  int fd = ::open(parent.empty() ? "." : parent.str().c_str(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return std::error_code(errno, std::generic_category());
  DirHandle dir(fd);
  return removeTreeAt(dir.get(), sys::path::filename(trimmed));
}

bool ownerAlive(StringRef ownerText) {
  std::pair<StringRef, StringRef> fields = ownerText.trim().split(' ');
  int pid = 0;
  if (fields.first.getAsInteger(10, pid) || pid <= 0)
    return false;
  std::string start = processStartTime(pid);
  if (start.empty())
    return false;
  // An owner file without a start time (the process could not be read when
  // it was written) trusts the pid alone.
  return fields.second.trim().empty() || fields.second.trim() == start;
}

unsigned removeStaleTempDirs() {
  unsigned removed = 0;
  uid_t self = geteuid();
  // /tmp too: a session under a long TMPDIR keeps LLDB's socket there.
  std::vector<std::string> roots = {tempRoot()};
  for (const char *other : {"/tmp", "/dev/shm"})
    if (roots.front() != other)
      roots.push_back(other);
  for (const std::string &root : roots) {
    DIR *dir = opendir(root.c_str());
    if (!dir)
      continue;
    std::vector<std::string> stale;
    while (dirent *entry = readdir(dir)) {
      StringRef name(entry->d_name);
      if (!name.starts_with("magic-trace-"))
        continue;
      std::string path = root + "/" + name.str();
      struct stat info;
      if (lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
          info.st_uid != self)
        continue;
      std::string owner = path + "/" + kOwnerFileName;
      if (Error notOurs = checkPrivate(owner, /*directory=*/false)) {
        // No owner file of ours (an older version's directory, or another
        // tool's): not ours to judge.
        consumeError(std::move(notOurs));
        continue;
      }
      ErrorOr<std::unique_ptr<MemoryBuffer>> text =
          MemoryBuffer::getFile(owner);
      if (text && !ownerAlive((*text)->getBuffer()))
        stale.push_back(path);
    }
    closedir(dir);
    for (const std::string &path : stale)
      if (!removeTree(path))
        ++removed;
  }
  return removed;
}

Error checkPrivate(StringRef path, bool directory) {
  std::string name = path.str();
  struct stat info;
  if (lstat(name.c_str(), &info) != 0)
    return errnoError("cannot read " + path);
  if (S_ISLNK(info.st_mode))
    return createStringError("%s is a symbolic link", name.c_str());
  if (directory ? !S_ISDIR(info.st_mode) : !S_ISREG(info.st_mode))
    return createStringError("%s is not a %s", name.c_str(),
                             directory ? "directory" : "regular file");
  if (info.st_uid != geteuid())
    return createStringError("%s belongs to user %u, not to this user (%u)",
                             name.c_str(), unsigned(info.st_uid),
                             unsigned(geteuid()));
  if (info.st_mode & (S_IWGRP | S_IWOTH))
    return createStringError("%s is writable by other users (mode %03o)",
                             name.c_str(), unsigned(info.st_mode & 0777));
  return Error::success();
}

Expected<std::string> userCacheDir() {
  SmallString<128> dir;
  const char *xdg = std::getenv("XDG_CACHE_HOME");
  const char *home = std::getenv("HOME");
  if (xdg && sys::path::is_absolute(xdg)) {
    dir = xdg;
  } else if (home && sys::path::is_absolute(home)) {
    dir = home;
    sys::path::append(dir, ".cache");
  } else {
    return createStringError("no cache directory (set HOME or "
                             "XDG_CACHE_HOME)");
  }
  sys::path::append(dir, "magic-trace");
  // Every existing parent up to HOME (its parents are the system's), or up
  // to / when the cache is elsewhere: one that another user owns or can
  // write without the sticky bit could have the cache directory renamed
  // and replaced under us (issue 50), also when the directories between
  // are root's.
  SmallString<128> homeDir(home && sys::path::is_absolute(home) ? home : "");
  sys::path::remove_dots(homeDir, /*remove_dot_dot=*/true);
  SmallString<128> parent(dir);
  sys::path::remove_dots(parent, /*remove_dot_dot=*/true);
  for (StringRef up = sys::path::parent_path(parent); !up.empty();
       up = sys::path::parent_path(up)) {
    struct stat info;
    if (stat(up.str().c_str(), &info) != 0)
      continue; // Made below, ours.
    if (std::string problem = unsafeTempParent(up); !problem.empty())
      return createStringError(
          formatv("the cache directory {0} is not used: its parent {1}: {2} "
                  "(set XDG_CACHE_HOME to a directory of your own)",
                  dir, up, problem)
              .str());
    if (up == homeDir.str())
      break;
  }
  if (std::error_code ec = sys::fs::create_directories(
          dir, /*IgnoreExisting=*/true, sys::fs::owner_all))
    return createStringError(ec, "cannot create %s: %s", dir.c_str(),
                             ec.message().c_str());
  if (Error error = checkPrivate(dir, /*directory=*/true))
    return error;
  return dir.str().str();
}

bool privateOutputs() {
  const char *keep = std::getenv("MAGIC_TRACE_KEEP_UMASK");
  return !keep || !*keep || StringRef(keep) == "0";
}

std::error_code createOutputDirectories(StringRef path) {
  return sys::fs::create_directories(path, /*IgnoreExisting=*/true,
                                     privateOutputs() ? sys::fs::owner_all
                                                      : sys::fs::all_all);
}

} // namespace magic_trace
