//===- QemuFlow.cpp - Executed blocks become a thread's packets ---------===//
//
// The plugin's hot path: the block callback derives the outcome of the
// block before from where this one starts and writes it with the core's
// PacketWriter; signals, faults and REP iterations per docs/qemu.md.
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

//===-- Writing one thread ------------------------------------------------===//

void fail(ThreadRecorder &thread, llvm::Error error) {
  warn(llvm::formatv("thread {0}: {1}; its trace ends here", thread.tid,
                     llvm::toString(std::move(error)))
           .str());
  thread.flags.failed = true;
}

bool check(ThreadRecorder &thread, llvm::Error error) {
  if (!error)
    return true;
  fail(thread, std::move(error));
  return false;
}

/// Adds the thread's uncounted instructions to its slot and the total, and
/// starts the stop when the total reached --max-insns.
__attribute__((noinline)) void flushCount(ThreadRecorder &thread) {
  uint64_t count = thread.uncounted;
  thread.uncounted = 0;
  __atomic_add_fetch(&thread.slot->instructions, count, __ATOMIC_RELAXED);
  uint64_t total = recorder->totalInsns.fetch_add(count) + count;
  if (recorder->options.maxInsns && total >= recorder->options.maxInsns) {
    noteStopReason(QemuStopReason::MaxInsns);
    recorder->set(SlowStopping);
  }
}

/// Counting goes through shared words only every `countBatch` instructions
/// (the limit is then reached at most that many late: a 64th of it).
uint64_t countBatch = 65536;

__attribute__((always_inline)) inline void
countInstructions(ThreadRecorder &thread, uint64_t count) {
  thread.uncounted += count;
  if (thread.uncounted >= countBatch)
    flushCount(thread);
}

/// With ground truth on, the first `count` instructions of `block` in it;
/// the last of them went on to `next`.
inline void recordTruth(ThreadRecorder &thread, const BlockInfo &block,
                        size_t count, uint64_t next) {
  if (!recorder->options.groundTruth || count == 0)
    return;
  for (size_t i = 0; i + 1 < count; ++i) {
    const InsnInfo &insn = block.insns[i];
    thread.truth.addInstruction(insn.ip, insn.size, insn.branch,
                                insn.ip + insn.size);
  }
  const InsnInfo &last = block.insns[count - 1];
  thread.truth.addInstruction(last.ip, last.size, last.branch, next);
}

/// Writes the first `count` instructions of `block`; the last of them went
/// on to `next`.
void resolve(ThreadRecorder &thread, const BlockInfo &block, size_t count,
             uint64_t next) {
  if (count == 0 || thread.flags.failed)
    return;
  if (block.seq)
    markCodeChange(thread, block);
  const InsnInfo &last = block.insns[count - 1];
  ExecutedInsn executed{last.ip, last.size, last.branch, next};
  bool perInsn = !block.straight || recorder->options.writer.overflowEvery;
  if (perInsn) {
    for (size_t i = 0; i + 1 < count; ++i) {
      const InsnInfo &insn = block.insns[i];
      ExecutedInsn step{insn.ip, insn.size, insn.branch, insn.ip + insn.size};
      if (!check(thread, thread.writer->step(step)))
        return;
    }
    if (!check(thread, thread.writer->step(executed)))
      return;
  } else if (!check(thread,
                    thread.writer->stepRun(block.start, count - 1, executed))) {
    return;
  }
  recordTruth(thread, block, count, next);
  countInstructions(thread, count);
}

/// Where a block that ran to its end went, when only one place is possible.
bool knownSuccessor(const BlockInfo &block, uint64_t &next) {
  const InsnInfo &last = block.last();
  switch (last.branch) {
  case BranchClass::Other:
    next = last.ip + last.size;
    return true;
  case BranchClass::DirectJump:
  case BranchClass::DirectCall:
    next = last.target;
    return true;
  default:
    return false;
  }
}

