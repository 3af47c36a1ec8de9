//===- PtraceSteps.cpp - One thread, one instruction ----------------------===//
//
// The ptrace stepper's step (PtraceEmulator.h): the instruction at a
// thread's IP classified, the code outside files it runs logged once per
// version, its packets written, and what each kind of stop means.
//
//===----------------------------------------------------------------------===//
#include "PtraceEmulator.h"

#include "magic_trace/InsnClassifier.h"
#include "magic_trace/JitRecords.h"
#include "magic_trace/ProcessModules.h"
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/StackUnwinder.h"
#include "magic_trace/SteppedCode.h"
#include "magic_trace/VirtualClock.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace llvm;

namespace magic_trace::ptrace_detail {

Error Emulator::refreshModules() {
  Expected<std::vector<MapsEntry>> maps = readProcMaps(pid);
  if (!maps)
    return maps.takeError();
  // Build-ids are per file; read each file once.
  std::vector<MapsEntry> entries = std::move(*maps);
  for (MapsEntry &entry : entries)
    if (!buildIds.count(entry.path) && StringRef(entry.path).starts_with("/"))
      buildIds[entry.path] = readBuildId(entry.path);
  result.snapshot.modules = modulesFromMaps(entries, buildIds);
  addVdso(entries);
  codeLog.setModules(result.snapshot.modules);
  // Code may have been unmapped and replaced (dlclose + dlopen).
  classified.clear();
  return Error::success();
}

/// The vdso has no file on disk: its bytes, read once (the kernel maps the
/// same image into every process), become a module decoders can read.
void Emulator::addVdso(const std::vector<MapsEntry> &entries) {
  for (const MapsEntry &entry : entries) {
    if (entry.path != "[vdso]" || entry.end <= entry.start ||
        entry.end - entry.start > MaxVdsoBytes)
      continue;
    if (result.vdsoImage.empty()) {
      std::vector<uint8_t> bytes(entry.end - entry.start);
      iovec local{bytes.data(), bytes.size()};
      iovec remote{reinterpret_cast<void *>(entry.start), bytes.size()};
      if (process_vm_readv(pid, &local, 1, &remote, 1, 0) !=
          ssize_t(bytes.size()))
        return; // Unreadable: its code is then a marked decode gap.
      result.vdsoImage = std::move(bytes);
    }
    Module vdso;
    vdso.path = "[vdso]";
    vdso.loadAddress = entry.start;
    vdso.segments.push_back(
        LoadedSegment{entry.start, entry.end - entry.start, 0, true});
    result.snapshot.modules.push_back(std::move(vdso));
    return;
  }
}

Expected<ClassifiedInsn> Emulator::classifyAt(pid_t tid, uint64_t ip) {
  auto it = classified.find(ip);
  if (it != classified.end())
    return it->second;
  uint8_t bytes[16];
  iovec local{bytes, sizeof(bytes)};
  iovec remote{reinterpret_cast<void *>(ip), sizeof(bytes)};
  // A short read at the end of a mapping is fine if the instruction fits.
  ssize_t got = process_vm_readv(tid, &local, 1, &remote, 1, 0);
  if (got <= 0)
    return errorf("cannot read the instruction at 0x%" PRIx64
                  " of thread %d: %s",
                  ip, int(tid), strerror(errno));
  Expected<ClassifiedInsn> insn =
      classifier->classify(ArrayRef<uint8_t>(bytes, size_t(got)), ip);
  if (!insn)
    return insn.takeError();
  classified[ip] = *insn;
  return *insn;
}

Error Emulator::startThread(TracedThread &thread) {
  if (!thread.writer) {
    auto writer = options.makeWriter ? options.makeWriter(options.writer)
                                     : PacketWriter::create(options.writer);
    if (!writer)
      return writer.takeError();
    thread.writer = std::move(*writer);
  }
  if (Error err = thread.writer->enable(thread.ip))
    return err;
  thread.enabled = true;
  thread.truth.addEvent(TruthEventKind::Enable, 0, thread.ip);
  return stepThread(thread);
}

Error Emulator::stepThread(TracedThread &thread) {
  if (stopRequested)
    return Error::success();
  if ((hasStop && thread.ip == stopAddress) ||
      (options.maxInsns && result.instructions >= options.maxInsns)) {
    result.end = hasStop && thread.ip == stopAddress ? EmulateEnd::StopHit
                                                     : EmulateEnd::MaxInsns;
    stopRequested = true;
    trigger = &thread;
    return Error::success();
  }
  // A step that delivers a caught signal runs no instruction; tracing
  // resumes in the handler.
  // After a syscall, the kernel may deliver a signal first (as raise()
  // does): then hardware's next packet is TIP.PGE at the handler.
  if (thread.pendingEnable && !thread.deliveringToHandler &&
      !handlerPending(thread.tid)) {
    if (Error err = thread.writer->enable(thread.ip))
      return err;
    thread.pendingEnable = false;
    thread.enabled = true;
    thread.truth.addEvent(TruthEventKind::Enable, 0, thread.ip);
  }
  if (Error err = logCode(thread))
    return err;
  if (ptrace(PTRACE_SINGLESTEP, thread.tid, nullptr, thread.signalToDeliver) !=
      0)
    return ptraceError("SINGLESTEP", thread.tid);
  thread.signalToDeliver = 0;
  thread.stepping = true;
  ++result.singleSteps;
  return Error::success();
}

/// Classifies the instruction at the thread's IP into `thread.insn`, and
/// logs the code outside files it is in: a new version of it is classified
/// again (the classification cached for its address is of the old code),
/// and the thread's trace marks where its code changed.
Error Emulator::logCode(TracedThread &thread) {
  auto read = [&](uint64_t address, uint8_t *buffer, size_t size) -> size_t {
    iovec local{buffer, size};
    iovec remote{reinterpret_cast<void *>(address), size};
    ssize_t got = process_vm_readv(thread.tid, &local, 1, &remote, 1, 0);
    return got > 0 ? size_t(got) : 0;
  };
  uint64_t markSeq = 0;
  for (int pass = 0; pass < 2; ++pass) {
    Expected<ClassifiedInsn> insn = classifyAt(thread.tid, thread.ip);
    if (!insn)
      return insn.takeError();
    thread.insn = *insn;
    SteppedCodeLog::Step step = codeLog.beforeStep(
        uint64_t(pid), thread.ip, thread.insn.size, read, thread.marks.seq);
    markSeq = std::max(markSeq, step.markSeq);
    if (!step.newVersion)
      break;
    classified.erase(thread.ip);
  }
  if (!markSeq)
    return Error::success();
  return thread.marks.mark(*thread.writer, markSeq);
}

/// The stepped instruction ran and execution is now at `nextIp`.
Error Emulator::finishStep(TracedThread &thread, uint64_t nextIp) {
  const ClassifiedInsn &insn = thread.insn;
  thread.truth.addInstruction(thread.ip, insn.size, insn.branch, nextIp);
  ++result.instructions;
  if (Error err =
          thread.writer->step({thread.ip, insn.size, insn.branch, nextIp}))
    return err;
  thread.ip = nextIp;
  if (insn.branch != BranchClass::Syscall)
    return Error::success();
  // Back from the kernel: tracing resumes (TIP.PGE) at the next user
  // instruction that runs, and an mmap may have loaded a module.
  thread.enabled = false;
  thread.pendingEnable = true;
  return refreshModules();
}

Error Emulator::handleStop(TracedThread &thread, int status) {
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    thread.alive = false;
    // Only a syscall (exit, or one killed by exit_group) was entered; any
    // other pending instruction never ran.
    if (thread.stepping && thread.insn.branch == BranchClass::Syscall) {
      thread.truth.addInstruction(thread.ip, thread.insn.size,
                                  BranchClass::Syscall, 0);
      ++result.instructions;
      if (Error err = thread.writer->step(
              {thread.ip, thread.insn.size, BranchClass::Syscall, 0}))
        return err;
      thread.enabled = false;
    }
    thread.stepping = false;
    if (thread.tid == pid && WIFEXITED(status))
      result.exitStatus = WEXITSTATUS(status);
    return Error::success();
  }
  if (!WIFSTOPPED(status))
    return Error::success();
  int signal = WSTOPSIG(status);
  if ((status >> 16) == PTRACE_EVENT_CLONE) {
    unsigned long newTid;
    if (ptrace(PTRACE_GETEVENTMSG, thread.tid, nullptr, &newTid) != 0)
      return ptraceError("GETEVENTMSG", thread.tid);
    threadFor(pid_t(newTid));
    // Still inside clone(): step again to finish the syscall.
    thread.stepping = false;
    if (stopRequested)
      return Error::success();
    if (ptrace(PTRACE_SINGLESTEP, thread.tid, nullptr, 0) != 0)
      return ptraceError("SINGLESTEP", thread.tid);
    thread.stepping = true;
    return Error::success();
  }
  if (status >> 16)
    return ptraceError("event", thread.tid);
  errno = 0;
  uint64_t rip = ptrace(PTRACE_PEEKUSER, thread.tid,
                        offsetof(user_regs_struct, rip), nullptr);
  if (errno)
    return ptraceError("PEEKUSER", thread.tid);
  bool wasStepping = thread.stepping;
  thread.stepping = false;
  if (!thread.writer) {
    // A new thread's first stop (its SIGSTOP), or an existing thread stopped
    // at the start point: trace it from here.
    if (stopRequested)
      return Error::success();
    // A thread stopped inside a syscall (by the start point's SIGSTOP) runs
    // that syscall again.
    thread.ip = signal == SIGSTOP ? resumeIp(thread.tid, rip) : rip;
    return startThread(thread);
  }
  if (signal == SIGTRAP && wasStepping) {
    if (thread.deliveringToHandler) {
      // The kernel entered the signal handler; nothing ran at thread.ip.
      // Straight after a syscall tracing is still off, so there is nothing
      // to interrupt in the packets; otherwise FUP + TIP.PGD.
      thread.deliveringToHandler = false;
      thread.truth.addEvent(TruthEventKind::Interrupt, thread.ip, rip);
      if (thread.enabled)
        if (Error err = thread.writer->interrupt(thread.ip))
          return err;
      thread.enabled = false;
      thread.pendingEnable = true;
      thread.ip = rip;
      return stepThread(thread);
    }
    // A REP string instruction traps once per iteration at the same IP:
    // one executed instruction, reported when it finishes.
    if (!(thread.insn.branch == BranchClass::Other && rip == thread.ip))
      if (Error err = finishStep(thread, rip))
        return err;
    return stepThread(thread);
  }
  // Any other signal (or our SIGSTOP) arrived around the step: the
  // instruction ran iff the IP moved.
  if (wasStepping && rip != thread.ip)
    if (Error err = finishStep(thread, rip))
      return err;
  if (stopRequested)
    return Error::success();
  if (signal != SIGSTOP) {
    thread.signalToDeliver = signal;
    thread.deliveringToHandler = isCaught(thread.tid, signal);
  }
  // Without a handler, an interrupted syscall is restarted: it runs again.
  if (!thread.deliveringToHandler)
    thread.ip = resumeIp(thread.tid, rip);
  return stepThread(thread);
}

} // namespace magic_trace::ptrace_detail
