//===- QemuRings.cpp - Reading the QEMU recorder's rings ------------------===//
//
// The reader side of QemuRings.h: maps the header and the rings, pauses the
// writers while it copies, and turns them into a Snapshot. The ring bytes
// are copied with the perf backend's AUX reader (copyAuxRing): a ring file
// is laid out like perf's mapping page plus AUX area.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/QemuRings.h"
#include "magic_trace/InputFiles.h"

#include "magic_trace/JitRecords.h"
#include "magic_trace/PerfIntelPt.h"
#include "magic_trace/ProcessModules.h"
#include "magic_trace/RingBuffer.h"

#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

namespace magic_trace {

llvm::Error pauseQemuWriters(QemuRingHeader &header) {
  uint32_t count =
      std::min(__atomic_load_n(&header.threadCount, __ATOMIC_ACQUIRE),
               kQemuRingMaxThreads);
  return pauseRingWriters(
      &header.paused, count, [&](size_t i) { return &header.threads[i].busy; },
      std::chrono::steady_clock::now() + std::chrono::seconds(1));
}

namespace {

/// A read-write shared mapping of a whole file, unmapped on destruction.
class FileMapping {
public:
  static llvm::Expected<FileMapping> open(const std::string &path,
                                          uint64_t minimumSize) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return llvm::createStringError(
          llvm::formatv("cannot open {0}: {1} (was the program run under "
                        "the magic-trace QEMU plugin?)",
                        path, std::strerror(errno))
              .str());
    struct stat info{};
    if (fstat(fd, &info) != 0 || uint64_t(info.st_size) < minimumSize) {
      ::close(fd);
      return llvm::createStringError(
          llvm::formatv("{0} is shorter than its layout needs ({1} bytes); "
                        "record again",
                        path, minimumSize)
              .str());
    }
    void *address =
        mmap(nullptr, info.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (address == MAP_FAILED)
      return llvm::createStringError(
          llvm::formatv("cannot map {0}: {1}", path, std::strerror(errno))
              .str());
    return FileMapping(address, info.st_size);
  }
  FileMapping(FileMapping &&other)
      : address(other.address), length(other.length) {
    other.address = nullptr;
  }
  FileMapping(const FileMapping &) = delete;
  ~FileMapping() {
    if (address)
      munmap(address, length);
  }
  uint8_t *bytes() const { return static_cast<uint8_t *>(address); }
  QemuRingHeader &header() const {
    return *reinterpret_cast<QemuRingHeader *>(address);
  }
  uint64_t size() const { return length; }

private:
  FileMapping(void *address, uint64_t length)
      : address(address), length(length) {}
  void *address = nullptr;
  uint64_t length = 0;
};

/// Sets `paused` and waits until no writer is inside its ring, for at most
/// a second. Returns false when a writer stayed busy (the copy may then hold
/// a torn packet at its end, which the decoder reports), with why in `note`.
bool pauseWriters(QemuRingHeader &header, std::string &note) {
  llvm::Error error = pauseQemuWriters(header);
  if (!error)
    return true;
  note += (note.empty() ? "" : "; ") + llvm::toString(std::move(error)) +
          ": the copy may end in a torn packet";
  return false;
}

/// QEMU maps a guest ELF image with host mappings that do not show the
/// guest's segments (the kernel merges neighbours, DIR/maps keeps only
/// mappings code ran in), so a module's segments are its PT_LOAD headers at
/// the bias its code mappings imply (placeElfByMappings). Keeps the maps'
/// segments when the file is not a readable ELF.
void segmentsFromElf(Module &module) {
  llvm::Expected<PlacedElf> placed =
      placeElfByMappings(module.path, module.segments);
  if (!placed) {
    llvm::consumeError(placed.takeError());
    return;
  }
  module.loadAddress = placed->loadAddress;
  if (!placed->segments.empty())
    module.segments = std::move(placed->segments);
}

/// Modules from DIR/maps (code outside files is in the code log).
void readModules(llvm::StringRef dir, QemuRecording &recording) {
  // Under TMPDIR: the user's own regular file only (InputFiles.h).
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> maps =
      readInputFile(qemu_dir::maps(dir), InputPlace::Shared);
  if (!maps) {
    recording.snapshot.notes.push_back(llvm::toString(maps.takeError()));
    return;
  }
  if (!*maps)
    return;
  std::vector<MapsEntry> entries = parseProcMaps((*maps)->getBuffer());
  recording.snapshot.modules = modulesFromMaps(entries);
  for (Module &module : recording.snapshot.modules)
    segmentsFromElf(module);
}

/// DIR/header, mapped and checked.
llvm::Expected<FileMapping> openHeader(llvm::StringRef dir) {
  llvm::Expected<FileMapping> headerMap =
      FileMapping::open(qemu_dir::header(dir), sizeof(QemuRingHeader));
  if (!headerMap)
    return headerMap.takeError();
  const QemuRingHeader &header = headerMap->header();
  if (std::memcmp(header.magic, kQemuRingMagic, sizeof(kQemuRingMagic)) != 0 ||
      header.headerSize != sizeof(QemuRingHeader))
    return llvm::createStringError(
        llvm::formatv("{0}/header is not a magic-trace QEMU ring header of "
                      "this version (rebuild the plugin and record again)",
                      dir)
            .str());
  return headerMap;
}

} // namespace

llvm::Error
flushQemuRings(llvm::StringRef dir,
               const std::vector<std::pair<uint64_t, uint64_t>> &stops,
               std::chrono::milliseconds deadline, uint32_t *held,
               std::vector<uint64_t> *notAtStop, bool othersRun) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap)
    return headerMap.takeError();
  QemuRingHeader &header = headerMap->header();
  uint32_t count =
      std::min(__atomic_load_n(&header.threadCount, __ATOMIC_ACQUIRE),
               kQemuRingMaxThreads);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t pc = 0;
    for (const auto &[tid, address] : stops)
      if (tid == header.threads[i].tid)
        pc = address;
    __atomic_store_n(&header.stopPc[i], pc, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&header.flushCatchRunning, othersRun ? 1u : 0u,
                   __ATOMIC_RELAXED);
  uint32_t next = __atomic_load_n(&header.flushRequest, __ATOMIC_ACQUIRE) + 1;
  if (held) {
    *held = next;
    __atomic_store_n(&header.flushHoldMs, uint32_t(deadline.count()),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&header.flushHold, next, __ATOMIC_RELEASE);
  }
  uint32_t request =
      __atomic_add_fetch(&header.flushRequest, 1u, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &header.flushRequest, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  auto end = std::chrono::steady_clock::now() + deadline;
  while (__atomic_load_n(&header.flushDone, __ATOMIC_ACQUIRE) != request) {
    if (std::chrono::steady_clock::now() > end)
      return llvm::createStringError(
          llvm::formatv("the QEMU recorder in {0} did not end its threads' "
                        "traces at their stops within {1} ms (the last "
                        "blocks before the stop are missing; is the "
                        "process still alive?)",
                        dir, deadline.count())
              .str());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (notAtStop)
    for (const auto &[tid, address] : stops)
      for (uint32_t i = 0; i < count; ++i)
        if (header.threads[i].tid == tid && address != 0 &&
            __atomic_load_n(&header.stopPc[i], __ATOMIC_ACQUIRE) != address)
          notAtStop->push_back(tid);
  return llvm::Error::success();
}

void releaseQemuRings(llvm::StringRef dir, uint32_t held) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap) {
    // The recorder is gone: nothing to release.
    llvm::consumeError(headerMap.takeError());
    return;
  }
  QemuRingHeader &header = headerMap->header();
  __atomic_store_n(&header.flushRelease, held, __ATOMIC_RELEASE);
  syscall(SYS_futex, &header.flushRelease, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

llvm::Error armQemuTrigger(llvm::StringRef dir, uint64_t address,
                           uint32_t count, std::chrono::milliseconds deadline) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap)
    return headerMap.takeError();
  QemuRingHeader &header = headerMap->header();
  uint32_t used = __atomic_load_n(&header.triggerCount, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < used; ++i)
    if (header.triggers[i].address == address) {
      __atomic_store_n(&header.triggers[i].remaining, count, __ATOMIC_RELEASE);
      return flushQemuRings(dir, {}, deadline);
    }
  if (used >= kQemuMaxTriggers)
    return llvm::createStringError(
        llvm::formatv("the QEMU recorder holds at most {0} triggers (delete "
                      "one first)",
                      kQemuMaxTriggers)
            .str());
  header.triggers[used].address = address;
  header.triggers[used].hits = 0;
  __atomic_store_n(&header.triggers[used].remaining, count, __ATOMIC_RELEASE);
  __atomic_store_n(&header.triggerCount, used + 1, __ATOMIC_RELEASE);
  // The flusher marks the blocks already translated at `address`.
  return flushQemuRings(dir, {}, deadline);
}

