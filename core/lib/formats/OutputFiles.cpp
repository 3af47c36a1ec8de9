//===- OutputFiles.cpp - Outputs no other user can redirect ---------------===//
#include "magic_trace/OutputFiles.h"
#include "magic_trace/PrivateFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace llvm;

namespace magic_trace {
namespace {

/// A helper thread with every signal blocked. Outputs are also written
/// inside QEMU's process (the recorder's ground truth, from a vCPU thread
/// at a trigger or a thread's exit), whose host signal handler assumes it
/// runs on a vCPU: a signal for the program must not land on a writer.
template <typename F> std::thread quietThread(F &&body) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  struct Restore {
    sigset_t mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{old};
  return std::thread(std::forward<F>(body));
}

std::string errnoText() { return std::strerror(errno); }

/// 8 random hex digits for a temporary name (getrandom, so two processes
/// that start together do not race for the same names).
std::string randomSuffix() {
  uint32_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value))
    value = uint32_t(getpid()) * 2654435761u ^ uint32_t(time(nullptr));
  return formatv("{0:x-8}", value).str();
}

/// The process's umask, read without changing it (umask(2) would, for
/// every thread, for a moment).
unsigned currentUmask() {
  if (auto status = MemoryBuffer::getFileAsStream("/proc/self/status")) {
    StringRef text = (*status)->getBuffer();
    size_t at = text.find("\nUmask:");
    unsigned mask = 0;
    if (at != StringRef::npos &&
        !text.substr(at + 7).trim(" \t").take_until(isSpace).getAsInteger(8,
                                                                          mask))
      return mask;
  }
  return 022;
}

const char *kindOf(mode_t mode) {
  if (S_ISLNK(mode))
    return "a symbolic link";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISDIR(mode))
    return "a directory";
  return "not a regular file";
}

