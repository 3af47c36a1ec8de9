//===- FakeKernel.h - The perf backend's kernel, for tests ------*- C++ -*-===//
//
// A KernelInterface that models the kernel rules the perf backend depends on,
// each as the kernel's source states it (docs/perf-backend.md):
// - perf_event_open: EACCES above perf_event_paranoid 2 without CAP_PERFMON;
//   ESRCH for a thread that exited; EBUSY while a CPU-wide PT session runs or
//   the thread already has a PT event on that CPU (exclusive PMU);
// - mmap: EINVAL for an inherited cpu = -1 event, or a redirected one; data
//   pages 0 or a power of two; AUX at aux_offset/aux_size, a power of two
//   of pages; EPERM beyond perf_event_mlock_kb x CPUs for the user and then
//   RLIMIT_MEMLOCK (perf_mmap's accounting); a read-only AUX is overwrite;
// - inherit: clone() copies a thread's inherit events into the new thread
//   before it runs, writing into the original event's ring;
// - the hardware: a thread that runs on a CPU writes its PT into the ring's
//   AUX pages at aux_head, wrapping, aux_head an offset (PT snapshot mode);
//   switched out, the kernel writes ITRACE_START (once per event) and
//   PERF_RECORD_AUX {aux_head, size, OVERWRITE | flags} with the sample_id
//   into the data pages;
// - the data pages (kernel/events/ring_buffer.c, perf_output_begin): a
//   record that does not fit beside what the reader has not consumed
//   (data_tail; CIRC_SPACE, one byte short of full) is dropped, the newest
//   first, and counted; the next record that fits together with a
//   LOST {id, lost} writes the LOST in front of it. Every watermark's worth
//   of records (half the data pages) wakes a poll(2) on the ring's events.
//
// The kernel is called from the test's thread (the target) and from the
// recorder's sideband reader; one lock keeps its state whole. The data pages
// are shared memory, written and published (data_head, release) as the
// kernel does, so the reader reads them without the lock.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_FAKEKERNEL_H
#define MAGIC_TRACE_TEST_FAKEKERNEL_H

#include "magic_trace/KernelInterface.h"

#include "llvm/ADT/ArrayRef.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace::testing {

class FakeKernel final : public KernelInterface {
public:
  struct Options {
    std::string sysRoot; ///< A fixture tree (test/unit/fixtures/sysfs-*).
    std::string procRoot = "/nonexistent-proc";
    unsigned cpus = 2;
    uint64_t mlockKb = 516; ///< The kernel's default.
    std::optional<uint64_t> memlockLimit = uint64_t(8) << 20;
    bool exempt = false; ///< CAP_IPC_LOCK.
    int paranoid = 2;
    bool systemWidePt = false; ///< Someone runs perf record -a -e intel_pt.
    uint64_t pageSize = 4096;
    /// The CPU of the PT it is given (the emulator's, PacketWriter.h).
    CpuIdentity cpu = {"GenuineIntel", 6, 122, 1};
    /// The perf page's TSC conversion (ns = zero + tsc * mult >> shift).
    uint64_t timeZero = 0;
    uint32_t timeMult = 1;
    uint16_t timeShift = 0;
    /// The scheduler's part: when the data pages pass their watermark and
    /// the kernel wakes the ring's poller, the target's next switch waits
    /// up to this long for the reader to consume (data_tail to move), as a
    /// woken reader on a real machine runs long before the target switches
    /// another half ring's worth of times. 0: the target never waits (a
    /// reader that is not there, or never gets a CPU).
    std::chrono::milliseconds wokenReaderRuns{0};
  };
  explicit FakeKernel(Options options);
  ~FakeKernel() override;

