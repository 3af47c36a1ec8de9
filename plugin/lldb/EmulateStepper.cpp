//===- EmulateStepper.cpp - Traced execution through the SB API -----------===//
#include "EmulateStepper.h"

#include "lldb/API/SBBreakpoint.h"
#include "lldb/API/SBBreakpointLocation.h"
#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBError.h"
#include "lldb/API/SBFrame.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBStream.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace magic_trace::plugin {
namespace {

using Clock = std::chrono::steady_clock;

/// Instructions a thread runs before the next thread's turn.
constexpr unsigned Quantum = 200;
/// A syscall still running after this long, with other threads to run, is
/// interrupted and retried later (it may wait for one of them).
constexpr auto BlockedSyscallTimeout = std::chrono::milliseconds(150);
constexpr unsigned MaxBackoffRounds = 32;

/// Interrupts the process when a step takes longer than a deadline: a step
/// of a blocking syscall with the other threads stopped would never end.
class Watchdog {
public:
  explicit Watchdog(lldb::SBProcess process)
      : process(process), worker([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      quit = true;
    }
    wake.notify_all();
    worker.join();
  }
  void arm(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mutex);
    deadline = Clock::now() + timeout;
    armed = true;
    fired = false;
    wake.notify_all();
  }
  /// Returns whether the deadline passed (and the process was interrupted).
  bool disarm() {
    std::lock_guard<std::mutex> lock(mutex);
    armed = false;
    wake.notify_all();
    return fired;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!quit) {
      if (!armed) {
        wake.wait(lock);
        continue;
      }
      if (wake.wait_until(lock, deadline) == std::cv_status::timeout && armed &&
          !quit) {
        fired = true;
        armed = false;
        process.SendAsyncInterrupt();
      }
    }
  }

  lldb::SBProcess process;
  std::mutex mutex;
  std::condition_variable wake;
  Clock::time_point deadline;
  bool armed = false;
  bool fired = false;
  bool quit = false;
  std::thread worker;
};

/// Load address -> breakpoint id of every enabled user breakpoint location.
std::map<uint64_t, lldb::break_id_t>
breakpointAddresses(lldb::SBTarget &target) {
  std::map<uint64_t, lldb::break_id_t> addresses;
  for (uint32_t i = 0, n = target.GetNumBreakpoints(); i < n; ++i) {
    lldb::SBBreakpoint breakpoint = target.GetBreakpointAtIndex(i);
    if (!breakpoint.IsEnabled())
      continue;
    for (size_t l = 0, count = breakpoint.GetNumLocations(); l < count; ++l) {
      lldb::SBBreakpointLocation location = breakpoint.GetLocationAtIndex(l);
      if (!location.IsEnabled())
        continue;
      lldb::addr_t address = location.GetLoadAddress();
      if (address != LLDB_INVALID_ADDRESS)
        addresses.emplace(address, breakpoint.GetID());
    }
  }
  return addresses;
}

uint64_t currentPc(lldb::SBThread &thread) {
  return thread.GetFrameAtIndex(0).GetPC();
}

std::string stopDescription(lldb::SBThread &thread) {
  char buffer[256];
  size_t length = thread.GetStopDescription(buffer, sizeof(buffer));
  return length ? std::string(buffer) : std::string("stopped");
}

/// Stepping state shared by the loop's helpers.
struct Stepper {
  lldb::SBDebugger &debugger;
  Session &session;
  lldb::SBTarget target;
  lldb::SBProcess process;
  Watchdog watchdog;
  std::map<uint64_t, lldb::break_id_t> breakpoints;

  enum class Result { Ok, Blocked, ThreadGone, Exited, Stop };

  bool interruptRequested() {
    return debugger.InterruptRequested() ||
           debugger.GetCommandInterpreter().WasInterrupted();
  }

  llvm::Error record(ThreadRecorder &recorder, const ExecutedInsn &insn) {
    if (!recorder.tracing) {
      if (llvm::Error error = recorder.writer->enable(insn.ip))
        return error;
      recorder.tracing = true;
    }
    if (llvm::Error error = recorder.writer->step(insn))
      return error;
    ++session.stats.instructions;
    // A syscall leaves user space: the writer wrote TIP.PGD.
    if (insn.branch == BranchClass::Syscall)
      recorder.tracing = false;
    return llvm::Error::success();
  }

