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
// This file: the entry QEMU calls, translation, syscalls and options;
// Recorder.h says where the rest is.
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
#include "llvm/ADT/bit.h"
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
extern "C" {
__attribute__((visibility("default"))) int qemu_plugin_version =
    MT_QEMU_PLUGIN_VERSION;
__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                    char **argv);
}

namespace magic_trace::qemu_plugin {

Recorder *recorder = nullptr;
std::atomic<uint32_t> slowReasons{SlowNotTracing};
// initial-exec: no __tls_get_addr call per block (one pointer of static
// TLS, which glibc reserves room for in dlopened libraries).
__attribute__((tls_model("initial-exec"))) __thread ThreadRecorder *current =
    nullptr;

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

void syscallEntered(qemu_plugin_id_t, unsigned int, int64_t number, uint64_t a1,
                    uint64_t a2, uint64_t, uint64_t a4, uint64_t, uint64_t,
                    uint64_t, uint64_t) {
  Recorder &rec = *recorder;
  if (rec.has(SlowForked))
    return;
  // Code may go away: the code log says so (QemuCode.cpp). MAP_FIXED is
  // 0x10; a MAP_FIXED_NOREPLACE mmap replaces nothing.
  if (number == kSysMunmap || number == kSysMremap ||
      (number == kSysMmap && (a4 & 0x10))) {
    std::lock_guard<std::mutex> lock(rec.mutex);
    noteUnmap(a1, a2);
  }
  if (number == kSysRtSigaction && a2) {
    // struct kernel_sigaction starts with the handler; guest memory is
    // host memory in qemu-user on x86-64 (checked at translation).
    uint64_t handler = 0;
    std::memcpy(&handler, reinterpret_cast<const void *>(a2), sizeof handler);
    if (handler > 1 && a1 < 65) {
      std::lock_guard<std::mutex> lock(rec.mutex);
      uint64_t signals = rec.handlers[handler] |= signalBit(a1);
      auto found = rec.blocks.find(handler);
      if (found != rec.blocks.end())
        for (const BlockInfo *block : found->second)
          block->signals.store(signals, std::memory_order_relaxed);
    }
  }
  ThreadRecorder *thread = current;
  if (!thread)
    return;
  // A syscall entry may race a debugger's stop (QEMU stops the vCPUs at
  // their next block, not here), and the stop flush holds flushLock. The
  // thread is at its syscall's return, as a stop would find it: where the
  // flusher ends its trace if it waits here (QemuThreads.cpp).
  const BlockInfo *newest = thread->newestBlock();
  if (newest && newest->valid && newest->lastBranch == BranchClass::Syscall)
    thread->waitingAt.store(newest->lastIp + newest->lastSize,
                            std::memory_order_release);
  std::lock_guard<std::mutex> hold(rec.flushLock);
  thread->waitingAt.store(0, std::memory_order_relaxed);
  uint32_t state = __atomic_load_n(&thread->slot->state, __ATOMIC_ACQUIRE);
  if (state != uint32_t(QemuThreadState::Running))
    return;
  drainLog(*thread);
  const BlockInfo *last = thread->pending;
  // Where the thread waits (0: not known; an older syscall's return would
  // call a true stop address wrong).
  thread->syscallReturn =
      last && last->valid && last->last().branch == BranchClass::Syscall
          ? last->last().ip + last->last().size
          : 0;
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
    noteStopReason(QemuStopReason::Exec);
    rec.set(SlowStopping);
    stopRecording(*thread, 0);
    waitForRunningThreads(std::chrono::milliseconds(100));
    return;
  }
  flushCount(*thread);
  if (!thread->flags.deferring) {
    thread->flags.running = false;
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
  BlockInfo *block = nullptr;
  {
    std::lock_guard<std::mutex> lock(rec.mutex);
    block = rec.newBlock();
    block->start = qemu_plugin_tb_vaddr(tb);
    block->insns = std::make_unique<InsnInfo[]>(count);
    block->count = static_cast<uint16_t>(count);
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
    block->lastIp = block->last().ip;
    block->lastSize = block->last().size;
    block->lastBranch = block->last().branch;
    // The code log (QemuCode.cpp): a block of code that replaced other
    // code is marked in each thread's trace before it runs, on the slow
    // write path.
    block->seq = noteTranslatedCode(*block);
    block->fast = block->fastOnceMarked() && !block->seq;
    block->isStop = rec.stopAddress && block->start == rec.stopAddress;
    block->isTrigger.store(isArmedTrigger(block->start),
                           std::memory_order_relaxed);
    setSuccessors(*block);
    auto handler = rec.handlers.find(block->start);
    if (handler != rec.handlers.end())
      block->signals.store(handler->second, std::memory_order_relaxed);
    rec.blocks[block->start].push_back(block);
    rec.codePages.insert(block->start & ~uint64_t(4095));
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, blockExecuted,
                                       QEMU_PLUGIN_CB_NO_REGS, block);
}

//===-- Options and start
//---------------------------------------------------===//

llvm::Error parseOptions(int argc, char **argv, Options &options) {
  options.parent = getppid();
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
    // A number that is a power of two of at least `least`.
    auto needPowerOfTwo = [&](uint64_t least) -> llvm::Error {
      if (llvm::Error error = needNumber())
        return error;
      if (number < least || (number & (number - 1)))
        return llvm::createStringError(
            llvm::formatv("{0}={1} is not a power of two of at least {2} "
                          "(use e.g. {0}=4194304)",
                          key, value, least)
                .str());
      return llvm::Error::success();
    };
    if (key == "dir") {
      options.dir = value.str();
    } else if (key == "size") {
      if (llvm::Error error = needPowerOfTwo(4096))
        return error;
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
    } else if (key == "parent") {
      // parent=keep: run on when the debugger is gone (QEMU's own way).
      if (value != "keep" && value != "watch")
        return llvm::createStringError("parent= must be watch or keep, not " +
                                       value);
      options.parent = value == "keep" ? 0 : getppid();
    } else if (key == "relay") {
      options.relayPath = value.str();
    } else if (key == "stub") {
      options.stubPath = value.str();
    } else if (key == "log") {
      if (llvm::Error error = needPowerOfTwo(1024))
        return error;
      options.logSize = number;
    } else {
      return llvm::createStringError(
          "unknown option '" + key +
          "' (dir, size, timer, noretcomp, psb-period, overflow-every, "
          "max-insns, start, stop, ground-truth, log, parent, relay, "
          "stub)");
    }
  }
  if (options.relayPath.empty() != options.stubPath.empty())
    return llvm::createStringError(
        "relay= and stub= go together (where GDB connects, and QEMU's -g)");
  if (options.dir.empty())
    return llvm::createStringError(
        "no dir= given (the directory for the rings, e.g. dir=/dev/shm/mt)");
  return llvm::Error::success();
}