bool enable(ThreadRecorder &thread, uint64_t ip) {
  if (!check(thread, thread.writer->enable(ip)))
    return false;
  thread.flags.enabled = true;
  if (recorder->options.groundTruth)
    thread.truth.addEvent(TruthEventKind::Enable, 0, ip);
  return true;
}

/// The loss of everything since the last packet: OVF, resume at `resume`.
void markLoss(ThreadRecorder &thread, uint64_t resume) {
  if (!check(thread, thread.writer->markLoss(resume, 0)))
    return;
}

void onBlock(ThreadRecorder &thread, const BlockInfo &block);
void onSyscall(ThreadRecorder &thread, int64_t number);

/// The deferred handler run ends: the interrupted code resumes at `resume`.
void replayDeferred(ThreadRecorder &thread, uint64_t resume) {
  std::vector<Deferred> items = std::move(thread.deferred);
  const BlockInfo *interrupted = thread.interrupted;
  uint64_t handler = thread.handler;
  thread.flags.deferring = thread.awaitingResume = false;
  thread.deferred.clear();
  thread.interrupted = nullptr;
  resolve(thread, *interrupted, interrupted->count, resume);
  if (thread.flags.failed || !check(thread, thread.writer->interrupt(resume)))
    return;
  if (recorder->options.groundTruth)
    thread.truth.addEvent(TruthEventKind::Interrupt, resume, handler);
  thread.flags.enabled = false;
  thread.pending = nullptr;
  if (!enable(thread, handler))
    return;
  for (const Deferred &item : items) {
    if (item.block)
      onBlock(thread, *item.block);
    else
      onSyscall(thread, item.syscall);
  }
}

/// The handler run cannot be tied to the interrupted code's outcome (it
/// never returned, or ran too long): the interrupted instruction is lost.
void abandonDeferred(ThreadRecorder &thread) {
  std::vector<Deferred> items = std::move(thread.deferred);
  const BlockInfo *interrupted = thread.interrupted;
  thread.flags.deferring = thread.awaitingResume = false;
  thread.deferred.clear();
  resolve(thread, *interrupted, interrupted->count - 1, interrupted->last().ip);
  markLoss(thread, thread.handler);
  thread.pending = nullptr;
  for (const Deferred &item : items) {
    if (item.block)
      onBlock(thread, *item.block);
    else
      onSyscall(thread, item.syscall);
  }
}

/// The signals the start of `block` is the handler of (bit n: signal n).
inline uint64_t handlerSignals(const BlockInfo &block) {
  return block.signals.load(std::memory_order_relaxed);
}

bool isHandler(const BlockInfo &block) { return handlerSignals(block) != 0; }

/// Signals the CPU raises for the instruction it runs (SIGILL, SIGTRAP,
/// SIGBUS, SIGFPE, SIGSEGV): delivered inside a block, not after it.
constexpr uint64_t kFaultSignals = signalBit(SIGILL) | signalBit(SIGTRAP) |
                                   signalBit(SIGBUS) | signalBit(SIGFPE) |
                                   signalBit(SIGSEGV);