uint32_t qemuTriggerSnapshots(llvm::StringRef dir) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap) {
    llvm::consumeError(headerMap.takeError());
    return 0;
  }
  return __atomic_load_n(&headerMap->header().triggerSnapshots,
                         __ATOMIC_ACQUIRE);
}

bool waitForQemuTriggerSnapshot(llvm::StringRef dir, uint32_t seen,
                                std::chrono::milliseconds limit) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap) {
    llvm::consumeError(headerMap.takeError());
    return false;
  }
  uint32_t *word = &headerMap->header().triggerSnapshots;
  uint32_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  if (now != seen)
    return now > seen; // Below: another recording's count; the caller waits.
  // Shared between processes (the header is a shared file mapping): not a
  // private futex. Returns at once when the word is no longer `seen`.
  timespec timeout{time_t(limit.count() / 1000),
                   long(limit.count() % 1000) * 1000000};
  syscall(SYS_futex, word, FUTEX_WAIT, seen, &timeout, nullptr, 0);
  return true;
}

llvm::Error setQemuTriggersCollected(llvm::StringRef dir, uint32_t collected,
                                     uint32_t maxPending, uint32_t waitMs) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap)
    return headerMap.takeError();
  QemuRingHeader &header = headerMap->header();
  __atomic_store_n(&header.maxPendingTriggers, maxPending, __ATOMIC_RELEASE);
  __atomic_store_n(&header.triggerWaitMs, waitMs, __ATOMIC_RELEASE);
  __atomic_store_n(&header.triggersCollected, collected, __ATOMIC_RELEASE);
  return llvm::Error::success();
}

