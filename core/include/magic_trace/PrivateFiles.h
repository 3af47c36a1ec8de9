//===- PrivateFiles.h - files and directories only their user can touch ---===//
//
// What magic-trace leaves on disk on a machine other people share: temporary
// directories no one else can plant a file or a symlink in, caches that are
// trusted only when they belong to the user, outputs readable by their
// owner alone (as perf writes perf.data), and the clean-up of what a
// debugger killed with SIGKILL left behind.
//
//===----------------------------------------------------------------------===//

#ifndef MAGIC_TRACE_PRIVATEFILES_H
#define MAGIC_TRACE_PRIVATEFILES_H

#include "magic_trace/OutputFiles.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace magic_trace {

/// The name of the file in each temporary directory we make that names the
/// process owning it: "PID STARTTIME" (the start time from /proc/PID/stat,
/// so a reused pid is not taken for the owner).
constexpr const char *kOwnerFileName = "owner";

/// Why DIR is no place to make our temporary directories in, or "" when
/// it is one: it is another user's (not root's), or others can write it
/// and it has no sticky bit (they could rename ours and put theirs there).
std::string unsafeTempParent(llvm::StringRef dir);

/// $TMPDIR, or /tmp; when that fails unsafeTempParent, /tmp or, when /tmp
/// does too, a directory in the user's cache directory.
std::string tempRoot();

/// Why tempRoot() is not $TMPDIR, for the user (one line), or "".
std::string tempRootNote();

/// Makes PARENT/PREFIX-XXXXXX (PARENT defaults to tempRoot()) with mkdtemp:
/// a new directory, mode 0700, that nobody else can have made or
/// redirected, holding an owner file naming this process.
/// Errors: PARENT fails unsafeTempParent, or the directory cannot be made
/// (the message names TMPDIR).
llvm::Expected<std::string> makePrivateTempDir(llvm::StringRef prefix,
                                               llvm::StringRef parent = "");

/// Writes the owner file into DIR, naming this process (or PID).
llvm::Error claimTempDir(llvm::StringRef dir, int pid = 0);

/// Whether the process an owner file names is still running.
bool ownerAlive(llvm::StringRef ownerText);

/// Removes directories named magic-trace-* directly under tempRoot(), /tmp
/// and /dev/shm that belong to this user, are not symlinks, and whose owner
/// file names a process that is gone. Returns how many it removed.
unsigned removeStaleTempDirs();

/// Removes PATH and, when it is a directory, everything in it, sockets
/// included (LLVM's remove_directories leaves anything that is not a file,
/// a directory or a symlink, such as QEMU's gdb socket, and the directory
/// with it). Symlinks are removed, never followed: every step is relative
/// to a directory descriptor opened O_NOFOLLOW (openat, unlinkat).
std::error_code removeTree(llvm::StringRef path);

/// removeTree of NAME in the directory open as `dir`.
std::error_code removeTreeAt(int dir, llvm::StringRef name);

/// Succeeds when PATH is a directory (or, with `directory` false, a regular
/// file) that is not a symlink, belongs to this user, and is not writable by
/// its group or others. The error says which of these fails.
llvm::Error checkPrivate(llvm::StringRef path, bool directory);

/// The user's cache directory, $XDG_CACHE_HOME/magic-trace or
/// $HOME/.cache/magic-trace, made 0700 when missing and checked with
/// checkPrivate, its parents up to HOME (or /) with unsafeTempParent. Errors:
/// no HOME, or a directory (or a parent) someone else controls.
llvm::Expected<std::string> userCacheDir();

/// Whether outputs are private (the default): files 0600 and directories
/// 0700, as perf writes perf.data. MAGIC_TRACE_KEEP_UMASK=1 in the
/// environment keeps the process's umask instead.
bool privateOutputs();

/// Creates PATH and its missing parents for outputs: 0700 when private.
std::error_code createOutputDirectories(llvm::StringRef path);

} // namespace magic_trace

#endif
