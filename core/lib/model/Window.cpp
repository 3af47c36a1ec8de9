//===- Window.cpp - The stretch of a model before its end -----------------===//
#include "FrameRuns.h"
#include "magic_trace/ModelWindow.h"
#include "magic_trace/Parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace magic_trace {
namespace {

/// A frame stays in a window from `from` when it ends after `from`, or
/// begins there or later (a zero-length frame at the window's start).
bool keepsFrame(uint64_t begin, uint64_t end, uint64_t from) {
  return end > from || begin >= from;
}

bool keepsSegment(const Segment &segment, uint64_t from) {
  return segment.end > from || segment.begin >= from;
}

/// Slices of a frame: its own, and an instant when it is a loss.
uint64_t frameSlices(const FrameSite &site) {
  return site.kind == FrameKind::DecodeError ? 2 : 1;
}

/// Whether some site of `thread` is a loss (two slices a frame).
bool hasLosses(const ThreadModel &thread) {
  for (size_t id = 0; id < thread.sites.size(); ++id)
    if (thread.sites[SiteId(id)].kind == FrameKind::DecodeError)
      return true;
  return false;
}

/// The runs of `threads` (FrameRuns.h), each at most `most` frames, and
/// whether each thread has losses.
struct SliceRuns {
  std::vector<model::FrameRun> runs;
  std::vector<char> losses; ///< By thread.
};
SliceRuns sliceRuns(llvm::ArrayRef<const ThreadModel *> threads, size_t most) {
  SliceRuns made;
  made.runs = model::frameRuns(
      threads.size(),
      [&](size_t t) -> const ThreadModel & { return *threads[t]; }, most);
  for (const ThreadModel *thread : threads)
    made.losses.push_back(hasLosses(*thread));
  return made;
}

/// Calls `visit(distance, slices)` for everything of `run` that
/// windowSlices counts: a frame at the distance of its end from `end` (its
/// thread's), a segment's gap instant at that of its begin. A window of
/// length W keeps what is at a distance of at most W (a superset of what a
/// cut keeps).
template <typename Visit>
void forEachSlice(llvm::ArrayRef<const ThreadModel *> threads,
                  const SliceRuns &runs, size_t r, uint64_t end, Visit visit) {
  auto distance = [end](uint64_t at) { return at < end ? end - at : 0; };
  const model::FrameRun &run = runs.runs[r];
  const ThreadModel &thread = *threads[run.thread];
  if (thread.segments.empty())
    return;
  const Segment &segment = thread.segments[run.segment];
  if (run.from == 0)
    visit(distance(segment.begin), 1);
  const FrameList &frames = segment.frames;
  if (!runs.losses[run.thread]) {
    // Every frame one slice: its site is not read.
    for (size_t i = run.from; i < run.to; ++i)
      visit(distance(frames.endOf(i)), 1);
    return;
  }
  for (size_t i = run.from; i < run.to; ++i)
    visit(distance(frames.endOf(i)),
          frameSlices(thread.sites[frames.siteOf(i)]));
}

} // namespace

uint64_t windowSlices(const ThreadModel &thread, uint64_t from) {
  // Without losses every frame is one slice: a segment wholly in the
  // window (every frame begins in it) is counted without a pass.
  bool losses = hasLosses(thread);
  uint64_t slices = 0;
  for (size_t s = 0; s < thread.segments.size(); ++s) {
    const Segment &segment = thread.segments[s];
    if (!keepsSegment(segment, from))
      continue;
    bool whole = segment.begin >= from;
    if (whole && (s > 0 || !segment.gapReason.empty()))
      ++slices;
    const FrameList &frames = segment.frames;
    if (whole && !losses) {
      slices += frames.size();
      continue;
    }
    for (size_t i = 0; i < frames.size(); ++i)
      if (whole || keepsFrame(frames.beginOf(i), frames.endOf(i), from))
        slices += frameSlices(thread.sites[frames.siteOf(i)]);
  }
  return slices;
}

