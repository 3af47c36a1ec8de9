//===- ItemStream.h - A thread's decoded pieces, finished in order -*- C++
//-*-===//
//
// The decoder's second concept, apart from libipt (BlockDecoder.cpp is the
// one decode file that includes intel-pt.h): a decode run's Piece, and the
// ItemStream that joins pieces in order, converts their times and hands the
// items to an ItemSink in batches. Used only by BlockDecoder.cpp.
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
#include <functional>
#include <vector>

namespace magic_trace::decode_detail {

/// What one run of the decode loop produced. Error items' detail indexes
/// `errors`; Block items carry the raw TSC (0 = unknown) in timeNs until
/// finishTimes() converts them.
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
///    next sample. Items before the first known time take that time, so
///    they wait for it, unless `anyTsc` (asked once, when a batch of them
///    waits) says no time will come: a trace without TSC packets (the
///    real-hardware ones from kAFL) streams like any other.
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
  /// every Block.
  uint64_t finish() {
    if (pending)
      timeRun(*pending);
    pending.reset();
    endRun(run.empty() ? 0 : run.front().timeNs);
    // No item had a time: they keep 0.
    for (TraceItem &item : leading)
      emit(item);
    leading.clear();
    send();
    return instructions;
  }

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

  __attribute__((always_inline)) void timeRun(const TraceItem &item) {
    if (!run.empty() && run.front().timeNs != item.timeNs)
      endRun(item.timeNs);
    // Without a sample, the time is 0 whatever the next sample is.
    if (item.timeNs == 0) {
      TraceItem timeless = item;
      monotonic(timeless);
      return;
    }
    run.push_back(item);
    if (item.kind == ItemKind::Block)
      runInsns += item.detail;
  }

  /// Converts the run's times, `nextTsc` being the next run's sample.
  void endRun(uint64_t nextTsc) {
    if (run.empty())
      return;
    uint64_t tsc = run.front().timeNs;
    uint64_t span = (tsc && nextTsc > tsc) ? nextTsc - tsc : 0;
    uint64_t done = 0;
    if (!known && !timeless) {
      // Before the first time: item by item, as monotonic() holds them.
      for (TraceItem &item : run) {
        item.timeNs = timeAt(tsc, span, done);
        done += item.kind == ItemKind::Block ? item.detail : 0;
        monotonic(item);
      }
    } else {
      // monotonic() and emit() for the whole run: the times in place, then
      // the items into the batch in bulk.
      uint64_t latest = floor;
      for (TraceItem &item : run) {
        latest = std::max(latest, timeAt(tsc, span, done));
        item.timeNs = latest;
        done += item.kind == ItemKind::Block ? item.detail : 0;
      }
      floor = latest;
      instructions += done;
      emitAll(run);
    }
    run.clear();
    runInsns = 0;
  }

  /// The time of a run's item after `done` of its `runInsns` instructions.
  uint64_t timeAt(uint64_t tsc, uint64_t span, uint64_t done) const {
    uint64_t share = runInsns ? shareOf(span, done, runInsns) : 0;
    return tsc ? time.tscToNs(tsc + share) : 0;
  }

  void monotonic(TraceItem &item) {
    if (!known && !timeless && !firstTime(item))
      return;
    floor = std::max(floor, item.timeNs);
    item.timeNs = floor;
    emit(item);
  }

  /// Before the first time: holds `item` back and returns false while no
  /// time is known; at the first time, hands out the items held back with
  /// it and returns true. Out of line: monotonic() runs for every item.
  __attribute__((noinline)) bool firstTime(const TraceItem &item) {
    if (item.timeNs == 0) {
      leading.push_back(item);
      if (leading.size() >= batchItems && anyTsc) {
        bool timeMayCome = anyTsc();
        anyTsc = nullptr;
        if (!timeMayCome)
          giveUpWaiting();
      }
      return false;
    }
    known = true;
    floor = item.timeNs;
    for (TraceItem &before : leading) {
      before.timeNs = floor;
      emit(before);
    }
    leading.clear();
    leading.shrink_to_fit();
    return true;
  }

  /// No time will come: the items waiting for one keep 0.
  void giveUpWaiting() {
    timeless = true;
    for (const TraceItem &before : leading)
      emit(before);
    leading.clear();
    leading.shrink_to_fit();
  }

  // Every item passes here: inline, with the batch hand-over out of line.
  __attribute__((always_inline)) void emit(const TraceItem &item) {
    if (item.kind == ItemKind::Block)
      instructions += item.detail;
    out.push_back(item);
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

  __attribute__((noinline)) void send() {
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
  bool timeless = false; ///< No TSC packet: every time is 0.
  size_t errorCount = 0;
  std::vector<DecodeError> errors;  ///< Not yet handed to the sink.
  std::optional<TraceItem> pending; ///< The join stage's last item.
  std::vector<TraceItem> run;       ///< Items sharing one raw TSC sample.
  uint64_t runInsns = 0;            ///< Instructions of run's Blocks.
  bool known = false;               ///< A time has been seen.
  uint64_t floor = 0;               ///< The latest time handed out.
  std::vector<TraceItem> leading;   ///< Items before the first time.
  PodVector<TraceItem> out;         ///< The batch being filled.
  uint64_t instructions = 0;
};

} // namespace magic_trace::decode_detail

#endif
