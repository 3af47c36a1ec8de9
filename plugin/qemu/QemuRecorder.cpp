//===- QemuRecorder.cpp - libmagic-trace-qemu.so: Intel PT from QEMU ------===//
//
// A QEMU TCG plugin (qemu-x86_64 -plugin libmagic-trace-qemu.so,dir=DIR,...)
// that writes, for every guest thread, the Intel PT a CPU tracing user space
// would have written, with the core's PacketWriter and InsnClassifier, into
// shared-memory rings (QemuRings.h). docs/qemu.md has the rules; in short:
// - at translation, each block's instructions are classified; only the last
//   one of a block can transfer control (QEMU ends a block at every branch);
// - at execution, a block's start is the outcome of the block before it on
//   that thread (host thread = guest thread in qemu-user);
// - a syscall ends the block before it with TIP.PGD, the next block resumes
//   with TIP.PGE; a signal delivered between blocks is FUP + TIP.PGD at the
//   interrupted instruction, then TIP.PGE at the handler; when the
//   interrupted instruction's outcome is only known at the handler's
//   rt_sigreturn, the handler's blocks wait until then; a fault inside a
//   block (unknown position) is marked as a loss (OVF), never guessed.
//
//===----------------------------------------------------------------------===//
#include "QemuPluginApi.h"

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

using namespace magic_trace;

extern "C" {
__attribute__((visibility("default"))) int qemu_plugin_version =
    MT_QEMU_PLUGIN_VERSION;
__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                    char **argv);
}

namespace {

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

/// One translated block, made at translation and never freed (a block is
/// translated again only after a flush; the total stays small).
struct BlockInfo {
  // What the fast path reads, first (one cache line).
  uint64_t start = 0;
  InsnInfo lastInsn; ///< insns.back().
  uint32_t count = 0;
  /// Straight, valid, and neither REP nor page-crossing at its end: the
  /// fast path writes it with one stepRun.
  bool fast = false;
  /// handlerSignals(start), valid while handlerGeneration matches the
  /// recorder's (handlers change only at rt_sigaction).
  mutable std::atomic<uint32_t> handlerGeneration{0};
  mutable std::atomic<uint64_t> signals{0};

  std::vector<InsnInfo> insns;
  bool straight = true;   ///< Every instruction but the last is Other.
  bool valid = true;      ///< Every instruction classified.
  bool lastIsRep = false; ///< The last is a REP string instruction.
  /// The last crosses into the next page and is not the first: QEMU 7.2
  /// lists it but may end the block before it (then the next block starts
  /// at it).
  bool lastCrossesPage = false;
  const InsnInfo &last() const { return lastInsn; }
};

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
};

struct ThreadRecorder {
  uint64_t tid = 0;
  uint32_t index = 0; ///< Of the slot in the header's tables.
  QemuThreadSlot *slot = nullptr;
  std::unique_ptr<PacketWriter> writer;
  ThreadTruth truth;
  const BlockInfo *pending = nullptr;
  bool enabled = false;
  bool failed = false;
  // A signal handler entered after an instruction whose outcome is unknown.
  bool deferring = false;
  bool awaitingResume = false; ///< The handler's rt_sigreturn was seen.
  int deferDepth = 0;
  const BlockInfo *interrupted = nullptr;
  uint64_t handler = 0;
  std::vector<Deferred> deferred;
  /// Instructions not yet added to the slot and the recorder's total.
  uint64_t uncounted = 0;
  /// The slot's state is Running and only this thread changes it (another
  /// thread may only finish a slot that is InSyscall).
  bool running = true;
};

struct Recorder {
  Options options;
  QemuRingHeader *header = nullptr;
  std::unique_ptr<InsnClassifier> classifier;
  std::mutex mutex; ///< Threads, code pages, handlers, classifier.
  /// Held by the flusher while it ends stopped threads' traces, and by
  /// every callback that may run while a debugger holds the guest stopped
  /// (syscall entry, exit): block callbacks do not run then.
  std::mutex flushLock;
  std::vector<ThreadRecorder *> threads;
  std::set<uint64_t> codePages;
  std::atomic<uint32_t> handlerGeneration{1};
  /// Signal handler address -> the signals it handles (bit n: signal n).
  std::unordered_map<uint64_t, uint64_t> handlers;
  uint64_t startAddress = 0, stopAddress = 0;
  std::atomic<bool> tracing{false}, stopping{false}, forked{false};
  std::atomic<uint64_t> totalInsns{0};
  bool mapsWritten = false;
};

