//===- PtraceSupport.cpp - ptrace helpers of the stepper ------------------===//
#include "PtraceSupport.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

using namespace llvm;

namespace magic_trace::ptrace_detail {

Error ptraceError(const char *what, pid_t tid) {
  return errorf("ptrace %s of thread %d failed: %s (check ptrace permission: "
                "/proc/sys/kernel/yama/ptrace_scope)",
                what, int(tid), strerror(errno));
}

void Tracee::killAndReap() {
  if (gone)
    return;
  kill(pid, SIGKILL);
  // Reap every thread; ECHILD ends the loop.
  int status;
  while (waitpid(-1, &status, __WALL) > 0 || errno == EINTR)
    ;
  gone = true;
}

Expected<uint64_t> resolveLocation(StringRef spec, StringRef exePath,
                                   uint64_t bias) {
  uint64_t address;
  if (spec.starts_with_insensitive("0x")) {
    if (spec.drop_front(2).getAsInteger(16, address))
      return errorf("bad address '%s' (give a symbol or a hex address like "
                    "0x1139)",
                    spec.str().c_str());
    return address + bias;
  }
  Expected<uint64_t> symbol = findElfSymbol(exePath, spec);
  if (!symbol)
    return symbol.takeError();
  return *symbol + bias;
}

namespace {

/// The signal masks of /proc/TID/status.
struct SignalMasks {
  uint64_t pending = 0; ///< SigPnd | ShdPnd.
  uint64_t blocked = 0;
  uint64_t caught = 0;
};

SignalMasks readSignalMasks(pid_t tid) {
  SignalMasks masks;
  auto buffer =
      MemoryBuffer::getFileAsStream("/proc/" + std::to_string(tid) + "/status");
  if (!buffer)
    return masks;
  StringRef text = (*buffer)->getBuffer();
  auto field = [&](StringRef name) -> uint64_t {
    size_t pos = text.find(name);
    uint64_t mask = 0;
    if (pos == StringRef::npos || text.substr(pos + name.size())
                                      .ltrim()
                                      .take_while(isHexDigit)
                                      .getAsInteger(16, mask))
      return 0;
    return mask;
  };
  masks.pending = field("SigPnd:") | field("ShdPnd:");
  masks.blocked = field("SigBlk:");
  masks.caught = field("SigCgt:");
  return masks;
}

} // namespace

bool isCaught(pid_t tid, int signal) {
  return (readSignalMasks(tid).caught >> (signal - 1)) & 1;
}

bool handlerPending(pid_t tid) {
  SignalMasks masks = readSignalMasks(tid);
  return masks.pending & ~masks.blocked & masks.caught;
}

uint64_t resumeIp(pid_t tid, uint64_t rip) {
  user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0)
    return rip;
  int64_t result = int64_t(regs.rax);
  bool inSyscall = int64_t(regs.orig_rax) >= 0;
  bool restarts =
      result == -512 || result == -513 || result == -514 || result == -516;
  return inSyscall && restarts ? rip - 2 : rip;
}

Expected<LaunchTarget> locateProgram(const std::string &argv0) {
  LaunchTarget target;
  target.path = argv0;
  if (target.path.find('/') == std::string::npos) {
    ErrorOr<std::string> found = sys::findProgramByName(target.path);
    if (!found)
      return errorf("cannot find program '%s' in PATH (give its path)",
                    target.path.c_str());
    target.path = *found;
  }
  if (!sys::fs::exists(target.path))
    return errorf("program '%s' does not exist (check the path)",
                  target.path.c_str());
  if (Error err = checkX86_64Elf(target.path))
    return std::move(err);
  SmallString<256> realPath;
  if (std::error_code ec = sys::fs::real_path(target.path, realPath))
    return errorf("cannot resolve '%s': %s", target.path.c_str(),
                  ec.message().c_str());
  target.realPath = realPath.str().str();
  Expected<ElfLoadInfo> loadInfo = readElfLoadInfo(realPath);
  if (!loadInfo)
    return loadInfo.takeError();
  target.load = *loadInfo;
  return target;
}

Expected<uint64_t> loadBias(pid_t pid, const LaunchTarget &target) {
  if (!target.load.positionIndependent)
    return 0;
  Expected<std::vector<MapsEntry>> maps = readProcMaps(pid);
  if (!maps)
    return maps.takeError();
  std::optional<uint64_t> lowest;
  for (const MapsEntry &entry : *maps)
    if (entry.path == target.realPath && (!lowest || entry.start < *lowest))
      lowest = entry.start;
  if (!lowest)
    return errorf("'%s' is not mapped in the new process (run it directly, "
                  "not through a loader)",
                  target.path.c_str());
  return *lowest - target.load.firstLoadVaddr;
}

} // namespace magic_trace::ptrace_detail
