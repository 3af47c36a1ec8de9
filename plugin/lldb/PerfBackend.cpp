//===- PerfBackend.cpp - The perf backend's LLDB side ---------------------===//
#include "PerfBackend.h"

#include "magic_trace/MachineFacts.h"

#include "lldb/API/SBThread.h"

namespace magic_trace::plugin {
namespace {

/// Starts recording every thread of `process` the session traces and does
/// not record yet. A thread that cannot be traced (it exited meanwhile, or
/// the kernel refused it) is skipped with a note, and the threads after it
/// are still tried: one failing thread must not leave the rest untraced.
/// Fails only when no thread of the process is traced at all (the first
/// failure says why).
llvm::Error addThreads(Session &session, lldb::SBProcess &process,
                       std::vector<std::string> &notes) {
  llvm::Error first = llvm::Error::success();
  bool anyTraced = false, anyFailed = false;
  for (uint32_t i = 0; i < process.GetNumThreads(); ++i) {
    uint64_t tid = process.GetThreadAtIndex(i).GetThreadID();
    if (!session.traces(tid))
      continue;
    if (session.perf->isTracing(tid)) {
      anyTraced = true;
      continue;
    }
    llvm::Error error = session.perf->addThread(tid);
    if (!error) {
      anyTraced = true;
      continue;
    }
    std::string message = llvm::toString(std::move(error));
    notes.push_back("thread " + std::to_string(tid) +
                    " is not traced: " + message);
    if (!anyFailed)
      first = llvm::joinErrors(
          std::move(first),
          llvm::createStringError(llvm::inconvertibleErrorCode(), message));
    anyFailed = true;
  }
  for (const std::string &note : session.perf->notes())
    notes.push_back(note);
  if (anyTraced || !anyFailed) {
    llvm::consumeError(std::move(first));
    return llvm::Error::success();
  }
  return first;
}

} // namespace

llvm::Error startPerf(Session &session, lldb::SBProcess &process,
                      TimerResolution timer, uint64_t bufferSize,
                      std::vector<std::string> &notes) {
  PerfRecorder::Options options;
  options.timer = timer;
  options.auxSize = bufferSize;
  llvm::Expected<std::unique_ptr<PerfRecorder>> recorder =
      PerfRecorder::create(options);
  if (!recorder)
    return recorder.takeError();
  session.perf = std::move(*recorder);
  if (llvm::Error error = addThreads(session, process, notes)) {
    session.perf.reset();
    return error;
  }
  return llvm::Error::success();
}

llvm::Expected<StepOutcome> runPerf(lldb::SBDebugger &debugger,
                                    Session &session) {
  lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
  if (!process.IsValid() || process.GetState() != lldb::eStateStopped)
    return llvm::createStringError("the process is not stopped (stop it with "
                                   "'process interrupt' first)");
  // The hardware records while the target runs: a synchronous continue
  // returns at the next stop.
  bool wasAsync = debugger.GetAsync();
  debugger.SetAsync(false);
  lldb::SBError error = process.Continue();
  debugger.SetAsync(wasAsync);
  if (error.Fail())
    return llvm::createStringError("cannot continue the process: %s",
                                   error.GetCString());
  StepOutcome outcome;
  lldb::StateType state = process.GetState();
  if (state == lldb::eStateExited) {
    outcome.kind = StepOutcome::Exited;
    outcome.exitStatus = process.GetExitStatus();
    return outcome;
  }
  std::vector<std::string> notes;
  if (session.perf) // The QEMU recorder finds new threads by itself.
    if (llvm::Error error = addThreads(session, process, notes))
      llvm::consumeError(std::move(error)); // Each failure is a note.
  outcome.notes.insert(outcome.notes.end(), notes.begin(), notes.end());
  lldb::SBThread thread = process.GetSelectedThread();
  outcome.tid = thread.GetThreadID();
  outcome.pc = thread.GetFrameAtIndex(0).GetPC();
  if (thread.GetStopReason() == lldb::eStopReasonBreakpoint &&
      thread.GetStopReasonDataCount() > 0) {
    outcome.kind = StepOutcome::Breakpoint;
    outcome.breakpoint =
        static_cast<lldb::break_id_t>(thread.GetStopReasonDataAtIndex(0));
    return outcome;
  }
  char description[256] = {0};
  thread.GetStopDescription(description, sizeof(description));
  outcome.kind = StepOutcome::Stopped;
  outcome.description = description;
  return outcome;
}

llvm::Error fillPerfSnapshot(Session &session, Snapshot &snapshot) {
  llvm::Expected<TimeConversion> time = session.perf->timeConversion();
  if (!time)
    return time.takeError();
  snapshot.time = *time;
  snapshot.timing = session.perf->timing();
  for (uint64_t tid : session.perf->threadIds()) {
    llvm::Expected<ThreadTrace> trace = session.perf->snapshotThread(tid);
    if (!trace)
      return trace.takeError();
    if (!trace->bytes.empty())
      snapshot.threads.push_back(std::move(*trace));
  }
  return llvm::Error::success();
}

} // namespace magic_trace::plugin
