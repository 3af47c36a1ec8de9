//===- PerfBackend.cpp - The perf backend's LLDB side ---------------------===//
#include "PerfBackend.h"

#include "magic_trace/MachineFacts.h"

#include "lldb/API/SBThread.h"

namespace magic_trace::plugin {
namespace {

/// Starts recording every thread of `process` the session traces and does
/// not record yet. A thread that exited meanwhile is skipped with a note.
llvm::Error addThreads(Session &session, lldb::SBProcess &process,
                       std::vector<std::string> &notes) {
  for (uint32_t i = 0; i < process.GetNumThreads(); ++i) {
    uint64_t tid = process.GetThreadAtIndex(i).GetThreadID();
    if (!session.traces(tid) || session.perf->isTracing(tid))
      continue;
    if (llvm::Error error = session.perf->addThread(tid))
      return error;
  }
  for (const std::string &note : session.perf->notes())
    notes.push_back(note);
  return llvm::Error::success();
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
      llvm::consumeError(std::move(error)); // A thread that died is skipped.
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
