//===- WindowPlan.h - Which PSB each thread's decode starts at --*- C++ -*-===//
//
// Private to core/lib/pipeline. Before a windowed snapshot is decoded
// (Pipeline.h, docs/architecture.md, "Window"), each thread's PSB table
// (offsets and the times their PSB+ carry) and a sample of its newest trace say
// how much trace a window of a given length holds and how many slices that
// makes. From that, the planner picks the longest window the budget allows and
// the PSB each thread is decoded from; the cut after the decode (ModelWindow.h)
// makes the budget exact.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_PIPELINE_WINDOWPLAN_H
#define MAGIC_TRACE_LIB_PIPELINE_WINDOWPLAN_H

#include "magic_trace/Decoder.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstddef>
#include <cstdint>

namespace magic_trace::pipeline {

/// Trace a thread's sample covers: its newest PSB pieces up to this many
/// bytes. Big enough for a steady density (thousands of slices), small
/// beside a window's trace (a 10 M-slice window holds megabytes).
constexpr uint64_t kSampleBytes = 16 * 1024;

/// Trace before a window that the threads without a usable stack at the
/// stop are decoded from their start for, in all, when the snapshot's whole
/// trace is at most kSmallTraceBytes: a recording the size of a test
/// program's, or of a ground-truth one (20 M instructions at most), has its
/// outermost frames exact. Beyond it, at most a sixteenth of the window's
/// bytes (WindowedBuild.cpp): a busy snapshot's starts had cost it a
/// quarter more decode.
constexpr uint64_t kCheapPrefixBytes = 1 << 20;
constexpr uint64_t kSmallTraceBytes = 8 * kCheapPrefixBytes;

/// What the planner knows of one thread after its sample.
struct ThreadPlan {
  const PsbTimes *psbs = nullptr;
  /// The thread's last time (its model's end so far; exact).
  uint64_t end = 0;
  /// Where its window ends: `end` when each thread keeps its own clock,
  /// else the latest end of every thread.
  uint64_t windowEnd = 0;
  /// Slices per byte of trace in the sample (0: nothing decoded).
  double slicesPerByte = 0;
};

/// Whether any PSB of `psbs` carries a time.
bool hasTimes(const PsbTimes &psbs);

/// The PSB a sample of `psbs` starts at: the latest that leaves at least
/// `bytes` of trace after it, else 0 (the whole buffer).
size_t sampleStart(const PsbTimes &psbs, uint64_t bytes);

/// Bytes of trace after time `at` in a thread whose trace ends at `end`:
/// from the offset where `at` falls between two timed PSBs (linearly), or
/// between the last one and `end`. The whole buffer when no timed PSB is at
/// or before `at`.
uint64_t bytesAfter(const PsbTimes &psbs, uint64_t end, uint64_t at);

/// The longest window W, at most `limitNs`, whose predicted slices (each
/// thread's density times its bytesAfter(windowEnd - W); a thread without
/// times counts whole) are at most `budget`; `limitNs` when all fit.
uint64_t plannedWindow(llvm::ArrayRef<ThreadPlan> threads, uint64_t limitNs,
                       uint64_t budget);

/// Trace a decode for a window of `length` reads, every thread's together:
/// each from its PSB decodeStart(windowEnd - length) picks to its end (a
/// thread without timing: all of it).
uint64_t bytesForWindow(llvm::ArrayRef<ThreadPlan> threads, uint64_t length);

/// The longest window of at most `spanNs` whose decode reads at most
/// `budget` bytes (bytesForWindow; the decode's budget,
/// WindowOptions::maxTraceBytes): `spanNs` when all of it fits; 0 when not
/// even a window of 1 ns fits (the newest PSB pieces alone are over it),
/// which the caller leaves unlimited.
uint64_t traceBudgetWindow(llvm::ArrayRef<ThreadPlan> threads, uint64_t spanNs,
                           uint64_t budget);

/// The PSB to decode from so that everything from time `at` on is decoded
/// as the whole buffer's decode has it: the timed PSB before the last timed
/// PSB at or before `at` (one PSB of margin: a block that runs across the
/// PSB a decode starts at begins there in that decode, earlier in the
/// whole one); 0 when there is none.
size_t decodeStart(const PsbTimes &psbs, uint64_t at);

/// The earliest time from which a decode from PSB `from` equals the whole
/// buffer's decode: the time of the next timed PSB after it; 0 for a
/// decode from PSB 0.
uint64_t exactFrom(const PsbTimes &psbs, size_t from);

} // namespace magic_trace::pipeline

#endif
