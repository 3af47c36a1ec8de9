//===- ModelWindow.h - The stretch of a model before its end ----*- C++ -*-===//
//
// docs/architecture.md, "Window": what a snapshot shows is a time window ending
// at its stop, the longest that fits an output budget. These are the model's
// side of it: how many slices a viewer gets of a thread cut at a time, the
// longest window a budget allows, and the cut itself. Frames open at the
// window's start are kept, from the window's start, as frames open at a
// trace's start are; what ended before it goes.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_MODELWINDOW_H
#define MAGIC_TRACE_MODELWINDOW_H

#include "magic_trace/TraceModel.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

namespace magic_trace {

/// The slices (Perfetto's: complete and instant events) a thread's model
/// gives a writer beside its frames, which are one each: an instant per
/// decode-error frame, one per gap between segments, one for a thread whose
/// times were estimated, one where a window starts.
constexpr uint64_t kThreadInstants = 2;

/// Slices of `thread` when cut at `from` (0: all of it). An upper bound on
/// what the .fxt writer writes, exact but for the two per-thread instants.
uint64_t windowSlices(const ThreadModel &thread, uint64_t from);

/// The longest window W, at most `maxLengthNs` (0: no limit), such that
/// cutting each thread i at ends[i] - W (ends parallel to threads) leaves
/// at most `maxSlices` slices in all (windowSlices, plus kThreadInstants a
/// thread). Returns maxLengthNs (or UINT64_MAX without a limit) when
/// everything fits. Two passes over the frames (a histogram of their
/// distances from their thread's end, then the one bucket where the
/// budget falls), so no frame is copied; each pass takes a thread per
/// worker, on up to `workers` threads.
uint64_t longestWindow(llvm::ArrayRef<const ThreadModel *> threads,
                       llvm::ArrayRef<uint64_t> ends, uint64_t maxLengthNs,
                       uint64_t maxSlices, unsigned workers = 1);

/// What longestWindow counts for a window of `lengthNs`: the smallest
/// `maxSlices` for which it gives at least that length.
uint64_t slicesWithin(llvm::ArrayRef<const ThreadModel *> threads,
                      llvm::ArrayRef<uint64_t> ends, uint64_t lengthNs);

/// Cuts `thread` at `from`: segments and frames that ended before it go
/// (one that ends exactly there goes unless it also begins there), and
/// what was open there begins there, as a frame open at a trace's start
/// does; a segment so cut loses its gap (the gap was before the window).
/// Frames keep their order, nesting and flags; the model stays valid.
/// Sets thread.windowStart when anything began before `from`.
void cutThreadModel(ThreadModel &thread, uint64_t from);

} // namespace magic_trace

#endif
