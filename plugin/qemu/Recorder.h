//===- Recorder.h - The QEMU plugin's state, shared by its files -*- C++
//-*-===//
//
// libmagic-trace-qemu.so in five files: QemuFlow.cpp turns executed blocks
// into packets (the hot path: the block callback and everything it calls),
// QemuThreads.cpp owns each thread's life (registration, the end, the stop
// flush, the maps file), QemuRecorder.cpp the plugin's entry, translation,
// syscalls and options, QemuTriggers.cpp the snapshots it takes itself,
// QemuCode.cpp the code log (the code as it ran: file mappings, versions of
// code outside files, each thread's marks). This header holds what they
// share: the block and thread records, the recorder, and the functions one
// file calls in another.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_QEMU_RECORDER_H
#define MAGIC_TRACE_PLUGIN_QEMU_RECORDER_H

#include "QemuPluginApi.h"

#include "magic_trace/GroundTruth.h"
#include "magic_trace/InsnClassifier.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/QemuRings.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace magic_trace::qemu_plugin {

constexpr int64_t kSysMmap = 9;
constexpr int64_t kSysMunmap = 11;
constexpr int64_t kSysMremap = 25;
constexpr int64_t kSysRtSigaction = 13;
constexpr int64_t kSysRtSigreturn = 15;
constexpr int64_t kSysExit = 60;
constexpr int64_t kSysExecve = 59;
constexpr int64_t kSysExecveat = 322;
/// Blocks a handler may run before its rt_sigreturn tells where the
/// interrupted code resumes; past this the outcome is marked lost.
constexpr size_t kMaxDeferred = 1 << 20;

struct InsnInfo {
  uint64_t ip = 0;
  uint8_t size = 0;
  BranchClass branch = BranchClass::Unknown;
  uint64_t target = 0; ///< Direct branch target, else 0.
};

/// Signal `number`'s bit in a signal set (bit n: signal n). Signal 64
/// (SIGRTMAX) does not fit and has none.
constexpr uint64_t signalBit(uint64_t number) {
  return number < 64 ? uint64_t(1) << number : 0;
}

/// One translated block, made at translation and never freed (a block is
/// translated again only after a flush; the total stays small).
struct alignas(64) BlockInfo {
  // One cache line: what the fast path reads, then the rest.
  uint64_t start = 0;
  uint64_t lastIp = 0; ///< last()'s ip, size and branch.
  /// Where the last instruction, run to its end, may go (setSuccessors):
  /// anywhere, else one of `successors`.
  uint64_t successors[2] = {0, 0};
  /// The signals its start is the handler of (bit n: signal n): set at
  /// translation and by every rt_sigaction that names it (Recorder::blocks).
  mutable std::atomic<uint64_t> signals{0};
  std::unique_ptr<InsnInfo[]> insns; ///< `count` of them.
  /// Non-zero when its code replaced other code at its addresses (a JIT
  /// rewrote it, or a file took an earlier mapping's place): the seq of
  /// that change in the code log (QemuCode.cpp). A thread that has not
  /// marked it writes a PSB+ and an image mark before the block's
  /// instructions; one that has (ThreadRecorder::markSeq) writes it as
  /// any other (fastOnceMarked).
  uint32_t seq = 0;
  uint16_t count = 0; ///< QEMU ends a block at 512 instructions.
  uint8_t lastSize = 0;
  BranchClass lastBranch = BranchClass::Unknown;
  /// fastOnceMarked(), and no seq to mark.
  bool fast = false;
  bool isStop = false; ///< It starts at the stop point.
  /// It starts at an armed recorder trigger (QemuTriggers.cpp): set at
  /// translation, or by the flusher while the guest is stopped.
  std::atomic<bool> isTrigger{false};
  bool anySuccessor = false;
  bool straight = true;   ///< Every instruction but the last is Other.
  bool valid = true;      ///< Every instruction classified.
  bool lastIsRep = false; ///< The last is a REP string instruction.
  /// The last crosses into the next page and is not the first: QEMU 7.2
  /// lists it but may end the block before it (then the next block starts
  /// at it).
  bool lastCrossesPage = false;