void onBlock(ThreadRecorder &thread, const BlockInfo &block) {
  if (thread.flags.deferring) {
    if (thread.awaitingResume && isHandler(block)) {
      // Another signal, delivered as the handler returned: the interrupted
      // code has still not run, so its resume point is still unknown.
      thread.awaitingResume = false;
      thread.deferDepth = 1;
      thread.deferred.push_back({&block, 0});
      return;
    }
    if (thread.awaitingResume) {
      replayDeferred(thread, block.start);
    } else {
      // A signal nested in the handler returns through its own
      // rt_sigreturn first.
      const Deferred &last = thread.deferred.back();
      if (isHandler(block) && last.block &&
          last.block->last().branch != BranchClass::DirectCall &&
          last.block->last().branch != BranchClass::IndirectCall &&
          last.block->last().branch != BranchClass::IndirectJump)
        ++thread.deferDepth;
      thread.deferred.push_back({&block, 0});
      if (thread.deferred.size() > kMaxDeferred)
        abandonDeferred(thread);
      return;
    }
  }
  if (thread.flags.failed)
    return;
  if (!thread.flags.enabled) {
    if (!enable(thread, block.start))
      return;
    thread.pending = &block;
    return;
  }
  const BlockInfo *previous = thread.pending;
  thread.pending = &block;
  if (!previous)
    return;
  // A REP string instruction runs one iteration per execution of a block
  // that starts at it: one instruction for PT and for the ground truth.
  if ((previous->lastIsRep || previous->lastCrossesPage) &&
      block.start == previous->last().ip) {
    resolve(thread, *previous, previous->count - 1, block.start);
    return;
  }
  if (!previous->valid) {
    markLoss(thread, block.start);
    return;
  }
  uint64_t signals = handlerSignals(block);
  bool viaBranch = block.start == previous->last().target ||
                   ((previous->last().branch == BranchClass::IndirectCall ||
                     previous->last().branch == BranchClass::IndirectJump) &&
                    !(signals & kFaultSignals));
  if (signals & kFaultSignals && !viaBranch) {
    // A fault inside `previous`: which instruction faulted is unknown, so
    // none of its instructions is claimed, and the loss is marked.
    markLoss(thread, block.start);
    return;
  }
  if (signals && !viaBranch) {
    // A signal delivered after `previous` ran.
    uint64_t resume = 0;
    if (knownSuccessor(*previous, resume)) {
      resolve(thread, *previous, previous->count, resume);
      if (thread.flags.failed ||
          !check(thread, thread.writer->interrupt(resume)))
        return;
      if (recorder->options.groundTruth)
        thread.truth.addEvent(TruthEventKind::Interrupt, resume, block.start);
      thread.flags.enabled = false;
      if (enable(thread, block.start))
        thread.pending = &block;
      return;
    }
    thread.flags.deferring = true;
    thread.deferDepth = 1;
    thread.interrupted = previous;
    thread.handler = block.start;
    thread.deferred.push_back({&block, 0});
    thread.pending = nullptr;
    return;
  }
  if (!previous->mayGoTo(block.start)) {
    // A fault inside `previous` (a synchronous signal): where it stopped is
    // unknown, so its instructions are not claimed, and the loss is marked.
    markLoss(thread, block.start);
    return;
  }
  resolve(thread, *previous, previous->count, block.start);
}

void onSyscall(ThreadRecorder &thread, int64_t number) {
  if (thread.flags.deferring && !thread.awaitingResume) {
    thread.deferred.push_back({nullptr, number});
    if (number == kSysRtSigreturn && --thread.deferDepth == 0)
      thread.awaitingResume = true;
    return;
  }
  if (thread.flags.failed || !thread.flags.enabled)
    return;
  const BlockInfo *previous = thread.pending;
  thread.pending = nullptr;
  if (previous && previous->valid &&
      previous->last().branch == BranchClass::Syscall) {
    resolve(thread, *previous, previous->count,
            previous->last().ip + previous->last().size);
  } else if (previous) {
    // A syscall without a syscall instruction at the end of the block: the
    // trace stops before the block's last instruction.
    resolve(thread, *previous, previous->count - 1, previous->last().ip);
    if (!thread.flags.failed)
      check(thread, thread.writer->interrupt(previous->last().ip));
  }
  thread.flags.enabled = false;
}

/// At the start of a block while the stop flush is under way: the thread
/// waits there, outside its callback (`activity` even) with the block's
/// start published, until the flusher, which holds flushLock, is done; the
/// flusher ends the thread's trace at that start (QemuThreads.cpp).
__attribute__((noinline)) void waitForFlush(ThreadRecorder &thread,
                                            uint64_t start) {
  thread.waitAtBlockStart(
      start, [] { std::lock_guard<std::mutex> hold(recorder->flushLock); });
}

