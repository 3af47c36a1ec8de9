//===- PerfRecorder.h - Per-CPU Intel PT recording of a process -*- C++ -*-===//
//
// How `perf record -p` records a process, in snapshot mode: on every online
// CPU one ring (the perf page, data pages for the kernel's sideband, and an
// AUX area mapped read-only so the hardware overwrites the oldest trace); one
// event per thread present at attach on each CPU (pid = tid, cpu = N,
// inherit), all writing into that CPU's ring (PERF_EVENT_IOC_SET_OUTPUT).
// With inherit the kernel copies the events into every thread the traced
// ones create, in clone() before the new thread runs, so a thread started
// after attach is traced from its first instruction. The kernel ends each
// thread's stretch on a CPU with a PERF_RECORD_AUX naming the thread and the
// ring offset it got to. A reader thread consumes those records as the
// target runs (Sideband.h), so that the data pages do not fill between two
// stops; at a stop they split every CPU's ring into per-thread traces
// (PerCpuTrace.h, shared with the perf.data reader).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PERFRECORDER_H
#define MAGIC_TRACE_PERFRECORDER_H

#include "magic_trace/KernelInterface.h"
#include "magic_trace/PerfIntelPt.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

namespace magic_trace {

struct CpuRing;       // core/lib/record/perf/Sideband.h
class SidebandReader; // core/lib/record/perf/Sideband.h

/// The per-CPU buffer sizes for a recording, chosen against the per-user
/// locked memory budget before any mmap (kernel/events/core.c, perf_mmap:
/// perf_event_mlock_kb x online CPUs for the user, beyond it RLIMIT_MEMLOCK
/// for the process, unless CAP_IPC_LOCK).
struct BufferPlan {
  unsigned cpus = 0;
  uint64_t auxBytes = 0;    ///< AUX area per CPU, a power of two of pages.
  uint64_t dataBytes = 0;   ///< Data pages per CPU (sideband), power of two.
  uint64_t budgetBytes = 0; ///< What the user may lock; 0: no limit.
  std::string note;         ///< Set when the wish was reduced to fit.
};

/// The data pages perf record maps by default (tools/perf/util/evlist.c,
/// perf_event_mlock_kb_in_pages): perf_event_mlock_kb less one page, a
/// power of two of pages; 512 KiB at the kernel's default of 516.
uint64_t perfDataBytes(const KernelInterface &kernel);

/// The data pages perf maps for an Intel PT snapshot when unprivileged
/// (tools/perf/arch/x86/util/intel-pt.c, intel_pt_recording_options).
constexpr uint64_t kPerfSnapshotDataBytes = 256 << 10;

/// The fewest data pages planBuffers gives up to when the budget is short
/// (what the recorder used before it read the sideband as the target runs).
constexpr uint64_t kMinDataBytes = 64 << 10;

/// Picks the largest AUX size up to `wantedAux` that fits the budget on
/// every CPU together with the perf page and `dataBytes` of data pages
/// (perfDataBytes when not given). The data pages are halved while that
/// gives a larger AUX, down to kPerfSnapshotDataBytes, and further down to
/// kMinDataBytes, with a note, only when two PSB periods of AUX would not
/// fit beside them. Fails (one line, what to do) when the AUX is below two
/// PSB periods even so (`psbPeriodBytes`; perf warns below it too: a
/// snapshot must hold a PSB).
llvm::Expected<BufferPlan>
planBuffers(uint64_t wantedAux, unsigned cpus, const KernelInterface &kernel,
            uint64_t psbPeriodBytes,
            std::optional<uint64_t> dataBytes = std::nullopt);

/// The PSB period the attr asks for, in bytes (2^(psb_period + 11); the
/// hardware's default of 2 KiB when the term is absent).
uint64_t psbPeriodBytes(const IntelPtPmuDescription &pmu,
                        const perf_event_attr &attr);

class PerfRecorder {
public:
  struct Options {
    TimerResolution timer = TimerResolution::Normal;
    uint64_t auxSize = 4 << 20; ///< Per CPU; reduced to fit the budget.
    /// The sideband reader's longest wait between two reads while the
    /// target runs (it is woken sooner when a ring is half full).
    int sidebandPeriodMs = 50;
    /// The kernel to use; the running one when null.
    std::shared_ptr<KernelInterface> kernel;
  };

  /// Reads the PMU and builds the attr. Fails (one line, what to do) when
  /// there is no intel_pt PMU.
  static llvm::Expected<std::unique_ptr<PerfRecorder>> create(Options options);
  ~PerfRecorder();

