//===- ItemStream.h - A thread's decoded pieces, finished in order -*- C++
//-*-===//
//
// The decoder's second concept, apart from libipt (this file includes no
// libipt header; Image.h, PsbTable.h, CpuErrata.cpp, LibiptError.cpp,
// StartQuirk.cpp and Version.cpp do): a decode run's Piece, and the
// ItemStream that joins pieces in order, converts their times and hands the
// items to an ItemSink in batches. Used by PieceDecoder and PsbParallel.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODE_ITEMSTREAM_H
#define MAGIC_TRACE_DECODE_ITEMSTREAM_H

#include "magic_trace/Interpolation.h"
#include "magic_trace/PodVector.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/TraceItems.h"

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <vector>

namespace magic_trace::decode_detail {

/// Inside the decoder, until ItemStream times it, an item's `timeNs` field
/// holds the raw TSC of the last timing packet libipt read (0 = unknown, 56
/// bits until ItemStream widens it), not nanoseconds. These two name that
/// use, so that no decoder line reads a TSC as nanoseconds.
inline uint64_t rawTsc(const TraceItem &item) { return item.timeNs; }
inline void setRawTsc(TraceItem &item, uint64_t tsc) { item.timeNs = tsc; }

/// What one run of the decode loop produced. Error items' detail indexes
/// `errors`; items carry their raw TSC (rawTsc()) until ItemStream converts
/// them.
struct Piece {
  std::vector<TraceItem> items;
  std::vector<DecodeError> errors;
  /// PSB index where decoding must continue; the PSB count at the end.
  size_t handoff = 0;
};

/// Finishes a thread's items as pieces arrive, in order, and hands them to
/// an ItemSink in batches. Two stages, each holding back only what the next
/// item can still change:
///  - join: Blocks split where no branch was (at a section change, at a
///    PSB, or at libipt's 16-bit block size) are joined, so every Block ends
///    at a branch or right before a non-Block item, whatever the piece
///    boundaries were; the last item waits for the next.
///  - time: raw TSC samples become monotonic nanoseconds. A TSC sample is
///    the time of the last timing packet libipt read; items between two
///    different samples share the interval in proportion to their
///    instruction counts, so a run of items with one sample waits for the
///    next sample. Where no next sample comes (after the trace's last
///    timing packet, before an untimed stretch) and before the first one,
///    times come from the instruction clock: the rate measured between
///    samples so far, else DefaultNsPerInsn, counted on from the last sample
///    or back from the first. Items before the first time wait for it,
///    unless `anyTsc` (asked once, when a batch of them waits) says no time
///    will come: a trace without TSC packets (the real-hardware ones from
///    kAFL) streams on the instruction clock from 0. The instructions so
///    timed are counted (ItemSink::timesEstimated): never a frozen clock.
class ItemStream {
public:
  ItemStream(ItemSink &sink, const TimeConversion &time, size_t batchItems,
             std::function<bool()> anyTsc)
      : sink(sink), time(time), batchItems(std::max<size_t>(1, batchItems)),
        anyTsc(std::move(anyTsc)) {
    out.reserve(this->batchItems);
  }

  /// Appends `piece`'s items and errors, renumbering its error references;
  /// leaves the piece empty.
  void append(Piece &piece) {
    uint32_t base = static_cast<uint32_t>(errorCount);
    for (TraceItem &item : piece.items) {
      if (item.kind == ItemKind::Error)
        item.detail += base;
      join(item);
    }
    errorCount += piece.errors.size();
    for (DecodeError &error : piece.errors)
      errors.push_back(std::move(error));
    piece.items.clear();
    piece.errors.clear();
  }

  /// Hands everything held back to the sink; returns the instructions of
  /// every Block. The sink hears how many of them have estimated times
  /// (ItemSink::timesEstimated) before the last batch.
  uint64_t finish() {
    if (pending)
      timeRun(*pending);
    pending.reset();
    endRun(0);
    // No item had a time: the clock counts instructions from 0.
    if (!leading.empty())
      giveUpWaiting();
    sink.timesEstimated(estimated);
    send();
    return instructions;
  }

  /// The default clock where a trace has no timing at all: nanoseconds per
  /// instruction (docs/decoder.md, "Time").
  static constexpr uint64_t DefaultNsPerInsn = 1;
  /// Instructions of timed intervals the instruction clock's rate is
  /// measured over (the newest ones).
  static constexpr uint64_t RateInsns = 4096;

private:
  // Every item passes here, from append()'s loop: inline.
  __attribute__((always_inline)) void join(const TraceItem &item) {
    if (pending && item.kind == ItemKind::Block &&
        pending->kind == ItemKind::Block &&
        pending->lastClass == BranchClass::Other &&
        pending->mode == item.mode &&
        uint64_t(pending->detail) + item.detail <= UINT32_MAX) {
      pending->detail += item.detail;
      pending->lastIp = item.lastIp;
      pending->lastClass = item.lastClass;
      pending->lastSize = item.lastSize;
      return;
    }
    if (pending)
      timeRun(*pending);
    pending = item;
  }

