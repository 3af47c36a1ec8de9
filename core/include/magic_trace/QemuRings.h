//===- QemuRings.h - The QEMU recorder's shared-memory rings ----*- C++ -*-===//
//
// The QEMU TCG plugin (plugin/qemu/) writes each guest thread's Intel PT into
// its own ring in a directory of shared-memory files; a reader (the
// magic-trace-emulate CLI after the run, the LLDB plugin while the target is
// stopped) maps them and copies the bytes out. The directory's files and
// the code log are defined in QemuCodeLog.h; the rings are these:
//
//   DIR/header      QemuRingHeader: CPU identity, clock, the thread table,
//                   and the `paused` word a reader sets to stop writers
//   DIR/ring.<tid>  one page laid out like perf's perf_event_mmap_page
//                   (aux_offset, aux_size, aux_head at their offsets), then
//                   aux_size bytes of PT: the head only grows, a wrapped
//                   ring has overwritten its oldest bytes (perf's AUX area
//                   in overwrite mode, read by the perf backend's reader)
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_QEMURINGS_H
#define MAGIC_TRACE_QEMURINGS_H

#include "magic_trace/GroundTruth.h"
#include "magic_trace/QemuCodeLog.h"
#include "magic_trace/Snapshot.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

constexpr char kQemuRingMagic[8] = {'M', 'T', 'Q', 'E', 'M', 'U', 'R', '1'};
constexpr uint32_t kQemuRingMaxThreads = 1024;
/// The ring file's first page (aux data starts here).
constexpr uint64_t kQemuRingPage = 4096;
/// Recorder triggers a header holds (QemuRingHeader::triggers).
constexpr uint32_t kQemuMaxTriggers = 16;
/// QemuTrigger::remaining of a trigger that takes a snapshot at every hit.
constexpr uint32_t kQemuTriggerEvery = UINT32_MAX;

enum class QemuThreadState : uint32_t {
  Unused = 0,
  Running = 1,   ///< Tracing or about to: its writer may write.
  InSyscall = 2, ///< Tracing disabled by a syscall; resumes on return.
  Done = 3,      ///< Exited or stopped: its ring and ground truth are final.
};

/// Why the recorder stopped (QemuRingHeader::stopReason): set once, by the
/// first thread to reach a stop, before `stopped`. A reader that finds the
/// process gone reads how the recording ended here, not from whether it
/// won a race with the program's exit.
enum class QemuStopReason : uint32_t {
  None = 0,      ///< Not stopped: recording ran until the program ended.
  StopPoint = 1, ///< A block started at the stop point (stop=).
  MaxInsns = 2,  ///< The instruction limit (max-insns=) was reached.
  Exec = 3,      ///< The program called execve.
};

struct QemuThreadSlot {
  uint64_t tid = 0;
  uint32_t state = 0; ///< QemuThreadState.
  uint32_t busy = 0;  ///< 1 while the writer may touch its ring.
  uint64_t instructions = 0;
  uint64_t lostInstructions = 0;
};

/// A snapshot the recorder takes itself when a block starts at `address`
/// (docs/qemu.md, "Triggers in the recorder"): no debugger breakpoint.
struct QemuTrigger {
  uint64_t address;   ///< A block's start: a function's entry.
  uint32_t remaining; ///< Snapshots still to take (kQemuTriggerEvery: all).
  uint32_t hits;      ///< Snapshots taken.
};

