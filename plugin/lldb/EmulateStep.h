//===- EmulateStep.h - One step of the SB-API stepper -----------*- C++ -*-===//
//
// Private to plugin/lldb/: the stepping state of one traced run
// (EmulateStepper.cpp's runTraced): each thread's turn in the round robin,
// and the Stepper that steps one thread one instruction through the SB API
// and records it (EmulateStep.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_LLDB_EMULATESTEP_H
#define MAGIC_TRACE_PLUGIN_LLDB_EMULATESTEP_H

#include "EmulateStepper.h"
#include "StepDeadline.h"
#include "ThreadSyscalls.h"

#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBDebugger.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include <chrono>
#include <map>
#include <optional>
#include <vector>

namespace magic_trace::plugin::emulate_detail {

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

std::string stopDescription(lldb::SBThread &thread);

/// Load address -> the ids of every enabled user breakpoint with a location
/// there, in id order (not the stepper's own, `skip`).
std::map<uint64_t, std::vector<lldb::break_id_t>>
breakpointAddresses(lldb::SBTarget &target,
                    const std::map<uint64_t, lldb::break_id_t> &skip);

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

} // namespace magic_trace::plugin::emulate_detail

#endif
