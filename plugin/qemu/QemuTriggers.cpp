//===- QemuTriggers.cpp - Snapshots the recorder takes itself -------------===//
//
// A debugger breakpoint costs QEMU 7.2 dearly: code in the same page runs
// one instruction per block (check_for_breakpoints), and each hit stops and
// resumes the whole process. A recorder trigger needs neither: a host arms
// it in the header (armQemuTrigger, QemuRings.h) and the block that starts
// at its address takes the slow path. There the hitting thread ends its
// trace at the address as the stop flush does (TIP.PGD), every ring is
// copied with the writers paused, the copy is written as the bundle
// DIR/snap-<N>/ (the hitting thread marked triggered), and the thread's
// block then resumes its trace with TIP.PGE. docs/qemu.md, "Triggers in
// the recorder".
//
//===----------------------------------------------------------------------===//
#include "Recorder.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/GroundTruth.h"
#include "magic_trace/RingBuffer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <climits>
#include <thread>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace magic_trace::qemu_plugin {
namespace {

/// The header's armed entry for `address`, or null.
QemuTrigger *armedTrigger(QemuRingHeader &header, uint64_t address) {
  uint32_t count =
      std::min(__atomic_load_n(&header.triggerCount, __ATOMIC_ACQUIRE),
               kQemuMaxTriggers);
  for (uint32_t i = 0; i < count; ++i)
    if (header.triggers[i].address == address &&
        __atomic_load_n(&header.triggers[i].remaining, __ATOMIC_ACQUIRE))
      return &header.triggers[i];
  return nullptr;
}

/// Takes one of `trigger`'s remaining snapshots; false when none is left.
bool claim(QemuTrigger &trigger) {
  uint32_t remaining = __atomic_load_n(&trigger.remaining, __ATOMIC_ACQUIRE);
  while (remaining) {
    uint32_t next = remaining == kQemuTriggerEvery ? remaining : remaining - 1;
    if (__atomic_compare_exchange_n(&trigger.remaining, &remaining, next, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return true;
  }
  return false;
}

/// Sends every thread through the slow path (SlowSync) while `users` > 0.
void useSync(int change) {
  Recorder &rec = *recorder;
  std::lock_guard<std::mutex> lock(rec.syncMutex);
  rec.syncUsers += change;
  if (rec.syncUsers)
    rec.set(SlowSync);
  else
    rec.clear(SlowSync);
}

/// Every other running thread writes its block log into its ring (the slow
/// path does that first) before the rings are copied: a busy thread's log
/// holds up to Options::logSize blocks not yet written, its newest
/// execution, which the snapshot must show. A thread in a syscall wrote
/// its log on the way in. Bounded: a thread that does not come by within
/// kSyncWait (descheduled for long) is copied as it is.
void syncThreads(const ThreadRecorder &hitter) {
  constexpr std::chrono::milliseconds kSyncWait(200);
  Recorder &rec = *recorder;
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    threads = rec.threads;
  }
  uint64_t epoch = rec.syncEpoch.fetch_add(1) + 1;
  useSync(+1);
  auto deadline = std::chrono::steady_clock::now() + kSyncWait;
  for (ThreadRecorder *thread : threads) {
    if (thread == &hitter)
      continue;
    while (__atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE) ==
               uint32_t(QemuThreadState::Running) &&
           thread->syncSeen.load(std::memory_order_acquire) < epoch &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  useSync(-1);
}

/// Every thread's ring, copied while no writer is inside one, as the
/// Snapshot a bundle holds.
Snapshot copyRings(const ThreadRecorder &hitter) {
  Recorder &rec = *recorder;
  QemuRingHeader &header = *rec.header;
  Snapshot snapshot = qemuSnapshotFacts(header);
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    threads = rec.threads;
  }
  llvm::Error paused = pauseQemuWriters(header);
  if (paused)
    setNote("a recorder trigger's copy may end in a torn packet: " +
            llvm::toString(std::move(paused)));
  for (const ThreadRecorder *thread : threads) {
    ThreadTrace trace;
    trace.tid = thread->tid;
    trace.bytes = thread->writer->buffer().snapshot();
    trace.wrapped = thread->writer->buffer().wrapped();
    {
      std::lock_guard<std::mutex> lock(rec.mutex);
      trace.imageMarks = marksFor(*thread, trace.bytes.size());
    }
    if (!trace.bytes.empty())
      snapshot.threads.push_back(std::move(trace));
  }
  __atomic_store_n(&header.paused, 0u, __ATOMIC_SEQ_CST);
  // The code as it ran up to here: the code log beside the bundle (DIR),
  // read when the bundle is loaded, so a snapshot decoded after the process
  // is gone still has every module and version of the code it ran.
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    snapshot.code.logDir = "..";
    snapshot.code.logLastSeq = lastCodeSeq();
  }
  // The thread that hit the trigger; no stack (the recorder unwinds none):
  // the model's final stack comes from the trace alone.
  ThreadStop stop;
  stop.tid = hitter.tid;
  stop.triggered = true;
  snapshot.stop.push_back(std::move(stop));
  return snapshot;
}

} // namespace

