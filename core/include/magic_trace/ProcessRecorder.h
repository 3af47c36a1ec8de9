//===- ProcessRecorder.h - One recording of a process, any backend -*- C++ -*-//
//
// docs/architecture.md, "Recorder → Snapshot": the perf, QEMU and emulate
// backends behind one interface that the LLDB and GDB hosts share, the way
// LLDB's lldb-server holds its per-thread and per-CPU Intel PT strategies
// behind IntelPTProcessTrace, or perf every tracer behind `struct
// auxtrace_record`: a recorder is started on a process (its factory), hears of
// the process's stops and resumes, fills a snapshot's threads, clock, timing
// and code history at a stop, and says what it is doing. A host supplies only
// what its debugger knows, in RecorderStop: which threads are stopped where,
// and which to keep; modules and stacks it adds to the snapshot itself.
//
// The checks that are not tied to one debugger (the platform, the PID
// namespace, the PMU, the budget, the advice when Intel PT is missing) are
// the factories' (PerfSession.h, QemuRings.h).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PROCESSRECORDER_H
#define MAGIC_TRACE_PROCESSRECORDER_H

#include "magic_trace/GroundTruth.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/PerfSession.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/SnapshotLog.h"
#include "magic_trace/SteppedCode.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace magic_trace {

/// What the host's debugger knows of the stop a snapshot is taken at.
struct RecorderStop {
  /// The process is stopped (false: it exited, or exec replaced the
  /// program: the rings are read as they are).
  bool alive = true;
  /// (tid, PC) of every stopped thread: the QEMU recorder ends each thread's
  /// trace there (the stop flush).
  std::vector<std::pair<uint64_t, uint64_t>> pcs;
  /// The threads not in `pcs` run on (GDB's stop under QEMU's gdbstub
  /// holds only the thread it is about): the QEMU recorder ends each where
  /// it comes to its next block.
  bool othersRun = false;
  /// The threads to keep (the host's thread filter); empty: all.
  std::function<bool(uint64_t)> traces;

  bool keeps(uint64_t tid) const { return !traces || traces(tid); }
};

/// One line of `status` per thread or ring the recorder knows.
struct RecorderThreadStatus {
  uint64_t tid = 0;
  uint64_t instructions = 0; ///< Recorded so far; 0 when unknown (perf).
  uint64_t bytes = 0;        ///< PT in its ring; 0 when unknown.
  bool wrapped = false;
  bool exited = false;
};

class ProcessRecorder {
public:
  virtual ~ProcessRecorder();

  /// "perf", "qemu" or "emulate".
  virtual llvm::StringRef backend() const = 0;
  /// The recorder records while the process runs, so that a plain continue
  /// traces (perf, qemu); the emulate stepper records only what it steps.
  virtual bool recordsWhileRunning() const = 0;
  /// The ring size: per CPU (perf) or per thread.
  virtual uint64_t bufferBytes() const = 0;
  virtual bool perCpuBuffers() const { return false; }
  /// The CPU whose errata libipt applies to the recorded packets.
  virtual CpuIdentity cpu() const = 0;

  /// The process stopped, or is about to run again (the perf backend reads
  /// its sideband then). Defaults do nothing.
  virtual void processDidStop() {}
  virtual void processWillResume() {}

  /// Fills `snapshot`'s threads (those `stop` keeps, with trace), CPU,
  /// clock, timing and code history, and `truth` with the recorder's
  /// ground truth of each (parallel to the threads) when it keeps one.
  /// Errors: one line, what to do.
  virtual llvm::Error snapshot(const RecorderStop &stop, Snapshot &snapshot,
                               std::vector<ThreadTruth> &truth) = 0;
  /// The threads whose trace in the last snapshot does not end at the stop
  /// address `stop` gave (a thread the debugger did not hold ran on): the
  /// debugger's stack of each is not the trace's end. None by default.
  virtual std::vector<uint64_t> threadsNotAtStop() const { return {}; }

  /// What `status` lists: one entry per thread the recorder knows.
  virtual std::vector<RecorderThreadStatus> threads() const = 0;
  /// More status lines ("  Intel PT: 8 CPU rings of 512 KiB, ..."): none
  /// by default.
  virtual std::vector<std::string> statusLines() const { return {}; }
};

/// A snapshot a host takes at a stop: what its debugger knows besides the
/// recorder's rings.
struct SnapshotRequest {
  std::string reason; ///< "command", "breakpoint 2", ...
  std::string path;   ///< The file to write (pattern expanded); "" for none.
  uint64_t pid = 0;   ///< The recorder's own pid wins (QEMU).
  std::string processName;
  RecorderStop stop;
  /// The debugger's modules (at the stop, or as last seen); the recorder's
  /// code history says what changed before.
  std::vector<Module> modules;
  /// Every kept thread's stack at the stop (empty when the process is gone).
  std::vector<ThreadStop> stacks;
  PipelineOptions pipeline; ///< Progress and Ctrl-C.
  /// Reads the stopped process's memory (the debugger's: SBProcess::
  /// ReadMemory, GDB's Inferior.read_memory): `size` bytes at `address`
  /// into `buffer`, how many it could. When set, the perf and emulate
  /// backends' snapshots get the code outside files as at the stop
  /// (addCodeAtStop).
  std::function<size_t(uint64_t address, uint8_t *buffer, size_t size)>
      readMemory;
  /// The error when no thread has trace (what to do differs by backend).
  std::string nothingRecorded =
      "nothing recorded yet (continue the process first)";
};

