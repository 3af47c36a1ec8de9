//===- PerfRecorder.cpp - Per-CPU Intel PT recording of a process ---------===//
//
// The live rings (PerfRecorder.h): one intel_pt event per CPU with inherit
// and its AUX area in overwrite mode, the sideband read as the process
// runs, and the snapshot at a stop (each CPU's AUX bytes split into the
// threads' streams). PerfPlanning.cpp has the sizes, descriptions and
// errors.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PerfRecorder.h"

#include "magic_trace/MachineFacts.h"

#include "Sideband.h"

#include "../../base/PtBytes.h"
#include "../../formats/perfdata/PerCpuTrace.h"
#include "../../formats/perfdata/PerfDataFormat.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

namespace magic_trace {
namespace {

using perfdata::AuxPiece;
using perfdata::CpuStream;

/// The kernel's flags that say a piece of AUX data is not whole
/// (include/uapi/linux/perf_event.h).
constexpr uint64_t kAuxLossFlags = perfdata::kAuxFlagTruncated |
                                   perfdata::kAuxFlagPartial |
                                   perfdata::kAuxFlagCollision;

using pt_bytes::kPsb;

bool isPowerOfTwo(uint64_t value) { return value && !(value & (value - 1)); }

std::string kib(uint64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

} // namespace

llvm::Error checkSameNamespace(uint64_t pid, llvm::StringRef procRoot,
                               llvm::ArrayRef<uint64_t> tids) {
  std::string dir = (procRoot + "/" + llvm::Twine(pid)).str();
  bool found = llvm::sys::fs::is_directory(dir);
  for (uint64_t tid : tids)
    found = found &&
            llvm::sys::fs::is_directory(dir + "/task/" + std::to_string(tid));
  if (found)
    return llvm::Error::success();
  return llvm::createStringError(
      "process %llu and its threads are not in this PID namespace (a remote "
      "or containerised target: run LLDB inside the target's namespace to use "
      "--backend perf)",
      (unsigned long long)pid);
}

llvm::Expected<std::unique_ptr<PerfRecorder>>
PerfRecorder::create(Options options) {
  std::shared_ptr<KernelInterface> kernel = options.kernel;
  if (!kernel)
    kernel = makeLinuxKernel();
  llvm::Expected<IntelPtPmuDescription> pmu = loadIntelPtPmu(kernel->sysRoot());
  if (!pmu)
    return pmu.takeError();
  llvm::Expected<IntelPtAttr> attr = buildIntelPtAttr(*pmu, options.timer);
  if (!attr)
    return attr.takeError();
  if (!isPowerOfTwo(options.auxSize) || options.auxSize < kernel->pageSize())
    return llvm::createStringError("snapshot size %llu is not a power of two "
                                   "of at least one page (try 4MiB)",
                                   (unsigned long long)options.auxSize);
  std::unique_ptr<PerfRecorder> recorder(new PerfRecorder());
  recorder->kernel = kernel;
  recorder->attrValue = attr->attr;
  // Per-task events on each CPU, copied into new threads (inherit), whose
  // sideband names the thread, time and CPU of every AUX record.
  recorder->attrValue.inherit = 1;
  // And the executable mappings it makes (also at each mprotect that leaves
  // memory executable), for JIT code rewritten before a stop.
  recorder->attrValue.mmap = 1;
  recorder->attrValue.mmap2 = 1;
  recorder->attrValue.sample_id_all = 1;
  recorder->attrValue.sample_type = kSidebandSampleType;
  recorder->timingValue = hardwareTiming(*pmu, attr->attr);
  recorder->psbBytes = psbPeriodBytes(*pmu, attr->attr);
  recorder->options = std::move(options);
  recorder->notesList = std::move(attr->notes);
  return recorder;
}

PerfRecorder::~PerfRecorder() {
  // The reader touches the rings: it stops before they are unmapped.
  reader.reset();
}

std::vector<uint64_t> PerfRecorder::threadIds() const {
  std::lock_guard<std::mutex> guard(sidebandLock);
  return std::vector<uint64_t>(known.begin(), known.end());
}

bool PerfRecorder::isTracing(uint64_t tid) const {
  std::lock_guard<std::mutex> guard(sidebandLock);
  return known.count(tid);
}

llvm::Error PerfRecorder::mapRing(CpuRing &ring) {
  uint64_t page = kernel->pageSize();
  ring.baseLength = page + planValue.dataBytes;
  llvm::ErrorOr<void *> base =
      kernel->mmap(ring.fds.front(), ring.baseLength, true, 0);
  if (!base)
    return llvm::createStringError(
        "cannot map the perf ring of CPU %u: %s (raise "
        "/proc/sys/kernel/perf_event_mlock_kb)",
        ring.cpu, base.getError().message().c_str());
  ring.base = *base;
  // Read-only AUX: overwrite (snapshot) mode (rb_alloc_aux's overwrite is
  // !VM_WRITE). Another user's perf locks from the same budget, so EPERM
  // can still come: halve, down to two PSB periods.
  for (uint64_t size = planValue.auxBytes; size >= 2 * psbBytes; size /= 2) {
    ring.page().aux_offset = ring.baseLength;
    ring.page().aux_size = size;
    llvm::ErrorOr<void *> aux =
        kernel->mmap(ring.fds.front(), size, false, ring.baseLength);
    if (aux) {
      ring.aux = *aux;
      ring.auxSize = size;
      if (size != planValue.auxBytes)
        notesList.push_back(
            "CPU " + std::to_string(ring.cpu) + ": the kernel refused a " +
            kib(planValue.auxBytes) + " AUX buffer, using " + kib(size) +
            " (other perf users lock from the same budget)");
      return llvm::Error::success();
    }
    if (aux.getError() != std::errc::operation_not_permitted &&
        aux.getError() != std::errc::not_enough_memory)
      return llvm::createStringError("cannot map the AUX area of CPU %u: %s",
                                     ring.cpu,
                                     aux.getError().message().c_str());
  }
  return llvm::createStringError(
      "the kernel refused every AUX buffer size down to %s for CPU %u (raise "
      "/proc/sys/kernel/perf_event_mlock_kb)",
      kib(2 * psbBytes).c_str(), ring.cpu);
}

llvm::Error PerfRecorder::openRings(llvm::ArrayRef<uint64_t> tids) {
  std::set<uint64_t> failed;
  llvm::Error first = llvm::Error::success();
  for (unsigned cpu : kernel->onlineCpus()) {
    auto ring = std::make_unique<CpuRing>();
    ring->kernel = kernel.get();
    ring->cpu = cpu;
    for (uint64_t tid : tids) {
      if (failed.count(tid))
        continue;
      llvm::ErrorOr<int> fd =
          kernel->perfEventOpen(attrValue, static_cast<int>(tid), int(cpu));
      if (!fd) {
        // One thread that cannot be traced (it exited) must not leave the
        // others untraced: a note, and on to the next.
        llvm::Error error =
            perfOpenError(fd.getError().value(), tid, kernel->procRoot());
        notesList.push_back(
            "thread " + std::to_string(tid) +
            " is not traced: " + llvm::toString(std::move(error)));
        if (!first)
          first = perfOpenError(fd.getError().value(), tid, kernel->procRoot());
        failed.insert(tid);
        continue;
      }
      ring->fds.push_back(*fd);
      if (ring->fds.size() == 1) {
        if (llvm::Error error = mapRing(*ring)) {
          llvm::consumeError(std::move(first));
          return error;
        }
        continue;
      }
      if (std::error_code error = kernel->ioctl(*fd, PERF_EVENT_IOC_SET_OUTPUT,
                                                unsigned(ring->fds.front()))) {
        notesList.push_back("thread " + std::to_string(tid) +
                            " is not traced on CPU " + std::to_string(cpu) +
                            ": " + error.message());
        kernel->close(*fd);
        ring->fds.pop_back();
      }
    }
    if (!ring->fds.empty())
      rings.push_back(std::move(ring));
  }
  for (uint64_t tid : tids)
    if (!failed.count(tid))
      known.insert(tid);
  if (known.empty())
    return first ? std::move(first)
                 : llvm::createStringError("the process has no thread to "
                                           "trace");
  llvm::consumeError(std::move(first));
  return llvm::Error::success();
}

void PerfRecorder::enableAll(bool enable) {
  // With inherit, an ioctl on an event applies to its copies in the
  // threads created since (perf_event_for_each_child).
  for (const auto &ring : rings)
    for (int fd : ring->fds)
      (void)kernel->ioctl(
          fd, enable ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

llvm::Error PerfRecorder::attach(uint64_t pid, llvm::ArrayRef<uint64_t> tids) {
  (void)pid;
  if (!rings.empty())
    return llvm::createStringError("already attached");
  llvm::Expected<BufferPlan> plan =
      planBuffers(options.auxSize, unsigned(kernel->onlineCpus().size()),
                  *kernel, psbBytes);
  if (!plan)
    return plan.takeError();
  planValue = *plan;
  if (!planValue.note.empty())
    notesList.push_back(planValue.note);
  if (llvm::Error error = openRings(tids)) {
    rings.clear();
    return error;
  }
  enableAll(true);
  // Every event of a ring can be polled for it (SET_OUTPUT shares the
  // ring: perf record polls them all, evlist__add_pollfd).
  std::vector<int> fds;
  for (const auto &ring : rings)
    fds.insert(fds.end(), ring->fds.begin(), ring->fds.end());
  reader = std::make_unique<SidebandReader>(
      *kernel, std::move(fds), options.sidebandPeriodMs, sidebandLock, [this] {
        for (const auto &ring : rings)
          readSideband(*ring, planValue.dataBytes, known);
      });
  return llvm::Error::success();
}

std::vector<ExecMapping> PerfRecorder::execMappings() const {
  std::lock_guard<std::mutex> guard(sidebandLock);
  std::vector<ExecMapping> all;
  for (const auto &ring : rings)
    llvm::append_range(all, ring->execMappings);
  llvm::sort(all, [](const ExecMapping &a, const ExecMapping &b) {
    return std::tuple(a.timeNs, a.address, a.size) <
           std::tuple(b.timeNs, b.address, b.size);
  });
  return all;
}

uint64_t PerfRecorder::lostSidebandRecords() const {
  std::lock_guard<std::mutex> guard(sidebandLock);
  uint64_t lost = 0;
  for (const auto &ring : rings)
    lost += ring->lostRecords;
  return lost;
}

/// At a stop (every event disabled, so every stretch has ended): the bytes
/// after the ring's last AUX record have no owner we know (their record was
/// lost). Skipped, and the next piece says so. Returns whether there were.
static bool skipUnowned(CpuRing &ring) {
  uint64_t auxHead = __atomic_load_n(&ring.page().aux_head, __ATOMIC_ACQUIRE);
  uint64_t unowned = (auxHead - ring.linearEnd) & (ring.auxSize - 1);
  if (!unowned)
    return false;
  ring.linearEnd += unowned;
  ring.pendingLost = true;
  return true;
}

/// The offset of the first PSB in bytes[from, to), or `to`.
static uint64_t findPsb(const std::vector<uint8_t> &bytes, uint64_t from,
                        uint64_t to) {
  auto begin = bytes.begin() + from, end = bytes.begin() + to;
  auto found = std::search(begin, end, std::begin(kPsb), std::end(kPsb));
  return from + (found - begin);
}

/// The offset of the last PSB in bytes[from, to), or `to`.
static uint64_t findLastPsb(const std::vector<uint8_t> &bytes, uint64_t from,
                            uint64_t to) {
  auto begin = bytes.begin() + from, end = bytes.begin() + to;
  auto found = std::find_end(begin, end, std::begin(kPsb), std::end(kPsb));
  return found == end ? to : from + (found - begin);
}

namespace {

/// Where a CPU's sideband lost AUX records: which thread ran there, up to
/// `time`, is unknown.
struct SidebandLoss {
  uint32_t cpu = 0;
  uint64_t time = 0;
  uint64_t offset = 0; ///< Outside the CPU's stream.
};

/// Any thread traced before a loss may have run in the stretches whose
/// records were lost (on that CPU or, moved there, from another): each gets
/// an OVF at the loss, as a piece outside the CPU's stream (splitPerCpu marks
/// such a piece with one). A thread first seen after it lost nothing.
void markLosses(llvm::ArrayRef<SidebandLoss> losses,
                std::vector<AuxPiece> &pieces) {
  std::map<uint32_t, uint64_t> firstSeen;
  for (const AuxPiece &piece : pieces) {
    auto [it, inserted] = firstSeen.try_emplace(piece.tid, piece.time);
    it->second = std::min(it->second, piece.time);
  }
  for (const SidebandLoss &loss : losses)
    for (auto [tid, first] : firstSeen)
      if (first < loss.time)
        pieces.push_back({loss.cpu, tid, loss.offset, 1, 0, loss.time});
}

} // namespace

llvm::Expected<std::vector<ThreadTrace>> PerfRecorder::snapshot() {
  if (rings.empty())
    return llvm::createStringError("no thread is traced yet");
  std::lock_guard<std::mutex> guard(sidebandLock);
  // Disabled, the kernel ends every stretch with its AUX record and the
  // hardware stops writing while we copy.
  enableAll(false);
  lostCount = 0;
  std::map<uint32_t, CpuStream> cpus;
  std::vector<AuxPiece> pieces;
  std::vector<SidebandLoss> losses;
  std::set<uint32_t> cut;
  for (const auto &ringPtr : rings) {
    CpuRing &ring = *ringPtr;
    readSideband(ring, planValue.dataBytes, known);
    bool lostAtEnd = skipUnowned(ring);
    uint64_t size = ring.auxSize;
    uint64_t windowStart = ring.linearEnd > size ? ring.linearEnd - size : 0;
    uint64_t outside = ring.linearEnd + 1;
    CpuStream stream;
    stream.base = windowStart;
    stream.haveBase = true;
    const uint8_t *aux = static_cast<const uint8_t *>(ring.aux);
    for (uint64_t at = windowStart; at < ring.linearEnd; ++at)
      stream.bytes.push_back(aux[at & (size - 1)]);
    std::vector<AuxPiece> mine;
    for (const CpuRing::Piece &piece : ring.pieces) {
      if (piece.end <= windowStart)
        continue;
      uint64_t start = piece.start;
      if (piece.lostBefore) {
        // Just before the record that followed the loss (the LOST record
        // carries that record's sample_id).
        ++lostCount;
        losses.push_back({ring.cpu, piece.time ? piece.time - 1 : 0, outside});
        // The records before this one were lost, so the stretch may begin
        // with other threads' bytes: keep only what follows its last PSB
        // (PT writes one when a thread is switched in).
        start = windowStart +
                findLastPsb(stream.bytes,
                            std::max(start, windowStart) - windowStart,
                            piece.end - windowStart);
      } else if (start < windowStart) {
        // The hardware overwrote its beginning: decode from its first PSB.
        cut.insert(piece.tid);
        start = windowStart + findPsb(stream.bytes, 0, piece.end - windowStart);
      }
      if (start < piece.end)
        mine.push_back(
            {ring.cpu, piece.tid, start, piece.end - start,
             (piece.flags & kAuxLossFlags) ? perfdata::kAuxFlagTruncated : 0,
             piece.time});
      else if (piece.flags & kAuxLossFlags)
        mine.push_back({ring.cpu, piece.tid, outside, 1, 0, piece.time});
      if (piece.flags & kAuxLossFlags)
        ++lostCount;
    }
    // The records of the last stretches were lost (the reader did not keep
    // up before the stop): every thread may end with a gap.
    if (lostAtEnd) {
      ++lostCount;
      losses.push_back({ring.cpu, UINT64_MAX, outside});
    }
    // What the window no longer holds is forgotten.
    llvm::erase_if(ring.pieces, [&](const CpuRing::Piece &piece) {
      return piece.end <= windowStart;
    });
    if (mine.empty())
      continue;
    for (const AuxPiece &piece : mine)
      stream.tids.insert(piece.tid);
    cpus[ring.cpu] = std::move(stream);
    pieces.insert(pieces.end(), mine.begin(), mine.end());
  }
  markLosses(losses, pieces);
  enableAll(true);
  llvm::Expected<std::vector<ThreadTrace>> threads =
      perfdata::splitPerCpu(cpus, std::move(pieces), /*snapshotMode=*/false);
  if (!threads)
    return threads.takeError();
  for (ThreadTrace &thread : *threads)
    thread.wrapped = cut.count(uint32_t(thread.tid));
  llvm::erase_if(
      *threads, [](const ThreadTrace &thread) { return thread.bytes.empty(); });
  return threads;
}

llvm::Expected<TimeConversion> PerfRecorder::timeConversion() const {
  if (rings.empty())
    return llvm::createStringError("no thread is traced yet");
  llvm::Expected<TimeConversion> time =
      timeConversionFromPage(rings.front()->page());
  // The trace is older than now: TSC packets' missing top byte comes from
  // the TSC read here (the debugger runs on the traced machine).
  if (time)
    time->tscReference = kernel->readTsc();
  return time;
}

} // namespace magic_trace
