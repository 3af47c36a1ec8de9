//===- PrivateFiles.cpp - files and directories only their user can touch -===//

#include "magic_trace/PrivateFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
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

std::string tempRoot() {
  SmallString<128> root;
  sys::path::system_temp_directory(/*ErasedOnReboot=*/true, root);
  return root.str().str();
}

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

std::error_code removeTree(StringRef path) {
  std::string name = path.str();
  struct stat info;
  if (lstat(name.c_str(), &info) != 0)
    return std::error_code(errno, std::generic_category());
  if (!S_ISDIR(info.st_mode))
    return ::unlink(name.c_str()) == 0
               ? std::error_code()
               : std::error_code(errno, std::generic_category());
  if (DIR *dir = opendir(name.c_str())) {
    std::vector<std::string> entries;
    while (dirent *entry = readdir(dir))
      if (StringRef(entry->d_name) != "." && StringRef(entry->d_name) != "..")
        entries.push_back(name + "/" + entry->d_name);
    closedir(dir);
    for (const std::string &entry : entries)
      removeTree(entry);
  }
  return ::rmdir(name.c_str()) == 0
             ? std::error_code()
             : std::error_code(errno, std::generic_category());
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

Expected<std::unique_ptr<raw_fd_ostream>> openOutputFile(StringRef path) {
  bool makePrivate = privateOutputs();
  int fd = -1;
  if (std::error_code ec = sys::fs::openFileForWrite(
          path, fd, sys::fs::CD_CreateAlways, sys::fs::OF_None,
          makePrivate ? 0600 : 0666))
    return createStringError(ec,
                             "cannot write '%s': %s (check the directory "
                             "exists and is writable)",
                             path.str().c_str(), ec.message().c_str());
  // A file that existed keeps its mode through O_TRUNC.
  if (makePrivate)
    (void)::fchmod(fd, 0600);
  return std::make_unique<raw_fd_ostream>(fd, /*shouldClose=*/true);
}

Error writeOutputFile(StringRef path, StringRef bytes) {
  Expected<std::unique_ptr<raw_fd_ostream>> file = openOutputFile(path);
  if (!file)
    return file.takeError();
  raw_fd_ostream &os = **file;
  os << bytes;
  os.close();
  if (os.has_error()) {
    std::error_code ec = os.error();
    os.clear_error();
    return createStringError(ec,
                             "cannot write '%s': %s (check free disk space)",
                             path.str().c_str(), ec.message().c_str());
  }
  return Error::success();
}

std::error_code createOutputDirectories(StringRef path) {
  return sys::fs::create_directories(path, /*IgnoreExisting=*/true,
                                     privateOutputs() ? sys::fs::owner_all
                                                      : sys::fs::all_all);
}

void makeOutputPrivate(StringRef path) {
  if (!privateOutputs())
    return;
  std::string name = path.str();
  struct stat info;
  if (stat(name.c_str(), &info) != 0)
    return;
  (void)::chmod(name.c_str(), S_ISDIR(info.st_mode) ? 0700 : 0600);
}

} // namespace magic_trace