std::string qemuTriggerSnapshotDir(llvm::StringRef dir, uint32_t number) {
  return qemu_dir::snapshot(dir, number);
}

uint64_t qemuTriggerSnapshotAddress(llvm::StringRef snapshotDir) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> text =
      readInputFile(qemu_dir::trigger(snapshotDir), InputPlace::Shared, 4096);
  uint64_t address = 0;
  if (!text) {
    llvm::consumeError(text.takeError());
    return 0;
  }
  if (!*text || (*text)->getBuffer().trim().getAsInteger(0, address))
    return 0;
  return address;
}

llvm::Expected<QemuRingStatus> readQemuRingStatus(llvm::StringRef dir) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap)
    return headerMap.takeError();
  const QemuRingHeader &header = headerMap->header();
  QemuRingStatus status;
  status.pid = header.pid;
  status.ringSize = header.ringSize;
  status.recording = __atomic_load_n(&header.recording, __ATOMIC_ACQUIRE);
  status.stopped = __atomic_load_n(&header.stopped, __ATOMIC_ACQUIRE);
  status.stopReason =
      QemuStopReason(__atomic_load_n(&header.stopReason, __ATOMIC_ACQUIRE));
  status.triggerSnapshots =
      __atomic_load_n(&header.triggerSnapshots, __ATOMIC_ACQUIRE);
  status.triggersSkipped =
      __atomic_load_n(&header.triggersSkipped, __ATOMIC_ACQUIRE);
  status.triggerWaitNs =
      __atomic_load_n(&header.triggerWaitNs, __ATOMIC_ACQUIRE);
  status.note =
      std::string(header.note, strnlen(header.note, sizeof(header.note)));
  uint32_t count =
      std::min(__atomic_load_n(&header.threadCount, __ATOMIC_ACQUIRE),
               kQemuRingMaxThreads);
  for (uint32_t i = 0; i < count; ++i) {
    QemuThreadSlot slot;
    slot.tid = header.threads[i].tid;
    slot.state = __atomic_load_n(&header.threads[i].state, __ATOMIC_ACQUIRE);
    slot.instructions =
        __atomic_load_n(&header.threads[i].instructions, __ATOMIC_RELAXED);
    slot.lostInstructions =
        __atomic_load_n(&header.threads[i].lostInstructions, __ATOMIC_RELAXED);
    status.instructions += slot.instructions;
    status.threads.push_back(slot);
  }
  return status;
}

bool qemuPluginOptionsOf(
    uint64_t tid, std::vector<std::pair<std::string, std::string>> &options) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> cmdline =
      llvm::MemoryBuffer::getFileAsStream("/proc/" + std::to_string(tid) +
                                          "/cmdline");
  if (!cmdline)
    return false;
  llvm::SmallVector<llvm::StringRef> args;
  (*cmdline)->getBuffer().split(args, '\0');
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "-plugin" && args[i] != "--plugin")
      continue;
    llvm::SmallVector<llvm::StringRef> parts;
    args[i + 1].split(parts, ',');
    if (parts.empty() ||
        !llvm::sys::path::filename(parts[0]).starts_with("libmagic-trace-qemu"))
      continue;
    options.clear();
    for (llvm::StringRef part : llvm::ArrayRef(parts).drop_front()) {
      auto [key, value] = part.split('=');
      options.emplace_back(key.str(), value.str());
    }
    return true;
  }
  return false;
}