/// Why NAME in DIR may not be replaced by an output, or "" when it may:
/// missing, or a regular file of this user's.
std::string destinationProblem(int dir, const std::string &name) {
  struct stat info;
  if (fstatat(dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? "" : errnoText();
  if (!S_ISREG(info.st_mode))
    return std::string("it is ") + kindOf(info.st_mode);
  if (info.st_uid != geteuid())
    return formatv("it belongs to user {0}", info.st_uid).str();
  return "";
}

Error refused(StringRef path, StringRef problem) {
  return createStringError(formatv("cannot write '{0}': {1} (remove it or "
                                   "choose another path; nothing was written)",
                                   path, problem)
                               .str());
}

/// The directory PATH, for writing `shown` in it.
Expected<std::shared_ptr<DirHandle>> openDirectory(StringRef path,
                                                   StringRef shown) {
  int fd = ::open(path.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return createStringError(formatv("cannot write '{0}': its directory {1}: "
                                     "{2} (check the directory exists and is "
                                     "writable)",
                                     shown, path, errnoText())
                                 .str());
  return std::make_shared<DirHandle>(fd);
}

/// The directory NAME in DIR, opened without following a link, when it is
/// ours and others cannot write it; `what` names it in messages.
Expected<std::shared_ptr<DirHandle>> openOwnDirectory(int dir, StringRef name,
                                                      StringRef what) {
  int fd = ::openat(dir, name.str().c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    struct stat info;
    if (errno != ENOENT &&
        fstatat(dir, name.str().c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(info.st_mode))
      return refused(what, std::string("it is ") + kindOf(info.st_mode));
    return refused(what, errnoText());
  }
  auto handle = std::make_shared<DirHandle>(fd);
  struct stat info;
  if (fstat(fd, &info) != 0)
    return refused(what, errnoText());
  if (info.st_uid != geteuid())
    return refused(what, formatv("it belongs to user {0}", info.st_uid).str());
  if (info.st_mode & (S_IWGRP | S_IWOTH))
    return refused(what, formatv("it is writable by other users (mode {0})",
                                 format("%o", unsigned(info.st_mode & 07777)))
                             .str());
  return handle;
}

} // namespace

DirHandle::~DirHandle() {
  if (fd >= 0)
    ::close(fd);
}

unsigned outputFileMode() {
  return privateOutputs() ? 0600 : (0666 & ~currentUmask());
}
unsigned outputDirMode() {
  return privateOutputs() ? 0700 : (0777 & ~currentUmask());
}

namespace {

/// Big outputs written lately, by a descriptor of their own. The page
/// cache keeps a written file's pages; a session that writes a 320 MB
/// trace a second took fresh memory for each, which on a VM costs a
/// fault in the host per page (the write took 0.65-0.95 s instead of
/// 0.25-0.35 s). So a big output's pages are let go once written back:
/// writeback starts at its commit, and the pages go at the next output's
/// start, when they are clean (POSIX_FADV_DONTNEED leaves dirty ones).
/// Only a cache hint: the files stay as they are, and readers (Perfetto)
/// read them from disk.
class WrittenBack {
public:
  static WrittenBack &get() {
    static WrittenBack instance;
    return instance;
  }

  void add(int fd) {
    // Writeback starts on a thread of its own (submitting 320 MB of writes
    // takes 0.1 s), with a descriptor of its own.
    int writing = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (writing >= 0)
      letGoAside(writing);
    int kept = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (kept < 0)
      return;
    std::lock_guard<std::mutex> hold(lock);
    if (fds.size() >= 8) {
      ::close(fds.front());
      fds.erase(fds.begin());
    }
    fds.push_back(kept);
  }

  void release() {
    std::vector<int> done;
    {
      std::lock_guard<std::mutex> hold(lock);
      done.swap(fds);
    }
    for (int fd : done)
      letGo(fd);
  }

  /// letGo on a thread of its own (here when no thread can start): for a
  /// big output just committed, whose writeback takes 0.1 s to submit, and
  /// for the last descriptor of a file just replaced, whose pages the kernel
  /// would otherwise free inside the rename (0.28 s for a 320 MB trace).
  static void letGoAside(int fd) {
    try {
      quietThread([fd] { letGo(fd); }).detach();
    } catch (const std::system_error &) {
      letGo(fd);
    }
  }

private:
  /// Drops `fd`'s clean cached pages, starts writeback of its dirty ones,
  /// and closes it.
  static void letGo(int fd) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }

  std::mutex lock;
  std::vector<int> fds;
};

/// Outputs from this size on are let go of the page cache (WrittenBack).
constexpr uint64_t kBigOutputBytes = uint64_t(64) << 20;

std::atomic<uint64_t> directBytesWritten{0};

} // namespace

/// An output file's bytes, written in chunks of kChunkBytes. The first
/// kDirectFromBytes go through the page cache; from there on, whole chunks
/// go to the disk directly (O_DIRECT), which costs no page-cache memory:
/// on a virtual machine whose freed memory the host takes back, new page
/// cache costs as much as writing the bytes (1.0 s of system time for
/// 320 MB here, against 0.05 s direct). Direct writes wait for the disk, so
/// a thread of the stream's own makes them while the next chunk fills. A
/// file system that refuses O_DIRECT, or a disk slower than
/// kSlowDiskBytesPerSecond, gets the page cache for the rest. The tail
/// (less than a chunk, not aligned) always goes through the page cache.
class OutputStream final : public raw_ostream {
public:
  // raw_ostream's own buffer takes the small writes (a JSON trace is made
  // of millions), so write_impl sees pieces of 64 KiB and more.
  explicit OutputStream(int fd) : fd(fd) { SetBufferSize(size_t(64) << 10); }
  ~OutputStream() override { close(); }

  /// Writes everything held (then nothing is left for close()).
  void finish() {
    flush();
    waitIdle();
    stopWriter();
    if (held > 0)
      writeChunk(fill, held, /*whole=*/false);
    held = 0;
    setDirect(false);
  }
  void close() {
    if (fd < 0)
      return;
    finish();
    if (::close(fd) != 0 && !failure)
      failure = std::error_code(errno, std::generic_category());
    fd = -1;
  }
  bool has_error() const { return bool(failure); }
  std::error_code error() const { return failure; }
  void clear_error() { failure = {}; }

private:
  static constexpr size_t kChunkBytes = size_t(4) << 20;
  static constexpr uint64_t kDirectFromBytes = uint64_t(8) << 20;
  static constexpr size_t kAlign = 4096;
  static constexpr double kSlowDiskBytesPerSecond = 256e6;

  struct Free {
    void operator()(char *p) const { std::free(p); }
  };
  using Chunk = std::unique_ptr<char, Free>;

  static Chunk newChunk() {
    return Chunk(static_cast<char *>(std::aligned_alloc(kAlign, kChunkBytes)));
  }

  void write_impl(const char *ptr, size_t size) override {
    while (size > 0) {
      if (!fill) {
        chunks[0] = newChunk();
        fill = chunks[0].get();
        if (!fill) {
          failure = std::make_error_code(std::errc::not_enough_memory);
          return;
        }
      }
      size_t take = std::min(size, kChunkBytes - held);
      std::memcpy(fill + held, ptr, take);
      held += take;
      ptr += take;
      size -= take;
      if (held == kChunkBytes)
        submitFull();
    }
  }
  uint64_t current_pos() const override { return position + held; }

  /// The full chunk `fill` to the file: handed to the writer thread once
  /// direct writes have begun, else written here.
  void submitFull() {
    position += held;
    waitIdle();
    if (!writer.joinable() && written >= kDirectFromBytes && !directRefused)
      startWriter();
    if (writer.joinable()) {
      {
        std::lock_guard<std::mutex> hold(lock);
        pending = fill;
        pendingBytes = held;
      }
      wake.notify_one();
      fill = fill == chunks[0].get() ? chunks[1].get() : chunks[0].get();
    } else {
      writeChunk(fill, held, /*whole=*/true);
    }
    held = 0;
  }

  void startWriter() {
    if (!chunks[1])
      chunks[1] = newChunk();
    if (!chunks[1])
      return;
    stopping = false; // A write after finish() starts a writer again.
    try {
      writer = quietThread([this] { writerLoop(); });
    } catch (const std::system_error &) {
    }
  }
  void writerLoop() {
    std::unique_lock<std::mutex> hold(lock);
    for (;;) {
      wake.wait(hold, [&] { return pending || stopping; });
      if (!pending)
        return;
      char *data = pending;
      size_t bytes = pendingBytes;
      hold.unlock();
      writeChunk(data, bytes, /*whole=*/true);
      hold.lock();
      pending = nullptr;
      idle.notify_one();
    }
  }
  /// Until the writer thread has written what it was given.
  void waitIdle() {
    if (!writer.joinable())
      return;
    std::unique_lock<std::mutex> hold(lock);
    idle.wait(hold, [&] { return !pending; });
  }
  void stopWriter() {
    if (!writer.joinable())
      return;
    {
      std::lock_guard<std::mutex> hold(lock);
      stopping = true;
    }
    wake.notify_one();
    writer.join();
  }

  /// Writes `size` bytes at the file's end; `whole`: a full chunk, which may
  /// go directly. One thread at a time (the writer's, or this one's when
  /// the writer is idle).
  void writeChunk(const char *data, size_t size, bool whole) {
    if (fd < 0 || failure)
      return;
    bool direct = whole && written >= kDirectFromBytes &&
                  written % kAlign == 0 && setDirect(true);
    if (!direct)
      setDirect(false);
    auto started = std::chrono::steady_clock::now();
    size_t done = writeAll(data, size);
    if (direct && done == 0 && errno == EINVAL) {
      // The file system took the flag but not the write.
      directRefused = true;
      setDirect(false);
      done = writeAll(data, size);
    }
    if (direct && done == size) {
      directSeconds += std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - started)
                           .count();
      directBytes += size;
      directBytesWritten += size;
      if (directBytes >= 4 * kChunkBytes &&
          double(directBytes) < kSlowDiskBytesPerSecond * directSeconds) {
        // Waiting for this disk costs more than the page cache does.
        directRefused = true;
        setDirect(false);
      }
    }
    written += done;
    if (done != size)
      failure = std::error_code(errno ? errno : EIO, std::generic_category());
  }

  /// Bytes of [data, data + size) written (short on an error, errno set).
  size_t writeAll(const char *data, size_t size) {
    size_t done = 0;
    while (done < size) {
      ssize_t now = ::write(fd, data + done, size - done);
      if (now < 0 && errno == EINTR)
        continue;
      if (now <= 0) {
        if (now == 0)
          errno = EIO;
        break;
      }
      done += size_t(now);
      if (directOn && done < size && done % kAlign != 0)
        setDirect(false); // A short direct write leaves the rest unaligned.
    }
    return done;
  }

  /// Turns O_DIRECT on or off; true when it is on.
  bool setDirect(bool on) {
    if (fd < 0 || on == directOn || (on && directRefused))
      return directOn;
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 ||
        ::fcntl(fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) != 0) {
      if (on)
        directRefused = true;
      return directOn;
    }
    directOn = on;
    return directOn;
  }

  int fd;
  Chunk chunks[2];
  char *fill = nullptr;  ///< The chunk being filled (one of `chunks`).
  size_t held = 0;       ///< Bytes in `fill`.
  uint64_t position = 0; ///< Bytes given before `fill`'s.
  // The writer thread's side: `written` and what follows are touched by
  // one thread at a time (handed over under `lock`).
  uint64_t written = 0; ///< Bytes in the file.
  bool directOn = false;
  bool directRefused = false;
  uint64_t directBytes = 0;
  double directSeconds = 0;
  std::error_code failure;
  std::thread writer;
  std::mutex lock;
  std::condition_variable wake, idle;
  char *pending = nullptr; ///< Given to the writer, not yet written.
  size_t pendingBytes = 0;
  bool stopping = false;
};

