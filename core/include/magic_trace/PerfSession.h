//===- PerfSession.h - The perf backend, for any debugger host --*- C++ -*-===//
//
// What a debugger host does to record a process with Intel PT through
// perf_event_open (PerfRecorder.h), the same for LLDB and GDB: the checks
// that are not tied to a debugger (the target is a process of this machine
// and of this PID namespace; the PMU, permissions and the locked-memory
// budget are PerfRecorder's), the recorder started on every thread, and a
// snapshot's threads, clock and timing read from its rings. A host supplies
// only what its debugger knows: the pid, the threads, where the target runs,
// which threads to keep.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PERFSESSION_H
#define MAGIC_TRACE_PERFSESSION_H

#include "magic_trace/PacketWriter.h"
#include "magic_trace/PerfRecorder.h"
#include "magic_trace/Snapshot.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace magic_trace {

struct PerfStartOptions {
  TimerResolution timer = TimerResolution::Normal;
  uint64_t bufferSize = 4 << 20;
  /// Where the debugger says the target runs: "" or "host" for this
  /// machine; anything else (a remote platform, QEMU's gdbstub) is refused.
  std::string platform;
  /// The host's name for the command a user without Intel PT runs instead
  /// ("'magic-trace run'"), already in the advice: for the error's tail.
  std::string debugger = "LLDB";
};

/// Starts recording process `pid`, whose threads are `tids` (threads
/// created later are traced from their first instruction: per-CPU events
/// with inherit). Notes (degradations, smaller buffers) go to `notes`.
/// Errors (one line each, saying what to do): a target on another platform
/// or in another PID namespace; PerfRecorder's (no intel_pt PMU, with the
/// advice to use 'magic-trace run'; permissions; the budget).
llvm::Expected<std::unique_ptr<PerfRecorder>>
startPerfRecording(uint64_t pid, const std::vector<uint64_t> &tids,
                   const PerfStartOptions &options,
                   std::vector<std::string> &notes);

/// Fills `snapshot`'s clock, timing and the threads `traces` keeps from the
/// recorder's rings (the target stopped). Errors: the recorder's.
llvm::Error fillPerfSnapshot(PerfRecorder &recorder,
                             const std::function<bool(uint64_t)> &traces,
                             Snapshot &snapshot);

} // namespace magic_trace

#endif