  static uint64_t insnsOf(const TraceItem &item) {
    return item.kind == ItemKind::Block ? item.detail : 0;
  }

  // The item is copied whole and its time written in place afterwards: a
  // copy changed first and then moved 16 bytes at a time made every item
  // wait for its own time's store (a failed store-to-load forward).
  __attribute__((always_inline)) void timeRun(const TraceItem &item) {
    uint64_t tsc = rawTsc(item);
    if (tsc)
      tsc = time.fullTsc(tsc); // A 56-bit TSC packet.
    if (!run.empty() && rawTsc(run.front()) != tsc)
      endRun(tsc);
    // Without a sample, the time comes from the instruction count.
    if (tsc == 0) {
      untimed(item);
      return;
    }
    run.push_back(item);
    setRawTsc(run.back(), tsc);
    runInsns += insnsOf(item);
  }

  /// Converts the run's times, `nextTsc` being the next run's sample (0
  /// when none follows). Between two samples, the run's items share the
  /// interval by instruction count; a run no later sample closes (the
  /// trace's last, or one before an untimed stretch) is timed by the
  /// instruction clock from its own sample.
  void endRun(uint64_t nextTsc) {
    if (run.empty())
      return;
    uint64_t tsc = rawTsc(run.front());
    bool between = nextTsc > tsc;
    uint64_t span = between ? nextTsc - tsc : 0;
    uint64_t startNs = time.tscToNs(tsc);
    if (between && runInsns)
      measureRate(time.tscToNs(nextTsc) - startNs, runInsns);
    if (!known) {
      known = true;
      timeLeading(startNs);
    }
    uint64_t latest = floor;
    uint64_t done = 0;
    for (TraceItem &item : run) {
      uint64_t at = between ? timeAt(tsc, span, done) : startNs + clock(done);
      latest = std::max(latest, at);
      item.timeNs = latest;
      done += insnsOf(item);
    }
    floor = latest;
    anchorNs = startNs;
    sinceAnchor = done;
    if (!between) {
      estimated += done;
      noteEstimated(instructions, done);
    }
    instructions += done;
    emitAll(run);
    run.clear();
    runInsns = 0;
  }

  /// The time of a run's item after `done` of its `runInsns` instructions.
  uint64_t timeAt(uint64_t tsc, uint64_t span, uint64_t done) const {
    uint64_t share = runInsns ? shareOf(span, done, runInsns) : 0;
    return time.tscToNs(tsc + share);
  }

  /// Adds an interval between two samples to the measured rate, which
  /// keeps the newest intervals of at least RateInsns instructions.
  void measureRate(uint64_t ns, uint64_t insns) {
    rateNs += ns;
    rateInsns += insns;
    rateIntervals.push_back({ns, insns});
    while (rateIntervals.size() > 1 &&
           rateInsns - rateIntervals.front().insns >= RateInsns) {
      rateNs -= rateIntervals.front().ns;
      rateInsns -= rateIntervals.front().insns;
      rateIntervals.pop_front();
    }
  }

  /// Nanoseconds that `insns` instructions take on the instruction clock:
  /// the rate measured over the newest intervals between two samples (at
  /// least RateInsns instructions of them), else DefaultNsPerInsn. Local,
  /// not the whole trace's: the pace where the clock is needed, and the
  /// same whether the decode began at the buffer's first PSB or at a
  /// window's (a window's decode starts a PSB earlier than it needs).
  uint64_t clock(uint64_t insns) const {
    if (rateInsns == 0 || rateNs == 0)
      return insns * DefaultNsPerInsn;
    return shareOf(rateNs, insns, rateInsns);
  }

  /// An item without a sample: before the first time it waits for one;
  /// after it (or when none will come), the instruction clock continues
  /// from the last sample.
  void untimed(const TraceItem &item) {
    if (!known && !timeless) {
      waitForTime(item);
      return;
    }
    floor = std::max(floor, anchorNs + clock(sinceAnchor));
    sinceAnchor += insnsOf(item);
    estimated += insnsOf(item);
    noteEstimated(instructions, insnsOf(item));
    emit(item, floor);
  }

