//===- OutputFiles.h - Outputs no other user can redirect -------*- C++ -*-===//
//
// Every file magic-trace writes (traces, bundles, perf.data, the dlfilter's
// out=) is made so that another user of the machine cannot redirect it
// (issue 50): the bytes go to a new file of ours, with a random name, made
// O_EXCL|O_NOFOLLOW in the destination's directory, which is renamed over
// the destination's name at the end. Every step after opening the
// directory acts on descriptors (openat, fstatat, fchmod, renameat): a
// symlink, FIFO or file planted at the name is never opened or written,
// and a destination that is a symlink, a FIFO, a device or another user's
// file is refused in one line that names it. Nothing is chmodded by path.
//
// A bundle directory is new (made 0700 under a random name and renamed into
// place) or an existing directory accepted only when it is the user's own,
// not a symlink and not writable by others; its files go through the same
// temporary files, relative to the directory's descriptor.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_OUTPUTFILES_H
#define MAGIC_TRACE_OUTPUTFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace magic_trace {

/// An open directory descriptor, closed with its last user.
class DirHandle {
public:
  explicit DirHandle(int fd) : fd(fd) {}
  ~DirHandle();
  DirHandle(const DirHandle &) = delete;
  DirHandle &operator=(const DirHandle &) = delete;
  int get() const { return fd; }

private:
  int fd;
};

/// One output file being written. The destination is checked when it is
/// created and again at commit(); until commit() the bytes are in a private
/// temporary file beside it, removed if the file is dropped uncommitted.
class OutputStream;

class OutputFile {
public:
  /// Prepares to write PATH. Errors (one line, naming PATH): its directory
  /// cannot be opened or written; PATH is a symlink, a FIFO, a device, a
  /// directory or another user's file.
  static llvm::Expected<std::unique_ptr<OutputFile>>
  create(llvm::StringRef path);
  /// The same for NAME (one component) inside the directory `dir`, shown
  /// in messages as `shownPath`.
  static llvm::Expected<std::unique_ptr<OutputFile>>
  createAt(std::shared_ptr<DirHandle> dir, llvm::StringRef name,
           llvm::StringRef shownPath);
  ~OutputFile();

  llvm::raw_ostream &os();
  const std::string &path() const { return shown; }

  /// Flushes, gives the file its mode (0600, or the umask's with
  /// MAGIC_TRACE_KEEP_UMASK) and renames it over the destination, checked
  /// again first. Errors: a write failed, or the destination is no longer
  /// one we may replace.
  llvm::Error commit();

private:
  OutputFile() = default;
  /// A descriptor of the big regular file commit() is about to replace
  /// (64 MB and more), so that its pages are freed after the rename, on a
  /// thread of its own; -1 for any other destination.
  int holdBigDestination() const;
  std::shared_ptr<DirHandle> dir;
  std::string name;      ///< The destination, in `dir`.
  std::string temporary; ///< Our file, in `dir`.
  std::string shown;
  std::unique_ptr<OutputStream> stream;
  int fd = -1; ///< The stream's.
  bool committed = false;
};

/// Bytes written to the disk directly (O_DIRECT, past the page cache) by
/// the outputs of this process so far: an output's whole aligned chunks from
/// its 8th MiB on, where the file system takes them and the disk keeps up.
uint64_t outputBytesWrittenDirect();

/// Writes BYTES as the whole output file PATH (through OutputFile).
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef bytes);

/// A directory of outputs (a bundle), written relative to its descriptor.
class OutputDir {
public:
  /// PATH as a bundle directory. An existing one must be a directory (not
  /// a symlink) of this user's that others cannot write; a missing one is
  /// made 0700 under a random name beside it and renamed to PATH by
  /// commit(). Missing parents are made. Errors name PATH and the check
  /// that failed.
  static llvm::Expected<std::unique_ptr<OutputDir>>
  create(llvm::StringRef path);
  ~OutputDir();

  const std::string &path() const { return shown; }

  /// NAME (one component) inside, made 0700 when missing, or an existing
  /// directory of ours there. Errors: it cannot be made, or NAME is not a
  /// directory of ours.
  llvm::Expected<std::unique_ptr<OutputDir>> subdirectory(llvm::StringRef name);
  /// Writes RELATIVE (names separated by '/'; the directories must exist)
  /// through an OutputFile.
  llvm::Error writeFile(llvm::StringRef relative, llvm::StringRef bytes);
  /// An OutputFile for RELATIVE.
  llvm::Expected<std::unique_ptr<OutputFile>>
  createFile(llvm::StringRef relative);
  /// Removes the file NAME inside when it is there.
  llvm::Error removeFile(llvm::StringRef name);
  /// Gives a new directory its mode and renames it to its path (it must
  /// still be free). A no-op for an existing directory.
  llvm::Error commit();

private:
  OutputDir() = default;
  std::shared_ptr<DirHandle> self;
  std::shared_ptr<DirHandle> parent; ///< Set while a new directory is
                                     ///< under its temporary name.
  std::string name, temporary, shown;
  bool committed = true;
};

/// The mode bits outputs get: 0600/0700, or what the umask leaves of
/// 0666/0777 with MAGIC_TRACE_KEEP_UMASK=1.
unsigned outputFileMode();
unsigned outputDirMode();

} // namespace magic_trace

#endif