  /// Starts recording process `pid` whose threads are `tids` (and every
  /// thread they create from now on), and the thread that reads the
  /// sideband as the process runs. A thread that cannot be traced (it
  /// exited: ESRCH) is skipped with a note and the next one is tried. Fails
  /// when no thread can be traced, or no CPU's ring can be mapped: EACCES
  /// and EPERM name perf_event_paranoid and CAP_PERFMON, EBUSY says another
  /// tracer holds Intel PT, EPERM from mmap names perf_event_mlock_kb.
  llvm::Error attach(uint64_t pid, llvm::ArrayRef<uint64_t> tids);

  /// Whether `tid` is traced: present at attach, or seen in the sideband.
  bool isTracing(uint64_t tid) const;

  /// Every thread's trace from the rings (the target must be stopped):
  /// disables the events, reads what is left of each CPU's sideband and its
  /// AUX ring, splits it by thread, and enables them again. A piece the
  /// kernel flagged (TRUNCATED, PARTIAL, COLLISION) ends with an OVF, which
  /// the decoder shows as a gap. Where AUX records were lost (LOST), which
  /// thread ran is unknown: every thread with trace from before the loss
  /// gets an OVF there, and the stretch after it keeps only its part from
  /// its last PSB. Threads with no trace are left out.
  llvm::Expected<std::vector<ThreadTrace>> snapshot();
  /// The anonymous memory the process made executable since attach (the
  /// sideband's MMAP2 records, the newest kept), oldest first.
  std::vector<ExecMapping> execMappings() const;
  /// Time conversion from the first ring's perf page, with the TSC read now
  /// as the reference for the top byte of 56-bit TSC packets.
  llvm::Expected<TimeConversion> timeConversion() const;

  /// MTC/CYC parameters for the decoder (Snapshot::timing).
  const PtTimingConfig &timing() const { return timingValue; }
  /// Threads known to be traced, ascending.
  std::vector<uint64_t> threadIds() const;
  /// The sizes in use.
  const BufferPlan &plan() const { return planValue; }
  /// Pieces of trace the last snapshot marked lost (flagged by the kernel,
  /// or not attributable after lost sideband), all CPUs.
  uint64_t lostPieces() const { return lostCount; }
  /// Sideband records the kernel could not write since attach (the sum of
  /// its LOST records), all CPUs.
  uint64_t lostSidebandRecords() const;
  /// The CPU the rings' PT comes from (its errata apply when decoding).
  CpuIdentity cpu() const { return kernel->cpu(); }

  /// Degradations, skipped threads and size reductions, one line each.
  const std::vector<std::string> &notes() const { return notesList; }

  /// The attr every event is opened with (for tests, `status`, `doctor`).
  const perf_event_attr &attr() const { return attrValue; }

private:
  PerfRecorder() = default;
  llvm::Error openRings(llvm::ArrayRef<uint64_t> tids);
  llvm::Error mapRing(CpuRing &ring);
  void enableAll(bool enable);

  std::shared_ptr<KernelInterface> kernel;
  std::vector<std::unique_ptr<CpuRing>> rings;
  /// Guards what the sideband reader writes: the rings' pieces and `known`.
  mutable std::mutex sidebandLock;
  std::set<uint64_t> known;
  /// Stopped first on destruction, before the rings are unmapped.
  std::unique_ptr<SidebandReader> reader;
  perf_event_attr attrValue{};
  PtTimingConfig timingValue;
  BufferPlan planValue;
  uint64_t psbBytes = 0;
  uint64_t lostCount = 0;
  Options options;
  std::vector<std::string> notesList;
};

/// What attach would do on this machine, for `doctor`, one line each: the
/// perf_event_attr it opens per thread and CPU (type, config bits by term,
/// flags) and the buffer sizes it picks under this user's budget. Without
/// an intel_pt PMU, the kernel's format layout (arch/x86/events/intel/pt.c)
/// and a Skylake's capabilities stand in, and the first line says so.
std::vector<std::string> describePerfRecording(const KernelInterface &kernel,
                                               TimerResolution timer,
                                               uint64_t auxSize);

/// The one-line error for a failed perf_event_open, from its errno.
llvm::Error perfOpenError(int error, uint64_t tid, llvm::StringRef procRoot);

/// Checks that `pid` names the same process in this PID namespace: the
/// debugger may see a target through a remote platform or in a container,
/// where its pid means another process (or none) here. Reads
/// <procRoot>/<pid>/status. Fails with one line saying so.
llvm::Error checkSameNamespace(uint64_t pid, llvm::StringRef procRoot,
                               llvm::ArrayRef<uint64_t> tids);

} // namespace magic_trace

#endif
