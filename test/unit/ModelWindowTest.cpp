//===- ModelWindowTest.cpp - The window's search against its definition ---===//
//
// longestWindow finds, in two passes and on several workers, the longest
// window whose slices fit a budget. Checked against the definition written
// out plainly (every candidate length tried, each counting every frame and
// segment at its distance from its thread's end), on random models: a
// deep-nested random tree per segment, several segments and threads, and
// losses (two slices each). cutThreadModel is checked the same way against
// the cut's definition (below).
//
//===----------------------------------------------------------------------===//

#include "magic_trace/ModelWindow.h"
#include "magic_trace/TraceModel.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <random>
#include <set>
#include <vector>

using namespace magic_trace;

namespace {

/// The two sites of the random threads below: a plain frame's and a loss's.
struct TwoSites {
  SiteId plain, loss;
};
TwoSites internTwoSites(ThreadModel &thread) {
  FrameSite plain, loss;
  plain.name = 1;
  loss.name = 2;
  loss.kind = FrameKind::DecodeError;
  return {thread.sites.intern(plain), thread.sites.intern(loss)};
}

/// Makes every frame of `thread` take one plain site: a thread without
/// losses, each frame one slice.
void dropLosses(ThreadModel &thread) {
  FrameSite site;
  site.name = 1;
  thread.sites = SiteTable();
  SiteId only = thread.sites.intern(site);
  for (Segment &segment : thread.segments)
    for (size_t i = 0; i < segment.frames.size(); ++i) {
      Frame frame = segment.frames[i];
      frame.site = only;
      segment.frames.set(i, frame);
    }
}

/// A random thread: segments one after another, each a random pre-order
/// tree whose children lie inside their parents, some of them zero-length
/// at their parent's end.
ThreadModel randomThread(std::mt19937_64 &random, uint64_t tid) {
  ThreadModel thread;
  thread.tid = tid;
  auto [plainId, lossId] = internTwoSites(thread);
  uint64_t at = 1000 + random() % 5000;
  unsigned segments = 1 + random() % 3;
  for (unsigned s = 0; s < segments; ++s) {
    Segment segment;
    segment.begin = at;
    // A stack of open frames, each with the time its parent ends.
    std::vector<std::pair<uint32_t, uint64_t>> open;
    uint64_t end = at + 2000 + random() % 20000;
    unsigned frames = 50 + random() % 400;
    for (unsigned f = 0; f < frames && at < end; ++f) {
      while (!open.empty() && at >= open.back().second) {
        // Now and then a zero-length call at the very end of its parent
        // (a frame the window's cut must keep with its parent).
        if (random() % 4 == 0) {
          Frame last;
          last.begin = last.end = open.back().second;
          last.site = plainId;
          last.parent = open.back().first;
          segment.frames.push_back(last);
        }
        open.pop_back();
      }
      uint64_t limit = open.empty() ? end : open.back().second;
      Frame frame;
      frame.begin = at;
      frame.end = std::min(limit, at + random() % 300);
      frame.site = random() % 10 == 0 ? lossId : plainId;
      frame.parent = open.empty() ? Frame::NoParent : open.back().first;
      segment.frames.push_back(frame);
      if (random() % 2)
        open.push_back({uint32_t(segment.frames.size() - 1), frame.end});
      else
        at = frame.end;
      at += random() % 4;
    }
    segment.end = std::max(at, segment.begin);
    thread.segments.push_back(std::move(segment));
    at = thread.segments.back().end + 1 + random() % 3000;
  }
  return thread;
}

/// The definition: the longest W (at most `limit`) such that every thread's
/// frames ending within W of its end (and segments beginning within it)
/// come to at most the budget, beside kThreadInstants a thread.
uint64_t plainLongest(const std::vector<ThreadModel> &threads,
                      const std::vector<uint64_t> &ends, uint64_t limit,
                      uint64_t maxSlices) {
  auto distance = [](uint64_t end, uint64_t at) {
    return at < end ? end - at : 0;
  };
  auto slicesWithin = [&](uint64_t length) {
    uint64_t slices = kThreadInstants * threads.size();
    for (size_t t = 0; t < threads.size(); ++t)
      for (const Segment &segment : threads[t].segments) {
        slices += distance(ends[t], segment.begin) <= length;
        for (const Frame &frame : segment.frames)
          if (distance(ends[t], frame.end) <= length)
            slices +=
                threads[t].sites[frame.site].kind == FrameKind::DecodeError ? 2
                                                                            : 1;
      }
    return slices;
  };
  if (slicesWithin(UINT64_MAX) <= maxSlices)
    return limit;
  // The count only grows at a distance some slice has: the answer is one
  // short of the first such distance that does not fit.
  std::set<uint64_t> distances;
  for (size_t t = 0; t < threads.size(); ++t)
    for (const Segment &segment : threads[t].segments) {
      distances.insert(distance(ends[t], segment.begin));
      for (const Frame &frame : segment.frames)
        distances.insert(distance(ends[t], frame.end));
    }
  for (uint64_t length : distances)
    if (slicesWithin(length) > maxSlices)
      return std::min(limit, length ? length - 1 : 0);
  return limit;
}

/// Up to `most` random threads (tids from `firstTid`), each window ending
/// at its own end or, when `mayShare` and a coin says so, at the latest.
struct RandomThreads {
  std::vector<ThreadModel> threads;
  std::vector<uint64_t> ends;
  std::vector<const ThreadModel *> pointers; ///< Into `threads`.
};

RandomThreads randomThreads(std::mt19937_64 &random, unsigned most,
                            uint64_t firstTid, bool mayShare) {
  RandomThreads made;
  unsigned count = 1 + random() % most;
  for (unsigned t = 0; t < count; ++t)
    made.threads.push_back(randomThread(random, firstTid + t));
  uint64_t latest = 0;
  for (const ThreadModel &thread : made.threads)
    latest = std::max(latest, thread.segments.back().end);
  bool common = mayShare && random() % 2;
  for (const ThreadModel &thread : made.threads) {
    made.ends.push_back(common ? latest : thread.segments.back().end);
    made.pointers.push_back(&thread);
  }
  return made;
}

TEST(ModelWindow, LongestWindowIsTheDefinitionsOnAnyWorkers) {
  std::mt19937_64 random(49);
  for (int round = 0; round < 40; ++round) {
    RandomThreads made = randomThreads(random, 6, 100, true);
    // Without losses in every other round (each frame one slice).
    if (round % 2)
      for (ThreadModel &thread : made.threads)
        dropLosses(thread);
    const std::vector<ThreadModel> &threads = made.threads;
    const std::vector<uint64_t> &ends = made.ends;
    const std::vector<const ThreadModel *> &pointers = made.pointers;
    uint64_t all = 0;
    for (const ThreadModel &thread : threads)
      all += windowSlices(thread, 0);
    uint64_t maxSlices = 1 + random() % (all + 20);
    uint64_t maxLength = random() % 3 == 0 ? 1 + random() % 30000 : 0;
    uint64_t expected = plainLongest(
        threads, ends, maxLength ? maxLength : UINT64_MAX, maxSlices);
    for (unsigned workers : {1u, 2u, 7u})
      EXPECT_EQ(longestWindow(pointers, ends, maxLength, maxSlices, workers),
                expected)
          << "round " << round << ", " << workers << " workers, budget "
          << maxSlices << " of " << all;
  }
}

/// A thread whose first segment holds `frames` frames of a random tree
/// (more than longestWindow's runs of a million), then a small segment.
ThreadModel bigThread(std::mt19937_64 &random, uint64_t tid, size_t frames) {
  ThreadModel thread;
  thread.tid = tid;
  auto [plainId, lossId] = internTwoSites(thread);
  Segment segment;
  segment.begin = 1000;
  uint64_t at = segment.begin;
  std::vector<std::pair<uint32_t, uint64_t>> open;
  for (size_t f = 0; f < frames; ++f) {
    while (!open.empty() && at >= open.back().second)
      open.pop_back();
    Frame frame;
    frame.begin = at;
    frame.end = at + random() % 300;
    if (!open.empty())
      frame.end = std::min(frame.end, open.back().second);
    frame.site = random() % 10 == 0 ? lossId : plainId;
    frame.parent = open.empty() ? Frame::NoParent : open.back().first;
    segment.frames.push_back(frame);
    if (random() % 2 && open.size() < 200)
      open.push_back({uint32_t(segment.frames.size() - 1), frame.end});
    else
      at = frame.end;
    at += random() % 4;
  }
  for (size_t i = 0; i < segment.frames.size(); ++i)
    at = std::max(at, segment.frames.endOf(i));
  segment.end = at;
  thread.segments.push_back(std::move(segment));
  Segment last;
  last.begin = last.end = at + 10;
  thread.segments.push_back(std::move(last));
  return thread;
}

TEST(ModelWindow, LongestWindowSplitsABigThreadExactly) {
  // A thread of more than a million frames is counted in runs, on several
  // workers. The answer must be the definition's, found here another way:
  // every slice's distance sorted, the budget counted along them.
  std::mt19937_64 random(52);
  for (bool losses : {true, false}) {
    SCOPED_TRACE(losses ? "with losses" : "without losses");
    std::vector<ThreadModel> threads;
    threads.push_back(bigThread(random, 1, 1'300'000));
    threads.push_back(randomThread(random, 2));
    if (!losses)
      for (ThreadModel &thread : threads)
        dropLosses(thread);
    std::vector<uint64_t> ends;
    std::vector<const ThreadModel *> pointers;
    for (const ThreadModel &thread : threads) {
      ends.push_back(thread.segments.back().end);
      pointers.push_back(&thread);
    }
    std::vector<std::pair<uint64_t, uint64_t>> slices; // distance, slices.
    for (size_t t = 0; t < threads.size(); ++t)
      for (const Segment &segment : threads[t].segments) {
        auto distance = [&](uint64_t at) {
          return at < ends[t] ? ends[t] - at : 0;
        };
        slices.push_back({distance(segment.begin), 1});
        for (const Frame &frame : segment.frames)
          slices.push_back(
              {distance(frame.end),
               threads[t].sites[frame.site].kind == FrameKind::DecodeError
                   ? 2
                   : 1});
      }
    std::sort(slices.begin(), slices.end());
    uint64_t instants = kThreadInstants * threads.size(), all = instants;
    for (const auto &slice : slices)
      all += slice.second;
    ASSERT_GT(slices.size(), size_t(1) << 20);
    for (int round = 0; round < 5; ++round) {
      uint64_t maxSlices = instants + 1 + random() % (all - instants);
      uint64_t expected = UINT64_MAX, counted = instants;
      for (size_t i = 0; i < slices.size();) {
        uint64_t distance = slices[i].first;
        for (; i < slices.size() && slices[i].first == distance; ++i)
          counted += slices[i].second;
        if (counted > maxSlices) {
          expected = distance ? distance - 1 : 0;
          break;
        }
      }
      for (unsigned workers : {1u, 2u, 7u})
        EXPECT_EQ(longestWindow(pointers, ends, 0, maxSlices, workers),
                  expected)
            << "round " << round << ", " << workers << " workers, budget "
            << maxSlices << " of " << all;
    }
  }
}

TEST(ModelWindow, WindowSlicesCountsWhatTheCutKeeps) {
  // windowSlices against its definition, written out plainly: a segment
  // that ends after `from` or begins at or after it keeps its frames that
  // do, a loss two slices, and its gap instant when it begins in the window
  // (after the first segment, or with a reason). With losses and without
  // (every frame then one slice, counted without a pass where it can be).
  std::mt19937_64 random(53);
  auto plain = [](const ThreadModel &thread, uint64_t from) {
    uint64_t slices = 0;
    for (size_t s = 0; s < thread.segments.size(); ++s) {
      const Segment &segment = thread.segments[s];
      if (!(segment.end > from || segment.begin >= from))
        continue;
      slices += segment.begin >= from && (s > 0 || !segment.gapReason.empty());
      for (const Frame &frame : segment.frames)
        if (frame.end > from || frame.begin >= from)
          slices +=
              thread.sites[frame.site].kind == FrameKind::DecodeError ? 2 : 1;
    }
    return slices;
  };
  for (int round = 0; round < 40; ++round) {
    ThreadModel thread = randomThread(random, 1);
    if (round % 2)
      dropLosses(thread);
    if (random() % 2)
      thread.segments.front().gapReason = "overflow";
    uint64_t first = thread.segments.front().begin,
             last = thread.segments.back().end;
    for (uint64_t from : {uint64_t(0), first, first + 1, last, last + 1,
                          first + random() % (last - first + 1)})
      EXPECT_EQ(windowSlices(thread, from), plain(thread, from))
          << "round " << round << ", from " << from;
  }
}

TEST(ModelWindow, SlicesWithinIsTheBudgetALengthNeeds) {
  std::mt19937_64 random(51);
  for (int round = 0; round < 40; ++round) {
    RandomThreads made = randomThreads(random, 4, 200, false);
    const std::vector<ThreadModel> &threads = made.threads;
    const std::vector<uint64_t> &ends = made.ends;
    const std::vector<const ThreadModel *> &pointers = made.pointers;
    for (uint64_t length : {uint64_t(1), 1 + random() % 30000}) {
      uint64_t needed = slicesWithin(pointers, ends, length);
      SCOPED_TRACE("round " + std::to_string(round) + ", length " +
                   std::to_string(length));
      // That budget gives at least the length, by the definition too; one
      // less gives less, unless nothing more lies at the length itself.
      EXPECT_GE(longestWindow(pointers, ends, 0, needed), length);
      EXPECT_GE(plainLongest(threads, ends, UINT64_MAX, needed), length);
      if (needed > slicesWithin(pointers, ends, length - 1)) {
        EXPECT_LT(longestWindow(pointers, ends, 0, needed - 1), length);
      }
    }
  }
}

/// The cut's definition, plainly: a frame stays when it ends after `from`
/// or begins at or after it, or when a frame that stays is its descendant;
/// in the same order, its times clamped to `from`, its parent the same
/// frame. Segments wholly before `from` go.
ThreadModel plainCut(const ThreadModel &thread, uint64_t from) {
  ThreadModel cut = thread;
  cut.segments.clear();
  for (const Segment &segment : thread.segments) {
    if (!(segment.end > from || segment.begin >= from))
      continue;
    Segment kept = segment;
    if (segment.begin < from) {
      const FrameList &frames = segment.frames;
      std::vector<bool> stays(frames.size());
      for (size_t i = 0; i < frames.size(); ++i)
        if (frames[i].end > from || frames[i].begin >= from)
          for (size_t j = i; j != Frame::NoParent && !stays[j];
               j = frames[j].parent)
            stays[j] = true;
      std::vector<uint32_t> index(frames.size(), Frame::NoParent);
      kept.frames.clear();
      for (size_t i = 0; i < frames.size(); ++i) {
        if (!stays[i])
          continue;
        Frame frame = frames[i];
        frame.begin = std::max(frame.begin, from);
        frame.end = std::max(frame.end, from);
        if (frame.parent != Frame::NoParent)
          frame.parent = index[frame.parent];
        index[i] = uint32_t(kept.frames.size());
        kept.frames.push_back(frame);
      }
      kept.begin = from;
      kept.end = std::max(segment.end, from);
      kept.gapReason.clear();
      kept.stitchedToPrevious = false;
      kept.continuedFrames = 0;
    }
    cut.segments.push_back(std::move(kept));
  }
  return cut;
}

TEST(ModelWindow, CutIsTheDefinitions) {
  std::mt19937_64 random(54);
  for (int round = 0; round < 200; ++round) {
    ThreadModel thread = randomThread(random, 7);
    // Cut at a time some frame begins or ends (a zero-length frame at the
    // very end of its parent, ending there, is the case the cut must keep
    // with its parent), or anywhere.
    const Segment &segment = thread.segments[random() % thread.segments.size()];
    uint64_t from =
        segment.begin + random() % (segment.end - segment.begin + 1);
    if (!segment.frames.empty() && random() % 2) {
      const Frame &frame = segment.frames[random() % segment.frames.size()];
      from = random() % 2 ? frame.end : frame.begin;
    }
    ThreadModel expected = plainCut(thread, from);
    cutThreadModel(thread, from);
    ASSERT_EQ(thread.segments.size(), expected.segments.size())
        << "round " << round;
    for (size_t s = 0; s < expected.segments.size(); ++s) {
      const Segment &got = thread.segments[s], &want = expected.segments[s];
      EXPECT_EQ(got.begin, want.begin) << "round " << round;
      EXPECT_EQ(got.end, want.end) << "round " << round;
      ASSERT_EQ(got.frames.size(), want.frames.size())
          << "round " << round << ", segment " << s << ", from " << from;
      for (size_t i = 0; i < want.frames.size(); ++i) {
        EXPECT_EQ(got.frames[i].begin, want.frames[i].begin);
        EXPECT_EQ(got.frames[i].end, want.frames[i].end);
        EXPECT_EQ(got.frames[i].parent, want.frames[i].parent)
            << "round " << round << ", frame " << i;
      }
    }
  }
}

} // namespace
