//===- PtraceStepper.cpp - Emulated PT recording of a launched program ----===//
//
// Threads run concurrently, each under its own PTRACE_SINGLESTEP; one
// waitpid(-1, __WALL) loop collects whichever thread stopped. A thread
// blocked in a syscall simply reports later, so no thread waits on another.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PtraceStepper.h"

#include "magic_trace/InsnClassifier.h"
#include "magic_trace/JitRecords.h"
#include "magic_trace/ProcessModules.h"
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

namespace magic_trace {
namespace {

template <typename... Ts> Error errorf(const char *format, Ts... args) {
  return createStringError(inconvertibleErrorCode(), format, args...);
}

Error ptraceError(const char *what, pid_t tid) {
  return errorf("ptrace %s of thread %d failed: %s (check ptrace permission: "
                "/proc/sys/kernel/yama/ptrace_scope)",
                what, int(tid), strerror(errno));
}

/// The traced process. Kills and reaps it on destruction unless it is gone.
class Tracee {
public:
  explicit Tracee(pid_t pid) : pid(pid) {}
  Tracee(const Tracee &) = delete;
  Tracee &operator=(const Tracee &) = delete;
  ~Tracee() { killAndReap(); }

  void killAndReap() {
    if (gone)
      return;
    kill(pid, SIGKILL);
    // Reap every thread; ECHILD ends the loop.
    int status;
    while (waitpid(-1, &status, __WALL) > 0 || errno == EINTR)
      ;
    gone = true;
  }
  void markGone() { gone = true; }

  const pid_t pid;

private:
  bool gone = false;
};

struct TracedThread {
  pid_t tid = 0;
  std::unique_ptr<PacketWriter> writer; ///< Null until tracing starts.
  ThreadTruth truth;
  /// Where its trace moved to newer versions of the code (SteppedCode.h).
  SteppedMarks marks;
  bool stepping = false; ///< A PTRACE_SINGLESTEP is outstanding.
  bool enabled = false;  ///< The writer is enabled (not in a syscall).
  /// Back from a syscall: enable the writer before the next instruction
  /// runs, wherever that is (a signal handler may come first).
  bool pendingEnable = false;
  bool alive = true;
  uint64_t ip = 0; ///< The instruction being (or about to be) stepped.
  ClassifiedInsn insn;
  int signalToDeliver = 0;
  bool deliveringToHandler = false; ///< The pending step enters a handler.
};

/// Where `spec` (symbol or 0x link-time address) is at run time.
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

bool isCaught(pid_t tid, int signal) {
  return (readSignalMasks(tid).caught >> (signal - 1)) & 1;
}

/// A caught signal waits to be delivered: the next step enters its handler.
bool handlerPending(pid_t tid) {
  SignalMasks masks = readSignalMasks(tid);
  return masks.pending & ~masks.blocked & masks.caught;
}

/// Where a thread stopped by a signal in the middle of a syscall resumes
/// when the signal is not handled: the kernel restarts the syscall
/// (-ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK)
/// by backing the IP up over the 2-byte `syscall`. Otherwise `rip`.
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

class Emulator {
public:
  Emulator(const EmulateOptions &options, std::unique_ptr<InsnClassifier> c)
      : options(options), classifier(std::move(c)) {}

  Expected<EmulateResult> run();

private:
  Expected<pid_t> launch(StringRef path);
  Error runToStart(Tracee &tracee, uint64_t startAddress);
  Error traceLoop(Tracee &tracee);
  Error handleStop(TracedThread &thread, int status);
  Error finishStep(TracedThread &thread, uint64_t nextIp);
  Error startThread(TracedThread &thread);
  Error stepThread(TracedThread &thread);
  Error stopEverything(Tracee &tracee, TracedThread *trigger);
  Error refreshModules();
  void addVdso(const std::vector<MapsEntry> &entries);
  /// A vdso larger than this is not one (it is a few pages).
  static constexpr uint64_t MaxVdsoBytes = 1 << 20;
  Expected<ClassifiedInsn> classifyAt(pid_t tid, uint64_t ip);
  Error logCode(TracedThread &thread);
  TracedThread &threadFor(pid_t tid);