Recorder *recorder = nullptr;
// initial-exec: no __tls_get_addr call per block (one pointer of static
// TLS, which glibc reserves room for in dlopened libraries).
__attribute__((
    tls_model("initial-exec"))) thread_local ThreadRecorder *current = nullptr;

void setNote(const std::string &text) {
  if (!recorder->header || recorder->header->note[0])
    return;
  std::strncpy(recorder->header->note, text.c_str(),
               sizeof(recorder->header->note) - 1);
}

/// QEMU prints qemu_plugin_outs only under -d plugin: warnings go to
/// stderr (the guest's too) and into the header for the reader.
void warn(const std::string &text) {
  std::fprintf(stderr, "magic-trace-qemu: %s\n", text.c_str());
  setNote(text);
}

std::string joinPath(llvm::StringRef dir, const llvm::Twine &name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
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

bool isRepString(const uint8_t *bytes, size_t size) {
  bool rep = false;
  for (size_t i = 0; i < size; ++i) {
    uint8_t byte = bytes[i];
    if (byte == 0xf3 || byte == 0xf2) {
      rep = true;
      continue;
    }
    if (byte == 0x66 || byte == 0x67 || byte == 0x2e || byte == 0x3e ||
        byte == 0x26 || byte == 0x36 || byte == 0x64 || byte == 0x65 ||
        (byte >= 0x40 && byte <= 0x4f))
      continue;
    bool string = (byte >= 0xa4 && byte <= 0xa7) ||
                  (byte >= 0xaa && byte <= 0xaf) ||
                  (byte >= 0x6c && byte <= 0x6f);
    return rep && string;
  }
  return false;
}

//===-- Writing one thread ------------------------------------------------===//

void fail(ThreadRecorder &thread, llvm::Error error) {
  warn(llvm::formatv("thread {0}: {1}; its trace ends here", thread.tid,
                     llvm::toString(std::move(error)))
           .str());
  thread.failed = true;
}

bool check(ThreadRecorder &thread, llvm::Error error) {
  if (!error)
    return true;
  fail(thread, std::move(error));
  return false;
}

/// Adds the thread's uncounted instructions to its slot and the total, and
/// starts the stop when the total reached --max-insns.
void flushCount(ThreadRecorder &thread) {
  uint64_t count = thread.uncounted;
  thread.uncounted = 0;
  __atomic_add_fetch(&thread.slot->instructions, count, __ATOMIC_RELAXED);
  uint64_t total = recorder->totalInsns.fetch_add(count) + count;
  if (recorder->options.maxInsns && total >= recorder->options.maxInsns)
    recorder->stopping = true;
}

/// Counting goes through shared words only every `countBatch` instructions
/// (the limit is then reached at most that many late: a 64th of it).
uint64_t countBatch = 65536;

inline void countInstructions(ThreadRecorder &thread, uint64_t count) {
  thread.uncounted += count;
  if (thread.uncounted >= countBatch)
    flushCount(thread);
}

/// Writes the first `count` instructions of `block`; the last of them went
/// on to `next`.
void resolve(ThreadRecorder &thread, const BlockInfo &block, size_t count,
             uint64_t next) {
  if (count == 0 || thread.failed)
    return;
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
  if (recorder->options.groundTruth) {
    for (size_t i = 0; i + 1 < count; ++i) {
      const InsnInfo &insn = block.insns[i];
      thread.truth.addInstruction(insn.ip, insn.size, insn.branch,
                                  insn.ip + insn.size);
    }
    thread.truth.addInstruction(last.ip, last.size, last.branch, next);
  }
  countInstructions(thread, count);
}

/// Could `block`'s last instruction, run to its end, have gone to `next`?
bool possibleSuccessor(const BlockInfo &block, uint64_t next) {
  const InsnInfo &last = block.last();
  uint64_t fallThrough = last.ip + last.size;
  switch (last.branch) {
  case BranchClass::Other:
    return next == fallThrough || (block.lastIsRep && next == last.ip);
  case BranchClass::DirectJump:
  case BranchClass::DirectCall:
    return next == last.target;
  case BranchClass::CondBranch:
    return next == fallThrough || next == last.target;
  case BranchClass::Syscall:
    return next == fallThrough;
  default:
    return true;
  }
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
  thread.enabled = true;
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
  thread.deferring = thread.awaitingResume = false;
  thread.deferred.clear();
  thread.interrupted = nullptr;
  resolve(thread, *interrupted, interrupted->insns.size(), resume);
  if (thread.failed || !check(thread, thread.writer->interrupt(resume)))
    return;
  if (recorder->options.groundTruth)
    thread.truth.addEvent(TruthEventKind::Interrupt, resume, handler);
  thread.enabled = false;
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
  thread.deferring = thread.awaitingResume = false;
  thread.deferred.clear();
  resolve(thread, *interrupted, interrupted->insns.size() - 1,
          interrupted->last().ip);
  markLoss(thread, thread.handler);
  thread.pending = nullptr;
  for (const Deferred &item : items) {
    if (item.block)
      onBlock(thread, *item.block);
    else
      onSyscall(thread, item.syscall);
  }
}

/// The signals the start of `block` is the handler of (bit n: signal n), or
/// 0; cached in the block until the handlers change.
uint64_t lookUpHandler(const BlockInfo &block, uint32_t generation);

__attribute__((always_inline)) inline uint64_t
handlerSignals(const BlockInfo &block) {
  uint32_t generation =
      recorder->handlerGeneration.load(std::memory_order_acquire);
  if (block.handlerGeneration.load(std::memory_order_acquire) == generation)
    return block.signals.load(std::memory_order_relaxed);
  return lookUpHandler(block, generation);
}

uint64_t lookUpHandler(const BlockInfo &block, uint32_t generation) {
  uint64_t signals = 0;
  {
    std::lock_guard<std::mutex> lock(recorder->mutex);
    auto found = recorder->handlers.find(block.start);
    if (found != recorder->handlers.end())
      signals = found->second;
  }
  block.signals.store(signals, std::memory_order_relaxed);
  block.handlerGeneration.store(generation, std::memory_order_release);
  return signals;
}

bool isHandler(const BlockInfo &block) { return handlerSignals(block) != 0; }

/// Signals the CPU raises for the instruction it runs (SIGILL, SIGTRAP,
/// SIGBUS, SIGFPE, SIGSEGV): delivered inside a block, not after it.
constexpr uint64_t kFaultSignals =
    (1u << 4) | (1u << 5) | (1u << 7) | (1u << 8) | (1u << 11);

void onBlock(ThreadRecorder &thread, const BlockInfo &block) {
  if (thread.deferring) {
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
  if (thread.failed)
    return;
  if (!thread.enabled) {
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
    resolve(thread, *previous, previous->insns.size() - 1, block.start);
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
      resolve(thread, *previous, previous->insns.size(), resume);
      if (thread.failed || !check(thread, thread.writer->interrupt(resume)))
        return;
      if (recorder->options.groundTruth)
        thread.truth.addEvent(TruthEventKind::Interrupt, resume, block.start);
      thread.enabled = false;
      if (enable(thread, block.start))
        thread.pending = &block;
      return;
    }
    thread.deferring = true;
    thread.deferDepth = 1;
    thread.interrupted = previous;
    thread.handler = block.start;
    thread.deferred.push_back({&block, 0});
    thread.pending = nullptr;
    return;
  }
  if (!possibleSuccessor(*previous, block.start)) {
    // A fault inside `previous` (a synchronous signal): where it stopped is
    // unknown, so its instructions are not claimed, and the loss is marked.
    markLoss(thread, block.start);
    return;
  }
  resolve(thread, *previous, previous->insns.size(), block.start);
}

void onSyscall(ThreadRecorder &thread, int64_t number) {
  if (thread.deferring && !thread.awaitingResume) {
    thread.deferred.push_back({nullptr, number});
    if (number == kSysRtSigreturn && --thread.deferDepth == 0)
      thread.awaitingResume = true;
    return;
  }
  if (thread.failed || !thread.enabled)
    return;
  const BlockInfo *previous = thread.pending;
  thread.pending = nullptr;
  if (previous && previous->valid &&
      previous->last().branch == BranchClass::Syscall) {
    resolve(thread, *previous, previous->insns.size(),
            previous->last().ip + previous->last().size);
  } else if (previous) {
    // A syscall without a syscall instruction at the end of the block: the
    // trace stops before the block's last instruction.
    resolve(thread, *previous, previous->insns.size() - 1, previous->last().ip);
    if (!thread.failed)
      check(thread, thread.writer->interrupt(previous->last().ip));
  }
  thread.enabled = false;
}

//===-- Thread lifetime ---------------------------------------------------===//

void writeTruth(ThreadRecorder &thread) {
  if (!recorder->options.groundTruth)
    return;
  thread.truth.lost = thread.writer->lostInstructions();
  if (llvm::Error error =
          writeGroundTruth({thread.truth}, recorder->options.dir))
    warn(llvm::toString(std::move(error)));
}

/// Ends `thread`'s recording: the trace stops before `next` (0: before the
/// pending block's last instruction, whose outcome is unknown).
void finishThread(ThreadRecorder &thread, uint64_t next) {
  if (thread.deferring)
    abandonDeferred(thread);
  if (thread.enabled && !thread.failed) {
    const BlockInfo *previous = thread.pending;
    uint64_t stopAt = next;
    if (previous && next && possibleSuccessor(*previous, next))
      resolve(thread, *previous, previous->insns.size(), next);
    else if (previous) {
      resolve(thread, *previous, previous->insns.size() - 1,
              previous->last().ip);
      stopAt = previous->last().ip;
    }
    if (!thread.failed && stopAt)
      check(thread, thread.writer->disable(stopAt));
    thread.enabled = false;
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
  thread.running = false;
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
  std::string path =
      joinPath(rec.options.dir, llvm::formatv("ring.{0}", thread->tid));
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
  thread->index = index;
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
  if (pc == 0 || !thread.running || !thread.enabled || thread.failed ||
      thread.deferring ||
      __atomic_load_n(&thread.slot->state, __ATOMIC_ACQUIRE) !=
          uint32_t(QemuThreadState::Running))
    return;
  const BlockInfo *previous = thread.pending;
  thread.pending = nullptr;
  if (previous && (previous->lastIsRep || previous->lastCrossesPage) &&
      pc == previous->last().ip) {
    resolve(thread, *previous, previous->insns.size() - 1, pc);
  } else if (previous && previous->valid && possibleSuccessor(*previous, pc)) {
    resolve(thread, *previous, previous->insns.size(), pc);
  } else if (previous) {
    // Stopped inside the block (a fault the debugger sees first, a REP
    // iteration): the instructions before `pc` ran.
    size_t ran = previous->insns.size();
    for (size_t i = 0; i < previous->insns.size(); ++i)
      if (previous->insns[i].ip == pc)
        ran = i;
    if (ran < previous->insns.size() && previous->valid)
      resolve(thread, *previous, ran, pc);
    else
      markLoss(thread, pc);
  }
  if (thread.failed || !check(thread, thread.writer->disable(pc)))
    return;
  if (recorder->options.groundTruth)
    thread.truth.addEvent(
        TruthEventKind::Disable,
        thread.truth.insns.empty() ? 0 : thread.truth.insns.back(), pc);
  thread.enabled = false;
  flushCount(thread);
}

void flushStopped() {
  Recorder &rec = *recorder;
  std::vector<ThreadRecorder *> threads;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    threads = rec.threads;
  }
  std::lock_guard<std::mutex> hold(rec.flushLock);
  for (ThreadRecorder *thread : threads) {
    flushToStop(*thread, __atomic_load_n(&rec.header->stopPc[thread->index],
                                         __ATOMIC_ACQUIRE));
    // The ground truth so far, for every thread the debugger may show (a
    // finished thread's is final already).
    if (__atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE) !=
        uint32_t(QemuThreadState::Done))
      writeTruth(*thread);
  }
}

