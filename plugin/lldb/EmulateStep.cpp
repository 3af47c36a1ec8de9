//===- EmulateStep.cpp - One step of the SB-API stepper -------------------===//
//
// Stepper::stepOne (EmulateStep.h): a thread stepped one instruction with a
// deadline, its packets written, and what its stop means (a syscall, a
// signal, a new thread or process, a breakpoint, someone else's stop).
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

namespace magic_trace::plugin::emulate_detail {

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

} // namespace magic_trace::plugin::emulate_detail
