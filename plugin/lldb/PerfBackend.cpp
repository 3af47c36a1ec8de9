//===- PerfBackend.cpp - The perf backend's LLDB side ---------------------===//
#include "PerfBackend.h"

#include "magic_trace/MachineFacts.h"

#include "lldb/API/SBPlatform.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include "llvm/ADT/STLExtras.h"

namespace magic_trace::plugin {
llvm::Expected<std::unique_ptr<ProcessRecorder>>
startPerf(lldb::SBProcess &process, TimerResolution timer, uint64_t bufferSize,
          std::vector<std::string> &notes) {
  std::vector<uint64_t> tids;
  for (uint32_t i = 0; i < process.GetNumThreads(); ++i)
    tids.push_back(process.GetThreadAtIndex(i).GetThreadID());
  PerfStartOptions options;
  options.timer = timer;
  options.bufferSize = bufferSize;
  const char *platform = process.GetTarget().GetPlatform().GetName();
  options.platform = platform ? platform : "";
  return startPerfRecorder(process.GetProcessID(), tids, options, notes);
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
  // New threads need nothing here: the kernel copied the events into them
  // when they were created (inherit), and the QEMU recorder finds them too.
  lldb::SBThread thread = process.GetSelectedThread();
  outcome.tid = thread.GetThreadID();
  outcome.pc = thread.GetFrameAtIndex(0).GetPC();
  if (thread.GetStopReason() == lldb::eStopReasonBreakpoint &&
      thread.GetStopReasonDataCount() > 0) {
    // The stop reason's data are (breakpoint id, location id) pairs, one
    // per breakpoint with a location here.
    outcome.kind = StepOutcome::Breakpoint;
    for (size_t i = 0; i + 1 < thread.GetStopReasonDataCount(); i += 2) {
      auto id =
          static_cast<lldb::break_id_t>(thread.GetStopReasonDataAtIndex(i));
      if (!llvm::is_contained(outcome.breakpoints, id))
        outcome.breakpoints.push_back(id);
    }
    return outcome;
  }
  char description[256] = {0};
  thread.GetStopDescription(description, sizeof(description));
  outcome.kind = StepOutcome::Stopped;
  outcome.description = description;
  return outcome;
}

} // namespace magic_trace::plugin