uint64_t outputBytesWrittenDirect() { return directBytesWritten.load(); }

raw_ostream &OutputFile::os() { return *stream; }

Expected<std::unique_ptr<OutputFile>> OutputFile::create(StringRef path) {
  if (path.empty() || path.ends_with("/"))
    return refused(path, "it names no file");
  StringRef parent = sys::path::parent_path(path);
  Expected<std::shared_ptr<DirHandle>> dir =
      openDirectory(parent.empty() ? "." : parent, path);
  if (!dir)
    return dir.takeError();
  return createAt(std::move(*dir), sys::path::filename(path), path);
}

Expected<std::unique_ptr<OutputFile>>
OutputFile::createAt(std::shared_ptr<DirHandle> dir, StringRef name,
                     StringRef shownPath) {
  WrittenBack::get().release();
  std::unique_ptr<OutputFile> file(new OutputFile());
  file->dir = std::move(dir);
  file->name = name.str();
  file->shown = shownPath.str();
  if (std::string problem = destinationProblem(file->dir->get(), file->name);
      !problem.empty())
    return refused(shownPath, problem);
  // A new name nobody has: O_EXCL, and O_NOFOLLOW for a link planted
  // between our choice of name and the open.
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    file->temporary =
        "." + file->name.substr(0, 200) + ".tmp-" + randomSuffix();
    fd = ::openat(file->dir->get(), file->temporary.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return createStringError(formatv("cannot write '{0}': {1} (check the "
                                     "directory exists and is writable)",
                                     shownPath, errnoText())
                                 .str());
  file->fd = fd;
  file->stream = std::make_unique<OutputStream>(fd);
  return std::move(file);
}

OutputFile::~OutputFile() {
  if (stream) {
    stream->close();
    stream->clear_error();
  }
  if (!committed && !temporary.empty())
    ::unlinkat(dir->get(), temporary.c_str(), 0);
}

Error OutputFile::commit() {
  if (committed)
    return Error::success();
  stream->finish();
  bool failed = stream->has_error() || ::fchmod(fd, outputFileMode()) != 0;
  std::string why = stream->has_error() ? stream->error().message()
                                        : std::string(errnoText());
  if (!failed && stream->tell() >= kBigOutputBytes)
    WrittenBack::get().add(fd);
  stream->close();
  if (stream->has_error()) {
    failed = true;
    why = stream->error().message();
  }
  stream->clear_error();
  if (failed)
    return createStringError(
        formatv("cannot write '{0}': {1} (check free disk space)", shown, why)
            .str());
  // Checked again: a plant made while we wrote is refused, not replaced.
  if (std::string problem = destinationProblem(dir->get(), name);
      !problem.empty())
    return refused(shown, problem);
  int replaced = holdBigDestination();
  if (::renameat(dir->get(), temporary.c_str(), dir->get(), name.c_str()) !=
      0) {
    std::string why = errnoText();
    if (replaced >= 0)
      ::close(replaced);
    return createStringError(formatv("cannot write '{0}': {1} (check the "
                                     "directory is writable)",
                                     shown, why)
                                 .str());
  }
  if (replaced >= 0)
    WrittenBack::letGoAside(replaced);
  committed = true;
  return Error::success();
}

int OutputFile::holdBigDestination() const {
  // Never waits (O_NONBLOCK: a FIFO planted since the check), never follows
  // a link, and keeps only a big regular file.
  int fd = ::openat(dir->get(), name.c_str(),
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) ||
      uint64_t(info.st_size) < kBigOutputBytes) {
    ::close(fd);
    return -1;
  }
  return fd;
}