void flusherLoop() {
  QemuRingHeader &header = *recorder->header;
  uint32_t seen = 0;
  for (;;) {
    uint32_t request = __atomic_load_n(&header.flushRequest, __ATOMIC_ACQUIRE);
    if (request == seen) {
      timespec timeout{0, 200 * 1000 * 1000};
      syscall(SYS_futex, &header.flushRequest, FUTEX_WAIT, request, &timeout,
              nullptr, 0);
      continue;
    }
    seen = request;
    if (!recorder->forked.load())
      flushStopped();
    __atomic_store_n(&header.flushDone, request, __ATOMIC_RELEASE);
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

//===-- QEMU callbacks ----------------------------------------------------===//

void blockExecuted(unsigned int, void *userdata) {
  const auto &block = *static_cast<const BlockInfo *>(userdata);
  Recorder &rec = *recorder;
  if (rec.forked.load(std::memory_order_relaxed))
    return;
  if (!rec.tracing.load(std::memory_order_relaxed)) {
    if (block.start != rec.startAddress || rec.stopping)
      return;
    rec.tracing = true;
    __atomic_store_n(&rec.header->recording, 1u, __ATOMIC_RELEASE);
  }
  ThreadRecorder *thread = current;
  if (!thread) {
    thread = current = registerThread();
    if (!thread)
      return;
  }
  if (!thread->running) {
    uint32_t state = __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE);
    if (state == uint32_t(QemuThreadState::Done))
      return;
    // Back from a syscall, unless a stopping thread finished us meanwhile.
    if (!__atomic_compare_exchange_n(&thread->slot->state, &state,
                                     uint32_t(QemuThreadState::Running), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return;
    thread->running = true;
  }
  if (rec.stopping.load(std::memory_order_relaxed) ||
      (rec.stopAddress && block.start == rec.stopAddress)) {
    rec.stopping = true;
    stopRecording(*thread, block.start);
    return;
  }
  // The common case in one step: the block before ran straight to its end
  // and went here, no signal is involved.
  const BlockInfo *previous = thread->pending;
  if (previous && previous->fast && thread->enabled && !thread->deferring &&
      !thread->failed && !rec.options.groundTruth &&
      !rec.options.writer.overflowEvery && !handlerSignals(block) &&
      possibleSuccessor(*previous, block.start)) {
    thread->pending = &block;
    const InsnInfo &last = previous->lastInsn;
    if (llvm::Error error = thread->writer->stepRun(
            previous->start, previous->count - 1,
            ExecutedInsn{last.ip, last.size, last.branch, block.start}))
      return fail(*thread, std::move(error));
    countInstructions(*thread, previous->count);
    return;
  }
  onBlock(*thread, block);
}

void syscallEntered(qemu_plugin_id_t, unsigned int, int64_t number, uint64_t a1,
                    uint64_t a2, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t) {
  Recorder &rec = *recorder;
  if (rec.forked.load(std::memory_order_relaxed))
    return;
  if (number == kSysRtSigaction && a2) {
    // struct kernel_sigaction starts with the handler; guest memory is
    // host memory in qemu-user on x86-64 (checked at translation).
    uint64_t handler = 0;
    std::memcpy(&handler, reinterpret_cast<const void *>(a2), sizeof handler);
    if (handler > 1 && a1 < 65) {
      std::lock_guard<std::mutex> lock(rec.mutex);
      rec.handlers[handler] |= uint64_t(1) << a1;
      rec.handlerGeneration.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  ThreadRecorder *thread = current;
  if (!thread)
    return;
  // A syscall entry may race a debugger's stop (QEMU stops the vCPUs at
  // their next block, not here).
  std::lock_guard<std::mutex> hold(rec.flushLock);
  uint32_t state = __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE);
  if (state != uint32_t(QemuThreadState::Running))
    return;
  onSyscall(*thread, number);
  if (number == kSysExit) {
    finishThread(*thread, 0);
    return;
  }
  if (number == kSysExecve || number == kSysExecveat) {
    // The new program replaces QEMU (and this plugin): the recording ends
    // here, with every ring, the ground truth and the maps final. Threads
    // that are running end themselves at their next block; they get a
    // tenth of a second (exec then ends them anyway).
    setNote("the program called execve: the recording ends there");
    rec.stopping = true;
    stopRecording(*thread, 0);
    waitForRunningThreads(std::chrono::milliseconds(100));
    return;
  }
  flushCount(*thread);
  if (!thread->deferring) {
    thread->running = false;
    __atomic_store_n(&thread->slot->state, uint32_t(QemuThreadState::InSyscall),
                     __ATOMIC_RELEASE);
  }
}

bool resolvePointsOnce();

bool verifiedGuestMemory = false;
bool guestMemoryDirect = false;

/// Is the page at `address` mapped in this (QEMU's) process?
bool pageMapped(uint64_t address) {
  unsigned char resident = 0;
  return mincore(reinterpret_cast<void *>(address & ~uint64_t(4095)), 4096,
                 &resident) == 0;
}

/// Classifies one instruction of a block. QEMU 7.2 reports a short size and
/// bytes for an instruction that crosses into the next page, so near a page
/// end the bytes are read from guest memory (host memory in qemu-user),
/// into the next page when it is mapped.
bool classifyInsn(struct qemu_plugin_insn *insn, InsnInfo &info,
                  bool &repString) {
  info.ip = qemu_plugin_insn_vaddr(insn);
  size_t size = qemu_plugin_insn_size(insn);
  const auto *bytes = static_cast<const uint8_t *>(qemu_plugin_insn_data(insn));
  if (!verifiedGuestMemory) {
    verifiedGuestMemory = true;
    guestMemoryDirect =
        std::memcmp(bytes, reinterpret_cast<const void *>(info.ip), size) == 0;
    if (!guestMemoryDirect)
      warn("guest memory is not at its guest addresses (QEMU -B?): signals "
           "and page-crossing instructions will show as losses");
  }
  uint8_t buffer[15];
  uint64_t toPageEnd = 4096 - (info.ip & 4095);
  if (guestMemoryDirect && toPageEnd < sizeof buffer) {
    size = pageMapped(info.ip + toPageEnd) ? sizeof buffer : toPageEnd;
    std::memcpy(buffer, reinterpret_cast<const void *>(info.ip), size);
    bytes = buffer;
  }
  llvm::Expected<ClassifiedInsn> classified = recorder->classifier->classify(
      llvm::ArrayRef<uint8_t>(bytes, size), info.ip);
  if (!classified) {
    llvm::consumeError(classified.takeError());
    return false;
  }
  info.size = classified->size;
  info.branch = classified->branch;
  info.target = classified->directTarget;
  repString = isRepString(bytes, info.size);
  return true;
}

void blockTranslated(qemu_plugin_id_t, struct qemu_plugin_tb *tb) {
  Recorder &rec = *recorder;
  resolvePointsOnce();
  size_t count = qemu_plugin_tb_n_insns(tb);
  if (count == 0)
    return;
  auto *block = new BlockInfo();
  block->start = qemu_plugin_tb_vaddr(tb);
  block->insns.resize(count);
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    for (size_t i = 0; i < count; ++i) {
      InsnInfo &info = block->insns[i];
      bool repString = false;
      if (!classifyInsn(qemu_plugin_tb_get_insn(tb, i), info, repString)) {
        block->valid = false;
        continue;
      }
      if (i + 1 < count && info.branch != BranchClass::Other)
        block->straight = false;
      if (i + 1 == count) {
        block->lastIsRep = repString;
        block->lastCrossesPage = i > 0 && (info.ip & 4095) + info.size > 4096;
      }
    }
    // The instructions must tile the block.
    for (size_t i = 0; i + 1 < count; ++i)
      if (block->insns[i].ip + block->insns[i].size != block->insns[i + 1].ip)
        block->valid = false;
    block->lastInsn = block->insns.back();
    block->count = static_cast<uint32_t>(count);
    block->fast = block->straight && block->valid && !block->lastIsRep &&
                  !block->lastCrossesPage;
    rec.codePages.insert(block->start & ~uint64_t(4095));
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, blockExecuted,
                                       QEMU_PLUGIN_CB_NO_REGS, block);
}

/// DIR/maps: the mappings the guest ran code in, and the bytes of those
/// with no file behind them.
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
    if (!entry[0].path.empty() && entry[0].path[0] == '/')
      continue;
    std::string file = joinPath(
        rec.options.dir, llvm::formatv("code-{0:x}.bin", entry[0].start));
    int fd =
        ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      size_t size = entry[0].end - entry[0].start;
      const auto *bytes = reinterpret_cast<const char *>(entry[0].start);
      for (size_t done = 0; done < size;) {
        ssize_t wrote = ::write(fd, bytes + done, size - done);
        if (wrote <= 0)
          break;
        done += static_cast<size_t>(wrote);
      }
      ::close(fd);
    }
  }
  std::string path = joinPath(rec.options.dir, "maps");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, kept.data(), kept.size()) != ssize_t(kept.size()))
    warn("cannot write " + path + ": modules are unknown");
  if (fd >= 0)
    ::close(fd);
}

