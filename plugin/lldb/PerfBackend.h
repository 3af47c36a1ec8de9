//===- PerfBackend.h - The perf backend's LLDB side -------------*- C++ -*-===//
//
// What LLDB adds to the core's perf recorder (ProcessRecorder.h,
// PerfSession.h): the process's threads and platform at attach, and the
// resume of backends that record while the process runs (a plain process
// continue, which returns at the next stop).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_PERFBACKEND_H
#define MAGIC_TRACE_PLUGIN_PERFBACKEND_H

#include "EmulateStepper.h"
#include "Session.h"

namespace magic_trace::plugin {

/// Starts the perf recorder on every thread of `process`. Fails with the
/// core's one-line error (another platform, no intel_pt PMU, permissions,
/// ...). Notes (degradations, smaller buffers) are appended to `notes`.
llvm::Expected<std::unique_ptr<ProcessRecorder>>
startPerf(lldb::SBProcess &process, TimerResolution timer, uint64_t bufferSize,
          std::vector<std::string> &notes);

/// Resumes the process until it stops or exits. Also the qemu backend's
/// resume (its recorder needs nothing at a stop either).
llvm::Expected<StepOutcome> runPerf(lldb::SBDebugger &debugger,
                                    Session &session);

} // namespace magic_trace::plugin

#endif
