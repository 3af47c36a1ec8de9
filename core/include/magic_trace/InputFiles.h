//===- InputFiles.h - Reading files that may not be what they say -*- C++
//-*-===//
//
// Every file magic-trace reads whole goes through readInputFile: it opens
// with O_NONBLOCK (a FIFO planted where a file should be never makes us
// wait), checks the descriptor (fstat: a regular file, no bigger than the
// caller allows, so /dev/zero or a 1 TiB sparse file is not read into
// memory) and reads exactly the length fstat gave. A file in a place other
// users can write (/tmp/perf-PID.map, jitdump, caches, TMPDIR) is opened
// with O_NOFOLLOW too and trusted only when it is the user's or root's own,
// as perf does ("not owned by current user or root").
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_INPUTFILES_H
#define MAGIC_TRACE_INPUTFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace magic_trace {

enum class InputPlace {
  /// A path the user named, or one inside it (a bundle, a recording):
  /// links are followed, any owner is read.
  Named,
  /// A place other users can write: no link is followed, and only the
  /// user's or root's files are read.
  Shared,
};

/// The default largest input: 1 GiB.
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;

/// The bytes of PATH, or null when there is no such file. Errors (one
/// line, naming PATH and why it is not read): it is not a regular file
/// (FIFO, device, directory, a symlink in a shared place), belongs to
/// another user (shared place), is larger than `maxBytes`, or cannot be
/// read.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, InputPlace place,
              uint64_t maxBytes = kMaxInputBytes);

/// readInputFile, into `bytes` (resized to what was read): a large input (a
/// thread's PT) read once, where it is kept, without a buffer to copy it
/// from. False (`bytes` empty) when there is no such file.
llvm::Expected<bool> readInputFileInto(llvm::StringRef path, InputPlace place,
                                       std::vector<uint8_t> &bytes,
                                       uint64_t maxBytes = kMaxInputBytes);

/// Checks, before a library (LLVM's object reader) opens PATH itself, that
/// it is a regular file no bigger than `maxBytes` (stat, links followed): a
/// module path in a recording or bundle that names a FIFO, /dev/zero or
/// /proc/kcore is refused instead of waited on or read forever. Errors (one
/// line) name PATH and what it is.
llvm::Error checkRegularFile(llvm::StringRef path,
                             uint64_t maxBytes = uint64_t(16) << 30);

/// Gives back the pages of `buffer` that were read, when it maps a file
/// (LLVM maps big object files read-only and private): a later read maps
/// them again from the page cache, so what `buffer` holds does not change.
/// A buffer in memory is left alone. Only for read-only buffers: a
/// WritableMemoryBuffer's mapping is private too, and its writes would be
/// lost. (LLVM's own dontNeedIfMmap calls posix_madvise, which glibc
/// ignores for POSIX_MADV_DONTNEED.)
void releaseReadPages(const llvm::MemoryBuffer &buffer);

} // namespace magic_trace

#endif
