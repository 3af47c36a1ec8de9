//===- ThreadSyscalls.cpp - A thread's syscalls, as the stepper reads them ===//
#include "ThreadSyscalls.h"

#include "lldb/API/SBError.h"
#include "lldb/API/SBFrame.h"
#include "lldb/API/SBValue.h"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

namespace magic_trace::plugin {

bool restartsSyscall(uint64_t rax) {
  int64_t value = int64_t(rax);
  return value == -512 || value == -513 || value == -514 || value == -516;
}

uint64_t registerValue(lldb::SBThread &thread, const char *name) {
  return thread.GetFrameAtIndex(0).FindRegister(name).GetValueAsUnsigned(0);
}

uint64_t currentPc(lldb::SBThread &thread) {
  return thread.GetFrameAtIndex(0).GetPC();
}

std::optional<uint64_t> syscallInProgress(lldb::SBProcess &process,
                                          lldb::SBThread &thread) {
  if (!restartsSyscall(registerValue(thread, "rax")))
    return std::nullopt;
  uint64_t pc = currentPc(thread);
  uint8_t bytes[2];
  lldb::SBError error;
  if (process.ReadMemory(pc - 2, bytes, 2, error) != 2 || bytes[0] != 0x0f ||
      bytes[1] != 0x05)
    return std::nullopt;
  return pc - 2;
}

std::optional<uint64_t> cloneFlags(lldb::SBProcess &process,
                                   lldb::SBThread &thread, uint64_t number) {
  if (number == SysFork)
    return 0;
  if (number == SysVfork)
    return CloneVm | CloneVfork;
  if (number == SysClone)
    return registerValue(thread, "rdi");
  if (number != SysClone3)
    return std::nullopt;
  // clone3's first argument points to struct clone_args, flags first.
  uint64_t flags = 0;
  lldb::SBError error;
  process.ReadMemory(registerValue(thread, "rdi"), &flags, sizeof(flags),
                     error);
  if (error.Fail())
    return std::nullopt;
  return flags;
}

bool stopSignalPending(uint64_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    // proc(5): "ShdPnd:" is the mask of signals pending for the process.
    if (line.rfind("ShdPnd:", 0) != 0)
      continue;
    uint64_t mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return mask & (uint64_t(1) << (SIGSTOP - 1));
  }
  return false;
}

} // namespace magic_trace::plugin
