//===- EmulateStepper.cpp - Traced execution through the SB API -----------===//
#include "EmulateStepper.h"
#include "StepDeadline.h"
#include "ThreadSyscalls.h"

#include "lldb/API/SBBreakpoint.h"
#include "lldb/API/SBBreakpointLocation.h"
#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBError.h"
#include "lldb/API/SBEvent.h"
#include "lldb/API/SBFrame.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <set>

namespace magic_trace::plugin {
namespace {

using Clock = std::chrono::steady_clock;

/// Instructions a thread runs before the next thread's turn.
constexpr unsigned Quantum = 200;
/// A step's deadline when the process has other threads: a thread still in
/// the kernel after this long is parked (it may wait for one of them, and
/// when all are blocked, the one to wake first is not known).
constexpr auto SharedDeadline = std::chrono::milliseconds(150);
/// A step's deadline when the process has one thread: a short sleep ends
/// within a try or two, and Ctrl-C (seen between steps) still stops the run
/// well within a second.
constexpr auto AloneDeadline = std::chrono::milliseconds(500);
/// A blocked thread is parked this long first, doubling up to MaxPark.
constexpr auto FirstPark = std::chrono::milliseconds(100);
constexpr auto MaxPark = std::chrono::milliseconds(1600);
constexpr auto ProgressInterval = std::chrono::seconds(2);

std::string stopDescription(lldb::SBThread &thread) {
  char buffer[256];
  size_t length = thread.GetStopDescription(buffer, sizeof(buffer));
  return length ? std::string(buffer) : std::string("stopped");
}

/// Load address -> the ids of every enabled user breakpoint with a location
/// there, in id order (not the stepper's own, `skip`).
std::map<uint64_t, std::vector<lldb::break_id_t>>
breakpointAddresses(lldb::SBTarget &target,
                    const std::map<uint64_t, lldb::break_id_t> &skip) {
  std::map<uint64_t, std::vector<lldb::break_id_t>> addresses;
  for (uint32_t i = 0, n = target.GetNumBreakpoints(); i < n; ++i) {
    lldb::SBBreakpoint breakpoint = target.GetBreakpointAtIndex(i);
    if (!breakpoint.IsEnabled() ||
        std::any_of(skip.begin(), skip.end(), [&](const auto &entry) {
          return entry.second == breakpoint.GetID();
        }))
      continue;
    for (size_t l = 0, count = breakpoint.GetNumLocations(); l < count; ++l) {
      lldb::SBBreakpointLocation location = breakpoint.GetLocationAtIndex(l);
      if (!location.IsEnabled())
        continue;
      lldb::addr_t address = location.GetLoadAddress();
      if (address == LLDB_INVALID_ADDRESS)
        continue;
      std::vector<lldb::break_id_t> &ids = addresses[address];
      if (ids.empty() || ids.back() != breakpoint.GetID())
        ids.push_back(breakpoint.GetID());
    }
  }
  return addresses;
}

/// A thread's place in the round robin, for one traced run.
struct Turn {
  /// The thread is inside the syscall at this address (its PC is just
  /// after it): LLDB stopped it there, or a step of it reached its
  /// deadline. Its next step runs that syscall again.
  std::optional<uint64_t> inSyscall;
  /// Parked (blocked in the kernel) until then.
  Clock::time_point parkedUntil;
  Clock::duration park = FirstPark;

  bool parked(Clock::time_point now) const { return parkedUntil > now; }
};

/// Stepping state shared by the loop's helpers.
struct Stepper {
  lldb::SBDebugger &debugger;
  Session &session;
  lldb::SBTarget target;
  lldb::SBProcess process;
  StepDeadline deadline;
  std::map<uint64_t, std::vector<lldb::break_id_t>> breakpoints;
  /// The stepper's own breakpoints, by address, where a clone or fork
  /// returns (the instruction after the syscall). A new thread starts there
  /// and stops at once, so it is traced from its first instruction instead
  /// of running untraced until LLDB stops it; after a fork LLDB detaches the
  /// child and resumes the parent freely, which stops there too. Deleted
  /// when the run ends.
  std::map<uint64_t, lldb::break_id_t> landings;
  std::map<uint64_t, Turn> turns;
  /// The last step ended on its own although its deadline fired: that
  /// interrupt may still stop the next step early. (Any other SIGSTOP stop
  /// is someone else's: `process interrupt`, SBProcess::SendAsyncInterrupt.)
  bool lateInterrupt = false;