void atExit(qemu_plugin_id_t, void *) {
  Recorder &rec = *recorder;
  if (rec.forked)
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
  if (!rec.tracing && !rec.header->note[0])
    warn(rec.options.start.empty()
             ? "nothing was recorded"
             : "the start point " + rec.options.start +
                   " was never reached: nothing was recorded");
}

void inForkedChild() {
  // The child shares the parent's rings: it must not write them.
  if (recorder)
    recorder->forked = true;
}

//===-- Options and start
//---------------------------------------------------===//

llvm::Error parseOptions(int argc, char **argv, Options &options) {
  for (int i = 0; i < argc; ++i) {
    std::pair<llvm::StringRef, llvm::StringRef> option =
        llvm::StringRef(argv[i]).split('=');
    llvm::StringRef key = option.first, value = option.second;
    uint64_t number = 0;
    auto needNumber = [&]() -> llvm::Error {
      if (value.getAsInteger(0, number))
        return llvm::createStringError(
            llvm::formatv("{0}={1} is not a number", key, value).str());
      return llvm::Error::success();
    };
    if (key == "dir") {
      options.dir = value.str();
    } else if (key == "size") {
      if (llvm::Error error = needNumber())
        return error;
      if (number < 4096 || (number & (number - 1)))
        return llvm::createStringError(
            llvm::formatv("size={0} is not a power of two of at least 4096 "
                          "(use e.g. size=4194304)",
                          value)
                .str());
      options.ringSize = number;
    } else if (key == "timer") {
      if (value == "low")
        options.writer.timer = TimerResolution::Low;
      else if (value == "normal")
        options.writer.timer = TimerResolution::Normal;
      else if (value == "high")
        options.writer.timer = TimerResolution::High;
      else
        return llvm::createStringError(
            "timer= must be low, normal or high, not " + value);
    } else if (key == "noretcomp") {
      options.writer.noRetComp = value != "off" && value != "0";
    } else if (key == "psb-period") {
      if (llvm::Error error = needNumber())
        return error;
      options.writer.psbPeriod = number;
    } else if (key == "overflow-every") {
      if (llvm::Error error = needNumber())
        return error;
      options.writer.overflowEvery = number;
    } else if (key == "max-insns") {
      if (llvm::Error error = needNumber())
        return error;
      options.maxInsns = number;
    } else if (key == "start") {
      options.start = value.str();
    } else if (key == "stop") {
      options.stop = value.str();
    } else if (key == "ground-truth") {
      options.groundTruth = value != "off" && value != "0";
    } else {
      return llvm::createStringError(
          "unknown option '" + key +
          "' (dir, size, timer, noretcomp, psb-period, overflow-every, "
          "max-insns, start, stop, ground-truth)");
    }
  }
  if (options.dir.empty())
    return llvm::createStringError(
        "no dir= given (the directory for the rings, e.g. dir=/dev/shm/mt)");
  return llvm::Error::success();
}

