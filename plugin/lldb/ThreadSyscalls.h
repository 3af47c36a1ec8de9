//===- ThreadSyscalls.h - A thread's syscalls for the stepper -*- C++ -*-===//
//
// The x86-64 Linux facts the emulate stepper needs about a stopped thread
// and the syscall it is in or about to make: whether the kernel will run an
// interrupted syscall again (the thread is inside it, its PC after the
// `syscall`), which syscall is next, and what a clone asks for. Read through
// the SB API (registers of frame 0, process memory).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_THREADSYSCALLS_H
#define MAGIC_TRACE_PLUGIN_THREADSYSCALLS_H

#include "lldb/API/SBProcess.h"
#include "lldb/API/SBThread.h"

#include <cstdint>
#include <optional>

namespace magic_trace::plugin {

// x86-64 Linux system calls the stepper looks at (asm/unistd_64.h).
constexpr uint64_t SysClone = 56;
constexpr uint64_t SysFork = 57;
constexpr uint64_t SysVfork = 58;
constexpr uint64_t SysExecve = 59;
constexpr uint64_t SysFutex = 202;
constexpr uint64_t SysExecveat = 322;
constexpr uint64_t SysClone3 = 435;
constexpr uint64_t CloneVm = 0x100;       ///< CLONE_VM: shares the memory.
constexpr uint64_t CloneVfork = 0x4000;   ///< CLONE_VFORK.
constexpr uint64_t CloneThread = 0x10000; ///< CLONE_THREAD: not a new process.

/// The kernel's -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND and
/// -ERESTART_RESTARTBLOCK: rax of a thread stopped inside a syscall that the
/// kernel runs again on resume, backing the IP up over the `syscall`
/// (include/linux/errno.h; user code never sees these values).
bool restartsSyscall(uint64_t rax);

/// A register of frame 0 (0 when LLDB cannot read it).
uint64_t registerValue(lldb::SBThread &thread, const char *name);

uint64_t currentPc(lldb::SBThread &thread);

/// The address of the syscall `thread` is inside when LLDB stopped it in the
/// kernel (its PC is after the `syscall`, rax a restart code), else none.
std::optional<uint64_t> syscallInProgress(lldb::SBProcess &process,
                                          lldb::SBThread &thread);

/// The clone flags of syscall `number`, which `thread` is about to make,
/// when it creates a thread or a process (fork: none; vfork: CLONE_VM and
/// CLONE_VFORK); none for any other syscall, or clone3 arguments that
/// cannot be read.
std::optional<uint64_t> cloneFlags(lldb::SBProcess &process,
                                   lldb::SBThread &thread, uint64_t number);

/// Whether a SIGSTOP sent to process `pid` on this host waits to be
/// delivered (ShdPnd in /proc/PID/status); false when that cannot be read.
bool stopSignalPending(uint64_t pid);

inline bool isExec(uint64_t number) {
  return number == SysExecve || number == SysExecveat;
}

} // namespace magic_trace::plugin

#endif
