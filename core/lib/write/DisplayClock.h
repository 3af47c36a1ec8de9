//===- DisplayClock.h - Times a timeline viewer nests as the model -*- C++
//-*-===//
//
// Private to core/lib/write: the times the .fxt and Chrome JSON writers put
// in the file, so that Perfetto draws the model's tree. Perfetto's slice
// tracker (src/trace_processor/importers/common/slice_tracker.cc,
// MaybeCloseStack) nests by time alone: an open slice is closed when it ends
// before the next slice begins, or exactly when it begins unless both last
// zero time (zero-length slices at one timestamp stack like instants), and
// a slice that starts inside an open one but ends after it is dropped. The
// model's nesting is exact, but its times are not distinct: where timing is
// coarse or estimated, many frames begin and end at one nanosecond.
//
// The rule (docs/formats.md, "Displayed times"): walk a thread's frames as
// begin and end events in pre-order; each displayed time is the model's,
// or the previous displayed time if that is later, plus 1 ns when the event
// ends a frame that has no children (so every slice lasts at least 1 ns and
// none is zero-length). Displayed times are never earlier than the model's
// and catch up with it as soon as the model's clock passes them.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_WRITE_DISPLAYCLOCK_H
#define MAGIC_TRACE_LIB_WRITE_DISPLAYCLOCK_H

#include "magic_trace/TraceModel.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace magic_trace::writers {

/// One thread's displayed times, segment by segment, in the thread's order.
class DisplayClock {
public:
  /// Computes the displayed ends of `segment`'s frames, after those of the
  /// thread's earlier segments; forEachFrame() then gives the frames.
  void place(const Segment &segment) {
    before = last;
    beforeShift = shift;
    endShifts.clear();
    endShifts.appendUninitialized(segment.frames.size());
    largeShifts.clear();
    walk(segment, [&](uint64_t modelNs, uint64_t shown, Event event,
                      uint32_t frame) {
      // Displayed times are never before the model's (show()). The
      // walk's stack holds the frame and its ancestors at its begin,
      // its ancestors at its end: its depth indexes openShifts.
      if (event == Event::Begin) {
        size_t depth = stack.size() - 1;
        if (openShifts.size() <= depth)
          openShifts.resize(depth + 1);
        openShifts[depth] = shown - modelNs;
        return true;
      }
      if (event != Event::End)
        return true;
      int64_t by = int64_t(shown - modelNs) - int64_t(openShifts[stack.size()]);
      if (by > -LargeShift && by < LargeShift) {
        endShifts[frame] = int16_t(by);
      } else {
        endShifts[frame] = int16_t(-LargeShift);
        largeShifts[frame] = by;
      }
      return true;
    });
  }

  /// `write(frame, displayedBegin, displayedEnd)` for each frame of the
  /// segment place() was given, in pre-order. The begins are the same walk
  /// again (from the clock place() started at), so only the ends are kept:
  /// by how much more the end is shifted past the model's than the begin
  /// (the shifts themselves drift far where many frames share a time; this
  /// grows only inside frames whose descendants moved the clock), 2 bytes
  /// a frame of the largest segment (the rare difference of 32767 ns or
  /// more either way in a map), reused from thread to thread.
  template <typename Write>
  void forEachFrame(const Segment &segment, Write write) {
    last = before;
    shift = beforeShift;
    const FrameList &frames = segment.frames;
    walk(segment, [&](uint64_t, uint64_t shown, Event event, uint32_t frame) {
      if (event == Event::Begin) {
        int16_t by = endShifts[frame];
        int64_t more = by != -LargeShift ? by : largeShifts.find(frame)->second;
        uint64_t beginShift = shown - frames.beginOf(frame);
        write(frame, shown, frames.endOf(frame) + beginShift + uint64_t(more));
      }
      return true;
    });
  }

  /// The next segment of the thread `previous` placed its last segment of
  /// (a clock per segment, placed ahead of the writing): the clock goes on
  /// from where that one ended.
  void resume(const DisplayClock &previous) {
    last = previous.last;
    shift = previous.shift;
  }

  /// A new thread: the clock starts again (the buffers are kept).
  void reset() {
    stack.clear();
    justBegun = NoFrame;
    segmentBeginNs = last = shift = before = beforeShift = 0;
  }

  enum class Event { SegmentBegin, Begin, End };

  /// The events of `segment` in the order their displayed times are given
  /// (which is the model's time order), after those of the thread's earlier
  /// segments: `visit(modelNs, displayedNs, event, frame)` for its begin,
  /// then each frame's begin and end in pre-order. Stops early when `visit`
  /// returns false, and returns false then.
  template <typename Visit> bool walk(const Segment &segment, Visit visit) {
    const FrameList &frames = segment.frames;
    segmentBeginNs = show(segment.begin, 0);
    if (!visit(segment.begin, segmentBeginNs, Event::SegmentBegin, 0))
      return false;
    stack.clear();
    justBegun = NoFrame;
    auto closeTop = [&]() __attribute__((always_inline)) {
      uint32_t top = stack.back();
      stack.pop_back();
      // A frame without children ends at least 1 ns after it began.
      uint64_t end = frames.endOf(top);
      uint64_t shown = show(end, justBegun == top ? 1 : 0);
      justBegun = NoFrame;
      return visit(end, shown, Event::End, top);
    };
    for (uint32_t i = 0; i < frames.size(); ++i) {
      uint32_t parent = frames.parentOf(i);
      while (!stack.empty() && stack.back() != parent)
        if (!closeTop())
          return false;
      uint64_t begin = frames.beginOf(i);
      uint64_t shown = show(begin, 0);
      stack.push_back(i);
      justBegun = i;
      if (!visit(begin, shown, Event::Begin, i))
        return false;
    }
    while (!stack.empty())
      if (!closeTop())
        return false;
    return true;
  }

  /// The displayed time of the segment's begin (its gap instant).
  uint64_t segmentBegin() const { return segmentBeginNs; }
  /// The latest displayed time so far.
  uint64_t latest() const { return last; }
  /// The largest amount by which a displayed time exceeded the model's.
  uint64_t maxShift() const { return shift; }

private:
  static constexpr uint32_t NoFrame = UINT32_MAX;

  /// The displayed time of an event at model time `ns`, at least `gap`
  /// after the previous event.
  uint64_t show(uint64_t ns, uint64_t gap) {
    uint64_t at = std::max(ns, last + gap);
    shift = std::max(shift, at - ns);
    last = at;
    return at;
  }

  /// Differences of this size and more, either way, are kept in
  /// largeShifts (-LargeShift marks them).
  static constexpr int16_t LargeShift = INT16_MAX;
  /// Of place()'s segment's frames: the displayed end's shift past the
  /// model's less the displayed begin's.
  PodVector<int16_t> endShifts;
  llvm::DenseMap<uint32_t, int64_t> largeShifts;
  /// While place() walks: the displayed begin's shift past the model's of
  /// each frame open, by depth.
  std::vector<uint64_t> openShifts;
  std::vector<uint32_t> stack;
  uint32_t justBegun = NoFrame;
  uint64_t segmentBeginNs = 0;
  uint64_t last = 0;
  uint64_t shift = 0;
  uint64_t before = 0, beforeShift = 0; ///< The clock where place() began.
};

} // namespace magic_trace::writers

#endif
