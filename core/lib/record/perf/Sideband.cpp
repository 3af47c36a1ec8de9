//===- Sideband.cpp - A CPU ring's sideband, read as the target runs ------===//
#include "Sideband.h"

#include "../../formats/perfdata/KernelRecords.h"

#include "llvm/ADT/STLExtras.h"

#include <chrono>
#include <cstring>

#include <sys/mman.h>

namespace magic_trace {

/// An MMAP2 record's file name for memory no file backs: anonymous memory
/// ("//anon", perf_event_mmap_event) or a named region ("[anon:NAME]",
/// "[heap]"), as /proc/PID/maps' holdsNoFile, but the vdso's.
static bool holdsNoFile(llvm::StringRef name) {
  return name.empty() || name == "//anon" ||
         (name.starts_with("[") && name != "[vdso]" && name != "[vsyscall]" &&
          name != "[vvar]");
}

CpuRing::~CpuRing() {
  if (aux)
    kernel->munmap(aux, auxSize);
  if (base)
    kernel->munmap(base, baseLength);
  for (int fd : fds)
    kernel->close(fd);
}

void readSideband(CpuRing &ring, uint64_t dataBytes,
                  std::set<uint64_t> &known) {
  perf_event_mmap_page &page = ring.page();
  uint64_t dataOffset =
      page.data_offset ? page.data_offset : ring.kernel->pageSize();
  uint64_t dataSize = page.data_size ? page.data_size : dataBytes;
  const uint8_t *data = static_cast<const uint8_t *>(ring.base) + dataOffset;
  // The kernel publishes data_head after the bytes (perf_output_put_handle:
  // smp_wmb, then data_head): read it first, with acquire.
  uint64_t head = __atomic_load_n(&page.data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page.data_tail;
  // The kernel never writes past data_tail + the data pages; a head beyond
  // that is not a ring we can frame: skip it, and say so.
  if (head - tail > dataSize) {
    ring.pendingLost = true;
    tail = head;
  }
  // Records may wrap around the end of the data pages: copy them out in
  // order first, then frame them.
  std::vector<uint8_t> bytes;
  bytes.reserve(head - tail);
  for (uint64_t at = tail; at < head; ++at)
    bytes.push_back(data[at & (dataSize - 1)]);
  // The copy is done before the kernel may reuse the space (the full
  // barrier perf_output_put_handle asks of user space before data_tail).
  __atomic_store_n(&page.data_tail, head, __ATOMIC_SEQ_CST);

  uint64_t auxMask = ring.auxSize - 1;
  for (size_t at = 0; at + perfdata::kEventHeaderSize <= bytes.size();) {
    uint16_t size = 0;
    std::memcpy(&size, bytes.data() + at + 6, sizeof(size));
    if (size < perfdata::kEventHeaderSize || at + size > bytes.size()) {
      ring.pendingLost = true; // A broken frame: the rest cannot be framed.
      break;
    }
    perfdata::KernelRecord record;
    llvm::Error error = perfdata::parseKernelRecord(
        llvm::ArrayRef<uint8_t>(bytes).slice(at, size), kSidebandSampleType,
        &record);
    at += size;
    if (error) {
      llvm::consumeError(std::move(error));
      ring.pendingLost = true;
      continue;
    }
    if (record.type == perfdata::kRecordItraceStart)
      known.insert(record.tid);
    if (record.type == perfdata::kRecordMmap2 &&
        (record.mmapProt & PROT_EXEC) && holdsNoFile(record.mmapPath)) {
      if (ring.execMappings.size() >= CpuRing::kMaxExecMappings)
        ring.execMappings.erase(ring.execMappings.begin(),
                                ring.execMappings.begin() +
                                    CpuRing::kMaxExecMappings / 4);
      ring.execMappings.push_back(
          {record.aux.time, record.mmapAddress, record.mmapSize});
    }
    if (record.type == perfdata::kRecordLost) {
      ring.pendingLost = true;
      ring.lostRecords += record.lost;
    }
    if (record.type != perfdata::kRecordAux)
      continue;
    // In overwrite mode the record's offset is where the thread's stretch
    // ended, the driver's aux_head (perf_aux_output_end; pt_event_stop
    // passes the whole buffer as its size): the stretch began where the
    // previous record on this CPU ended.
    uint64_t length = (record.aux.offset - ring.linearEnd) & auxMask;
    CpuRing::Piece piece;
    piece.start = ring.linearEnd;
    piece.end = ring.linearEnd + length;
    piece.tid = record.aux.tid;
    piece.flags = record.aux.flags;
    piece.time = record.aux.time;
    piece.lostBefore = ring.pendingLost;
    ring.pendingLost = false;
    ring.linearEnd = piece.end;
    ring.pieces.push_back(piece);
    known.insert(record.aux.tid);
  }
  // The hardware has overwritten every piece that ended a whole ring ago:
  // forget them (pieces end in order).
  if (ring.linearEnd > ring.auxSize) {
    uint64_t windowStart = ring.linearEnd - ring.auxSize;
    auto firstKept = llvm::find_if(ring.pieces, [&](const CpuRing::Piece &p) {
      return p.end > windowStart;
    });
    ring.pieces.erase(ring.pieces.begin(), firstKept);
  }
}

SidebandReader::SidebandReader(KernelInterface &kernel, std::vector<int> fds,
                               int periodMs, std::mutex &lock,
                               std::function<void()> drain)
    : kernel(kernel), periodMs(periodMs), lock(lock), drain(std::move(drain)) {
  for (int fd : fds)
    polled.push_back({fd, POLLIN, 0});
  thread = std::thread([this] { loop(); });
}

SidebandReader::~SidebandReader() {
  {
    std::lock_guard<std::mutex> guard(sleepLock);
    stopping = true;
  }
  sleepWake.notify_all();
  thread.join();
}

void SidebandReader::loop() {
  while (!stopping) {
    if (polled.empty()) {
      // Nothing to poll (every event hung up, or poll failed): the period
      // alone paces the reads.
      std::unique_lock<std::mutex> guard(sleepLock);
      sleepWake.wait_for(guard, std::chrono::milliseconds(periodMs),
                         [&] { return stopping.load(); });
    } else if (llvm::ErrorOr<unsigned> ready = kernel.poll(polled, periodMs)) {
      llvm::erase_if(polled, [](const pollfd &entry) {
        return entry.revents & (POLLHUP | POLLERR | POLLNVAL);
      });
    } else if (ready.getError() != std::errc::interrupted) {
      polled.clear();
    }
    if (stopping)
      break;
    std::lock_guard<std::mutex> guard(lock);
    drain();
  }
}

} // namespace magic_trace