/// The load bias of the guest program, from its first executable segment:
/// QEMU 7.2's start_code is that segment's runtime p_vaddr (load_elf_image:
/// `vaddr = load_bias + p_vaddr`), not its page. lld places code at an
/// address that is not page-aligned (`LOAD 0x000620 vaddr 0x1620`), so the
/// bias is start_code minus the page of p_vaddr, rounded down to a page:
/// right whether a QEMU reports the segment's address or its page (a bias
/// is always page-aligned).
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
      return (qemu_plugin_start_code() - (header.p_vaddr & ~uint64_t(4095))) &
             ~uint64_t(4095);
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
    rec.set(SlowNotTracing | SlowStopping);
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
  std::string headerPath = qemu_dir::header(options.dir);
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
    rec->clear(SlowNotTracing);
    header.recording = 1;
  }
  if (options.writer.overflowEvery)
    rec->set(SlowEveryInsn);
  // Logged blocks are counted when they are written: a log of at most
  // max-insns / 256 blocks (a few instructions each) keeps the limit about
  // as close as the count batch does (a 64th).
  if (options.maxInsns)
    options.logSize = std::min<uint64_t>(
        options.logSize,
        std::max<uint64_t>(16, llvm::bit_floor(options.maxInsns / 256)));
  recorder = rec.release();
  // Publish the header last: a reader checks the magic first.
  std::memcpy(header.magic, kQemuRingMagic, sizeof(kQemuRingMagic));
  pthread_atfork(nullptr, nullptr, inForkedChild);
  startFlusher();
  if (!options.relayPath.empty())
    return startDebuggerRelay(options.relayPath, options.stubPath);
  return llvm::Error::success();
}

} // namespace magic_trace::qemu_plugin

using namespace magic_trace::qemu_plugin;

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
  if (!recorder->options.relayPath.empty())
    qemu_plugin_register_vcpu_syscall_ret_cb(id, syscallReturned);
  qemu_plugin_register_atexit_cb(id, atExit, nullptr);
  return 0;
}