  Stepper(lldb::SBDebugger &debugger, Session &session)
      : debugger(debugger), session(session),
        target(debugger.GetSelectedTarget()), process(target.GetProcess()),
        deadline(debugger, process) {
    breakpoints = breakpointAddresses(target, landings);
  }
  ~Stepper() {
    for (auto &[address, id] : landings)
      target.BreakpointDelete(id);
  }
  Stepper(const Stepper &) = delete;
  Stepper &operator=(const Stepper &) = delete;

  enum class Result { Progress, NoProgress, Blocked, ThreadGone, Exited, Stop };

  bool interruptRequested() {
    return CtrlCWatch::pressed() || debugger.InterruptRequested() ||
           debugger.GetCommandInterpreter().WasInterrupted();
  }

  /// A thread blocked; others run meanwhile.
  void park(Turn &turn) {
    turn.parkedUntil = Clock::now() + turn.park;
    turn.park = std::min<Clock::duration>(turn.park * 2, MaxPark);
  }

  /// Something that can wake a blocked thread happened (a futex call, a
  /// thread ended or began): every parked thread gets its next turn.
  void unparkAll() {
    for (auto &[tid, turn] : turns)
      turn.parkedUntil = Clock::time_point();
  }

  llvm::Error enable(SteppedThread &recorder, uint64_t ip) {
    if (recorder.tracing)
      return llvm::Error::success();
    if (llvm::Error error = recorder.writer->enable(ip))
      return error;
    recorder.tracing = true;
    if (recorder.truth)
      recorder.truth->addEvent(TruthEventKind::Enable, 0, ip);
    return llvm::Error::success();
  }

  llvm::Error record(SteppedThread &recorder, const ExecutedInsn &insn) {
    if (llvm::Error error = enable(recorder, insn.ip))
      return error;
    if (llvm::Error error = recorder.writer->step(insn))
      return error;
    if (recorder.truth)
      recorder.truth->addInstruction(insn.ip, insn.size, insn.branch,
                                     insn.nextIp);
    ++session.stats.instructions;
    // A syscall leaves user space: the writer wrote TIP.PGD.
    if (insn.branch == BranchClass::Syscall)
      recorder.tracing = false;
    return llvm::Error::success();
  }

  /// A signal handler ran before the instruction at `ip`: an asynchronous
  /// transfer (FUP + TIP.PGD); tracing resumes in the handler.
  llvm::Error interrupted(SteppedThread &recorder, uint64_t ip,
                          uint64_t handler) {
    if (recorder.truth)
      recorder.truth->addEvent(TruthEventKind::Interrupt, ip, handler);
    if (!recorder.tracing)
      return llvm::Error::success();
    recorder.tracing = false;
    return recorder.writer->interrupt(ip);
  }

  /// Notes a fork: LLDB follows the parent and detaches the child.
  void noteFork(lldb::SBThread &thread, StepOutcome &outcome) {
    int64_t child = int64_t(registerValue(thread, "rax"));
    if (child > 0)
      outcome.notes.push_back(
          "thread " + std::to_string(thread.GetThreadID()) +
          " forked process " + std::to_string(child) +
          ", which runs untraced (the debugger follows the parent)");
  }

  /// Sets (once) the stepper's breakpoint at `address` (see `landings`).
  void land(uint64_t address) {
    if (landings.count(address))
      return;
    lldb::SBBreakpoint breakpoint = target.BreakpointCreateByAddress(address);
    if (!breakpoint.IsValid())
      return;
    landings[address] = breakpoint.GetID();
    breakpoints = breakpointAddresses(target, landings);
  }

  /// A deadline's SIGSTOP that met the step ending on its own waits in the
  /// process: it is taken now, by a step that stops before the thread's
  /// next instruction runs, so that it never ends a later step early or the
  /// user's next `continue`.
  llvm::Error takePendingStop(lldb::SBThread &thread) {
    uint64_t tid = thread.GetThreadID();
    if (!stopSignalPending(process.GetProcessID()))
      return llvm::Error::success();
    uint64_t pc = currentPc(thread);
    deadline.arm(AloneDeadline);
    lldb::SBError error;
    thread.StepInstruction(false, error);
    deadline.disarm();
    if (error.Fail() || currentPc(thread) != pc)
      return llvm::createStringError(
          "thread %llu ran past 0x%llx while the stepper took back a stop "
          "signal of its own (the trace ends here; 'process status' shows "
          "where it is)",
          (unsigned long long)tid, (unsigned long long)pc);
    return llvm::Error::success();
  }