  const InsnInfo &last() const { return insns[count - 1]; }
  /// Straight, valid, and neither REP nor page-crossing at its end: the
  /// fast path writes it with one stepRun, once its seq (if any) is marked.
  bool fastOnceMarked() const {
    return straight && valid && !lastIsRep && !lastCrossesPage;
  }
  /// Could the last instruction, run to its end, have gone to `next`?
  bool mayGoTo(uint64_t next) const {
    return anySuccessor || next == successors[0] || next == successors[1];
  }
};
static_assert(sizeof(BlockInfo) == 64, "a block is one cache line");

/// One entry of a handler's run that waits for its rt_sigreturn.
struct Deferred {
  const BlockInfo *block = nullptr; ///< Or a syscall when null.
  int64_t syscall = 0;
};

struct Options {
  std::string dir;
  uint64_t ringSize = 4 << 20;
  PacketWriter::Options writer;
  std::string start = "main";
  std::string stop;
  uint64_t maxInsns = 0;
  bool groundTruth = false;
  /// Entries of each thread's block log (a power of two; log=): 64 MiB
  /// of virtual memory, touched as the log fills.
  uint64_t logSize = uint64_t(1) << 23;
  /// The process that started QEMU (the debugger): when it is gone, the
  /// program ends with it (parent=keep keeps it running; 0 = no watch).
  int parent = 0;
  /// relay=, stub=: where GDB connects, and QEMU's gdbstub (-g), which the
  /// recorder relays between (QemuDebugger.cpp); empty: no relay.
  std::string relayPath, stubPath;
};

/// A thread's state as the block callback's fast path needs it: together,
/// so that it checks all four at once (ready()).
struct ThreadFlags {
  /// The slot's state is Running and only this thread changes it (another
  /// thread may only finish a slot that is InSyscall).
  bool running = true;
  bool enabled = false;
  bool failed = false;
  // A signal handler entered after an instruction whose outcome is unknown.
  bool deferring = false;

  /// Running and enabled, neither failed nor deferring: one 4-byte compare.
  bool ready() const {
    static constexpr ThreadFlags kReady{true, true, false, false};
    uint32_t word = 0, readyWord = 0;
    std::memcpy(&word, this, sizeof(word));
    std::memcpy(&readyWord, &kReady, sizeof(readyWord));
    return word == readyWord;
  }
};
static_assert(sizeof(ThreadFlags) == sizeof(uint32_t));

struct alignas(64) ThreadRecorder {
  // What the block callback's fast path reads and writes, first (one cache
  // line).
  std::unique_ptr<PacketWriter> writer;
  const BlockInfo *pending = nullptr;
  /// Instructions not yet added to the slot and the recorder's total.
  uint64_t uncounted = 0;
  ThreadFlags flags;
  /// The block log (drainLog): entries [tail, head) of `log`, indices
  /// masked with `logMask` (Options::logSize - 1).
  std::unique_ptr<const BlockInfo *[]> log;
  uint64_t head = 0;
  uint64_t tail = 0;
  uint64_t logMask = 0;
  /// The last block the thread ran that its trace knows: the newest logged,
  /// else the pending one (null before any).
  const BlockInfo *newestBlock() const {
    return head != tail ? log[(head - 1) & logMask] : pending;
  }

