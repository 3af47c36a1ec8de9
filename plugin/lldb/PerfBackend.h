//===- PerfBackend.h - The perf backend's LLDB side -------------*- C++ -*-===//
//
// Wires core/PerfRecorder (Intel PT through perf_event_open) into a session:
// start recording the process at attach (per-CPU events with inherit, so
// threads created later are traced from their first instruction), resume
// with a plain process continue (the hardware records while the target
// runs), and hand the rings to takeSnapshot.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_PERFBACKEND_H
#define MAGIC_TRACE_PLUGIN_PERFBACKEND_H

#include "EmulateStepper.h"
#include "Session.h"

namespace magic_trace::plugin {

/// Creates the recorder and starts every traced thread of `process`. Fails
/// with the recorder's one-line error (no intel_pt PMU, permissions, ...);
/// the session is then left unattached. Notes (degradations, smaller
/// buffers) are appended to `notes`.
llvm::Error startPerf(Session &session, lldb::SBProcess &process,
                      TimerResolution timer, uint64_t bufferSize,
                      std::vector<std::string> &notes);

/// Resumes the process until it stops or exits. Also the qemu backend's
/// resume (its recorder needs nothing at a stop either).
llvm::Expected<StepOutcome> runPerf(lldb::SBDebugger &debugger,
                                    Session &session);

/// Fills the snapshot's threads, time conversion and timing from the rings.
llvm::Error fillPerfSnapshot(Session &session, Snapshot &snapshot);

} // namespace magic_trace::plugin

#endif