uint64_t longestWindow(llvm::ArrayRef<const ThreadModel *> threads,
                       llvm::ArrayRef<uint64_t> ends, uint64_t maxLengthNs,
                       uint64_t maxSlices, unsigned workers) {
  uint64_t limit = maxLengthNs ? maxLengthNs : UINT64_MAX;
  uint64_t reserved = kThreadInstants * threads.size();
  // A budget of the instants alone still fits a window that holds nothing
  // else (below, with a budget of 0).
  if (maxSlices < reserved)
    return 0;
  uint64_t budget = maxSlices - reserved;
  // No distance is past a thread's first segment's begin (frames and later
  // segments begin after it): the histogram's range, without a pass.
  uint64_t farthest = 0;
  for (size_t t = 0; t < threads.size(); ++t)
    if (!threads[t]->segments.empty() &&
        threads[t]->segments.front().begin < ends[t])
      farthest =
          std::max(farthest, ends[t] - threads[t]->segments.front().begin);
  // Pass 1: a histogram of the distances, a histogram per worker, each
  // taking the next run of frames; the bucket where the running count
  // passes the budget holds the answer. Counts add up in any order: the
  // result is the same.
  constexpr uint64_t Buckets = 1 << 16;
  uint64_t width = farthest / Buckets + 1;
  std::vector<uint64_t> counts(Buckets + 1, 0);
  std::mutex lock;
  SliceRuns runs = sliceRuns(threads, model::RunFrames);
  size_t count = runs.runs.size();
  uint64_t frames = 0;
  for (const model::FrameRun &run : runs.runs)
    frames += run.to - run.from;
  // A small model is counted on one thread, straight into the histogram.
  unsigned counting = frames < model::RunFrames
                          ? 1
                          : unsigned(std::min<size_t>(workers, count));
  std::atomic<size_t> nextRun{0};
  forEachParallel(counting, counting, [&](size_t) {
    std::vector<uint64_t> own;
    if (counting > 1)
      own.assign(Buckets + 1, 0);
    std::vector<uint64_t> &into = counting > 1 ? own : counts;
    for (size_t r; (r = nextRun++) < count;)
      forEachSlice(
          threads, runs, r, ends[runs.runs[r].thread],
          [&](uint64_t distance, uint64_t n) { into[distance / width] += n; });
    if (counting == 1)
      return;
    std::lock_guard<std::mutex> hold(lock);
    for (size_t b = 0; b <= Buckets; ++b)
      counts[b] += own[b];
  });
  uint64_t total = 0;
  for (uint64_t count : counts)
    total += count;
  if (total <= budget)
    return limit;
  uint64_t before = 0;
  size_t bucket = 0;
  while (before + counts[bucket] <= budget)
    before += counts[bucket++];
  // Pass 2: the distances in that bucket, in order.
  std::vector<std::pair<uint64_t, uint64_t>> inBucket;
  forEachParallel(count, counting, [&](size_t r) {
    std::vector<std::pair<uint64_t, uint64_t>> own;
    forEachSlice(threads, runs, r, ends[runs.runs[r].thread],
                 [&](uint64_t distance, uint64_t n) {
                   if (distance / width == bucket)
                     own.emplace_back(distance, n);
                 });
    std::lock_guard<std::mutex> hold(lock);
    inBucket.insert(inBucket.end(), own.begin(), own.end());
  });
  std::sort(inBucket.begin(), inBucket.end());
  for (size_t i = 0; i < inBucket.size();) {
    uint64_t distance = inBucket[i].first;
    uint64_t atDistance = 0;
    for (; i < inBucket.size() && inBucket[i].first == distance; ++i)
      atDistance += inBucket[i].second;
    // Everything at this distance does not fit: the window stops short of
    // it.
    if (before + atDistance > budget)
      return std::min(limit, distance ? distance - 1 : 0);
    before += atDistance;
  }
  return std::min(limit, farthest); // Not reached: the bucket overflows.
}

