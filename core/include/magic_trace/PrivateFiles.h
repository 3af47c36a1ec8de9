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

/// $TMPDIR, or /tmp.
std::string tempRoot();

/// Makes PARENT/PREFIX-XXXXXX (PARENT defaults to tempRoot()) with mkdtemp:
/// a new directory, mode 0700, that nobody else can have made or
/// redirected, holding an owner file naming this process.
/// Errors: the directory cannot be made (the message names TMPDIR).
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
/// with it). Symlinks are removed, never followed.
std::error_code removeTree(llvm::StringRef path);

/// Succeeds when PATH is a directory (or, with `directory` false, a regular
/// file) that is not a symlink, belongs to this user, and is not writable by
/// its group or others. The error says which of these fails.
llvm::Error checkPrivate(llvm::StringRef path, bool directory);

/// The user's cache directory, $XDG_CACHE_HOME/magic-trace or
/// $HOME/.cache/magic-trace, made 0700 when missing and checked with
/// checkPrivate. Errors: no HOME, or a directory someone else controls.
llvm::Expected<std::string> userCacheDir();

/// Whether outputs are private (the default): files 0600 and directories
/// 0700, as perf writes perf.data. MAGIC_TRACE_KEEP_UMASK=1 in the
/// environment keeps the process's umask instead.
bool privateOutputs();

/// Opens PATH to write an output (created or truncated). A private output is
/// created 0600 and an existing file is made 0600.
/// Errors: the file cannot be opened (with what to check).
llvm::Expected<std::unique_ptr<llvm::raw_fd_ostream>>
openOutputFile(llvm::StringRef path);

/// Writes BYTES as the whole output file PATH (openOutputFile's mode).
/// Errors: the file cannot be opened or written (with what to check).
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef bytes);

/// Creates PATH and its missing parents for outputs: 0700 when private.
std::error_code createOutputDirectories(llvm::StringRef path);

/// Makes an existing output file or directory private (0600 / 0700) when
/// outputs are private; a no-op otherwise.
void makeOutputPrivate(llvm::StringRef path);

} // namespace magic_trace

#endif