  // The process.
  void addThread(uint32_t pid, uint32_t tid);
  /// `parent` creates a thread, with tid `tid` when not 0 (a reused tid);
  /// returns its tid.
  uint32_t clone(uint32_t parent, uint32_t tid = 0);
  void exitThread(uint32_t tid);
  /// `tid` runs on `cpu` and the hardware writes `bytes` of PT (nothing if
  /// no enabled event traces it there); then it is switched out: the AUX
  /// record gets `auxFlags` besides OVERWRITE.
  void run(uint32_t tid, unsigned cpu, llvm::ArrayRef<uint8_t> bytes,
           uint64_t auxFlags = 0);
  /// `tid`, running on `cpu`, made [address, address + size) executable at
  /// `timeNs` (the perf clock): when its event there asked for mmap records
  /// (attr.mmap and mmap2), the kernel writes PERF_RECORD_MMAP2 {pid, tid,
  /// addr, len, pgoff, 24 bytes of device and inode, prot, flags, filename}
  /// into its ring, as perf_event_mmap does at each mmap and each mprotect
  /// (mm/mprotect.c, mprotect_fixup) of executable memory.
  void mapExecutable(uint32_t tid, unsigned cpu, uint64_t timeNs,
                     uint64_t address, uint64_t size, const std::string &path);
  /// The next `count` records for `cpu`'s ring find its data pages full.
  void dropRecords(unsigned cpu, unsigned count);
  /// Pages locked for the user plus pinned for the process.
  uint64_t lockedBytes() const;
  /// AUX sizes of the mapped rings, by CPU.
  std::map<unsigned, uint64_t> auxSizes() const;

  // KernelInterface.
  llvm::ErrorOr<int> perfEventOpen(const perf_event_attr &attr, int pid,
                                   int cpu) override;
  llvm::ErrorOr<void *> mmap(int fd, size_t length, bool writable,
                             uint64_t offset) override;
  void munmap(void *address, size_t length) override;
  std::error_code ioctl(int fd, unsigned long request,
                        unsigned long argument) override;
  void close(int fd) override;
  llvm::ErrorOr<unsigned> poll(llvm::MutableArrayRef<pollfd> fds,
                               int timeoutMs) override;
  std::string sysRoot() const override { return options.sysRoot; }
  std::string procRoot() const override { return options.procRoot; }
  uint64_t pageSize() const override { return options.pageSize; }
  std::vector<unsigned> onlineCpus() const override {
    std::vector<unsigned> cpus;
    for (unsigned cpu = 0; cpu < options.cpus; ++cpu)
      cpus.push_back(cpu);
    return cpus;
  }
  std::optional<uint64_t> perfMlockKb() const override {
    return options.mlockKb;
  }
  std::optional<uint64_t> memlockLimit() const override {
    return options.memlockLimit;
  }
  bool lockLimitExempt() const override { return options.exempt; }
  uint64_t readTsc() const override { return clock; }
  CpuIdentity cpu() const override { return options.cpu; }

private:
  struct Ring;
  struct Event;
  Event *eventOf(int fd);
  Ring *ringOf(Event &event);
  std::error_code charge(uint64_t pages, uint64_t &userPart,
                         uint64_t &pinnedPart);
  /// Writes one record into the ring's data pages, or counts it lost.
  void emit(Ring &ring, const Event &event, uint32_t type,
            llvm::ArrayRef<uint64_t> words, uint32_t tid,
            std::optional<uint64_t> time = std::nullopt);
  /// `tid`'s enabled event on `cpu` and its ring with AUX pages, or null.
  std::pair<Event *, Ring *> runningOn(uint32_t tid, unsigned cpu);
  /// Options::wokenReaderRuns: waits (lock released) for the reader.
  void letReaderRun(std::unique_lock<std::mutex> &guard, Ring &ring);

  mutable std::mutex mutex;
  std::condition_variable woken; ///< A ring passed its watermark.
  Options options;
  std::map<uint32_t, uint32_t> pidOf; ///< Live threads.
  std::vector<std::unique_ptr<Event>> events;
  std::vector<std::unique_ptr<Ring>> rings;
  int nextFd = 100;
  uint32_t nextTid = 5000;
  uint64_t userLockedPages = 0, pinnedPages = 0;
  uint64_t clock = 1000;
};

/// `bytes` cut at its PSBs, the stretches a thread's PT is made of between
/// two switches: each begins with a PSB, as PT does when a thread is
/// switched back in. Bytes before the first PSB are not a stretch a decoder
/// could begin.
std::vector<std::vector<uint8_t>> psbStretches(llvm::ArrayRef<uint8_t> bytes);

} // namespace magic_trace::testing

#endif