Error writeOutputFile(StringRef path, StringRef bytes) {
  Expected<std::unique_ptr<OutputFile>> file = OutputFile::create(path);
  if (!file)
    return file.takeError();
  (*file)->os() << bytes;
  return (*file)->commit();
}

Expected<std::unique_ptr<OutputDir>> OutputDir::create(StringRef path) {
  SmallString<256> trimmed(path);
  while (trimmed.size() > 1 && trimmed.back() == '/')
    trimmed.pop_back();
  StringRef name = sys::path::filename(trimmed);
  StringRef parentPath = sys::path::parent_path(trimmed);
  if (name.empty() || name == "." || name == "..")
    return refused(path, "give the bundle a directory name of its own");
  if (!parentPath.empty())
    if (std::error_code ec = createOutputDirectories(parentPath))
      return createStringError(formatv("cannot create '{0}': {1} (check the "
                                       "output directory)",
                                       parentPath, ec.message())
                                   .str());
  Expected<std::shared_ptr<DirHandle>> parent =
      openDirectory(parentPath.empty() ? "." : parentPath, path);
  if (!parent)
    return parent.takeError();
  std::unique_ptr<OutputDir> dir(new OutputDir());
  dir->name = name.str();
  dir->shown = trimmed.str().str();
  struct stat info;
  if (fstatat((*parent)->get(), dir->name.c_str(), &info,
              AT_SYMLINK_NOFOLLOW) == 0) {
    Expected<std::shared_ptr<DirHandle>> own =
        openOwnDirectory((*parent)->get(), dir->name, dir->shown);
    if (!own)
      return own.takeError();
    dir->self = std::move(*own);
    return std::move(dir);
  }
  // New: made private under a name nobody can have taken, then renamed.
  for (int attempt = 0; attempt < 100; ++attempt) {
    dir->temporary = "." + dir->name.substr(0, 200) + ".tmp-" + randomSuffix();
    if (::mkdirat((*parent)->get(), dir->temporary.c_str(), 0700) == 0)
      break;
    if (errno != EEXIST)
      return createStringError(formatv("cannot create '{0}': {1} (check the "
                                       "output directory is writable)",
                                       dir->shown, errnoText())
                                   .str());
    dir->temporary.clear();
  }
  if (dir->temporary.empty())
    return refused(path, "no free temporary name beside it");
  dir->parent = std::move(*parent);
  dir->committed = false;
  Expected<std::shared_ptr<DirHandle>> made =
      openOwnDirectory(dir->parent->get(), dir->temporary, dir->shown);
  if (!made)
    return made.takeError();
  dir->self = std::move(*made);
  return std::move(dir);
}

