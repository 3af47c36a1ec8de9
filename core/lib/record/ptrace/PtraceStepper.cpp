//===- PtraceStepper.cpp - Emulated PT recording of a launched program ----===//
//
// Threads run concurrently, each under its own PTRACE_SINGLESTEP; one
// waitpid(-1, __WALL) loop collects whichever thread stopped. A thread
// blocked in a syscall simply reports later, so no thread waits on another.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PtraceStepper.h"

#include "PtraceEmulator.h"

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
namespace ptrace_detail {

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

/// The recording as a snapshot: each thread's trace, the virtual CPU and
/// clock, and the code outside files the threads ran.
void Emulator::assembleSnapshot(StringRef path) {
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
    addJitRecords(snapshot.pid, jitRecordDirs(snapshot.pid), JitCode::NamesOnly,
                  snapshot.code);
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
  Expected<LaunchTarget> target = locateProgram(options.argv[0]);
  if (!target)
    return target.takeError();
  const std::string &path = target->path;
  StringRef realPath = target->realPath;

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

  Expected<uint64_t> bias = loadBias(pid, *target);
  if (!bias)
    return bias.takeError();
  Expected<uint64_t> startAddress =
      resolveLocation(options.start, realPath, *bias);
  if (!startAddress && options.start == "main" && target->load.entry) {
    // A stripped program has no `main` to start at; its entry point is
    // always there (ld.so runs first, untraced, as it would before main).
    consumeError(startAddress.takeError());
    startAddress = target->load.entry + *bias;
    result.startNote =
        formatv("no symbol 'main' in {0} (stripped?): tracing from its ELF "
                "entry point {1:x} (give --start to choose)",
                path, *startAddress)
            .str();
  }
  if (!startAddress)
    return startAddress.takeError();
  if (!options.stop.empty()) {
    Expected<uint64_t> stop = resolveLocation(options.stop, realPath, *bias);
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

  assembleSnapshot(path);
  return std::move(result);
}

} // namespace ptrace_detail

Expected<EmulateResult> emulateProgram(const EmulateOptions &options) {
  Expected<std::unique_ptr<InsnClassifier>> classifier =
      InsnClassifier::create();
  if (!classifier)
    return classifier.takeError();
  ptrace_detail::Emulator emulator(options, std::move(*classifier));
  return emulator.run();
}

} // namespace magic_trace
