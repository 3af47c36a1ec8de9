//===- PerfRecorder.h - Per-thread Intel PT recording with perf -*- C++ -*-===//
//
// One perf_event_open per traced thread (pid = tid, cpu = -1), user space
// only, with the perf mapping page plus an AUX area mapped read-only so the
// kernel overwrites the oldest data (snapshot mode). At a stop, each thread's
// ring is copied oldest-first into a ThreadTrace, with the event disabled
// around the read as LLDB's collector does.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PERFRECORDER_H
#define MAGIC_TRACE_PERFRECORDER_H

#include "magic_trace/PerfIntelPt.h"

#include <memory>

namespace magic_trace {

class PerfRecorder {
public:
  struct Options {
    TimerResolution timer = TimerResolution::Normal;
    uint64_t auxSize = 4 << 20; ///< Power of two; halved while refused.
    std::string sysRoot = "/sys";
    std::string procRoot = "/proc";
  };

  /// Reads the PMU and builds the attr. Fails (one line, what to do) when
  /// there is no intel_pt PMU.
  static llvm::Expected<std::unique_ptr<PerfRecorder>> create(Options options);
  ~PerfRecorder();

  /// Starts recording thread `tid`. Errors: EACCES/EPERM name
  /// perf_event_paranoid (with its value) and CAP_PERFMON; ESRCH says the
  /// thread exited; ENOMEM on the AUX mmap halves the size until 4 KiB and
  /// records a note naming the refused and the used size.
  llvm::Error addThread(uint64_t tid);
  bool isTracing(uint64_t tid) const;

  /// Copies thread `tid`'s ring (the target must be stopped).
  llvm::Expected<ThreadTrace> snapshotThread(uint64_t tid);
  /// Time conversion from the first thread's mapping page.
  llvm::Expected<TimeConversion> timeConversion() const;

  /// MTC/CYC parameters for the decoder (Snapshot::timing).
  const PtTimingConfig &timing() const { return timingValue; }
  /// Threads being recorded, in the order they were added.
  std::vector<uint64_t> threadIds() const;
  /// The AUX size in use for `tid` (after any halving), 0 if not traced.
  uint64_t bufferSize(uint64_t tid) const;

  /// Degradations and size reductions, one line each.
  const std::vector<std::string> &notes() const { return notesList; }

  /// The attr every thread is opened with (for tests and `status`).
  const perf_event_attr &attr() const { return attrValue; }

private:
  PerfRecorder() = default;
  struct ThreadRecording;
  std::vector<std::unique_ptr<ThreadRecording>> threads;
  perf_event_attr attrValue{};
  PtTimingConfig timingValue;
  Options options;
  std::vector<std::string> notesList;
};

/// The one-line error for a failed perf_event_open, from its errno.
llvm::Error perfOpenError(int error, uint64_t tid, llvm::StringRef procRoot);

} // namespace magic_trace

#endif