  const EmulateOptions &options;
  std::unique_ptr<InsnClassifier> classifier;
  DenseMap<uint64_t, ClassifiedInsn> classified;
  /// The code outside files the threads ran, each version of it.
  SteppedCodeLog codeLog;
  std::map<std::string, std::string> buildIds;
  std::vector<std::unique_ptr<TracedThread>> threads;
  DenseMap<pid_t, TracedThread *> threadByTid;
  pid_t pid = 0;
  uint64_t stopAddress = 0;
  bool hasStop = false;
  bool stopRequested = false;
  TracedThread *trigger = nullptr;
  EmulateResult result;
};

TracedThread &Emulator::threadFor(pid_t tid) {
  auto it = threadByTid.find(tid);
  if (it != threadByTid.end())
    return *it->second;
  threads.push_back(std::make_unique<TracedThread>());
  TracedThread &thread = *threads.back();
  thread.tid = tid;
  thread.truth.tid = tid;
  threadByTid[tid] = &thread;
  return thread;
}

Expected<pid_t> Emulator::launch(StringRef path) {
  int pipeFds[2];
  if (pipe2(pipeFds, O_CLOEXEC) != 0)
    return errorf("cannot create a pipe: %s", strerror(errno));
  std::vector<char *> argv;
  std::string pathCopy = path.str();
  for (const std::string &arg : options.argv)
    argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t child = fork();
  if (child < 0)
    return errorf("cannot fork: %s", strerror(errno));
  if (child == 0) {
    close(pipeFds[0]);
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    // Fixed addresses from run to run, as debuggers do.
    personality(ADDR_NO_RANDOMIZE);
    execv(pathCopy.c_str(), argv.data());
    int error = errno;
    (void)!write(pipeFds[1], &error, sizeof(error));
    _exit(127);
  }
  close(pipeFds[1]);
  int execError = 0;
  ssize_t got = read(pipeFds[0], &execError, sizeof(execError));
  close(pipeFds[0]);
  if (got == sizeof(execError)) {
    int status;
    waitpid(child, &status, 0);
    return errorf("cannot run '%s': %s (check that it is an executable "
                  "program)",
                  pathCopy.c_str(), strerror(execError));
  }
  return child;
}

Error Emulator::runToStart(Tracee &tracee, uint64_t startAddress) {
  errno = 0;
  long word = ptrace(PTRACE_PEEKTEXT, pid, startAddress, nullptr);
  if (errno)
    return errorf("cannot read the start point at 0x%" PRIx64
                  ": %s (give a code address of the program)",
                  startAddress, strerror(errno));
  long patched = (word & ~0xffL) | 0xcc; // int3
  if (ptrace(PTRACE_POKETEXT, pid, startAddress, patched) != 0)
    return ptraceError("POKETEXT", pid);
  threadFor(pid);
  pid_t resume = pid;
  int signal = 0;
  while (true) {
    if (resume && ptrace(PTRACE_CONT, resume, nullptr, signal) != 0)
      return ptraceError("CONT", resume);
    int status;
    pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0)
      return errorf("waitpid failed: %s", strerror(errno));
    resume = tid;
    signal = 0;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (tid != pid) {
        threadFor(tid).alive = false;
        resume = 0;
        continue;
      }
      tracee.markGone();
      if (WIFEXITED(status))
        return errorf("the program exited with status %d before reaching "
                      "the start point '%s' (choose a --start it reaches)",
                      WEXITSTATUS(status), options.start.c_str());
      return errorf("the program was killed by signal %d before reaching the "
                    "start point '%s' (choose a --start it reaches)",
                    WTERMSIG(status), options.start.c_str());
    }
    if (!WIFSTOPPED(status))
      continue;
    int stopSignal = WSTOPSIG(status);
    if ((status >> 16) == PTRACE_EVENT_CLONE) {
      unsigned long newTid;
      ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &newTid);
      threadFor(pid_t(newTid));
      continue;
    }
    // A new thread's first stop (it may come before its clone event): let
    // it run untraced.
    if (stopSignal == SIGSTOP && tid != pid && !threadFor(tid).writer)
      continue;
    if (stopSignal != SIGTRAP) {
      signal = stopSignal;
      continue;
    }
    user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0)
      return ptraceError("GETREGS", tid);
    if (regs.rip - 1 != startAddress)
      continue;
    // The start point: undo the int3 and back up over it.
    // Memory goes through the stopped thread: the others may be running.
    if (ptrace(PTRACE_POKETEXT, tid, startAddress, word) != 0)
      return ptraceError("POKETEXT", tid);
    regs.rip = startAddress;
    if (ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0)
      return ptraceError("SETREGS", tid);
    // Other threads run untraced until now: stop them, and trace each from
    // its SIGSTOP on (startThread).
    for (auto &other : threads)
      if (other->tid != tid && other->alive)
        syscall(SYS_tgkill, pid, other->tid, SIGSTOP);
    TracedThread &thread = threadFor(tid);
    thread.ip = startAddress;
    return startThread(thread);
  }
}

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