  uint64_t tid = 0;
  uint32_t index = 0; ///< Of the slot in the header's tables.
  QemuThreadSlot *slot = nullptr;
  ThreadTruth truth;
  bool awaitingResume = false; ///< The handler's rt_sigreturn was seen.
  /// Where the thread's last syscall returns (the address after its syscall
  /// instruction; 0 before one, or when it was not known): set at syscall
  /// entry, read by the stop flush, both under Recorder::flushLock.
  uint64_t syscallReturn = 0;
  int deferDepth = 0;
  const BlockInfo *interrupted = nullptr;
  uint64_t handler = 0;
  std::vector<Deferred> deferred;
  /// A floor on the PT the logged blocks [floorFrom, floorTo) make, in
  /// sixths of a byte (logFull, ptFloor): kept as the log slides.
  uint64_t floorFrom = 0, floorTo = 0, floorSixths = 0;
  /// The code history's seq the thread's trace has marked (QemuCode.cpp),
  /// its marks so far (ring offset, seq), and DIR/marks.<tid>.
  uint32_t markSeq = 0;
  std::vector<ImageMark> marks;
  int marksFd = -1;
  /// The last Recorder::syncEpoch this thread answered (its log written).
  std::atomic<uint64_t> syncSeen{0};
  /// Odd while the thread is inside a block callback, even outside; written
  /// only by the thread. The stop flush reads it to know that it may touch
  /// the thread's state, and whether the thread runs (QemuThreads.cpp).
  std::atomic<uint64_t> activity{0};
  /// Where the thread waits for the stop flush to end (the start of the
  /// block it is about to run), 0 when it does not: set before `activity`
  /// turns even at the wait, read by the flusher.
  std::atomic<uint64_t> waitingAt{0};

  /// From a block callback: runs `wait` with the thread outside its
  /// callback (`activity` even) and `start`, the block it is about to run,
  /// published in `waitingAt` (the stop flush's and GDB's holds).
  template <typename Wait> void waitAtBlockStart(uint64_t start, Wait wait) {
    uint64_t count = activity.load(std::memory_order_relaxed);
    waitingAt.store(start, std::memory_order_relaxed);
    activity.store(count + 1, std::memory_order_release);
    wait();
    waitingAt.store(0, std::memory_order_relaxed);
    activity.store(count + 2, std::memory_order_relaxed);
  }
};

/// Recorder::slow bits.
enum SlowReason : uint32_t {
  SlowNotTracing = 1, ///< Before the start point, or nothing to record.
  SlowStopping = 2,   ///< The stop point or the limit was reached.
  SlowForked = 4,     ///< A forked child: the rings are the parent's.
  SlowEveryInsn = 8,  ///< Overflow injection (an option).
  /// A recorder trigger asks every running thread to write its log
  /// (syncEpoch), or holds the program while the host's decoder catches up
  /// (holders): QemuTriggers.cpp.
  SlowSync = 16,
  /// The stop flush is under way: a thread's next block waits at its start
  /// until it ends (waitForFlush), so that the flusher may end the trace of
  /// a thread the debugger does not hold (GDB: QemuThreads.cpp).
  SlowFlush = 32,
  /// GDB has the program stopped: a thread's next block waits at its start
  /// until GDB resumes the program (waitForDebugger, QemuDebugger.cpp).
  SlowDebuggerStop = 64,
};

/// Why blocks cannot take the fast path (Slow* bits): one word the block
/// callback reads without a load of `recorder` first (Recorder::has, set,
/// clear).
extern std::atomic<uint32_t> slowReasons;