Snapshot qemuSnapshotFacts(const QemuRingHeader &header) {
  Snapshot snapshot;
  snapshot.pid = header.pid;
  snapshot.cpu.vendor =
      std::string(header.vendor, strnlen(header.vendor, sizeof(header.vendor)));
  snapshot.cpu.family = header.family;
  snapshot.cpu.model = header.model;
  snapshot.cpu.stepping = header.stepping;
  snapshot.time.timeZero = header.timeZero;
  snapshot.time.timeMult = header.timeMult;
  snapshot.time.timeShift = static_cast<uint16_t>(header.timeShift);
  snapshot.timing.mtcFreq = static_cast<uint8_t>(header.mtcFreq);
  snapshot.timing.nomFreq = static_cast<uint8_t>(header.nomFreq);
  snapshot.timing.cpuid15Eax = header.cpuid15Eax;
  snapshot.timing.cpuid15Ebx = header.cpuid15Ebx;
  return snapshot;
}

llvm::Expected<QemuRecording> readQemuRings(llvm::StringRef dir,
                                            bool withTruth) {
  llvm::Expected<FileMapping> headerMap = openHeader(dir);
  if (!headerMap)
    return headerMap.takeError();
  QemuRingHeader &header = headerMap->header();

  QemuRecording recording;
  recording.snapshot = qemuSnapshotFacts(header);
  Snapshot &snapshot = recording.snapshot;
  recording.note =
      std::string(header.note, strnlen(header.note, sizeof(header.note)));

  bool quiet = pauseWriters(header, recording.note);
  uint32_t count =
      std::min(__atomic_load_n(&header.threadCount, __ATOMIC_ACQUIRE),
               kQemuRingMaxThreads);
  llvm::Error failure = llvm::Error::success();
  for (uint32_t i = 0; i < count && !failure; ++i) {
    const QemuThreadSlot &slot = header.threads[i];
    std::string path = qemu_dir::ring(dir, slot.tid);
    llvm::Expected<FileMapping> ring =
        FileMapping::open(path, kQemuRingPage + header.ringSize);
    if (!ring) {
      failure = ring.takeError();
      break;
    }
    const auto *page =
        reinterpret_cast<const perf_event_mmap_page *>(ring->bytes());
    if (page->aux_offset != kQemuRingPage ||
        page->aux_size != header.ringSize) {
      failure = llvm::createStringError(
          llvm::formatv("{0}: aux_offset/aux_size do not match the header "
                        "(record again)",
                        path)
              .str());
      break;
    }
    ThreadTrace trace;
    trace.tid = slot.tid;
    uint64_t head = __atomic_load_n(&page->aux_head, __ATOMIC_ACQUIRE);
    trace.bytes = copyAuxRing(ring->bytes() + kQemuRingPage, header.ringSize,
                              head, trace.wrapped);
    trace.imageMarks = readQemuMarks(
        dir, slot.tid, head - std::min<uint64_t>(head, trace.bytes.size()));
    snapshot.threads.push_back(std::move(trace));
    recording.instructions += slot.instructions;
    recording.lostInstructions += slot.lostInstructions;
  }
  __atomic_store_n(&header.paused, 0u, __ATOMIC_SEQ_CST);
  recording.pauseTimeouts = header.pauseTimeouts + (quiet ? 0 : 1);
  recording.stopReason =
      QemuStopReason(__atomic_load_n(&header.stopReason, __ATOMIC_ACQUIRE));
  if (failure)
    return std::move(failure);

  readModules(dir, recording);
  // After the rings: every change their code made is in the log by then.
  if (llvm::Error error =
          readQemuCodeLog(dir, /*lastSeq=*/0, recording.snapshot.code))
    return std::move(error);
  // Names for the JIT code the log has: the process's perf map and jitdump
  // (the recorder has the bytes).
  JitRecordNotes jit =
      addJitRecords(header.pid, jitRecordDirs(header.pid), JitCode::NamesOnly,
                    recording.snapshot.code);
  llvm::append_range(recording.snapshot.notes, jit.skipped);
  // A mark past the log's last change names a change the reader dropped as
  // a repeat of one it has (a second segment of a mapped library): the
  // same code, so the last change's seq says the same.
  uint64_t lastSeq = recording.snapshot.code.lastSeq();
  for (ThreadTrace &thread : recording.snapshot.threads)
    for (ImageMark &mark : thread.imageMarks)
      mark.seq = std::min(mark.seq, lastSeq);
  // A recording without its ground truth is still a recording: keep it,
  // and say why the oracle is missing.
  if (withTruth)
    for (const ThreadTrace &thread : snapshot.threads) {
      llvm::Expected<ThreadTruth> truth = readGroundTruth(dir, thread.tid);
      if (!truth) {
        recording.truthNote = llvm::toString(truth.takeError()) +
                              ": the bundle has no ground truth";
        recording.note +=
            (recording.note.empty() ? "" : "; ") + recording.truthNote;
        recording.truth.clear();
        break;
      }
      recording.truth.push_back(std::move(*truth));
    }
  return recording;
}

} // namespace magic_trace
