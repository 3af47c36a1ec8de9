//===- QemuThreads.cpp - Guest threads, the stop flush, the maps file ----===//
//
// Each guest thread's ring and slot from its first block to its end (exit,
// the stop point, exec, the program's exit); the stop flush a debugger's
// snapshot asks for; DIR/maps when recording ends.
//
//===----------------------------------------------------------------------===//
#include "Recorder.h"

#include "magic_trace/GroundTruth.h"
#include "magic_trace/InsnClassifier.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/ProcessModules.h"
#include "magic_trace/QemuRings.h"
#include "magic_trace/VirtualClock.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <linux/perf_event.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <set>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>
namespace magic_trace::qemu_plugin {

void setNote(const std::string &text) {
  if (!recorder->header || recorder->header->note[0])
    return;
  std::strncpy(recorder->header->note, text.c_str(),
               sizeof(recorder->header->note) - 1);
}

void noteStopReason(QemuStopReason reason) {
  uint32_t none = uint32_t(QemuStopReason::None);
  __atomic_compare_exchange_n(&recorder->header->stopReason, &none,
                              uint32_t(reason), false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

/// QEMU prints qemu_plugin_outs only under -d plugin: warnings go to
/// stderr (the guest's too) and into the header for the reader.
void warn(const std::string &text) {
  std::fprintf(stderr, "magic-trace-qemu: %s\n", text.c_str());
  setNote(text);
}

/// A shared file of `size` bytes, mapped read-write; nullptr on failure.
void *mapSharedFile(const std::string &path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return nullptr;
  void *address = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(size)) == 0)
    address = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return address == MAP_FAILED ? nullptr : address;
}

//===-- Thread lifetime ---------------------------------------------------===//

void writeTruth(ThreadRecorder &thread) {
  if (!recorder->options.groundTruth)
    return;
  // Instruction indices (the lost ranges', the virtual clock's) are the
  // writer's: they name the ground truth's instructions only while both
  // counted the same ones.
  if (thread.truth.insns.size() != thread.writer->instructions())
    warn(llvm::formatv("thread {0}: the ground truth has {1} instructions, "
                       "the trace {2} (a recorder bug: report it)",
                       thread.tid, thread.truth.insns.size(),
                       thread.writer->instructions())
             .str());
  thread.truth.lost = thread.writer->lostInstructions();
  if (llvm::Error error =
          writeGroundTruth({thread.truth}, recorder->options.dir))
    warn(llvm::toString(std::move(error)));
}

/// Ends `thread`'s recording: the trace stops before `next` (0: before the
/// pending block's last instruction, whose outcome is unknown).
/// The ground truth's record of where `thread` stopped (the instruction it
/// would run next): a call just made is on the stack there. The ptrace
/// stepper records its stops the same way.
void truthStoppedAt(ThreadRecorder &thread, uint64_t pc) {
  if (recorder->options.groundTruth)
    thread.truth.addEvent(
        TruthEventKind::Disable,
        thread.truth.insns.empty() ? 0 : thread.truth.insns.back(), pc);
}

void finishThread(ThreadRecorder &thread, uint64_t next) {
  drainLog(thread);
  if (thread.flags.deferring)
    abandonDeferred(thread);
  if (thread.flags.enabled && !thread.flags.failed) {
    const BlockInfo *previous = thread.pending;
    uint64_t stopAt = next;
    if (previous && next && previous->mayGoTo(next))
      resolve(thread, *previous, previous->count, next);
    else if (previous) {
      resolve(thread, *previous, previous->count - 1, previous->last().ip);
      stopAt = previous->last().ip;
    }
    if (!thread.flags.failed && stopAt &&
        check(thread, thread.writer->disable(stopAt)))
      truthStoppedAt(thread, stopAt);
    thread.flags.enabled = false;
  }
  thread.pending = nullptr;
  flushCount(thread);
  writeTruth(thread);
  __atomic_store_n(
      &thread.slot->lostInstructions,
      [&] {
        uint64_t lost = 0;
        for (auto &range : thread.writer->lostInstructions())
          lost += range.second;
        return lost;
      }(),
      __ATOMIC_RELAXED);
  thread.flags.running = false;
  __atomic_store_n(&thread.slot->state, uint32_t(QemuThreadState::Done),
                   __ATOMIC_RELEASE);
}

ThreadRecorder *registerThread() {
  Recorder &rec = *recorder;
  std::lock_guard<std::mutex> lock(rec.mutex);
  uint32_t index = rec.header->threadCount;
  if (index >= kQemuRingMaxThreads) {
    setNote("more than 1024 threads: later ones are not recorded");
    return nullptr;
  }
  auto thread = std::make_unique<ThreadRecorder>();
  thread->tid = static_cast<uint64_t>(syscall(SYS_gettid));
  thread->truth.tid = thread->tid;
  std::string path = qemu_dir::ring(rec.options.dir, thread->tid);
  auto *memory = static_cast<uint8_t *>(
      mapSharedFile(path, kQemuRingPage + rec.options.ringSize));
  if (!memory) {
    warn(llvm::formatv("cannot create {0}: {1} (check the directory and "
                       "free space in it)",
                       path, std::strerror(errno))
             .str());
    return nullptr;
  }
  auto *page = reinterpret_cast<perf_event_mmap_page *>(memory);
  page->aux_offset = kQemuRingPage;
  page->aux_size = rec.options.ringSize;
  PacketWriter::Options options = rec.options.writer;
  options.bufferSize = rec.options.ringSize;
  options.ringMemory = memory + kQemuRingPage;
  options.ringHead = reinterpret_cast<uint64_t *>(&page->aux_head);
  options.ringGate.busy = &rec.header->threads[index].busy;
  options.ringGate.paused = &rec.header->paused;
  options.ringGate.timeouts = &rec.header->pauseTimeouts;
  llvm::Expected<std::unique_ptr<PacketWriter>> writer =
      PacketWriter::create(options);
  if (!writer) {
    warn(llvm::toString(writer.takeError()));
    return nullptr;
  }
  thread->writer = std::move(*writer);
  // Not value-initialized: the pages are touched only as the log fills.
  thread->log.reset(new const BlockInfo *[rec.options.logSize]);
  thread->logMask = rec.options.logSize - 1;
  thread->index = index;
  // Registered from inside its first block callback (blockExecuted makes
  // it even when that ends).
  thread->activity.store(1, std::memory_order_relaxed);
  thread->slot = &rec.header->threads[index];
  thread->slot->tid = thread->tid;
  __atomic_store_n(&thread->slot->state, uint32_t(QemuThreadState::Running),
                   __ATOMIC_RELEASE);
  __atomic_store_n(&rec.header->threadCount, index + 1, __ATOMIC_RELEASE);
  rec.threads.push_back(thread.get());
  return thread.release();
}

void writeMaps();

/// Stops every thread that is blocked in a syscall (the others stop
/// themselves at their next block).
void stopIdleThreads() {
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(recorder->mutex);
    threads = recorder->threads;
  }
  for (ThreadRecorder *thread : threads) {
    uint32_t expected = uint32_t(QemuThreadState::InSyscall);
    if (__atomic_compare_exchange_n(&thread->slot->state, &expected,
                                    uint32_t(QemuThreadState::Running), false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      finishThread(*thread, 0);
  }
}

/// Waits until no recorded thread is Running, at most `limit`.
void waitForRunningThreads(std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool running = false;
    {
      std::lock_guard<std::mutex> lock(recorder->mutex);
      for (ThreadRecorder *thread : recorder->threads)
        running |= __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE) ==
                   uint32_t(QemuThreadState::Running);
    }
    if (!running || std::chrono::steady_clock::now() > deadline)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void stopRecording(ThreadRecorder &self, uint64_t next) {
  finishThread(self, next);
  bool first = !recorder->header->stopped;
  __atomic_store_n(&recorder->header->recording, 0u, __ATOMIC_RELEASE);
  if (first) {
    writeMaps();
    stopIdleThreads();
    __atomic_store_n(&recorder->header->stopped, 1u, __ATOMIC_RELEASE);
  }
}

//===-- The stop flush ----------------------------------------------------===//
//
// At a debugger's stop each thread's last block is pending: where it went
// is known only when the next block runs, after the debugger resumes. A
// snapshot then would end before the stop, without the instructions that
// led to the breakpoint. So a reader (QemuRings.h, flushQemuRings) gives
// each thread's stop address, and the flusher thread ends the thread's
// trace there as a syscall would: the pending block's instructions up to
// the stop address, then TIP.PGD; the thread's next block writes TIP.PGE.
// Safe because QEMU's gdbstub holds every vCPU outside its blocks while
// the debugger has the process stopped (measured: docs/qemu.md), and the
// callbacks that can still run take flushLock.

/// Ends `thread`'s trace at `pc`, where the debugger stopped it.
void flushToStop(ThreadRecorder &thread, uint64_t pc) {
  if (pc == 0 || __atomic_load_n(&thread.slot->state, __ATOMIC_ACQUIRE) !=
                     uint32_t(QemuThreadState::Running))
    return;
  drainLog(thread);
  if (!thread.flags.running || !thread.flags.enabled || thread.flags.failed ||
      thread.flags.deferring)
    return;
  const BlockInfo *previous = thread.pending;
  thread.pending = nullptr;
  if (previous && (previous->lastIsRep || previous->lastCrossesPage) &&
      pc == previous->last().ip) {
    resolve(thread, *previous, previous->count - 1, pc);
  } else if (previous && previous->valid && previous->mayGoTo(pc)) {
    resolve(thread, *previous, previous->count, pc);
  } else if (previous) {
    // Stopped inside the block (a fault the debugger sees first, a REP
    // iteration): the instructions before `pc` ran.
    size_t ran = previous->count;
    for (size_t i = 0; i < previous->count; ++i)
      if (previous->insns[i].ip == pc)
        ran = i;
    if (ran < previous->count && previous->valid)
      resolve(thread, *previous, ran, pc);
    else
      markLoss(thread, pc);
  }
  if (thread.flags.failed || !check(thread, thread.writer->disable(pc)))
    return;
  truthStoppedAt(thread, pc);
  thread.flags.enabled = false;
  flushCount(thread);
}

/// Makes every thread of the process pass a full memory barrier:
/// membarrier(2)'s private expedited command, registered at the first
/// call; where the kernel refuses it, a 2 ms sleep, far longer than a store
/// waits in a CPU's store buffer.
void everyThreadBarrier() {
  static const bool registered =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) ==
      0;
  if (registered &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0)
    return;
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

namespace {

/// Whether `thread`, outside its block callbacks, can be stopped at `pc`:
/// its newest block (logged or pending) goes there or holds it.
bool stopFits(const ThreadRecorder &thread, uint64_t pc) {
  const BlockInfo *last = thread.newestBlock();
  if (!last)
    return false;
  if (last->valid && last->mayGoTo(pc))
    return true;
  for (size_t i = 0; i < last->count; ++i)
    if (last->insns[i].ip == pc)
      return true;
  return false;
}

} // namespace

/// With flushLock held and SlowFlush set (flusherLoop).
void flushStopped() {
  Recorder &rec = *recorder;
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    threads = rec.threads;
  }
  // Is each thread stopped, and where? LLDB's stop holds every vCPU between
  // blocks, but GDB's does not (measured, docs/qemu.md): the other threads
  // run on. So every block now waits at its start (SlowFlush,
  // waitForFlush) while this thread holds flushLock, and after a barrier a
  // thread is, for good: inside a block callback (`activity` odd: wait for
  // it to leave), waiting at a block's start (`waitingAt`: its trace ends
  // there, where it is), or outside the callbacks and quiet (held, in
  // QEMU, or in a syscall: its stop address stands). A thread quiet at a
  // stop address its newest block does not lead to may be one that runs
  // but was descheduled: it gets until the deadline to come by.
  everyThreadBarrier();
  std::vector<uint64_t> before(threads.size());
  for (size_t i = 0; i < threads.size(); ++i)
    before[i] = threads[i]->activity.load(std::memory_order_acquire);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  bool catchRunning =
      __atomic_load_n(&rec.header->flushCatchRunning, __ATOMIC_ACQUIRE) != 0;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  std::vector<ThreadRecorder *> truths;
  for (size_t i = 0; i < threads.size(); ++i) {
    ThreadRecorder *thread = threads[i];
    uint64_t pc =
        __atomic_load_n(&rec.header->stopPc[thread->index], __ATOMIC_ACQUIRE);
    // No stop address: a thread that runs on (catch it at its next block),
    // or one the debugger did not list, or a flush that only marks trigger
    // blocks (nothing to end, and no wait for it).
    bool catching = pc == 0 && catchRunning;
    bool leave = pc == 0 && !catching;
    while (!leave) {
      uint32_t state = __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE);
      if (state != uint32_t(QemuThreadState::Running)) {
        // Blocked in a syscall, the thread is at its return, whatever the
        // debugger read: LLDB can read a vCPU that still runs toward the
        // syscall, a stale PC with the current stack (run-programs.test:
        // main at _dl_fixup under __pthread_clockjoin_ex, its trace ending
        // in the futex wait). Reported, its stack is left out of the stop
        // context.
        if (state == uint32_t(QemuThreadState::InSyscall) &&
            thread->syscallReturn != 0)
          pc = thread->syscallReturn;
        break;
      }
      if (uint64_t at = thread->waitingAt.load(std::memory_order_acquire)) {
        pc = at;
        break;
      }
      if (catching) {
        // Never came by (descheduled all along): its trace ends at what it
        // wrote, nothing invented.
        if (std::chrono::steady_clock::now() > deadline) {
          leave = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      uint64_t now = thread->activity.load(std::memory_order_acquire);
      bool inside = now & 1;
      // Ran since the barrier (it will come by) or still inside a callback.
      bool running = inside || now != before[i];
      // A stop address where the thread's last syscall returns, yet the
      // thread is running: it was blocked in that syscall at the stop, the
      // syscall returned during the stop, and it ran on (QEMU holds the
      // vCPUs that run blocks, not one in a host syscall). Stale.
      bool stale = pc == thread->syscallReturn;
      bool doubtful = !running && (stale || !stopFits(*thread, pc));
      if (!running && !doubtful)
        break;
      if (std::chrono::steady_clock::now() > deadline) {
        // Still inside a callback (held by a recorder trigger): its state
        // is not ours to touch. Stale: leave it as a thread in a syscall
        // is, its trace ending at what it wrote, nothing invented.
        leave = inside || stale;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!leave)
      flushToStop(*thread, pc);
    // Where the trace ends, for the reader, when not where it said.
    uint64_t given =
        __atomic_load_n(&rec.header->stopPc[thread->index], __ATOMIC_RELAXED);
    if (given != 0 && (leave || pc != given))
      __atomic_store_n(&rec.header->stopPc[thread->index], leave ? 0 : pc,
                       __ATOMIC_RELEASE);
    uint32_t state = __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE);
    // A running thread that never came by and is outside the callbacks is
    // held all the same: descheduled, or waiting in QEMU (for an exclusive
    // section that waits for a thread held at its block; seen under GDB,
    // where such a worker's `activity` did not move for 90 s). Its next
    // callback waits for flushLock before it touches its state. Where it
    // goes next is not known, so its trace ends before its newest block's
    // last instruction (as a thread's that finishes does; it resumes with
    // TIP.PGE), and its ground truth is written with it.
    bool heldElsewhere =
        leave && catching && state == uint32_t(QemuThreadState::Running) &&
        !(thread->activity.load(std::memory_order_acquire) & 1);
    if (heldElsewhere) {
      drainLog(*thread);
      const BlockInfo *newest = thread->pending;
      // (A block that may go to its own last instruction would read as
      // having gone there: left as it wrote.)
      heldElsewhere = newest && newest->valid &&
                      !newest->mayGoTo(newest->last().ip) &&
                      !newest->lastIsRep && !newest->lastCrossesPage;
      if (heldElsewhere)
        flushToStop(*thread, newest->last().ip);
    }
    // The ground truth so far, for every thread the debugger may show (a
    // finished thread's is final already).
    if ((!leave || heldElsewhere) && state != uint32_t(QemuThreadState::Done))
      truths.push_back(thread);
  }
  // Written once every thread is where its trace ends: a busy thread's
  // ground truth can be gigabytes (8 bytes an instruction since the start),
  // and writing it first took the next threads' time to come by (under GDB
  // a worker was left without one after 90 s of writing, and the bundle
  // lost its ground truth).
  for (ThreadRecorder *thread : truths)
    writeTruth(*thread);
}

/// Keeps the threads waiting at their blocks (flushLock held, SlowFlush
/// set) until the reader releases `request` or `limitMs` pass.
void holdUntilReleased(uint32_t request, uint32_t limitMs) {
  QemuRingHeader &header = *recorder->header;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limitMs);
  for (;;) {
    uint32_t released = __atomic_load_n(&header.flushRelease, __ATOMIC_ACQUIRE);
    if (released == request || std::chrono::steady_clock::now() > deadline)
      return;
    timespec timeout{0, 10 * 1000 * 1000};
    syscall(SYS_futex, &header.flushRelease, FUTEX_WAIT, released, &timeout,
            nullptr, 0);
  }
}

/// Ends QEMU, and the program with it, once the process that started it
/// (the debugger) is gone: a debugger killed with SIGKILL cannot end it,
/// and a program left running unobserved is what LLDB and GDB avoid for
/// their own processes (they kill them with the debugger). The parent is
/// polled, at the flusher's 200 ms wake-ups, rather than asked of the kernel
/// with PR_SET_PDEATHSIG, which fires when the *thread* that forked QEMU
/// exits, and a debugger may launch from a thread that ends before it does.
void endIfOrphaned() {
  int parent = recorder->options.parent;
  if (parent == 0 || getppid() == parent)
    return;
  std::fprintf(stderr,
               "magic-trace-qemu: the debugger that started this "
               "program (pid %d) is gone: ending the program\n",
               parent);
  kill(getpid(), SIGKILL);
}

void flusherLoop() {
  QemuRingHeader &header = *recorder->header;
  uint32_t seen = 0;
  for (;;) {
    endIfOrphaned();
    uint32_t request = __atomic_load_n(&header.flushRequest, __ATOMIC_ACQUIRE);
    if (request == seen) {
      timespec timeout{0, 200 * 1000 * 1000};
      syscall(SYS_futex, &header.flushRequest, FUTEX_WAIT, request, &timeout,
              nullptr, 0);
      continue;
    }
    seen = request;
    if (recorder->has(SlowForked)) {
      __atomic_store_n(&header.flushDone, request, __ATOMIC_RELEASE);
      continue;
    }
    std::unique_lock<std::mutex> hold(recorder->flushLock);
    recorder->set(SlowFlush);
    flushStopped();
    markTriggerBlocks();
    __atomic_store_n(&header.flushDone, request, __ATOMIC_RELEASE);
    if (__atomic_load_n(&header.flushHold, __ATOMIC_ACQUIRE) == request)
      holdUntilReleased(request,
                        __atomic_load_n(&header.flushHoldMs, __ATOMIC_RELAXED));
    recorder->clear(SlowFlush);
  }
}

/// Starts the flusher with every signal blocked: QEMU's host signal
/// handler assumes it runs on a vCPU thread.
void startFlusher() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread(flusherLoop).detach();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

/// DIR/maps: the mappings the guest ran code in (their code, and code with
/// no file behind it, is in the code log: QemuCode.cpp).
void writeMaps() {
  Recorder &rec = *recorder;
  if (rec.mapsWritten)
    return;
  rec.mapsWritten = true;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> maps =
      llvm::MemoryBuffer::getFileAsStream("/proc/self/maps");
  if (!maps) {
    warn("cannot read /proc/self/maps: modules are unknown");
    return;
  }
  std::string kept;
  std::lock_guard<std::mutex> lock(rec.mutex);
  llvm::SmallVector<llvm::StringRef, 0> lines;
  (*maps)->getBuffer().split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    // QEMU maps guest code without PROT_EXEC on the host (it never runs it
    // natively), so a mapping is code when the guest ran a block in it.
    std::vector<MapsEntry> entry = parseProcMaps(line);
    if (entry.size() != 1)
      continue;
    auto used = rec.codePages.lower_bound(entry[0].start);
    if (used == rec.codePages.end() || *used >= entry[0].end)
      continue;
    std::string text = line.str();
    size_t perms = text.find(' ');
    if (perms != std::string::npos && perms + 3 < text.size())
      text[perms + 3] = 'x';
    kept += text + "\n";
  }
  std::string path = qemu_dir::maps(rec.options.dir);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, kept.data(), kept.size()) != ssize_t(kept.size()))
    warn("cannot write " + path + ": modules are unknown");
  if (fd >= 0)
    ::close(fd);
}

void atExit(qemu_plugin_id_t, void *) {
  Recorder &rec = *recorder;
  if (rec.has(SlowForked))
    return;
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    threads = rec.threads;
  }
  // Other vCPUs are stopped here (QEMU's exit runs exclusively).
  std::lock_guard<std::mutex> hold(rec.flushLock);
  for (ThreadRecorder *thread : threads)
    if (__atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE) !=
        uint32_t(QemuThreadState::Done))
      finishThread(*thread, 0);
  writeMaps();
  __atomic_store_n(&rec.header->recording, 0u, __ATOMIC_RELEASE);
  if (rec.has(SlowNotTracing) && !rec.header->note[0])
    warn(rec.options.start.empty()
             ? "nothing was recorded"
             : "the start point " + rec.options.start +
                   " was never reached: nothing was recorded");
}

void inForkedChild() {
  // The child shares the parent's rings: it must not write them.
  if (recorder)
    recorder->set(SlowForked);
}

} // namespace magic_trace::qemu_plugin
