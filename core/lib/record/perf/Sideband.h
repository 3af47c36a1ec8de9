//===- Sideband.h - The data pages, read as the target runs -----*- C++ -*-===//
//
// Private to core/lib/record/perf. Every switch-out of a traced thread makes
// the kernel write a PERF_RECORD_AUX (56 bytes with our sample_id) into its
// CPU ring's data pages, and the kernel never overwrites what the reader has
// not consumed: a record that does not fit is dropped, the newest first, and
// counted, and a LOST record says how many once there is room again
// (kernel/events/ring_buffer.c, perf_output_begin). Read only at a stop, a
// busy process fills any size of data pages between two stops and loses the
// records of the stretch before the stop. So, as `perf record` does
// (builtin-record.c: the poll loop around record__mmap_read_all), a reader
// thread consumes the records while the target runs: woken by the kernel
// when a ring passes its watermark (half the data pages), and at the latest
// every period. A loss then costs only the stretches whose records were
// dropped, older than the records that came after, and it is marked.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_RECORD_PERF_SIDEBAND_H
#define MAGIC_TRACE_LIB_RECORD_PERF_SIDEBAND_H

#include "magic_trace/KernelInterface.h"
#include "magic_trace/Snapshot.h"

#include "../../formats/perfdata/PerfDataFormat.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace magic_trace {

/// What every event's sideband carries after each record (sample_id_all):
/// the writer's pid/tid, the time and the CPU (perf_event_open(2)). The
/// recorder opens its events with it, and the reader parses records by it.
constexpr uint64_t kSidebandSampleType =
    perfdata::kSampleTid | perfdata::kSampleTime | perfdata::kSampleCpu;

/// One CPU's ring: the events writing into it and what its sideband said.
struct CpuRing {
  /// One stretch of the AUX ring written by one thread, in linear bytes
  /// since attach (ring offset = linear % size).
  struct Piece {
    uint64_t start = 0, end = 0;
    uint32_t tid = 0;
    uint64_t flags = 0, time = 0;
    bool lostBefore = false; ///< Records before it were lost.
  };

  KernelInterface *kernel = nullptr;
  unsigned cpu = 0;
  std::vector<int> fds; ///< fds[0] owns the mapping; the rest output to it.
  void *base = nullptr;
  size_t baseLength = 0;
  void *aux = nullptr;
  uint64_t auxSize = 0;
  /// The pieces whose bytes the AUX ring may still hold, oldest first.
  std::vector<Piece> pieces;
  uint64_t linearEnd = 0; ///< Where the last piece ended.
  bool pendingLost = false;
  uint64_t lostRecords = 0; ///< The LOST records' counts since attach.
  /// MMAP2 records of anonymous memory made executable, oldest first: at
  /// most kMaxExecMappings, the newest.
  std::vector<ExecMapping> execMappings;
  static constexpr size_t kMaxExecMappings = 65536;

  CpuRing() = default;
  CpuRing(const CpuRing &) = delete;
  CpuRing &operator=(const CpuRing &) = delete;
  ~CpuRing();
  perf_event_mmap_page &page() const {
    return *static_cast<perf_event_mmap_page *>(base);
  }
};

/// Consumes the records the kernel published in `ring`'s data pages since
/// the last call (data_tail to data_head, then data_tail moves on): each AUX
/// record becomes a piece, an ITRACE_START or AUX record's thread joins
/// `known`, a LOST record (or a frame that cannot be parsed) marks the next
/// piece `lostBefore`, an MMAP2 record of anonymous memory made executable
/// joins `execMappings`. Pieces the AUX ring can no longer hold are forgotten,
/// so memory stays flat however long the target runs. Safe while the target
/// runs; the caller serializes calls on one ring.
void readSideband(CpuRing &ring, uint64_t dataBytes, std::set<uint64_t> &known);

/// A thread that calls `drain` (holding `lock`) whenever the kernel wakes a
/// poll(2) on `fds`, and at the latest every `periodMs`: no wait is longer.
/// An event that hung up (its thread and copies exited) or is invalid is
/// left out of the poll from then on, as perf record's fdarray__filter does,
/// so that poll does not return at once forever.
class SidebandReader {
public:
  SidebandReader(KernelInterface &kernel, std::vector<int> fds, int periodMs,
                 std::mutex &lock, std::function<void()> drain);
  /// Stops the thread: it returns within one period.
  ~SidebandReader();

private:
  void loop();

  KernelInterface &kernel;
  std::vector<pollfd> polled;
  int periodMs;
  std::mutex &lock;
  std::function<void()> drain;
  std::atomic<bool> stopping{false};
  std::mutex sleepLock;
  std::condition_variable sleepWake;
  std::thread thread;
};

} // namespace magic_trace

#endif