/// DIR/header. Fields are written by the plugin; `paused` by a reader.
struct QemuRingHeader {
  char magic[8];
  uint32_t headerSize; ///< sizeof(QemuRingHeader), a version check.
  uint32_t threadCount;
  uint64_t ringSize; ///< PT bytes per thread ring (a power of two).
  uint64_t pid;      ///< The QEMU process (= the guest's pid).
  char vendor[16];
  uint32_t family, model, stepping, reserved0;
  uint64_t timeZero;
  uint32_t timeMult;
  uint32_t timeShift;
  uint32_t mtcFreq, nomFreq, cpuid15Eax, cpuid15Ebx;
  /// Reader protocol: set to 1, wait until no slot is busy, copy, set to 0.
  /// A writer finding it set waits (up to a second, then counts a timeout
  /// and goes on), so the reader copies a ring no one writes.
  uint32_t paused;
  uint32_t recording; ///< 1 from the start point until the stop point.
  uint64_t pauseTimeouts;
  uint32_t stopped;    ///< The stop point or instruction limit was reached.
  uint32_t stopReason; ///< QemuStopReason, set before `stopped`.
  char note[256];      ///< One line from the plugin for the user (e.g. a loss).
  QemuThreadSlot threads[kQemuRingMaxThreads];
  /// The stop flush (docs/qemu.md, "Snapshots: the stop flush"): a reader
  /// stores each thread's stop address in stopPc[slot], increments
  /// flushRequest (a futex word) and waits until flushDone equals it. The
  /// plugin's flusher thread has then written each thread's pending block
  /// up to where it stopped and a TIP.PGD there (the thread resumes with a
  /// TIP.PGE), and stored in stopPc[slot] where that was when it was not
  /// the stop address given (0: the trace ends before; the thread ran on).
  uint32_t flushRequest;
  uint32_t flushDone;
  uint64_t stopPc[kQemuRingMaxThreads];
  /// Recorder triggers: a host fills triggers[triggerCount] and then
  /// increments triggerCount (armQemuTrigger). At each hit the plugin ends
  /// the hitting thread's trace there, copies every ring into the bundle
  /// DIR/snap-<N>/ (N = ++triggerSnapshots, stored once the bundle is
  /// complete, then woken as a futex word for a host waiting on it:
  /// waitForQemuTriggerSnapshot) and resumes the thread.
  uint32_t triggerCount;
  uint32_t triggerSnapshots;
  QemuTrigger triggers[kQemuMaxTriggers];
  /// The bound on recorder snapshots waiting on disk: the host decodes each
  /// DIR/snap-N as it comes, removes it and stores N in triggersCollected.
  /// A trigger hit while maxPendingTriggers (0: no bound) snapshots wait
  /// waits for room, at most triggerWaitMs (the time is added to
  /// triggerWaitNs), then is skipped and counted in triggersSkipped (a hit
  /// skipped takes none of the trigger's count).
  uint32_t triggersCollected;
  uint32_t triggersSkipped;
  uint32_t maxPendingTriggers;
  uint32_t triggerWaitMs;
  uint64_t triggerWaitNs;
  /// The stop flush's hold (flushQemuRings with `held`): the reader stores
  /// its request in flushHold, and the hold's limit in flushHoldMs, before
  /// it asks. The flusher, its threads' traces ended, keeps every thread
  /// that comes to a block waiting there (a debugger need not hold them:
  /// GDB's stop does not) until the reader, its copy done, stores the
  /// request in flushRelease (releaseQemuRings), or flushHoldMs pass.
  uint32_t flushHold;
  uint32_t flushRelease;
  uint32_t flushHoldMs;
  /// 1: the threads with no stop address run (the debugger holds only the
  /// others): the flusher ends each where it comes to its next block.
  uint32_t flushCatchRunning;
};

// scripts/bench-qemu.sh reads these offsets directly (no C++ in a shell
// benchmark); changing the layout means changing it there too.
static_assert(offsetof(QemuRingHeader, threads) == 376, "bench-qemu.sh");
static_assert(sizeof(QemuThreadSlot) == 32, "bench-qemu.sh");

/// What a reader copied out of a ring directory.
struct QemuRecording {
  Snapshot snapshot;
  std::vector<ThreadTruth> truth; ///< Parallel to threads, if recorded.
  uint64_t instructions = 0;
  uint64_t lostInstructions = 0;
  uint64_t pauseTimeouts = 0;
  QemuStopReason stopReason = QemuStopReason::None;
  std::string note;
  /// Why the ground truth asked for is missing (also in `note`).
  std::string truthNote;
};

/// Maps DIR/header and every DIR/ring.<tid>, pauses the writers while it
/// copies (deadline: one second), and returns threads (tid order of first
/// appearance), CPU identity and clock; modules from DIR/maps when present;
/// ground truth from DIR/groundtruth when `withTruth`. Errors (one line): no
/// header (the program did not run under the plugin), a wrong magic or
/// size, a ring file that is missing or shorter than its header says.
llvm::Expected<QemuRecording> readQemuRings(llvm::StringRef dir,
                                            bool withTruth);

/// Sets the header's `paused` and waits, for at most a second, until no
/// writer is inside its ring (RingBuffer.h, pauseRingWriters): what a copy
/// of the rings needs, by a reader or by the recorder's own trigger.
llvm::Error pauseQemuWriters(QemuRingHeader &header);

/// The facts a header gives every snapshot of its recording: pid, CPU,
/// clock and timing.
Snapshot qemuSnapshotFacts(const QemuRingHeader &header);