  /// Logs the code outside files the instruction at `pc` is in
  /// (SteppedCode.h) and marks the thread's trace where its code changed.
  llvm::Error logCode(uint64_t pc, uint8_t size, SteppedThread *recorder) {
    auto read = [this](uint64_t address, uint8_t *buffer, size_t length) {
      lldb::SBError error;
      return process.ReadMemory(address, buffer, length, error);
    };
    SteppedCodeLog::Step step = session.emulate()->code().beforeStep(
        process.GetProcessID(), pc, size, read,
        recorder ? recorder->marks.seq : UINT64_MAX);
    if (!step.markSeq || !recorder)
      return llvm::Error::success();
    return recorder->marks.mark(*recorder->writer, step.markSeq);
  }

  llvm::Expected<Result> stepOne(lldb::SBThread &thread,
                                 SteppedThread *recorder, Turn &turn,
                                 bool otherThreads, StepOutcome &outcome);
  llvm::Error disableAll();
};

llvm::Expected<Stepper::Result> Stepper::stepOne(lldb::SBThread &thread,
                                                 SteppedThread *recorder,
                                                 Turn &turn, bool otherThreads,
                                                 StepOutcome &outcome) {
  uint64_t tid = thread.GetThreadID();
  uint64_t pc;
  ClassifiedInsn insn;
  uint64_t number = UINT64_MAX; ///< The syscall about to run, when known.
  if (turn.inSyscall) {
    pc = *turn.inSyscall;
    insn.size = 2;
    insn.branch = BranchClass::Syscall;
  } else {
    pc = currentPc(thread);
    uint8_t bytes[16];
    lldb::SBError error;
    size_t read = process.ReadMemory(pc, bytes, sizeof(bytes), error);
    if (read == 0)
      return llvm::createStringError(
          "cannot read the instruction at 0x%llx of thread %llu: %s (the "
          "thread left mapped code; use a plain 'continue')",
          (unsigned long long)pc, (unsigned long long)tid,
          error.GetCString() ? error.GetCString() : "unreadable");
    llvm::Expected<ClassifiedInsn> classified =
        session.classifier->classify(llvm::ArrayRef(bytes, read), pc);
    if (!classified)
      return classified.takeError();
    insn = *classified;
    if (insn.branch == BranchClass::Syscall)
      number = registerValue(thread, "rax");
    if (llvm::Error error = logCode(pc, insn.size, recorder))
      return std::move(error);
  }
  bool exec = isExec(number);
  std::optional<uint64_t> clone = insn.branch == BranchClass::Syscall
                                      ? cloneFlags(process, thread, number)
                                      : std::nullopt;
  bool fork = clone && !(*clone & CloneThread);
  // A child sharing the memory (vfork, posix_spawn) would run into the
  // breakpoint as well, detached: no landing for it.
  if (clone && ((*clone & CloneThread) || !(*clone & CloneVm)))
    land(pc + insn.size);
  // After an exec the old program's modules are gone, and its trace is
  // decoded with them.
  if (exec)
    session.lastModules = captureModules(target);

  deadline.arm(otherThreads ? SharedDeadline : AloneDeadline);
  lldb::SBError stepError;
  thread.StepInstruction(false, stepError);
  StepDeadline::Fired fired = deadline.disarm();
  bool ourInterrupt = fired != StepDeadline::Fired::No || lateInterrupt;
  lateInterrupt = false;
  ++session.stats.steps;
  if (stepError.Fail())
    return llvm::createStringError(
        "cannot step thread %llu at 0x%llx: %s (see 'process status')",
        (unsigned long long)tid, (unsigned long long)pc,
        stepError.GetCString());

  // The thread or the whole process ended: only a syscall (exit,
  // exit_group, or execve of another thread) was entered.
  lldb::StateType state = process.GetState();
  bool processGone = state == lldb::eStateExited ||
                     state == lldb::eStateDetached || !process.IsValid();
  lldb::SBThread after = process.GetThreadByID(tid);
  if (processGone || !after.IsValid() ||
      after.GetStopReason() == lldb::eStopReasonExec) {
    if (recorder && insn.branch == BranchClass::Syscall)
      if (llvm::Error error =
              record(*recorder, {pc, insn.size, insn.branch, 0}))
        return std::move(error);
    if (processGone) {
      outcome.kind = StepOutcome::Exited;
      outcome.exitStatus = process.GetExitStatus();
      return Result::Exited;
    }
    if (exec) {
      outcome.kind = StepOutcome::Exec;
      outcome.tid = tid;
      outcome.pc = pc;
      return Result::Stop;
    }
    if (recorder)
      recorder->gone = true;
    return Result::ThreadGone;
  }

  uint64_t next = currentPc(after);
  bool completed;
  if (insn.branch == BranchClass::Syscall) {
    uint64_t resume = pc + insn.size;
    turn.inSyscall.reset();
    if (next == resume && restartsSyscall(registerValue(after, "rax"))) {
      turn.inSyscall = pc; // Still in the kernel (interrupted).
      completed = false;
    } else {
      // At `pc`: stopped before the syscall began. Elsewhere than `resume`:
      // a signal handler runs on the way out (as after raise()).
      completed = next != pc;
    }
  } else {
    // A rep-string instruction traps once per iteration: one instruction.
    // LLDB stepping off a breakpoint site can also stop before it ran.
    completed = next != pc;
  }

  if (completed && recorder) {
    if (insn.branch == BranchClass::Other && next != pc + insn.size) {
      if (llvm::Error error = interrupted(*recorder, pc, next))
        return std::move(error);
    } else if (llvm::Error error =
                   record(*recorder, {pc, insn.size, insn.branch, next})) {
      return std::move(error);
    }
  }
  // An interrupt of ours that raced with a step ending on its own may stop
  // the next step early; one that stopped this step was used up.
  lateInterrupt = completed && fired != StepDeadline::Fired::No;
  if (completed && fork)
    noteFork(after, outcome);
  if (completed && number == SysFutex)
    unparkAll(); // It may have woken a parked thread.
  // mmap, munmap, mprotect: where code outside files is may have changed.
  if (completed && insn.branch == BranchClass::Syscall)
    session.emulate()->code().mappingsChanged();

  lldb::StopReason reason = after.GetStopReason();
  // Someone else halted the process: Ctrl-C in the lldb driver while the
  // step ran (LLDB passes it to the running process as a halt), `process
  // interrupt` or SBProcess::SendAsyncInterrupt from a script. LLDB marks
  // the stop as interrupted. (One that arrives between two steps LLDB
  // drops; Ctrl-C then reaches the command interpreter instead.) On this
  // host the deadline's own stop is a SIGSTOP that LLDB did not ask for, so
  // an interrupted stop is never ours; elsewhere ours is a halt too, and one
  // of someone else's that LLDB merged with it is taken for ours.
  bool halted = lldb::SBProcess::GetInterruptedFromEvent(
      process.GetStopEventForStopID(process.GetStopID()));
  bool stopSignal = reason == lldb::eStopReasonSignal &&
                    after.GetStopReasonDataAtIndex(0) == SIGSTOP;
  bool signalled = deadline.stopsBySignal() && !deadline.haltedLastStep();
  bool someoneElses =
      signalled ? halted : (halted || stopSignal) && !ourInterrupt;
  bool otherStop = reason == lldb::eStopReasonSignal ||
                   reason == lldb::eStopReasonException ||
                   reason == lldb::eStopReasonWatchpoint;
  std::string description = otherStop ? stopDescription(after) : "";
  if (deadline.stopsBySignal() && fired == StepDeadline::Fired::Deadline &&
      !stopSignal)
    if (llvm::Error error = takePendingStop(after))
      return std::move(error);
  if (someoneElses) {
    outcome.kind = StepOutcome::Interrupted;
    return Result::Stop;
  }
  if (stopSignal)
    return completed                                ? Result::Progress
           : fired == StepDeadline::Fired::Deadline ? Result::Blocked
                                                    : Result::NoProgress;
  if (otherStop) {
    outcome.kind = StepOutcome::Stopped;
    outcome.tid = tid;
    outcome.pc = next;
    outcome.description = description;
    return Result::Stop;
  }
  if (!completed)
    return fired == StepDeadline::Fired::Deadline ? Result::Blocked
                                                  : Result::NoProgress;
  if (insn.branch == BranchClass::Syscall)
    breakpoints = breakpointAddresses(target, landings); // dlopen may add some.
  auto hit = breakpoints.find(next);
  if (hit != breakpoints.end()) {
    outcome.kind = StepOutcome::Breakpoint;
    outcome.tid = tid;
    outcome.pc = next;
    outcome.breakpoints = hit->second;
    return Result::Stop;
  }
  return Result::Progress;
}

/// Writes FUP + TIP.PGD for every thread still tracing, at its PC.
llvm::Error Stepper::disableAll() {
  for (auto &[tid, recorder] : session.emulate()->stepped()) {
    if (!recorder.tracing)
      continue;
    recorder.tracing = false;
    lldb::SBThread thread = process.GetThreadByID(tid);
    if (!thread.IsValid())
      continue;
    auto turn = turns.find(tid);
    uint64_t pc = turn != turns.end() && turn->second.inSyscall
                      ? *turn->second.inSyscall
                      : currentPc(thread);
    if (pc == 0)
      continue;
    if (llvm::Error error = recorder.writer->disable(pc))
      return error;
    if (recorder.truth)
      recorder.truth->addEvent(
          TruthEventKind::Disable,
          recorder.truth->insns.empty() ? 0 : recorder.truth->insns.back(), pc);
  }
  return llvm::Error::success();
}

/// The threads LLDB lists now, by id.
std::vector<uint64_t> threadIds(lldb::SBProcess &process) {
  std::vector<uint64_t> tids;
  for (uint32_t i = 0, n = process.GetNumThreads(); i < n; ++i)
    tids.push_back(process.GetThreadAtIndex(i).GetThreadID());
  return tids;
}

/// Brings the round robin up to date with the threads that exist now; a
/// thread that appeared during the run ran on its own until LLDB stopped
/// it, and may have reached a breakpoint meanwhile (returns true, with
/// `outcome` set).
bool refreshTurns(Stepper &stepper, const std::vector<uint64_t> &tids,
                  bool firstRound, StepOutcome &outcome) {
  std::set<uint64_t> live(tids.begin(), tids.end());
  bool changed = false;
  for (auto it = stepper.turns.begin(); it != stepper.turns.end();)
    if (!live.count(it->first)) {
      it = stepper.turns.erase(it);
      changed = true;
    } else {
      ++it;
    }
  for (uint64_t tid : tids) {
    if (stepper.turns.count(tid))
      continue;
    lldb::SBThread thread = stepper.process.GetThreadByID(tid);
    Turn &turn = stepper.turns[tid];
    turn.inSyscall = syscallInProgress(stepper.process, thread);
    changed = true;
    if (firstRound || thread.GetStopReason() != lldb::eStopReasonBreakpoint)
      continue;
    auto hit = stepper.breakpoints.find(currentPc(thread));
    if (hit == stepper.breakpoints.end())
      continue;
    outcome.kind = StepOutcome::Breakpoint;
    outcome.tid = tid;
    outcome.pc = hit->first;
    outcome.breakpoints = hit->second;
    outcome.notes.push_back(
        "thread " + std::to_string(tid) + " is new and reached breakpoint " +
        std::to_string(hit->second.front()) +
        " before the stepper took it over, so it has no trace (a new thread "
        "runs untraced until LLDB stops it)");
    return true;
  }
  if (changed && !firstRound)
    stepper.unparkAll(); // A thread that ended may have been waited for.
  return false;
}

} // namespace

llvm::Expected<StepOutcome>
runTraced(lldb::SBDebugger &debugger, Session &session,
          const std::function<void(const StepProgress &)> &progress) {
  lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
  if (!process.IsValid() || process.GetState() != lldb::eStateStopped)
    return llvm::createStringError(
        "the process is not stopped (interrupt it with 'process interrupt', "
        "or launch it again)");
  if (!session.emulate())
    return llvm::createStringError(
        "the session does not record with the emulate backend (attach with "
        "'magic-trace attach --backend emulate')");

  bool wasAsync = debugger.GetAsync();
  debugger.SetAsync(false);
  CtrlCWatch ctrlC;
  Stepper stepper(debugger, session);
  // The process ran unstepped since the last run: its modules and mappings
  // may have changed.
  {
    lldb::SBTarget target = debugger.GetSelectedTarget();
    session.emulate()->code().setModules(captureModules(target));
  }
  StepOutcome outcome;
  Clock::time_point began = Clock::now();
  Clock::time_point lastProgress = began;
  uint64_t startInstructions = session.stats.instructions;
  llvm::Error failure = llvm::Error::success();
  bool done = false;
  for (bool firstRound = true; !done; firstRound = false) {
    if (stepper.interruptRequested()) {
      outcome.kind = StepOutcome::Interrupted;
      break;
    }
    std::vector<uint64_t> tids = threadIds(process);
    if (refreshTurns(stepper, tids, firstRound, outcome))
      break;
    // A round: every thread that can run gets a quantum. When all are
    // parked, the one due first is tried (its step's deadline bounds the
    // wait).
    Clock::time_point now = Clock::now();
    unsigned runnable = 0;
    uint64_t dueFirst = 0;
    Clock::time_point dueAt = Clock::time_point::max();
    for (auto &[tid, turn] : stepper.turns) {
      runnable += !turn.parked(now);
      if (turn.parkedUntil < dueAt) {
        dueAt = turn.parkedUntil;
        dueFirst = tid;
      }
    }
    for (uint64_t tid : tids) {
      Turn &turn = stepper.turns[tid];
      if (runnable ? turn.parked(Clock::now()) : tid != dueFirst)
        continue;
      lldb::SBThread thread = process.GetThreadByID(tid);
      if (!thread.IsValid())
        continue;
      SteppedThread *recorder = nullptr;
      if (session.traces(tid)) {
        llvm::Expected<SteppedThread *> created =
            session.emulate()->thread(tid);
        if (!created) {
          failure = created.takeError();
          done = true;
          break;
        }
        recorder = *created;
      }
      for (unsigned i = 0; i < Quantum && !done; ++i) {
        if (i && stepper.interruptRequested())
          break; // The round's start reports it.
        llvm::Expected<Stepper::Result> result = stepper.stepOne(
            thread, recorder, turn, stepper.turns.size() > 1, outcome);
        if (!result) {
          failure = result.takeError();
          done = true;
          break;
        }
        if (*result == Stepper::Result::Progress)
          turn.park = FirstPark;
        if (*result == Stepper::Result::Blocked) {
          stepper.park(turn);
          break;
        }
        if (*result == Stepper::Result::ThreadGone)
          break;
        done = *result == Stepper::Result::Exited ||
               *result == Stepper::Result::Stop;
      }
      if (done)
        break;
      now = Clock::now();
      if (progress && now - lastProgress >= ProgressInterval) {
        lastProgress = now;
        StepProgress line;
        line.instructions = session.stats.instructions - startInstructions;
        line.seconds = std::chrono::duration<double>(now - began).count();
        line.threads = stepper.turns.size();
        for (auto &[id, other] : stepper.turns)
          line.parked += other.parked(now) || other.inSyscall.has_value();
        progress(line);
      }
    }
  }
  session.stats.seconds +=
      std::chrono::duration<double>(Clock::now() - began).count();
  if (outcome.kind == StepOutcome::Exec) {
    // The old program's threads and code are gone: their streams just end.
    for (auto &[tid, recorder] : session.emulate()->stepped())
      recorder.tracing = false;
  } else if (outcome.kind != StepOutcome::Exited && process.IsValid()) {
    if (llvm::Error error = stepper.disableAll())
      failure = llvm::joinErrors(std::move(failure), std::move(error));
    // A deadline's signal no thread took (it met a thread's end) would stop
    // the user's next `continue`.
    lldb::SBThread selected = process.GetSelectedThread();
    if (stepper.deadline.stopsBySignal() && selected.IsValid())
      if (llvm::Error error = stepper.takePendingStop(selected))
        failure = llvm::joinErrors(std::move(failure), std::move(error));
  }
  debugger.SetAsync(wasAsync);
  if (failure)
    return std::move(failure);
  if (outcome.kind == StepOutcome::Exited) {
    session.exited = true;
    session.exitStatus = outcome.exitStatus;
  }
  if (outcome.kind == StepOutcome::Exec)
    session.execed = true;
  return outcome;
}

} // namespace magic_trace::plugin
