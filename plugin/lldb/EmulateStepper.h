//===- EmulateStepper.h - Traced execution through the SB API ---*- C++ -*-===//
//
// The emulate backend's `magic-trace continue`: single-steps the target's
// threads with SBThread::StepInstruction, classifies each instruction
// (InsnClassifier) and feeds one PacketWriter per thread, until a breakpoint
// address is reached, the process exits, a signal stops it, or the user
// interrupts. Threads take turns (a quantum of instructions each); a
// syscall that blocks is interrupted after a timeout and retried later, so
// a thread waiting for another does not hang the debugger.
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

namespace magic_trace::plugin {

/// Why traced execution stopped.
struct StepOutcome {
  enum Kind { Breakpoint, Exited, Interrupted, Stopped } kind = Stopped;
  uint64_t tid = 0; ///< The thread that stopped (Breakpoint, Stopped).
  uint64_t pc = 0;
  lldb::break_id_t breakpoint = 0; ///< Breakpoint: which one.
  int exitStatus = 0;
  std::string description; ///< Stopped: LLDB's stop description.
};

/// Steps every thread of the selected process until something stops it.
/// Every writer is left disabled (FUP + TIP.PGD at the thread's PC), so the
/// time until the next traced run shows as untraced. `progress` is called
/// about every two seconds with the instructions recorded so far.
/// Errors: no stopped process, an instruction that cannot be read or
/// classified, a step LLDB refuses.
llvm::Expected<StepOutcome>
runTraced(lldb::SBDebugger &debugger, Session &session,
          const std::function<void(uint64_t, double)> &progress);

} // namespace magic_trace::plugin

#endif