/// The header's counters, read without pausing anyone (for status lines).
struct QemuRingStatus {
  uint64_t pid = 0;
  uint64_t ringSize = 0;
  uint64_t instructions = 0; ///< Recorded so far, every thread.
  bool recording = false;
  bool stopped = false;
  QemuStopReason stopReason = QemuStopReason::None;
  uint32_t triggerSnapshots = 0; ///< Recorder snapshots written.
  uint32_t triggersSkipped = 0;  ///< Hits skipped: too many were waiting.
  uint64_t triggerWaitNs = 0;    ///< Time hits waited for the decoder.
  std::vector<QemuThreadSlot> threads;
  std::string note;
};
llvm::Expected<QemuRingStatus> readQemuRingStatus(llvm::StringRef dir);

/// How long a host waits for the plugin to answer a flush or a trigger's
/// arming: two seconds; two minutes with ground truth, when the recorder
/// also writes every instruction so far (8 bytes each): a test's wait, not
/// a user's.
inline std::chrono::milliseconds qemuAnswerDeadline(bool groundTruth) {
  return std::chrono::milliseconds(groundTruth ? 120000 : 2000);
}

/// The stop flush: asks the plugin recording into `dir` to end each
/// thread's trace at its stop address (`stops`: tid, address; every guest
/// thread must be stopped by a debugger), waiting at most `deadline`.
/// Threads not listed, or in a syscall, are left as they are. Fails (one
/// line) when there is no header or the plugin does not answer in time.
/// With `held`, the recorder also keeps the threads where their traces end
/// until releaseQemuRings(dir, *held) (or `deadline` more passes), so that
/// a copy of the rings ends where the flush did for every thread; *held is
/// set to the request to release. `notAtStop` gets the threads listed in
/// `stops` whose trace the recorder ended elsewhere (they ran on: the
/// debugger did not hold them). `othersRun`: the threads not in `stops`
/// run on (flushCatchRunning).
llvm::Error
flushQemuRings(llvm::StringRef dir,
               const std::vector<std::pair<uint64_t, uint64_t>> &stops,
               std::chrono::milliseconds deadline, uint32_t *held = nullptr,
               std::vector<uint64_t> *notAtStop = nullptr,
               bool othersRun = false);

/// Ends the hold of flushQemuRings's request `held`: the threads run on.
void releaseQemuRings(llvm::StringRef dir, uint32_t held);

/// Arms a recorder trigger at `address` (a block's start, e.g. a function's
/// entry; blocks already translated there are marked through the stop
/// flush, so every guest thread must be stopped by a debugger) for `count`
/// snapshots (kQemuTriggerEvery: every hit). Errors (one line): no header,
/// the table full, the plugin not answering within `deadline`.
llvm::Error armQemuTrigger(llvm::StringRef dir, uint64_t address,
                           uint32_t count, std::chrono::milliseconds deadline);

/// How many snapshots the recorder's triggers have written (complete
/// bundles DIR/snap-1 ... DIR/snap-N); 0 without a header.
uint32_t qemuTriggerSnapshots(llvm::StringRef dir);

/// Waits until the recorder has written more than `seen` snapshots (it
/// wakes the futex word triggerSnapshots when it stores one), at most
/// `limit`. False, at once, without a header or when the recorder has
/// written fewer than `seen` (the caller then waits its own way).
bool waitForQemuTriggerSnapshot(llvm::StringRef dir, uint32_t seen,
                                std::chrono::milliseconds limit);

/// Tells the recorder that snapshots up to `collected` are decoded (and
/// their directories removed), how many may wait at once (`maxPending`, 0:
/// no bound) and how long a hit waits for room (`waitMs`, 0: it is skipped
/// at once). Errors: no header.
llvm::Error setQemuTriggersCollected(llvm::StringRef dir, uint32_t collected,
                                     uint32_t maxPending, uint32_t waitMs);

/// DIR/snap-<number>: the bundle of the recorder's snapshot `number`.
std::string qemuTriggerSnapshotDir(llvm::StringRef dir, uint32_t number);

/// The trigger address a recorder snapshot was taken at (its bundle's
/// `trigger` file), 0 when unknown.
uint64_t qemuTriggerSnapshotAddress(llvm::StringRef snapshotDir);

/// The magic-trace plugin's options (KEY=VALUE, in order) in the command
/// line of the process thread `tid` belongs to, when that process is QEMU
/// running the plugin (`-plugin .../libmagic-trace-qemu.so,dir=DIR,...`);
/// false otherwise.
bool qemuPluginOptionsOf(
    uint64_t tid, std::vector<std::pair<std::string, std::string>> &options);

} // namespace magic_trace

#endif