  /// Before the first time: holds `item` back. Out of line: it is rare.
  __attribute__((noinline)) void waitForTime(const TraceItem &item) {
    leading.push_back(item);
    if (leading.size() >= batchItems && anyTsc) {
      bool timeMayCome = anyTsc();
      anyTsc = nullptr;
      if (!timeMayCome)
        giveUpWaiting();
    }
  }

  /// The first sample is at `firstNs`: the items held back ran before it,
  /// so they get times counted back from it on the instruction clock.
  void timeLeading(uint64_t firstNs) {
    uint64_t total = 0;
    for (const TraceItem &before : leading)
      total += insnsOf(before);
    noteEstimated(instructions, total);
    uint64_t done = 0;
    for (TraceItem &before : leading) {
      before.timeNs = firstNs - std::min(firstNs, clock(total - done));
      done += insnsOf(before);
      floor = std::max(floor, before.timeNs);
      emit(before, floor);
    }
    estimated += total;
    leading.clear();
    leading.shrink_to_fit();
  }

  /// No time will come: the clock counts instructions from 0.
  void giveUpWaiting() {
    timeless = true;
    std::vector<TraceItem> waiting;
    waiting.swap(leading);
    for (const TraceItem &before : waiting)
      untimed(before);
  }

  // Every untimed item passes here: inline, with the batch hand-over out of
  // line. Its time is written in place (see timeRun).
  __attribute__((always_inline)) void emit(const TraceItem &item,
                                           uint64_t timeNs) {
    if (item.kind == ItemKind::Block)
      instructions += item.detail;
    out.push_back(item);
    out.back().timeNs = timeNs;
    if (out.size() >= batchItems)
      send();
  }

  /// emit() for each of `items` (which are timed), in bulk.
  void emitAll(llvm::ArrayRef<TraceItem> items) {
    while (!items.empty()) {
      size_t take = std::min(items.size(), batchItems - out.size());
      // Room for `take` more (within the reserved batch), then one copy:
      // runs are short, and vector::insert cost ~100 instructions a run.
      size_t at = out.size();
      out.shift(at, at + take);
      std::memcpy(static_cast<void *>(out.data() + at), items.data(),
                  take * sizeof(TraceItem));
      items = items.drop_front(take);
      if (out.size() >= batchItems)
        send();
    }
  }

  /// Instructions [first, first + count) were timed by the instruction
  /// clock: joined to the range pending, which the sink hears before the
  /// batch that holds them.
  void noteEstimated(uint64_t first, uint64_t count) {
    if (count == 0)
      return;
    if (rangeCount && rangeFirst + rangeCount == first) {
      rangeCount += count;
      return;
    }
    flushEstimatedRange();
    rangeFirst = first;
    rangeCount = count;
  }

  void flushEstimatedRange() {
    if (rangeCount)
      sink.estimatedRange(rangeFirst, rangeCount);
    rangeCount = 0;
  }

  __attribute__((noinline)) void send() {
    flushEstimatedRange();
    if (out.empty() && errors.empty())
      return;
    sink.consume(llvm::ArrayRef<TraceItem>(out.data(), out.size()), errors);
    out.clear();
    errors.clear();
  }

  ItemSink &sink;
  const TimeConversion &time;
  size_t batchItems;
  std::function<bool()> anyTsc;
  bool timeless = false; ///< No TSC packet: the instruction clock from 0.
  size_t errorCount = 0;
  std::vector<DecodeError> errors;  ///< Not yet handed to the sink.
  std::optional<TraceItem> pending; ///< The join stage's last item.
  std::vector<TraceItem> run;       ///< Items sharing one raw TSC sample.
  uint64_t runInsns = 0;            ///< Instructions of run's Blocks.
  bool known = false;               ///< A time has been seen.
  uint64_t floor = 0;               ///< The latest time handed out.
  /// The instruction clock: the last sample's time and the instructions
  /// handed out since it.
  uint64_t anchorNs = 0, sinceAnchor = 0;
  /// The measured rate: ns and instructions between samples, summed.
  uint64_t rateNs = 0, rateInsns = 0;
  struct Interval {
    uint64_t ns, insns;
  };
  std::deque<Interval> rateIntervals;
  uint64_t estimated = 0; ///< Instructions timed by the instruction clock.
  /// The range of such instructions not yet told to the sink.
  uint64_t rangeFirst = 0, rangeCount = 0;
  std::vector<TraceItem> leading; ///< Items before the first time.
  PodVector<TraceItem> out;       ///< The batch being filled.
  uint64_t instructions = 0;
};

} // namespace magic_trace::decode_detail

#endif
