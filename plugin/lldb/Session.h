//===- Session.h - One debugger's magic-trace recording ---------*- C++ -*-===//
//
// What `magic-trace attach` starts and the other commands share: the
// recorder (ProcessRecorder.h), the snapshot triggers, and the snapshots
// taken so far. One Session per SBDebugger, found by its id.
// Also the adapter from SB objects to the core's Snapshot (modules, threads,
// stop context).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_SESSION_H
#define MAGIC_TRACE_PLUGIN_SESSION_H

#include "magic_trace/GroundTruth.h"
#include "magic_trace/InsnClassifier.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/ProcessRecorder.h"
#include "magic_trace/RecorderSnapshots.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/SnapshotLog.h"

#include "lldb/API/SBDebugger.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBTarget.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace::plugin {

/// `snapshot-on`: a breakpoint whose hits take snapshots.
struct Trigger {
  lldb::break_id_t breakpoint = 0;
  std::string description; ///< "function handle_order", "0x401136", ...
  unsigned count = 0;      ///< Stop triggering after this many hits; 0: never.
  unsigned hits = 0;
  bool continueAfter = false;
  /// snapshot-on created the breakpoint (and detach deletes it); false for
  /// a BREAKPOINT-ID the user gave.
  bool ownsBreakpoint = true;
  std::string pattern;  ///< Output path; %N is the snapshot number.
  WindowOptions window; ///< --window, --max-slices.
  /// A trigger inside the QEMU recorder (snapshot-on --continue under the
  /// qemu backend): the function entry it fires at; no breakpoint.
  uint64_t recorderAddress = 0;
  bool active() const { return count == 0 || hits < count; }
};

/// Counters of the emulate stepper over a session.
struct StepperStats {
  uint64_t instructions = 0; ///< Instructions recorded.
  uint64_t steps = 0;        ///< StepInstruction calls.
  double seconds = 0;        ///< Wall time spent stepping.
};

struct Session {
  // The recording (valid while `attached`).
  bool attached = false;
  uint64_t pid = 0;
  std::string backend; ///< "emulate", "perf" or "qemu".
  /// The recording (ProcessRecorder.h): the perf backend's rings, the QEMU
  /// recorder's, or the packet writers the emulate stepper writes.
  std::unique_ptr<ProcessRecorder> recorder;
  /// The QEMU recorder's ring directory (backend "qemu" only), and the QEMU
  /// process's pid (LLDB's gdb-remote connection to QEMU reports pid 1).
  std::string qemuDir;
  uint64_t qemuPid = 0;
  /// Snapshots trigger callbacks took since the last command resumed the
  /// process (backends that record while it runs).
  std::vector<SnapshotRecord *> triggered;
  PacketWriter::Options writerOptions;
  std::string timerName = "normal";
  /// Which threads to trace; empty with allThreads false means the thread
  /// selected at attach.
  bool allThreads = true;
  std::vector<uint64_t> threadFilter;
  std::unique_ptr<InsnClassifier> classifier;
  std::vector<Module> lastModules; ///< Module list last seen while alive.
  std::vector<Trigger> triggers;
  StepperStats stats;
  /// Keep every executed address per thread (attach --ground-truth).
  bool keepTruth = false;
  bool exited = false;
  int exitStatus = 0;
  /// The process called exec: the recorded program is gone, and its
  /// snapshots use the modules seen before the exec.
  bool execed = false;

  // Kept after detach, for save and report.
  SnapshotLog snapshots;
  /// Symbol tables and DWARF read by earlier snapshots, reused by the next
  /// (keyed by build-id, or path, size and time: a rebuilt file is re-read).
  std::unique_ptr<SymbolCache> symbols = std::make_unique<SymbolCache>();
  /// Held by whoever uses `snapshots`, `symbols`, `lastModules` or
  /// `triggers` while recorderSnapshots' worker may run.
  std::mutex lock;
  /// The recorder's own snapshots (DIR/snap-N), decoded by a worker as
  /// they come (backend "qemu" only). Last: its worker stops before the
  /// members it uses go.
  std::unique_ptr<RecorderSnapshots> recorderSnapshots;

  /// Whether `tid` is to be traced.
  bool traces(uint64_t tid) const;
  /// The emulate backend's recorder, or null under another backend.
  EmulateRecorder *emulate() const {
    return recorder && recorder->backend() == "emulate"
               ? static_cast<EmulateRecorder *>(recorder.get())
               : nullptr;
  }
  /// The recorder records while the process runs (perf, qemu).
  bool recordsRunning() const {
    return recorder && recorder->recordsWhileRunning();
  }
  /// The trigger on `breakpoint`, or null.
  Trigger *findTrigger(lldb::break_id_t breakpoint);
  llvm::json::Value statusJson() const;
};

/// Removes `path` (a directory this plugin made, with its files) when the
/// debugger exits.
void removeAtExit(const std::string &path);

/// This debugger's private directory, $TMPDIR/magic-trace-lldb-XXXXXX (0700,
/// naming this process as its owner): the vdso copies, the QEMU rings and
/// LLDB's own temporary directory for QEMU's socket live in it, so nothing
/// we write has a name another user could plant or redirect. Made on first
/// use, after removing what debuggers killed earlier left behind; removed
/// when the debugger exits.
/// Errors: the directory cannot be made (check TMPDIR).
llvm::Expected<std::string> privateDir();

/// The session of `debugger`, created on first use.
Session &sessionFor(lldb::SBDebugger &debugger);

/// The modules LLDB knows for `target`, with load addresses of every loaded
/// section (file offset, size, executable).
std::vector<Module> captureModules(lldb::SBTarget &target);

/// Every traced thread's stack at the stop (physical frames, innermost
/// first, with function names), marking `triggeredTid`.
std::vector<ThreadStop> captureStop(lldb::SBProcess &process,
                                    const Session &session,
                                    uint64_t triggeredTid);

/// Builds the Snapshot (ring bytes of every recorder, modules, stop context),
/// runs the pipeline, writes `path` when not empty, and records it. Writers
/// must already be disabled (the stepper does that at every stop).
/// `stopped`: the process is stopped even if its public state does not say
/// so yet (in a breakpoint callback).
llvm::Expected<SnapshotRecord *>
takeSnapshot(lldb::SBDebugger &debugger, Session &session,
             uint64_t triggeredTid, std::string reason, std::string path,
             const WindowOptions &window = {}, bool stopped = false);

/// A hit of `trigger`'s breakpoint by thread `tid`: counts it, takes the
/// trigger's snapshot, and disables the breakpoint after its last hit.
llvm::Expected<SnapshotRecord *> fireTrigger(lldb::SBDebugger &debugger,
                                             Session &session, Trigger &trigger,
                                             uint64_t tid,
                                             bool stopped = false);

} // namespace magic_trace::plugin

#endif