Error Emulator::traceLoop(Tracee &tracee) {
  while (!stopRequested) {
    bool anyAlive = false;
    for (auto &thread : threads)
      anyAlive |= thread->alive;
    if (!anyAlive) {
      tracee.markGone();
      result.end = EmulateEnd::Exited;
      return Error::success();
    }
    int status;
    pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR)
        continue;
      if (errno == ECHILD) {
        tracee.markGone();
        result.end = EmulateEnd::Exited;
        return Error::success();
      }
      return errorf("waitpid failed: %s", strerror(errno));
    }
    if (Error err = handleStop(threadFor(tid), status))
      return err;
  }
  return Error::success();
}

/// Brings every thread to a halt for the snapshot and closes its trace with
/// FUP + TIP.PGD at the instruction it would run next.
Error Emulator::stopEverything(Tracee &tracee, TracedThread *trigger) {
  for (auto &thread : threads)
    if (thread->alive && thread->stepping)
      syscall(SYS_tgkill, pid, thread->tid, SIGSTOP);
  for (auto &thread : threads) {
    while (thread->alive && thread->stepping) {
      int status;
      pid_t tid = waitpid(thread->tid, &status, __WALL);
      if (tid < 0 && errno == EINTR)
        continue;
      if (tid < 0)
        return errorf("waitpid failed: %s", strerror(errno));
      if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_CLONE &&
          thread->insn.branch == BranchClass::Syscall) {
        // Halted inside clone(): the syscall was entered (TIP.PGD).
        thread->stepping = false;
        thread->truth.addInstruction(thread->ip, thread->insn.size,
                                     BranchClass::Syscall, 0);
        ++result.instructions;
        if (Error err = thread->writer->step(
                {thread->ip, thread->insn.size, BranchClass::Syscall, 0}))
          return err;
        thread->enabled = false;
        continue;
      }
      if (Error err = handleStop(*thread, status))
        return err;
    }
  }
  for (auto &thread : threads) {
    if (!thread->writer || !thread->enabled)
      continue;
    uint64_t last =
        thread->truth.insns.empty() ? 0 : thread->truth.insns.back();
    thread->truth.addEvent(TruthEventKind::Disable, last, thread->ip);
    if (Error err = thread->writer->disable(thread->ip))
      return err;
    thread->enabled = false;
  }
  if (Error err = refreshModules())
    return err;
  // The stop context: each live thread's stack, innermost first.
  for (auto &thread : threads) {
    if (!thread->alive)
      continue;
    ThreadStop stop;
    stop.tid = thread->tid;
    stop.triggered = thread.get() == trigger;
    user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, thread->tid, nullptr, &regs) == 0)
      stop.frames = unwindStack(thread->tid, regs.rip, regs.rsp, regs.rbp,
                                result.snapshot.modules);
    result.snapshot.stop.push_back(std::move(stop));
  }
  tracee.killAndReap();
  return Error::success();
}

