//===- EmulateStepper.cpp - Traced execution through the SB API -----------===//
//
// runTraced (EmulateStepper.h): the round robin over the process's threads,
// each stepped a quantum at a time (EmulateStep.h), until a breakpoint, a
// trigger, the exit or Ctrl-C.
//
//===----------------------------------------------------------------------===//
#include "EmulateStep.h"

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

using namespace emulate_detail;

namespace {

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