/// The load bias of the guest program: where QEMU put its first executable
/// segment (qemu_plugin_start_code) minus that segment's link address.
llvm::Expected<uint64_t> programBias(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError("cannot read " + path);
  auto object = llvm::object::ELF64LEObjectFile::create(**buffer);
  if (!object)
    return object.takeError();
  auto headers = object->getELFFile().program_headers();
  if (!headers)
    return headers.takeError();
  for (const auto &header : *headers)
    if (header.p_type == llvm::ELF::PT_LOAD && (header.p_flags & 1))
      return qemu_plugin_start_code() - (header.p_vaddr & ~uint64_t(4095));
  return llvm::createStringError(path + " has no executable segment");
}

/// A start/stop point: a symbol of the program, or a hex link address.
llvm::Expected<uint64_t> resolvePoint(llvm::StringRef path,
                                      llvm::StringRef point, uint64_t bias,
                                      std::string &note) {
  uint64_t address = 0;
  if (point.starts_with("0x") && !point.substr(2).getAsInteger(16, address))
    return address + bias;
  llvm::Expected<uint64_t> symbol = findElfSymbol(path, point);
  if (symbol)
    return *symbol + bias;
  if (point != "main")
    return symbol.takeError();
  llvm::consumeError(symbol.takeError());
  llvm::Expected<ElfLoadInfo> info = readElfLoadInfo(path);
  if (!info)
    return info.takeError();
  note = path.str() + " has no symbol main (stripped): tracing starts at "
                      "its entry point";
  return info->entry + bias;
}