  /// One instruction of `thread`. On Stop, `outcome` says why.
  llvm::Expected<Result> stepOne(lldb::SBThread &thread,
                                 ThreadRecorder *recorder, bool otherThreads,
                                 StepOutcome &outcome) {
    uint64_t tid = thread.GetThreadID();
    uint64_t pc;
    ClassifiedInsn insn;
    if (recorder && recorder->pendingSyscall) {
      pc = recorder->pendingSyscall->first;
      insn.size = recorder->pendingSyscall->second;
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
    }

    bool guard = otherThreads && insn.branch == BranchClass::Syscall;
    if (guard)
      watchdog.arm(BlockedSyscallTimeout);
    lldb::SBError stepError;
    thread.StepInstruction(false, stepError);
    bool timedOut = guard && watchdog.disarm();
    ++session.stats.steps;
    if (stepError.Fail())
      return llvm::createStringError(
          "cannot step thread %llu at 0x%llx: %s (see 'process status')",
          (unsigned long long)tid, (unsigned long long)pc,
          stepError.GetCString());

    lldb::StateType state = process.GetState();
    if (state == lldb::eStateExited || state == lldb::eStateDetached ||
        !process.IsValid()) {
      if (recorder)
        if (llvm::Error error =
                record(*recorder, {pc, insn.size, insn.branch, pc + insn.size}))
          return std::move(error);
      outcome.kind = StepOutcome::Exited;
      outcome.exitStatus = process.GetExitStatus();
      return Result::Exited;
    }
    lldb::SBThread after = process.GetThreadByID(tid);
    if (!after.IsValid()) {
      // The thread ran its exit syscall.
      if (recorder) {
        if (llvm::Error error =
                record(*recorder, {pc, insn.size, insn.branch, pc + insn.size}))
          return std::move(error);
        recorder->gone = true;
      }
      return Result::ThreadGone;
    }
    lldb::StopReason reason = after.GetStopReason();
    if (timedOut && reason != lldb::eStopReasonPlanComplete &&
        reason != lldb::eStopReasonTrace) {
      // Still in the kernel: it completes on a later step.
      if (recorder)
        recorder->pendingSyscall.emplace(pc, insn.size);
      return Result::Blocked;
    }
    uint64_t next = currentPc(after);
    if (recorder) {
      recorder->pendingSyscall.reset();
      // A rep-string instruction traps once per iteration: one instruction.
      if (next == pc && insn.branch == BranchClass::Other) {
      } else if (insn.branch == BranchClass::Other && next != pc + insn.size) {
        // A signal handler ran before this instruction: an asynchronous
        // transfer (FUP + TIP.PGD), tracing resumes in the handler.
        if (recorder->tracing) {
          if (llvm::Error error = recorder->writer->interrupt(pc))
            return std::move(error);
          recorder->tracing = false;
        }
      } else if (llvm::Error error =
                     record(*recorder, {pc, insn.size, insn.branch, next})) {
        return std::move(error);
      }
    }

    if (reason == lldb::eStopReasonSignal ||
        reason == lldb::eStopReasonException ||
        reason == lldb::eStopReasonWatchpoint) {
      outcome.kind = StepOutcome::Stopped;
      outcome.tid = tid;
      outcome.pc = next;
      outcome.description = stopDescription(after);
      return Result::Stop;
    }
    // No progress (a rep-string iteration, or LLDB stepping off a
    // breakpoint site in two stops): not a new arrival at a breakpoint.
    if (next == pc)
      return Result::Ok;
    if (insn.branch == BranchClass::Syscall)
      breakpoints = breakpointAddresses(target); // dlopen may add locations.
    auto hit = breakpoints.find(next);
    if (hit != breakpoints.end()) {
      outcome.kind = StepOutcome::Breakpoint;
      outcome.tid = tid;
      outcome.pc = next;
      outcome.breakpoint = hit->second;
      return Result::Stop;
    }
    return Result::Ok;
  }

