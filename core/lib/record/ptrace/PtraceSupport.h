//===- PtraceSupport.h - ptrace helpers of the stepper ---------*- C++ -*-===//
//
// Private to record/ptrace/: what PtraceStepper.cpp's Emulator needs of the
// system besides stepping: the program to launch found and checked, its
// load bias, where a --start or --stop location is, the traced process's
// lifetime, and a thread's signal state from /proc.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_RECORD_PTRACE_PTRACESUPPORT_H
#define MAGIC_TRACE_LIB_RECORD_PTRACE_PTRACESUPPORT_H

#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace magic_trace::ptrace_detail {

template <typename... Ts> llvm::Error errorf(const char *format, Ts... args) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), format,
                                 args...);
}

/// A ptrace request that failed on `tid`, with errno's text and what to
/// check.
llvm::Error ptraceError(const char *what, pid_t tid);

/// The traced process. Kills and reaps it on destruction unless it is gone.
class Tracee {
public:
  explicit Tracee(pid_t pid) : pid(pid) {}
  Tracee(const Tracee &) = delete;
  Tracee &operator=(const Tracee &) = delete;
  ~Tracee() { killAndReap(); }

  void killAndReap();
  void markGone() { gone = true; }

  const pid_t pid;

private:
  bool gone = false;
};

/// The program to launch: found in PATH when its name has no '/', an
/// existing x86-64 ELF file, its real path and load facts.
struct LaunchTarget {
  std::string path;     ///< As found.
  std::string realPath; ///< Links resolved: how /proc/PID/maps names it.
  ElfLoadInfo load;
};
llvm::Expected<LaunchTarget> locateProgram(const std::string &argv0);

/// Where the kernel put `target`'s executable in process `pid` (ASLR is off,
/// but a PIE still moves); 0 for a program that is not position
/// independent.
llvm::Expected<uint64_t> loadBias(pid_t pid, const LaunchTarget &target);

/// Where `spec` (symbol or 0x link-time address) is at run time.
llvm::Expected<uint64_t>
resolveLocation(llvm::StringRef spec, llvm::StringRef exePath, uint64_t bias);

/// The signal `signal` has a handler in thread `tid`.
bool isCaught(pid_t tid, int signal);

/// A caught signal waits to be delivered: the next step enters its handler.
bool handlerPending(pid_t tid);

/// Where a thread stopped by a signal in the middle of a syscall resumes
/// when the signal is not handled: the kernel restarts the syscall
/// (-ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK)
/// by backing the IP up over the 2-byte `syscall`. Otherwise `rip`.
uint64_t resumeIp(pid_t tid, uint64_t rip);

} // namespace magic_trace::ptrace_detail

#endif