Expected<EmulateResult> Emulator::run() {
  if (options.argv.empty())
    return errorf("no program given (put it after --)");
  std::string path = options.argv[0];
  if (path.find('/') == std::string::npos) {
    ErrorOr<std::string> found = sys::findProgramByName(path);
    if (!found)
      return errorf("cannot find program '%s' in PATH (give its path)",
                    path.c_str());
    path = *found;
  }
  if (!sys::fs::exists(path))
    return errorf("program '%s' does not exist (check the path)", path.c_str());
  if (Error err = checkX86_64Elf(path))
    return std::move(err);
  SmallString<256> realPath;
  if (std::error_code ec = sys::fs::real_path(path, realPath))
    return errorf("cannot resolve '%s': %s", path.c_str(),
                  ec.message().c_str());
  Expected<ElfLoadInfo> loadInfo = readElfLoadInfo(realPath);
  if (!loadInfo)
    return loadInfo.takeError();

  // Bad writer options (buffer size, PSB period) fail before the launch.
  if (!options.makeWriter) {
    auto probe = PacketWriter::create(options.writer);
    if (!probe)
      return probe.takeError();
  }

  Expected<pid_t> child = launch(path);
  if (!child)
    return child.takeError();
  pid = *child;
  Tracee tracee(pid);
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
    return errorf("'%s' did not stop after exec (is it a valid program?)",
                  path.c_str());
  long ptraceOptions = PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL;
  if (ptrace(PTRACE_SETOPTIONS, pid, nullptr, ptraceOptions) != 0)
    return ptraceError("SETOPTIONS", pid);

  // The load bias: where the kernel put the executable (ASLR is off, but a
  // PIE still moves).
  uint64_t bias = 0;
  if (loadInfo->positionIndependent) {
    Expected<std::vector<MapsEntry>> maps = readProcMaps(pid);
    if (!maps)
      return maps.takeError();
    std::optional<uint64_t> lowest;
    for (const MapsEntry &entry : *maps)
      if (entry.path == realPath.str() && (!lowest || entry.start < *lowest))
        lowest = entry.start;
    if (!lowest)
      return errorf("'%s' is not mapped in the new process (run it directly, "
                    "not through a loader)",
                    path.c_str());
    bias = *lowest - loadInfo->firstLoadVaddr;
  }
  Expected<uint64_t> startAddress =
      resolveLocation(options.start, realPath, bias);
  if (!startAddress && options.start == "main" && loadInfo->entry) {
    // A stripped program has no `main` to start at; its entry point is
    // always there (ld.so runs first, untraced, as it would before main).
    consumeError(startAddress.takeError());
    startAddress = loadInfo->entry + bias;
    result.startNote =
        formatv("no symbol 'main' in {0} (stripped?): tracing from its ELF "
                "entry point {1:x} (give --start to choose)",
                path, *startAddress)
            .str();
  }
  if (!startAddress)
    return startAddress.takeError();
  if (!options.stop.empty()) {
    Expected<uint64_t> stop = resolveLocation(options.stop, realPath, bias);
    if (!stop)
      return stop.takeError();
    stopAddress = *stop;
    hasStop = true;
  }

  if (Error err = runToStart(tracee, *startAddress))
    return std::move(err);
  if (Error err = refreshModules())
    return std::move(err);
  auto began = std::chrono::steady_clock::now();
  if (Error err = traceLoop(tracee))
    return std::move(err);
  if (stopRequested) {
    if (Error err = stopEverything(tracee, trigger))
      return std::move(err);
  } else {
    // Every thread exited: close any trace still enabled (a thread killed
    // by exit_group) where it stood.
    for (auto &thread : threads)
      if (thread->writer && thread->enabled) {
        uint64_t last =
            thread->truth.insns.empty() ? 0 : thread->truth.insns.back();
        thread->truth.addEvent(TruthEventKind::Disable, last, thread->ip);
        if (Error err = thread->writer->disable(thread->ip))
          return std::move(err);
      }
  }
  result.tracedSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();

  Snapshot &snapshot = result.snapshot;
  snapshot.pid = uint64_t(pid);
  snapshot.processName = sys::path::filename(path).str();
  // The virtual CPU and clock of the packets (VirtualClock.h); a dialect
  // may need a CPU with a decoder workaround (dialectCpu).
  snapshot.cpu = dialectCpu(options.writer.dialect);
  snapshot.timing = VirtualClock::timing;
  for (auto &thread : threads) {
    if (!thread->writer)
      continue;
    snapshot.time = thread->writer->timeConversion();
    ThreadTrace trace;
    trace.tid = uint64_t(thread->tid);
    trace.bytes = thread->writer->buffer().snapshot();
    trace.wrapped = thread->writer->buffer().wrapped();
    trace.imageMarks = thread->marks.inSnapshot(thread->writer->buffer());
    snapshot.threads.push_back(std::move(trace));
    thread->truth.lost = thread->writer->lostInstructions();
    result.truth.push_back(std::move(thread->truth));
  }
  // The code outside files the threads ran, each version of it, and its
  // names from the process's perf map and jitdump (the files outlive it).
  snapshot.code = codeLog.history();
  if (!codeLog.note().empty())
    result.recorderNote = codeLog.note();
  if (!snapshot.code.changes.empty())
    addJitRecords(snapshot.pid, jitRecordDirs(snapshot.pid),
                  /*withCode=*/false, snapshot.code);
  return std::move(result);
}

} // namespace

Expected<EmulateResult> emulateProgram(const EmulateOptions &options) {
  Expected<std::unique_ptr<InsnClassifier>> classifier =
      InsnClassifier::create();
  if (!classifier)
    return classifier.takeError();
  Emulator emulator(options, std::move(*classifier));
  return emulator.run();
}

} // namespace magic_trace