/// blockExecuted for every case but the common one.
__attribute__((noinline)) void blockExecutedSlowly(const BlockInfo &block) {
  Recorder &rec = *recorder;
  if (rec.has(SlowForked))
    return;
  ThreadRecorder *thread = current;
  if (thread && rec.has(SlowDebuggerStop))
    waitForDebugger(*thread, block.start);
  if (thread && rec.has(SlowFlush))
    waitForFlush(*thread, block.start);
  if (thread)
    drainLog(*thread);
  if (thread && rec.has(SlowSync))
    answerSync(*thread);
  if (rec.has(SlowNotTracing)) {
    if (block.start != rec.startAddress || rec.has(SlowStopping))
      return;
    rec.clear(SlowNotTracing);
    __atomic_store_n(&rec.header->recording, 1u, __ATOMIC_RELEASE);
  }
  if (!thread) {
    // A thread that starts after the recording ended has nothing to record
    // (the program may run on: magic-trace-emulate --run-on).
    if (rec.has(SlowStopping) && rec.header->stopped)
      return;
    thread = current = registerThread();
    if (!thread)
      return;
  }
  if (!thread->flags.running) {
    uint32_t state = __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE);
    if (state == uint32_t(QemuThreadState::Done))
      return;
    // Back from a syscall, unless a stopping thread finished us meanwhile.
    if (!__atomic_compare_exchange_n(&thread->slot->state, &state,
                                     uint32_t(QemuThreadState::Running), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return;
    thread->flags.running = true;
  }
  if (rec.has(SlowStopping) || block.isStop) {
    if (block.isStop)
      noteStopReason(QemuStopReason::StopPoint);
    rec.set(SlowStopping);
    stopRecording(*thread, block.start);
    return;
  }
  if (block.isTrigger.load(std::memory_order_relaxed))
    triggerHit(*thread, block);
  onBlock(*thread, block);
}

/// The run of `previous`, which went to `next`, when it writes packets.
__attribute__((noinline)) void
writePackets(ThreadRecorder &thread, const BlockInfo &previous, uint64_t next) {
  if (previous.seq)
    markCodeChange(thread, previous);
  ExecutedInsn executed{previous.lastIp, previous.lastSize, previous.lastBranch,
                        next};
  if (llvm::Error error = thread.writer->stepRunWithPackets(
          previous.start, previous.count - 1, executed))
    return fail(thread, std::move(error));
  recordTruth(thread, previous, previous.count, next);
  countInstructions(thread, previous.count);
}

/// The logged block at `index`.
inline const BlockInfo &logged(const ThreadRecorder &thread, uint64_t index) {
  return *thread.log[index & thread.logMask];
}

/// Whether `block` is written the fast way by `thread`: its code is in a
/// file, or the thread's trace has marked the version it runs (code a JIT
/// wrote pays its mark once per version, not each time it runs).
inline bool quiet(const ThreadRecorder &thread, const BlockInfo &block) {
  return block.fast || (block.seq <= thread.markSeq && block.fastOnceMarked());
}

/// drainRange's loop.
__attribute__((always_inline)) inline void
writeLogged(ThreadRecorder &thread, uint64_t from, uint64_t to) {
  bool truth = recorder->options.groundTruth;
  for (uint64_t i = from; i < to; ++i) {
    if (thread.flags.ready()) {
      // Quiet runs until a block is not quiet (its block before did not
      // run straight to it, or it writes a packet).
      PacketWriter::QuietRuns runs(*thread.writer);
      const BlockInfo *previous = thread.pending;
      for (; i < to; ++i) {
        const BlockInfo &block = logged(thread, i);
        if (!previous || !quiet(thread, *previous) ||
            !previous->mayGoTo(block.start) ||
            !runs.step(previous->start, previous->count - 1,
                       {previous->lastIp, previous->lastSize,
                        previous->lastBranch, block.start}))
          break;
        if (__builtin_expect(truth, 0))
          recordTruth(thread, *previous, previous->count, block.start);
        previous = &block;
      }
      runs.commit();
      thread.pending = previous;
      countInstructions(thread, runs.instructions());
      if (i == to)
        return;
    }
    // Block i is not quiet: what the block callback did for such a block.
    const BlockInfo &block = logged(thread, i);
    const BlockInfo *previous = thread.pending;
    if (!thread.flags.ready() || !previous || !previous->fastOnceMarked() ||
        !previous->mayGoTo(block.start)) {
      onBlock(thread, block);
      continue;
    }
    thread.pending = &block;
    writePackets(thread, *previous, block.start);
  }
}

/// Writes the logged blocks [from, to), in order, as the block callback
/// would have written each when it ran (ThreadRecorder::log): quiet runs
/// in one loop with the writer's state in registers (PacketWriter::
/// QuietRuns), the others one by one.
__attribute__((noinline)) void drainRange(ThreadRecorder &thread, uint64_t from,
                                          uint64_t to) {
  writeLogged(thread, from, to);
}

void drainLog(ThreadRecorder &thread) {
  uint64_t head = thread.head;
  if (thread.tail == head)
    return;
  uint64_t tail = thread.tail;
  thread.tail = head;
  drainRange(thread, tail, head);
}

/// Ends the log's oldest `count` blocks as lost instead of writing them
/// (see logFull): the block before them is written, then OVF + FUP at the
/// first block kept, with their instructions counted as lost. Returns
/// false when, the block before written, the thread is not in the state
/// for that (then nothing else changed).
bool dropOldest(ThreadRecorder &thread, uint64_t count) {
  uint64_t tail = thread.tail;
  // The block before the dropped ones went to the first of them.
  drainRange(thread, tail, tail + 1);
  thread.tail = ++tail;
  if (!thread.flags.ready() || !thread.pending)
    return false;
  // What each dropped block ran, as onBlock counts it: a REP iteration (or
  // a block QEMU ended before its page-crossing last instruction) that the
  // next block continues runs all but its last instruction.
  uint64_t lost = 0;
  auto drop = [&](const BlockInfo &block, uint64_t next) {
    size_t ran = block.count;
    if ((block.lastIsRep || block.lastCrossesPage) && next == block.last().ip)
      --ran;
    recordTruth(thread, block, ran, next);
    lost += ran;
  };
  const BlockInfo *lostBlock = thread.pending;
  for (uint64_t i = tail; i < tail + count - 1; ++i) {
    const BlockInfo &next = logged(thread, i);
    drop(*lostBlock, next.start);
    lostBlock = &next;
  }
  const BlockInfo &kept = logged(thread, tail + count - 1);
  drop(*lostBlock, kept.start);
  thread.tail = tail + count - 1;
  thread.pending = nullptr;
  countInstructions(thread, lost);
  check(thread, thread.writer->markLoss(kept.start, lost));
  return true;
}

/// The fewest PT bytes, in sixths of a byte, that a block's last
/// instruction makes (PacketWriter::branchPackets): a conditional branch or
/// a compressed return is one TNT bit, and a TNT packet holds at most six
/// bits a byte (short TNT: 6 in 1 byte; long TNT: 47 in 8); a TIP is at
/// least 3 bytes (a header and 2 bytes of IP, the most compressed); a
/// TIP.PGD at a syscall 1. A direct branch makes none, and an unclassified
/// instruction is counted as none.
constexpr uint64_t ptFloorSixths(BranchClass branch) {
  switch (branch) {
  case BranchClass::CondBranch:
  case BranchClass::Return:
    return 1;
  case BranchClass::IndirectCall:
  case BranchClass::IndirectJump:
    return 18;
  case BranchClass::Syscall:
  case BranchClass::FarTransfer:
    return 6;
  default:
    return 0;
  }
}

/// A floor on the PT bytes the logged blocks [from, to) make when written,
/// in sixths of a byte. Kept as a sliding sum (ThreadRecorder::floorSixths),
/// so that each block is added and taken out once: `from` and `to` only
/// grow between calls unless the log was emptied, when it starts again.
uint64_t ptFloor(ThreadRecorder &thread, uint64_t from, uint64_t to) {
  if (thread.floorFrom < thread.tail || thread.floorFrom > from ||
      thread.floorTo < from || thread.floorTo > to) {
    thread.floorFrom = thread.floorTo = from;
    thread.floorSixths = 0;
  }
  for (; thread.floorFrom < from; ++thread.floorFrom)
    thread.floorSixths -=
        ptFloorSixths(logged(thread, thread.floorFrom).lastBranch);
  for (; thread.floorTo < to; ++thread.floorTo)
    thread.floorSixths +=
        ptFloorSixths(logged(thread, thread.floorTo).lastBranch);
  return thread.floorSixths;
}

/// The block callback when `thread`'s log is full. Its oldest eighth is
/// written, or, when the other seven eighths will overwrite the whole ring
/// anyway, dropped unwritten: a snapshot can only hold the newest, and
/// writing packets is most of the recorder's cost (docs/qemu.md, "Speed").
/// "Will" is a floor, not an estimate (ptFloor): the kept blocks are
/// written before any snapshot (the stop flush drains the log), so the
/// OVF a drop writes is always overwritten, never in a snapshot. (An
/// estimate from the bytes per block so far dropped wrongly where a
/// program's PT rate fell: the JVM's interpreter, then its compiled code.)
__attribute__((noinline)) void logFull(ThreadRecorder &thread,
                                       const BlockInfo &block) {
  uint64_t size = recorder->options.logSize;
  uint64_t oldest = size / 8, kept = size - oldest;
  uint64_t keptFrom = thread.head - kept;
  bool covered =
      ptFloor(thread, keptFrom, thread.head) >= 6 * recorder->options.ringSize;
  if (!covered || !dropOldest(thread, oldest)) {
    uint64_t tail = thread.tail;
    if (tail < keptFrom) {
      thread.tail = keptFrom;
      drainRange(thread, tail, keptFrom);
    }
  }
  uint64_t head = thread.head;
  thread.log[head & thread.logMask] = &block;
  thread.head = head + 1;
}

/// The callback of every executed block. The common case is a leaf that
/// logs the block (ThreadRecorder::log): the thread is recording, and no
/// signal, stop point or option is involved.
void blockExecuted(unsigned int, void *userdata) {
  const auto &block = *static_cast<const BlockInfo *>(userdata);
  ThreadRecorder *thread = current;
  if (__builtin_expect(!thread, 0)) {
    blockExecutedSlowly(block);
    if (ThreadRecorder *registered = current)
      registered->activity.store(
          registered->activity.load(std::memory_order_relaxed) + 1,
          std::memory_order_release);
    return;
  }
  // Inside (odd) before slowReasons is read: the flusher sets SlowFlush,
  // makes every thread pass a barrier (QemuThreads.cpp, everyThreadBarrier)
  // and then sees either this thread inside or it at waitForFlush.
  thread->activity.store(thread->activity.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (slowReasons.load(std::memory_order_relaxed) || !thread->flags.ready() ||
      block.isStop || handlerSignals(block) ||
      block.isTrigger.load(std::memory_order_relaxed)) {
    blockExecutedSlowly(block);
  } else {
    uint64_t head = thread->head;
    if (__builtin_expect(head - thread->tail > thread->logMask, 0)) {
      logFull(*thread, block);
    } else {
      thread->log[head & thread->logMask] = &block;
      thread->head = head + 1;
    }
  }
  thread->activity.store(thread->activity.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
}

} // namespace magic_trace::qemu_plugin