/// Takes `request`'s snapshot: the recorder's threads with the host's
/// modules and stacks, decoded (runPipeline, with `symbols`), written to
/// its path, and added to `log` (numbered). The caller holds what guards
/// `log` and `symbols`. Errors (one line): the recorder's, nothing
/// recorded, the pipeline's (interrupted), the file's.
llvm::Expected<SnapshotRecord *> recordSnapshot(ProcessRecorder &recorder,
                                                SnapshotRequest request,
                                                SnapshotLog &log,
                                                SymbolCache *symbols);

/// The most bytes of code addCodeAtStop reads.
constexpr uint64_t kMaxCodeAtStop = uint64_t(64) << 20;

/// Adds to `snapshot.code`, as Bytes changes after its last, the code
/// outside files of process `pid` as at the stop: each executable mapping
/// /proc/PID/maps shows with no file (MapsEntry::holdsNoFile) that no
/// module of `snapshot.modules` covers, read with `read`. A recorder's own
/// versions of that code (the steppers' code log) win wherever they are:
/// the decoder takes the earliest change a thread's mark has not reached
/// (codeChangeWins), and these come last. At most kMaxCodeAtStop bytes; a
/// note says what was left out. Maps that cannot be read (the process is
/// remote or gone) add nothing.
void addCodeAtStop(
    uint64_t pid,
    const std::function<size_t(uint64_t, uint8_t *, size_t)> &read,
    Snapshot &snapshot);

/// The perf backend: the code outside files read at the stop (the Bytes
/// changes after `firstAtStop` in `snapshot.code`) holds only from the
/// latest time the kernel saw its memory made executable
/// (Snapshot::execMappings, MMAP2 records, also written at each mprotect):
/// before then it may have been other code. A change is cut where those
/// times differ; a part never seen made executable keeps no time (it was
/// there before the recording, or is the recorder's).
void timeCodeAtStop(Snapshot &snapshot, size_t firstAtStop);

/// Renumbers `history`'s changes so that seqs follow time: the changes
/// without a time first, in their order, then those with one by time (the
/// decoder's time rule, ImageTimeline::seqAtTime, takes the seq of the
/// latest change up to a moment). Only for a history without image marks
/// (the perf backend's).
void orderChangesByTime(CodeHistory &history);

/// The perf backend: startPerfRecording (PerfSession.h) as a recorder.
llvm::Expected<std::unique_ptr<ProcessRecorder>>
startPerfRecorder(uint64_t pid, const std::vector<uint64_t> &tids,
                  const PerfStartOptions &options,
                  std::vector<std::string> &notes);

/// The QEMU recorder recording into `ringDir` (QemuRings.h), with its
/// ground truth when `keepTruth`. Errors: the directory holds no recorder's
/// header (the program does not run under it).
llvm::Expected<std::unique_ptr<ProcessRecorder>>
openQemuRecorder(std::string ringDir, bool keepTruth);

/// One traced thread of the emulate backend: the host's stepper writes the
/// packets of each instruction it steps.
struct SteppedThread {
  uint64_t tid = 0;
  std::unique_ptr<PacketWriter> writer;
  /// Tracing is on (TIP.PGE written, no TIP.PGD since).
  bool tracing = false;
  /// Every instruction the stepper saw execute (--ground-truth).
  std::optional<ThreadTruth> truth;
  /// Where its trace moved to newer versions of the code (SteppedCode.h).
  SteppedMarks marks;
  bool gone = false; ///< The thread exited.
};

/// The emulate backend: PT that a host's single-stepper writes, one
/// PacketWriter per thread (genuine packets through libipt's encoder, a
/// virtual CPU without errata, the virtual clock).
class EmulateRecorder final : public ProcessRecorder {
public:
  EmulateRecorder(PacketWriter::Options options, bool keepTruth);

  /// The thread's writer, created (with tracing off) when missing.
  /// Errors: the packet writer's.
  llvm::Expected<SteppedThread *> thread(uint64_t tid);
  std::map<uint64_t, SteppedThread> &stepped() { return threadsByTid; }
  const PacketWriter::Options &options() const { return writerOptions; }
  /// The code outside files the host's stepper ran (SteppedCode.h): a
  /// snapshot's code history.
  SteppedCodeLog &code() { return codeLog; }

  llvm::StringRef backend() const override { return "emulate"; }
  bool recordsWhileRunning() const override { return false; }
  uint64_t bufferBytes() const override { return writerOptions.bufferSize; }
  CpuIdentity cpu() const override;
  llvm::Error snapshot(const RecorderStop &stop, Snapshot &snapshot,
                       std::vector<ThreadTruth> &truth) override;
  std::vector<RecorderThreadStatus> threads() const override;

private:
  PacketWriter::Options writerOptions;
  bool keepTruth;
  std::map<uint64_t, SteppedThread> threadsByTid;
  SteppedCodeLog codeLog;
};

} // namespace magic_trace

#endif