struct Recorder {
  Options options;
  QemuRingHeader *header = nullptr;
  std::unique_ptr<InsnClassifier> classifier;
  std::mutex mutex; ///< Threads, code pages, handlers, classifier.
  /// Held by the flusher while it ends stopped threads' traces, and by
  /// every callback that touches a thread's trace outside a block callback
  /// (syscall entry, exit); a block callback waits for it at its start
  /// while SlowFlush is set.
  std::mutex flushLock;
  std::vector<ThreadRecorder *> threads;
  std::set<uint64_t> codePages;
  /// Signal handler address -> the signals it handles (bit n: signal n).
  std::unordered_map<uint64_t, uint64_t> handlers;
  /// Start -> the blocks translated there, to mark a handler's blocks.
  std::unordered_map<uint64_t, std::vector<const BlockInfo *>> blocks;
  uint64_t startAddress = 0, stopAddress = 0;
  /// Why blocks cannot take the fast path (slowReasons).
  bool has(uint32_t reasons) const { return slowReasons.load() & reasons; }
  void set(uint32_t reasons) { slowReasons.fetch_or(reasons); }
  void clear(uint32_t reasons) { slowReasons.fetch_and(~reasons); }
  std::atomic<uint64_t> totalInsns{0};
  bool mapsWritten = false;
  /// One recorder-trigger snapshot at a time (QemuTriggers.cpp).
  std::mutex triggerMutex;
  /// A trigger's request that every running thread write its log, and the
  /// triggers that hold every thread while the host's queue is full
  /// (SlowSync; syncMutex orders setting and clearing it).
  std::atomic<uint64_t> syncEpoch{0};
  std::atomic<uint32_t> holders{0};
  std::mutex syncMutex;
  uint32_t syncUsers = 0; ///< With syncMutex: why SlowSync is set.
  /// Signalled (with syncMutex) when a hold ends: the held threads sleep
  /// on it rather than waking every millisecond, which on 2 cores took
  /// the decoder's time.
  std::condition_variable holdEnded;

  /// Blocks come from chunks of this many, never freed: the ones a loop
  /// runs lie next to each other (fewer cache lines and pages to walk
  /// than blocks spread over the heap between QEMU's own allocations).
  static constexpr size_t kBlocksPerChunk = 4096;
  std::vector<std::unique_ptr<BlockInfo[]>> blockChunks;
  size_t blocksUsed = kBlocksPerChunk; ///< Of the last chunk.
  /// A new block (with `mutex` held).
  BlockInfo *newBlock() {
    if (blocksUsed == kBlocksPerChunk) {
      blockChunks.push_back(std::make_unique<BlockInfo[]>(kBlocksPerChunk));
      blocksUsed = 0;
    }
    return &blockChunks.back()[blocksUsed++];
  }
};

extern Recorder *recorder;
// initial-exec: no __tls_get_addr call per block (one pointer of static
// TLS, which glibc reserves room for in dlopened libraries); __thread, not
// thread_local: no call to a TLS init wrapper either.
extern
    __attribute__((tls_model("initial-exec"))) __thread ThreadRecorder *current;
/// Counting goes through shared words every `countBatch` instructions.
extern uint64_t countBatch;
/// Guest memory is at its guest addresses in QEMU's own (checked at the
/// first block; QemuRecorder.cpp).
extern bool guestMemoryDirect;

// QemuFlow.cpp: a thread's packets.
void fail(ThreadRecorder &thread, llvm::Error error);
bool check(ThreadRecorder &thread, llvm::Error error);
void flushCount(ThreadRecorder &thread);
void resolve(ThreadRecorder &thread, const BlockInfo &block, size_t count,
             uint64_t next);
/// Sets `block`'s anySuccessor and successors from its last instruction (a
/// REP string instruction may also go to itself, for its next iteration).
inline void setSuccessors(BlockInfo &block) {
  const InsnInfo &last = block.last();
  uint64_t fallThrough = last.ip + last.size;
  switch (last.branch) {
  case BranchClass::Other:
    block.successors[0] = fallThrough;
    block.successors[1] = block.lastIsRep ? last.ip : fallThrough;
    return;
  case BranchClass::DirectJump:
  case BranchClass::DirectCall:
    block.successors[0] = block.successors[1] = last.target;
    return;
  case BranchClass::CondBranch:
    block.successors[0] = fallThrough;
    block.successors[1] = last.target;
    return;
  case BranchClass::Syscall:
    block.successors[0] = block.successors[1] = fallThrough;
    return;
  default:
    block.anySuccessor = true;
    return;
  }
}
void markLoss(ThreadRecorder &thread, uint64_t resume);
void abandonDeferred(ThreadRecorder &thread);
void onSyscall(ThreadRecorder &thread, int64_t number);
void blockExecuted(unsigned int, void *userdata);
/// A thread in the slow path while SlowSync is set: answers the last sync
/// request (its log was just written) and waits while a trigger holds the
/// program (QemuTriggers.cpp).
void answerSync(ThreadRecorder &thread);