bool isArmedTrigger(uint64_t start) {
  return recorder->header && armedTrigger(*recorder->header, start);
}

void markTriggerBlocks() {
  Recorder &rec = *recorder;
  QemuRingHeader &header = *rec.header;
  uint32_t count =
      std::min(__atomic_load_n(&header.triggerCount, __ATOMIC_ACQUIRE),
               kQemuMaxTriggers);
  std::lock_guard<std::mutex> lock(rec.mutex);
  for (uint32_t i = 0; i < count; ++i) {
    bool armed =
        __atomic_load_n(&header.triggers[i].remaining, __ATOMIC_ACQUIRE) != 0;
    auto found = rec.blocks.find(header.triggers[i].address);
    if (found == rec.blocks.end())
      continue;
    for (const BlockInfo *block : found->second)
      const_cast<BlockInfo *>(block)->isTrigger.store(
          armed, std::memory_order_relaxed);
  }
}

/// Whether as many snapshots as the host allows wait to be decoded.
static bool tooManyWaiting(const QemuRingHeader &header) {
  uint32_t limit =
      __atomic_load_n(&header.maxPendingTriggers, __ATOMIC_ACQUIRE);
  uint32_t waiting =
      __atomic_load_n(&header.triggerSnapshots, __ATOMIC_ACQUIRE) -
      __atomic_load_n(&header.triggersCollected, __ATOMIC_ACQUIRE);
  return limit && waiting >= limit;
}

void answerSync(ThreadRecorder &thread) {
  Recorder &rec = *recorder;
  thread.syncSeen.store(rec.syncEpoch.load(std::memory_order_acquire),
                        std::memory_order_release);
  // Held with the thread that hit the trigger, for at most as long as it
  // waits (and a second to spare), asleep until the hold ends: many held
  // threads must leave the decoder its cores.
  if (!rec.holders.load(std::memory_order_acquire))
    return;
  uint32_t waitMs =
      __atomic_load_n(&rec.header->triggerWaitMs, __ATOMIC_ACQUIRE) + 1000;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  std::unique_lock<std::mutex> lock(rec.syncMutex);
  rec.holdEnded.wait_until(lock, deadline, [&] {
    return !rec.holders.load(std::memory_order_acquire);
  });
}

/// The whole program waits (every thread in answerSync) while `waiting()`
/// holds, for at most triggerWaitMs; the time is added to triggerWaitNs.
template <typename Waiting> static void holdProgramWhile(Waiting waiting) {
  Recorder &rec = *recorder;
  QemuRingHeader &header = *rec.header;
  auto began = std::chrono::steady_clock::now();
  auto deadline = began + std::chrono::milliseconds(__atomic_load_n(
                              &header.triggerWaitMs, __ATOMIC_ACQUIRE));
  rec.holders.fetch_add(1);
  useSync(+1);
  // The host's progress is in shared memory: looked at every millisecond.
  while (waiting() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    std::lock_guard<std::mutex> lock(rec.syncMutex);
    rec.holders.fetch_sub(1);
  }
  rec.holdEnded.notify_all();
  useSync(-1);
  __atomic_add_fetch(
      &header.triggerWaitNs,
      uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - began)
                   .count()),
      __ATOMIC_RELEASE);
}