  /// Writes FUP + TIP.PGD for every thread still tracing, at its PC.
  llvm::Error disableAll() {
    for (auto &[tid, recorder] : session.recorders) {
      if (!recorder.tracing)
        continue;
      lldb::SBThread thread = process.GetThreadByID(tid);
      uint64_t pc = recorder.pendingSyscall ? recorder.pendingSyscall->first
                    : thread.IsValid()      ? currentPc(thread)
                                            : 0;
      recorder.tracing = false;
      if (pc == 0)
        continue;
      if (llvm::Error error = recorder.writer->disable(pc))
        return error;
    }
    return llvm::Error::success();
  }
};

} // namespace

llvm::Expected<StepOutcome>
runTraced(lldb::SBDebugger &debugger, Session &session,
          const std::function<void(uint64_t, double)> &progress) {
  lldb::SBTarget target = debugger.GetSelectedTarget();
  lldb::SBProcess process = target.GetProcess();
  if (!process.IsValid() || process.GetState() != lldb::eStateStopped)
    return llvm::createStringError(
        "the process is not stopped (interrupt it with 'process interrupt', "
        "or launch it again)");

  bool wasAsync = debugger.GetAsync();
  debugger.SetAsync(false);
  Stepper stepper{debugger, session,           target,
                  process,  Watchdog(process), breakpointAddresses(target)};
  StepOutcome outcome;
  Clock::time_point began = Clock::now();
  Clock::time_point lastProgress = began;
  uint64_t startInstructions = session.stats.instructions;
  llvm::Error failure = llvm::Error::success();
  bool done = false;
  while (!done) {
    if (stepper.interruptRequested()) {
      outcome.kind = StepOutcome::Interrupted;
      break;
    }
    // One round: every live thread gets a quantum.
    std::vector<uint64_t> tids;
    for (uint32_t i = 0, n = process.GetNumThreads(); i < n; ++i)
      tids.push_back(process.GetThreadAtIndex(i).GetThreadID());
    bool otherThreads = tids.size() > 1;
    for (uint64_t tid : tids) {
      lldb::SBThread thread = process.GetThreadByID(tid);
      if (!thread.IsValid())
        continue;
      ThreadRecorder *recorder = nullptr;
      if (session.traces(tid)) {
        llvm::Expected<ThreadRecorder *> created = session.recorder(tid);
        if (!created) {
          failure = created.takeError();
          done = true;
          break;
        }
        recorder = *created;
        if (recorder->skipRounds > 0 && otherThreads) {
          --recorder->skipRounds;
          continue;
        }
      }
      for (unsigned i = 0; i < Quantum && !done; ++i) {
        llvm::Expected<Stepper::Result> result =
            stepper.stepOne(thread, recorder, otherThreads, outcome);
        if (!result) {
          failure = result.takeError();
          done = true;
          break;
        }
        if (*result == Stepper::Result::Blocked) {
          if (recorder) {
            recorder->skipRounds = recorder->backoff;
            recorder->backoff =
                std::min(recorder->backoff * 2, MaxBackoffRounds);
          }
          break;
        }
        if (recorder)
          recorder->backoff = 1;
        if (*result == Stepper::Result::ThreadGone)
          break;
        if (*result == Stepper::Result::Exited ||
            *result == Stepper::Result::Stop) {
          done = true;
          break;
        }
      }
      if (done)
        break;
      Clock::time_point now = Clock::now();
      if (progress && now - lastProgress > std::chrono::seconds(2)) {
        lastProgress = now;
        progress(session.stats.instructions - startInstructions,
                 std::chrono::duration<double>(now - began).count());
      }
    }
  }
  session.stats.seconds +=
      std::chrono::duration<double>(Clock::now() - began).count();
  if (outcome.kind != StepOutcome::Exited && process.IsValid())
    if (llvm::Error error = stepper.disableAll())
      failure = llvm::joinErrors(std::move(failure), std::move(error));
  debugger.SetAsync(wasAsync);
  if (failure)
    return std::move(failure);
  if (outcome.kind == StepOutcome::Exited) {
    session.exited = true;
    session.exitStatus = outcome.exitStatus;
  }
  return outcome;
}

} // namespace magic_trace::plugin