uint64_t slicesWithin(llvm::ArrayRef<const ThreadModel *> threads,
                      llvm::ArrayRef<uint64_t> ends, uint64_t lengthNs) {
  uint64_t slices = kThreadInstants * threads.size();
  SliceRuns runs = sliceRuns(threads, SIZE_MAX);
  for (size_t r = 0; r < runs.runs.size(); ++r)
    forEachSlice(threads, runs, r, ends[runs.runs[r].thread],
                 [&](uint64_t distance, uint64_t n) {
                   if (distance <= lengthNs)
                     slices += n;
                 });
  return slices;
}

void cutThreadModel(ThreadModel &thread, uint64_t from) {
  std::vector<Segment> &segments = thread.segments;
  if (segments.empty() || segments.front().begin >= from)
    return;
  thread.windowStart = from;
  segments.erase(std::remove_if(segments.begin(), segments.end(),
                                [from](const Segment &segment) {
                                  return !keepsSegment(segment, from);
                                }),
                 segments.end());
  if (segments.empty() || segments.front().begin >= from)
    return;
  // Only the first segment can start before `from` (segments are ordered
  // and do not overlap).
  Segment &segment = segments.front();
  FrameList &frames = segment.frames;
  // Pre-order gives begins that never decrease: every frame from `first`
  // on begins at or after `from` and is kept, and only the prefix before
  // it (the decode's lead-in before the window, a small share) is sorted
  // out; the rest moves down by what the prefix dropped.
  size_t first = std::partition_point(frames.begin(), frames.end(),
                                      [from](const Frame &frame) {
                                        return frame.begin < from;
                                      }) -
                 frames.begin();
  std::vector<uint32_t> newIndex(first, 0);
  std::vector<bool> kept(first);
  for (size_t i = 0; i < first; ++i)
    kept[i] = keepsFrame(frames.beginOf(i), frames.endOf(i), from);
  // A kept frame keeps its ancestors (a zero-length frame at `from` at the
  // very end of a parent that ends there). Every frame from `first` on is
  // kept; a parent of one in the prefix contains it, so ends at `from` or
  // later, and is kept by keepsFrame unless it ends exactly there, which
  // only a frame beginning at `from` can ask of it: those come first in
  // the suffix. Parents come first in pre-order, so one backward sweep of
  // the prefix then reaches every ancestor.
  for (size_t i = first; i < frames.size() && frames[i].begin == from; ++i)
    if (frames[i].parent != Frame::NoParent && frames[i].parent < first)
      kept[frames[i].parent] = true;
  for (size_t i = first; i-- > 0;)
    if (kept[i] && frames[i].parent != Frame::NoParent)
      kept[frames[i].parent] = true;
  // The kept prefix, clipped to `from`, goes in front of the suffix, which
  // moves down as a block (one memmove); only its parents in the prefix are
  // renumbered.
  std::vector<Frame> prefix;
  for (size_t i = 0; i < first; ++i) {
    if (!kept[i])
      continue;
    Frame frame = frames[i];
    frame.begin = std::max(frame.begin, from);
    frame.end = std::max(frame.end, from);
    if (frame.parent != Frame::NoParent)
      frame.parent = newIndex[frame.parent];
    newIndex[i] = uint32_t(prefix.size());
    prefix.push_back(frame);
  }
  uint32_t next = uint32_t(prefix.size());
  frames.shift(first, next, [&](uint32_t parent) {
    return parent < newIndex.size() ? newIndex[parent] : parent;
  });
  for (uint32_t i = 0; i < next; ++i)
    frames.set(i, prefix[i]);
  frames.shrinkToFit();
  segment.begin = from;
  segment.end = std::max(segment.end, from);
  // The gap before the segment is before the window.
  segment.gapReason.clear();
  segment.stitchedToPrevious = false;
  segment.continuedFrames = 0;
}

} // namespace magic_trace