/// The whole program waits while the host decodes snapshot `number`, as it
/// would at a breakpoint, so that the decoder has the machine's cores rather
/// than sharing them with the program's busy threads (8 of them on 2 cores
/// had left it 1 worker). Not at all when triggerWaitMs is 0 (no host that
/// decodes, or --trigger-wait 0).
static void holdWhileDecoded(uint32_t number) {
  QemuRingHeader &header = *recorder->header;
  if (!__atomic_load_n(&header.triggerWaitMs, __ATOMIC_ACQUIRE))
    return;
  holdProgramWhile([&] {
    return __atomic_load_n(&header.triggersCollected, __ATOMIC_ACQUIRE) <
           number;
  });
}

void triggerHit(ThreadRecorder &thread, const BlockInfo &block) {
  Recorder &rec = *recorder;
  QemuTrigger *trigger = armedTrigger(*rec.header, block.start);
  // The host decodes the snapshots as they come; when it falls behind, a
  // hit waits for room (for at most the host's bound; the wait is
  // counted), then is skipped and counted: the disk holds at most the
  // bound, and nothing is lost without saying so. The whole program waits
  // with it (answerSync), so that the decoder has the machine's cores to
  // itself rather than sharing them with the program's busy threads, which
  // would make it fall further behind.
  if (trigger && tooManyWaiting(*rec.header)) {
    QemuRingHeader &header = *rec.header;
    holdProgramWhile([&] { return tooManyWaiting(header); });
    if (tooManyWaiting(header)) {
      __atomic_add_fetch(&header.triggersSkipped, 1u, __ATOMIC_RELEASE);
      return;
    }
  }
  if (!trigger || !thread.flags.enabled || thread.flags.failed ||
      thread.flags.deferring || !claim(*trigger)) {
    // Spent: later hits of this block go the fast way again.
    if (!trigger || !__atomic_load_n(&trigger->remaining, __ATOMIC_ACQUIRE))
      const_cast<BlockInfo &>(block).isTrigger.store(false,
                                                     std::memory_order_relaxed);
    return;
  }
  std::lock_guard<std::mutex> lock(rec.triggerMutex);
  syncThreads(thread);
  // The trace ends where the trigger's block starts; onBlock resumes it.
  flushToStop(thread, block.start);
  Snapshot snapshot = copyRings(thread);
  uint32_t number =
      __atomic_load_n(&rec.header->triggerSnapshots, __ATOMIC_ACQUIRE) + 1;
  std::string dir = qemu_dir::snapshot(rec.options.dir, number);
  if (llvm::Error error = writeBundle(snapshot, dir)) {
    setNote("a recorder trigger's snapshot was not written: " +
            llvm::toString(std::move(error)));
    return;
  }
  // With ground truth (a test oracle): the hitting thread's, up to the
  // trigger (the other threads' grow while they run).
  if (rec.options.groundTruth)
    if (llvm::Error error = writeGroundTruth({thread.truth}, dir))
      setNote("a recorder trigger's ground truth was not written: " +
              llvm::toString(std::move(error)));
  // Which trigger it was, for the host's output pattern: closed before the
  // snapshot is published, so the host never reads it half written.
  {
    std::error_code ec;
    llvm::raw_fd_ostream which(qemu_dir::trigger(dir), ec);
    if (!ec)
      which << llvm::format_hex(block.start, 0) << "\n";
  }
  __atomic_add_fetch(&trigger->hits, 1u, __ATOMIC_RELEASE);
  __atomic_store_n(&rec.header->triggerSnapshots, number, __ATOMIC_RELEASE);
  // The host's collector waits on this word (waitForQemuTriggerSnapshot).
  syscall(SYS_futex, &rec.header->triggerSnapshots, FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
  holdWhileDecoded(number);
}

} // namespace magic_trace::qemu_plugin