// QemuThreads.cpp: the stop flush, also how a trigger ends a thread's trace.
void flushToStop(ThreadRecorder &thread, uint64_t pc);
/// Makes every thread of the process pass a full memory barrier.
void everyThreadBarrier();
// QemuDebugger.cpp: GDB's all-stop, the relay between GDB and the gdbstub.
/// Listens for GDB at `listenPath` and relays its connection to the
/// gdbstub at `stubPath`, holding the threads while GDB has the program
/// stopped.
llvm::Error startDebuggerRelay(const std::string &listenPath,
                               const std::string &stubPath);
/// At the start of a block while SlowDebuggerStop is set: the thread waits
/// there, outside its callback, until GDB resumes the program.
void waitForDebugger(ThreadRecorder &thread, uint64_t start);
/// The syscall-return callback with a relay: a thread whose syscall
/// returns while GDB has the program stopped waits there until it resumes.
void syscallReturned(qemu_plugin_id_t, unsigned int, int64_t, int64_t);
// QemuTriggers.cpp: snapshots the recorder takes itself.
/// Whether a block starting at `start` is an armed trigger (translation).
bool isArmedTrigger(uint64_t start);
/// Marks the blocks already translated at armed triggers (the flusher).
void markTriggerBlocks();
/// `block`, which starts at a trigger, is about to run on `thread`.
void triggerHit(ThreadRecorder &thread, const BlockInfo &block);
/// Writes every logged block of `thread` (ThreadRecorder::log): by the
/// thread itself, or by another with the thread held stopped (the stop
/// flush, the exit). Every slow path calls it first.
void drainLog(ThreadRecorder &thread);

// QemuCode.cpp: the code log (DIR/code.log, code.bin, marks.<tid>).
/// Logs the code `block` runs if the log does not know it yet (a file
/// mapping's first block, a new version of code outside files) and returns
/// the seq `block` must be marked with (BlockInfo::seq), 0 when its code
/// replaced nothing. With Recorder::mutex held.
uint32_t noteTranslatedCode(const BlockInfo &block);
/// A syscall that may unmap code (munmap, mremap, mmap MAP_FIXED) is about
/// to run over [address, address + length).
void noteUnmap(uint64_t address, uint64_t length);
/// Before `block`'s instructions are written: a PSB+ and an image mark when
/// its code replaced code the thread's trace has not marked.
void markCodeChange(ThreadRecorder &thread, const BlockInfo &block);
/// The thread's marks in a snapshot of its ring of `bytesCopied` bytes, with
/// Recorder::mutex held.
std::vector<ImageMark> marksFor(const ThreadRecorder &thread,
                                uint64_t bytesCopied);
/// The code log's last seq.
uint64_t lastCodeSeq();

// QemuThreads.cpp: threads, the stop flush, the maps file.
void setNote(const std::string &text);
/// Records why recording stops (QemuRingHeader::stopReason), unless a
/// reason is recorded already: the first stop reached is the one.
void noteStopReason(QemuStopReason reason);
void warn(const std::string &text);
void *mapSharedFile(const std::string &path, uint64_t size);
void writeTruth(ThreadRecorder &thread);
void finishThread(ThreadRecorder &thread, uint64_t next);
ThreadRecorder *registerThread();
void waitForRunningThreads(std::chrono::milliseconds limit);
void stopRecording(ThreadRecorder &self, uint64_t next);
void startFlusher();
void writeMaps();
void atExit(qemu_plugin_id_t, void *);
void inForkedChild();

} // namespace magic_trace::qemu_plugin

#endif
