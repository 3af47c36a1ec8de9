//===- InputFiles.cpp - Reading files that may not be what they say -------===//
#include "magic_trace/InputFiles.h"

#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;

namespace magic_trace {
namespace {

const char *kindOf(mode_t mode) {
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

Error notRead(StringRef path, const Twine &why) {
  return createStringError(
      formatv("skipped {0}: {1} (only regular files {2} are read)", path,
              why.str(), "of this user's or root's")
          .str());
}

} // namespace

namespace {

/// An open input: its descriptor (closed with it; -1 when there is no such
/// file) and the length fstat gave.
struct OpenInput {
  int fd = -1;
  uint64_t size = 0;
  explicit OpenInput(int fd) : fd(fd) {}
  OpenInput(OpenInput &&other) : fd(other.fd), size(other.size) {
    other.fd = -1;
  }
  OpenInput &operator=(OpenInput &&) = delete;
  ~OpenInput() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// readInputFile's opening and checks.
Expected<OpenInput> openInputFile(StringRef path, InputPlace place,
                                  uint64_t maxBytes) {
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  if (place == InputPlace::Shared)
    flags |= O_NOFOLLOW;
  OpenInput input(::open(path.str().c_str(), flags));
  if (input.fd < 0) {
    if (errno == ENOENT)
      return std::move(input);
    if (errno == ELOOP)
      return notRead(path, "it is a symbolic link");
    return createStringError(
        formatv("cannot read {0}: {1} (check its permissions)", path,
                std::strerror(errno))
            .str());
  }
  struct stat info;
  if (fstat(input.fd, &info) != 0)
    return createStringError(
        formatv("cannot read {0}: {1}", path, std::strerror(errno)).str());
  if (!S_ISREG(info.st_mode))
    return notRead(path, std::string("it is ") + kindOf(info.st_mode));
  if (place == InputPlace::Shared && info.st_uid != geteuid() &&
      info.st_uid != 0)
    return notRead(path, formatv("not owned by current user or root (it is "
                                 "user {0}'s)",
                                 info.st_uid)
                             .str());
  if (uint64_t(info.st_size) > maxBytes)
    return createStringError(
        formatv("cannot read {0}: {1} bytes, more than the {2} this input may "
                "have (is it the right file?)",
                path, uint64_t(info.st_size), maxBytes)
            .str());
  input.size = uint64_t(info.st_size);
  return std::move(input);
}

/// Reads up to `size` bytes of `fd` into `to`; the count read. Read, not
/// mapped: a file another user truncates under a mapping would kill the
/// debugger with SIGBUS. Exactly the length fstat gave: a file that grows
/// as we read is cut there, one that shrinks ends early.
Expected<size_t> readAll(StringRef path, int fd, char *to, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, to + got, size - got, off_t(got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return createStringError(
          formatv("cannot read {0}: {1}", path, std::strerror(errno)).str());
    if (n == 0)
      break;
    got += size_t(n);
  }
  return got;
}

} // namespace

Expected<std::unique_ptr<MemoryBuffer>>
readInputFile(StringRef path, InputPlace place, uint64_t maxBytes) {
  Expected<OpenInput> opened = openInputFile(path, place, maxBytes);
  if (!opened)
    return opened.takeError();
  if (opened->fd < 0)
    return nullptr;
  std::unique_ptr<WritableMemoryBuffer> buffer =
      WritableMemoryBuffer::getNewUninitMemBuffer(opened->size, path);
  if (!buffer)
    return createStringError(
        formatv("cannot read {0}: out of memory for {1} bytes", path,
                opened->size)
            .str());
  Expected<size_t> got = readAll(path, opened->fd, buffer->getBufferStart(),
                                 buffer->getBufferSize());
  if (!got)
    return got.takeError();
  if (*got == buffer->getBufferSize())
    return std::move(buffer);
  return MemoryBuffer::getMemBufferCopy(
      StringRef(buffer->getBufferStart(), *got), path);
}

Expected<bool> readInputFileInto(StringRef path, InputPlace place,
                                 std::vector<uint8_t> &bytes,
                                 uint64_t maxBytes) {
  bytes.clear();
  Expected<OpenInput> opened = openInputFile(path, place, maxBytes);
  if (!opened)
    return opened.takeError();
  if (opened->fd < 0)
    return false;
  bytes.resize(opened->size);
  Expected<size_t> got = readAll(
      path, opened->fd, reinterpret_cast<char *>(bytes.data()), bytes.size());
  if (!got) {
    bytes.clear();
    return got.takeError();
  }
  bytes.resize(*got);
  return true;
}

Error checkRegularFile(StringRef path, uint64_t maxBytes) {
  struct stat info;
  if (::stat(path.str().c_str(), &info) != 0)
    return createStringError(std::error_code(errno, std::generic_category()),
                             formatv("cannot read '{0}': {1} (check the path)",
                                     path, std::strerror(errno))
                                 .str());
  if (!S_ISREG(info.st_mode))
    return createStringError(formatv("'{0}' is {1}, not a file to read "
                                     "(check the module's path)",
                                     path, kindOf(info.st_mode))
                                 .str());
  if (uint64_t(info.st_size) > maxBytes)
    return createStringError(formatv("'{0}' has {1} bytes, more than a module "
                                     "file may have (check the module's path)",
                                     path, uint64_t(info.st_size))
                                 .str());
  return Error::success();
}

void releaseReadPages(const MemoryBuffer &buffer) {
  if (buffer.getBufferKind() != MemoryBuffer::MemoryBuffer_MMap)
    return;
  // Whole pages inside the mapping only: its first page may hold what
  // comes before the file's start when LLVM mapped from an offset.
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t begin =
      (uintptr_t(buffer.getBufferStart()) + page - 1) & ~(page - 1);
  uintptr_t end = uintptr_t(buffer.getBufferEnd()) & ~(page - 1);
  if (begin < end)
    ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

} // namespace magic_trace