/// Resolves --start and --stop once the program is loaded (QEMU has not
/// loaded it when it installs plugins). On failure nothing is recorded and
/// the reader gets the reason.
void resolvePoints() {
  Recorder &rec = *recorder;
  Options &options = rec.options;
  const char *binary = qemu_plugin_path_to_binary();
  std::string path = binary ? binary : "";
  free(const_cast<char *>(binary));
  auto failWith = [&](llvm::Error error) {
    warn(llvm::toString(std::move(error)) + ": nothing is recorded");
    rec.startAddress = 0;
    rec.tracing = false;
    rec.stopping = true;
  };
  llvm::Expected<uint64_t> bias = programBias(path);
  if (!bias)
    return failWith(bias.takeError());
  std::string note;
  if (!options.start.empty()) {
    llvm::Expected<uint64_t> start =
        resolvePoint(path, options.start, *bias, note);
    if (!start)
      return failWith(start.takeError());
    rec.startAddress = *start;
  }
  if (!options.stop.empty()) {
    llvm::Expected<uint64_t> stop =
        resolvePoint(path, options.stop, *bias, note);
    if (!stop)
      return failWith(stop.takeError());
    rec.stopAddress = *stop;
  }
  if (!note.empty())
    setNote(note); // The reader prints it.
}

