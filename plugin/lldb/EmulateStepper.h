//===- EmulateStepper.h - Traced execution through the SB API ---*- C++ -*-===//
//
// The emulate backend's `magic-trace continue`: single-steps the target's
// threads with SBThread::StepInstruction, classifies each instruction
// (InsnClassifier) and feeds one PacketWriter per thread, until a breakpoint
// address is reached, the process exits or execs, a signal stops it, or the
// user interrupts. Threads take turns (a quantum of instructions each).
//
// It cannot hang: every step has a deadline (StepDeadline.h); a thread
// still in the kernel at its deadline (a futex, read, sleep, join) is parked
// while the others run, and retried after a back-off or when another thread
// may have woken it.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_EMULATESTEPPER_H
#define MAGIC_TRACE_PLUGIN_EMULATESTEPPER_H

#include "Session.h"

#include "lldb/API/SBDebugger.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace magic_trace::plugin {

/// Why traced execution stopped.
struct StepOutcome {
  enum Kind { Breakpoint, Exited, Exec, Interrupted, Stopped } kind = Stopped;
  uint64_t tid = 0; ///< The thread that stopped (Breakpoint, Stopped, Exec).
  uint64_t pc = 0;
  /// Breakpoint: every enabled breakpoint with a location at `pc`, in id
  /// order (a user's breakpoint and a trigger may share an address; each
  /// gets its hit).
  std::vector<lldb::break_id_t> breakpoints;
  int exitStatus = 0;
  std::string description; ///< Stopped: LLDB's stop description.
  /// Things the user should know about the run, one line each ("thread T
  /// forked process C, which runs untraced").
  std::vector<std::string> notes;
};

/// What the progress line shows.
struct StepProgress {
  uint64_t instructions = 0; ///< Recorded by this run.
  double seconds = 0;
  unsigned threads = 0;
  unsigned parked = 0; ///< Threads blocked in the kernel right now.
};

/// Steps every thread of the selected process until something stops it.
/// Every writer is left disabled (FUP + TIP.PGD at the thread's PC), so the
/// time until the next traced run shows as untraced. `progress` is called
/// about every two seconds.
/// Errors: no stopped process, an instruction that cannot be read or
/// classified, a step LLDB refuses.
llvm::Expected<StepOutcome>
runTraced(lldb::SBDebugger &debugger, Session &session,
          const std::function<void(const StepProgress &)> &progress);

} // namespace magic_trace::plugin

#endif