OutputDir::~OutputDir() {
  if (!committed && parent)
    removeTreeAt(parent->get(), temporary);
}

Expected<std::unique_ptr<OutputDir>> OutputDir::subdirectory(StringRef sub) {
  std::string shownSub = shown + "/" + sub.str();
  if (::mkdirat(self->get(), sub.str().c_str(), 0700) != 0 && errno != EEXIST)
    return createStringError(
        formatv("cannot create '{0}': {1} (check permissions)", shownSub,
                errnoText())
            .str());
  Expected<std::shared_ptr<DirHandle>> own =
      openOwnDirectory(self->get(), sub, shownSub);
  if (!own)
    return own.takeError();
  (void)::fchmod((*own)->get(), outputDirMode());
  std::unique_ptr<OutputDir> dir(new OutputDir());
  dir->self = std::move(*own);
  dir->name = sub.str();
  dir->shown = std::move(shownSub);
  return std::move(dir);
}

Expected<std::unique_ptr<OutputFile>>
OutputDir::createFile(StringRef relative) {
  auto [first, rest] = relative.split('/');
  if (rest.empty())
    return OutputFile::createAt(self, first, shown + "/" + first.str());
  Expected<std::unique_ptr<OutputDir>> sub = subdirectory(first);
  if (!sub)
    return sub.takeError();
  return (*sub)->createFile(rest);
}

Error OutputDir::writeFile(StringRef relative, StringRef bytes) {
  Expected<std::unique_ptr<OutputFile>> file = createFile(relative);
  if (!file)
    return file.takeError();
  (*file)->os() << bytes;
  return (*file)->commit();
}

Error OutputDir::removeFile(StringRef file) {
  if (::unlinkat(self->get(), file.str().c_str(), 0) != 0 && errno != ENOENT)
    return createStringError(formatv("cannot remove '{0}/{1}': {2} (check "
                                     "permissions)",
                                     shown, file, errnoText())
                                 .str());
  return Error::success();
}

Error OutputDir::commit() {
  if (committed)
    return Error::success();
  (void)::fchmod(self->get(), outputDirMode());
  // RENAME_NOREPLACE: a directory planted at the name meanwhile stays, and
  // ours is not moved over it.
  if (::renameat2(parent->get(), temporary.c_str(), parent->get(), name.c_str(),
                  RENAME_NOREPLACE) != 0)
    return createStringError(formatv("cannot write the bundle '{0}': {1} "
                                     "(something took the name while it was "
                                     "written; choose another path)",
                                     shown, errnoText())
                                 .str());
  committed = true;
  parent.reset();
  return Error::success();
}

} // namespace magic_trace