bool resolvePointsOnce() {
  static std::once_flag once;
  std::call_once(once, resolvePoints);
  return true;
}

llvm::Error install(int argc, char **argv) {
  auto rec = std::make_unique<Recorder>();
  if (llvm::Error error = parseOptions(argc, argv, rec->options))
    return error;
  Options &options = rec->options;
  if (std::error_code ec = llvm::sys::fs::create_directories(options.dir))
    return llvm::createStringError("cannot create " + options.dir + ": " +
                                   ec.message() + " (choose a writable dir=)");
  std::string headerPath = joinPath(options.dir, "header");
  rec->header = static_cast<QemuRingHeader *>(
      mapSharedFile(headerPath, sizeof(QemuRingHeader)));
  if (!rec->header)
    return llvm::createStringError("cannot create " + headerPath + ": " +
                                   std::strerror(errno) +
                                   " (choose a writable dir=)");
  QemuRingHeader &header = *rec->header;
  header.headerSize = sizeof(QemuRingHeader);
  header.ringSize = options.ringSize;
  header.pid = static_cast<uint64_t>(getpid());
  CpuIdentity cpu = emulatorCpu();
  std::strncpy(header.vendor, cpu.vendor.c_str(), sizeof(header.vendor) - 1);
  header.family = cpu.family;
  header.model = cpu.model;
  header.stepping = cpu.stepping;
  TimeConversion time = VirtualClock::conversion();
  header.timeZero = time.timeZero;
  header.timeMult = time.timeMult;
  header.timeShift = time.timeShift;
  header.mtcFreq = VirtualClock::timing.mtcFreq;
  header.nomFreq = VirtualClock::timing.nomFreq;
  header.cpuid15Eax = VirtualClock::timing.cpuid15Eax;
  header.cpuid15Ebx = VirtualClock::timing.cpuid15Ebx;

  llvm::Expected<std::unique_ptr<InsnClassifier>> classifier =
      InsnClassifier::create();
  if (!classifier)
    return classifier.takeError();
  rec->classifier = std::move(*classifier);

  if (options.maxInsns)
    countBatch =
        std::max<uint64_t>(1, std::min<uint64_t>(65536, options.maxInsns / 64));
  if (options.start.empty()) {
    rec->tracing = true;
    header.recording = 1;
  }
  recorder = rec.release();
  // Publish the header last: a reader checks the magic first.
  std::memcpy(header.magic, kQemuRingMagic, sizeof(kQemuRingMagic));
  pthread_atfork(nullptr, nullptr, inForkedChild);
  startFlusher();
  return llvm::Error::success();
}

} // namespace

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                        char **argv) {
  if (!info || llvm::StringRef(info->target_name) != "x86_64" ||
      info->system_emulation) {
    std::fprintf(stderr, "magic-trace-qemu: only x86-64 user-mode emulation "
                         "(qemu-x86_64) is supported\n");
    return -1;
  }
  if (llvm::Error error = install(argc, argv)) {
    std::fprintf(stderr, "magic-trace-qemu: %s\n",
                 llvm::toString(std::move(error)).c_str());
    return -1;
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, blockTranslated);
  qemu_plugin_register_vcpu_syscall_cb(id, syscallEntered);
  qemu_plugin_register_atexit_cb(id, atExit, nullptr);
  return 0;
}
