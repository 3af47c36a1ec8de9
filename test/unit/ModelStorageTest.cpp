//===- ModelStorageTest.cpp - PodVector and SiteTable ---------------------===//
//
// The model's storage against plain reference containers: PodVector must
// behave as std::vector on the operations the model uses (including shift,
// which reroot uses to prepend frames in place), and SiteTable must give
// one id per distinct site, stable while the table grows.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/PodVector.h"
#include "magic_trace/TraceModel.h"

#include "gtest/gtest.h"

#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <sys/mman.h>

using namespace magic_trace;

namespace {

template <typename T>
void expectSame(const PodVector<T> &ours, const std::vector<T> &reference) {
  ASSERT_EQ(ours.size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i)
    EXPECT_EQ(ours[i], reference[i]) << "element " << i;
}

TEST(PodVector, RandomOperationsMatchStdVector) {
  std::mt19937 random(7);
  PodVector<uint64_t> ours;
  std::vector<uint64_t> reference;
  for (int step = 0; step < 20000; ++step) {
    switch (random() % 8) {
    case 0:
    case 1:
    case 2: {
      uint64_t value = random();
      ours.push_back(value);
      reference.push_back(value);
      break;
    }
    case 3:
      if (!reference.empty()) {
        // An element of the array itself, when the push reallocates.
        uint64_t &first = ours.front();
        ours.push_back(first);
        reference.push_back(reference.front());
      }
      break;
    case 4:
      if (!reference.empty()) {
        ours.pop_back();
        reference.pop_back();
      }
      break;
    case 5: {
      // shift(from, to): drop `from` leading elements, open `to` new ones.
      size_t from = reference.empty() ? 0 : random() % (reference.size() + 1);
      size_t to = random() % 5;
      ours.shift(from, to);
      std::vector<uint64_t> shifted(to, 0);
      shifted.insert(shifted.end(), reference.begin() + from, reference.end());
      for (size_t i = 0; i < to; ++i)
        ours[i] = shifted[i] = random();
      reference = shifted;
      break;
    }
    case 6:
      ours.shrinkToFit(random() % 3);
      EXPECT_LE(ours.capacity(), ours.size() + 2);
      break;
    case 7: {
      size_t size = random() % 64;
      ours.resize(size);
      reference.resize(size);
      break;
    }
    }
    ASSERT_NO_FATAL_FAILURE(expectSame(ours, reference));
  }
  PodVector<uint64_t> copy = ours;
  expectSame(copy, reference);
  PodVector<uint64_t> moved = std::move(copy);
  expectSame(moved, reference);
  EXPECT_TRUE(copy.empty());
  std::vector<uint64_t> backwards(ours.rbegin(), ours.rend());
  EXPECT_TRUE(std::equal(backwards.begin(), backwards.end(), reference.rbegin(),
                         reference.rend()));
}

TEST(PodVector, ShrinkToFitKeepsOnlyWhatIsAsked) {
  PodVector<Frame> frames;
  for (uint32_t i = 0; i < 1000; ++i) {
    Frame frame;
    frame.begin = i;
    frames.push_back(frame);
  }
  EXPECT_GT(frames.capacity(), 1000u);
  frames.shrinkToFit(1);
  EXPECT_EQ(frames.capacity(), 1001u);
  for (uint32_t i = 0; i < 1000; ++i)
    EXPECT_EQ(frames[i].begin, i);
  frames.clear();
  frames.shrinkToFit();
  EXPECT_EQ(frames.capacity(), 0u);
}

TEST(PodVector, LargeArraysKeepEveryElement) {
  // Past 4 MiB, appending populates pages ahead of the writes; a shift and a
  // shrink then move the block.
  PodVector<uint64_t> values;
  const uint64_t count = 3u << 20; // 24 MiB.
  for (uint64_t i = 0; i < count; ++i)
    values.push_back(i * 7);
  values.shift(1, 3);
  values[0] = values[1] = values[2] = 0;
  values.shrinkToFit();
  ASSERT_EQ(values.size(), count + 2);
  for (uint64_t i = 1; i < count; ++i)
    ASSERT_EQ(values[i + 2], i * 7) << "element " << i;
}

TEST(PodVector, MappedBlocksGrowShrinkAndMoveWhole) {
  // From 8 MiB a block is its own 2 MiB-aligned mapping. Two arrays grown
  // in turn sit next to each other, so most growths cannot extend in place
  // and move their pages to a new mapping; then shrinks cross back below
  // 8 MiB, and copies and moves keep every element.
  PodVector<uint64_t> odd, even;
  const uint64_t count = 5u << 20; // 40 MiB each.
  for (uint64_t i = 0; i < count; ++i) {
    odd.push_back(2 * i + 1);
    even.push_back(2 * i);
    if (odd.capacity() * 8 >= (8u << 20)) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(odd.data()) % (2u << 20), 0u);
    }
  }
  for (uint64_t i = 0; i < count; ++i) {
    ASSERT_EQ(odd[i], 2 * i + 1) << "element " << i;
    ASSERT_EQ(even[i], 2 * i) << "element " << i;
  }
  PodVector<uint64_t> copy = odd;
  odd.resize(3u << 20); // Still mapped: the tail is unmapped.
  odd.shrinkToFit();
  EXPECT_EQ(odd.capacity(), 3u << 20);
  odd.resize(1u << 10);
  odd.shrinkToFit(); // Below 8 MiB: copied into a malloc'd block.
  EXPECT_EQ(odd.capacity(), 1u << 10);
  for (uint64_t i = 0; i < odd.size(); ++i)
    ASSERT_EQ(odd[i], 2 * i + 1);
  even = std::move(copy);
  EXPECT_TRUE(copy.empty());
  ASSERT_EQ(even.size(), count);
  for (uint64_t i = 0; i < count; ++i)
    ASSERT_EQ(even[i], 2 * i + 1) << "element " << i;
  even.clear();
  even.shrinkToFit();
  EXPECT_EQ(even.capacity(), 0u);
}

TEST(PodVector, FreedPagesAreTakenBackFromThePool) {
  // A large array's pages go to the pool when it is freed, and the next
  // large array takes them instead of new (zeroed) ones: its elements, left
  // as they were, read what the freed one held. Only pages the array had
  // are pooled. The limit bounds the pool, and 0 empties it.
  setPagePoolLimit(0);
  setPagePoolLimit(size_t(64) << 20);
  const size_t count = (size_t(16) << 20) / sizeof(uint64_t); // 16 MiB.
  {
    PodVector<uint64_t> freed;
    uint64_t *values = freed.appendUninitialized(count);
    for (size_t i = 0; i < count; ++i)
      values[i] = 0x5eed000000000000ull | i;
  }
  EXPECT_EQ(pagePoolBytes(), size_t(16) << 20);
  PodVector<uint64_t> reused;
  const uint64_t *values = reused.appendUninitialized(count);
  EXPECT_EQ(pagePoolBytes(), 0u);
  size_t same = 0;
  for (size_t i = 0; i < count; ++i)
    same += (values[i] >> 48) == 0x5eed;
  EXPECT_EQ(same, count) << "the pages were not the freed array's";

  // A growth takes pooled pages for its new part and keeps its elements.
  {
    PodVector<uint64_t> freed;
    freed.appendUninitialized(count);
  }
  for (size_t i = 0; i < count; ++i)
    reused.push_back(i);
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(reused[count + i], i) << "element " << count + i;
  EXPECT_EQ(pagePoolBytes(), 0u);

  // Capacity no element reached has no pages: it is unmapped, not pooled
  // (64 MiB reserved, the first 8 MiB populated ahead of the appends).
  {
    PodVector<uint64_t> spare;
    spare.reserve(count * 4);
    spare.push_back(1);
  }
  EXPECT_EQ(pagePoolBytes(), size_t(8) << 20);
  setPagePoolLimit(0);
  setPagePoolLimit(size_t(64) << 20);

  // Over the limit, a freed block is unmapped; lowering the limit unmaps
  // what the pool holds.
  setPagePoolLimit(size_t(8) << 20);
  {
    PodVector<uint64_t> big;
    big.appendUninitialized(count);
  }
  EXPECT_EQ(pagePoolBytes(), 0u);
  {
    PodVector<uint64_t> small;
    small.appendUninitialized(count / 2);
  }
  EXPECT_EQ(pagePoolBytes(), size_t(8) << 20);
  setPagePoolLimit(0);
  EXPECT_EQ(pagePoolBytes(), 0u);
  setPagePoolLimit(size_t(256) << 20);
}

TEST(PodVector, FilledPagesArePresentAndBoundedByTheLimit) {
  // fillPagePool adds new pages on a thread of its own: as many as asked,
  // as far as the limit allows; an array then takes them with their pages
  // present (mincore), beyond the part it populated itself.
  setPagePoolLimit(0);
  setPagePoolLimit(size_t(40) << 20);
  auto poolReaches = [](size_t bytes) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (pagePoolBytes() < bytes &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    stopPagePoolFill();
    return pagePoolBytes();
  };
  fillPagePool(size_t(24) << 20);
  EXPECT_EQ(poolReaches(size_t(24) << 20), size_t(24) << 20);
  {
    const size_t count = (size_t(16) << 20) / sizeof(uint64_t);
    PodVector<uint64_t> taker;
    taker.reserve(count);
    taker.push_back(1); // Populates its first 8 MiB only.
    EXPECT_EQ(pagePoolBytes(), size_t(8) << 20);
    size_t pages = (size_t(16) << 20) / 4096;
    std::vector<unsigned char> present(pages);
    ASSERT_EQ(mincore(taker.data(), size_t(16) << 20, present.data()), 0);
    size_t resident = 0;
    for (unsigned char page : present)
      resident += page & 1;
    EXPECT_EQ(resident, pages) << "the pool's pages were not present";
  }
  // Back from the array: the 8 MiB it knew it had. Asked for more than the
  // limit, the fill stops at it.
  EXPECT_EQ(pagePoolBytes(), size_t(16) << 20);
  fillPagePool(size_t(400) << 20);
  EXPECT_EQ(poolReaches(size_t(40) << 20), size_t(40) << 20);
  // Nothing to add: no thread, nothing changes.
  fillPagePool(0);
  stopPagePoolFill();
  EXPECT_EQ(pagePoolBytes(), size_t(40) << 20);
  setPagePoolLimit(0);
  setPagePoolLimit(size_t(256) << 20);
}

TEST(SiteTable, OneIdPerDistinctSiteStableWhileGrowing) {
  SiteTable sites;
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites.intern(FrameSite()), 0u) << "id 0 is the default site";
  std::mt19937 random(3);
  std::map<std::tuple<uint64_t, StringId, StringId, uint32_t, int>, SiteId>
      reference;
  reference[{0, 0, 0, 0, 0}] = 0;
  for (int i = 0; i < 50000; ++i) {
    FrameSite site;
    // Few values per field, so that sites repeat and differ in one field.
    site.address = 0x1000 + random() % 40;
    site.name = random() % 30;
    site.file = random() % 3;
    site.line = random() % 4;
    site.kind = static_cast<FrameKind>(random() % 6);
    auto key = std::make_tuple(site.address, site.name, site.file, site.line,
                               int(site.kind));
    SiteId id = sites.intern(site);
    auto [it, inserted] = reference.try_emplace(key, id);
    EXPECT_EQ(id, it->second) << "a site changed id";
    EXPECT_EQ(sites[id], site);
  }
  EXPECT_EQ(sites.size(), reference.size());
  EXPECT_GT(sites.size(), 10000u) << "the table grew several times";
}

TEST(Frame, DefaultFrameIsValidAndSmall) {
  Frame frame;
  EXPECT_EQ(frame.site, 0u);
  EXPECT_FALSE(frame.inferred);
  EXPECT_FALSE(frame.anchored);
  EXPECT_FALSE(frame.open);
  EXPECT_EQ(frame.parent, Frame::NoParent);
  frame.site = SiteTable::MaxSite;
  frame.open = true;
  EXPECT_EQ(frame.site, SiteTable::MaxSite) << "the site field holds 29 bits";
  EXPECT_TRUE(frame.open);
  EXPECT_FALSE(frame.inferred);
  EXPECT_EQ(sizeof(PackedFrame), 11u) << "a stored frame is 11 bytes";
}

/// A parent for frame `index` that reaches every case of the packing: none,
/// a distance back that fits and that does not, the frame itself, one
/// after it, and any index.
static uint32_t randomParent(std::mt19937_64 &random, size_t index) {
  static const uint64_t Backs[] = {1,
                                   2,
                                   PackedFrame::FarParents - 1,
                                   PackedFrame::FarParents,
                                   PackedFrame::FarParents + 1,
                                   PackedFrame::WideParent,
                                   PackedFrame::WideParent + 1,
                                   100000};
  switch (random() % 6) {
  case 0:
    return Frame::NoParent;
  case 1:
    return uint32_t(index - Backs[random() % std::size(Backs)]);
  case 2:
    return uint32_t(index + random() % 2);
  case 3:
    return uint32_t(random());
  default:
    return index ? uint32_t(index - 1 - random() % index) : Frame::NoParent;
  }
}

/// Random frames whose fields reach every case of the packing: offsets
/// from the block's base that fit and that do not (before it, 2^30 ns and
/// more after it), lengths that fit and that do not (2^22 ns and more,
/// negative), sites that fit and that do not. Their parents are left for
/// randomParent.
static Frame randomFrame(std::mt19937_64 &random, uint64_t base) {
  static const uint64_t Offsets[] = {0,
                                     1,
                                     PackedFrame::WideBegin - 1,
                                     PackedFrame::WideBegin,
                                     PackedFrame::WideBegin + 1,
                                     uint64_t(1) << 50};
  static const uint64_t Lengths[] = {0, 7, PackedFrame::WideLength - 1,
                                     PackedFrame::WideLength,
                                     uint64_t(1) << 40};
  Frame frame;
  switch (random() % 4) {
  case 0:
    frame.begin = base + Offsets[random() % std::size(Offsets)];
    break;
  case 1:
    frame.begin = base - 1 - random() % 1000; // Before the base.
    break;
  default:
    frame.begin = base + random() % 100000;
  }
  switch (random() % 4) {
  case 0:
    frame.end = frame.begin + Lengths[random() % std::size(Lengths)];
    break;
  case 1:
    frame.end = frame.begin - 1 - random() % 10; // Ends before it begins.
    break;
  default:
    frame.end = frame.begin + random() % 1000;
  }
  static const SiteId Sites[] = {0,
                                 1,
                                 PackedFrame::WideSite - 1,
                                 PackedFrame::WideSite,
                                 PackedFrame::WideSite + 1,
                                 SiteTable::MaxSite};
  frame.site = random() % 2 ? SiteId(random() % 5000)
                            : Sites[random() % std::size(Sites)];
  frame.inferred = random() & 1;
  frame.anchored = random() & 1;
  frame.open = random() & 1;
  return frame;
}

static void expectSameFrames(const FrameList &ours,
                             const std::vector<Frame> &reference) {
  ASSERT_EQ(ours.size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    Frame got = ours[i];
    const Frame &want = reference[i];
    ASSERT_EQ(got.begin, want.begin) << "frame " << i;
    ASSERT_EQ(got.end, want.end) << "frame " << i;
    ASSERT_EQ(ours.beginOf(i), want.begin) << "frame " << i;
    ASSERT_EQ(ours.endOf(i), want.end) << "frame " << i;
    ASSERT_EQ(got.parent, want.parent) << "frame " << i;
    ASSERT_EQ(got.site, want.site) << "frame " << i;
    ASSERT_EQ(got.inferred, want.inferred) << "frame " << i;
    ASSERT_EQ(got.anchored, want.anchored) << "frame " << i;
    ASSERT_EQ(got.open, want.open) << "frame " << i;
  }
}

TEST(FrameList, EveryTimeRoundTripsThroughEveryEdit) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 random(seed);
    uint64_t base = uint64_t(1) << 40;
    FrameList ours;
    ours.setBase(base);
    std::vector<Frame> reference;
    for (int step = 0; step < 3000; ++step) {
      switch (random() % 8) {
      case 0:
      case 1:
      case 2: {
        Frame frame = randomFrame(random, base);
        frame.parent = randomParent(random, reference.size());
        ours.push_back(frame);
        reference.push_back(frame);
        break;
      }
      case 3: {
        Frame frame = randomFrame(random, base);
        frame.end = frame.begin;
        frame.anchored = frame.open = false;
        frame.parent = randomParent(random, reference.size());
        ours.pushAt(frame.begin, frame.parent, frame.site, frame.inferred);
        reference.push_back(frame);
        break;
      }
      case 4:
        if (!reference.empty()) {
          size_t i = random() % reference.size();
          reference[i] = randomFrame(random, base);
          reference[i].parent = randomParent(random, i);
          ours.set(i, reference[i]);
        }
        break;
      case 5:
        if (!reference.empty()) {
          size_t i = random() % reference.size();
          reference[i].end = randomFrame(random, base).end;
          ours.setEnd(i, reference[i].end);
          reference[i].parent = randomParent(random, i);
          ours.setParent(i, reference[i].parent);
          reference[i].open = !reference[i].open;
          ours.setOpen(i, reference[i].open);
        }
        break;
      case 6: {
        // shift(from, to), then the caller sets the frames before `to`.
        // A moved frame's parent that moved too follows it; any other
        // becomes outside(parent), or stays.
        size_t from = random() % (reference.size() + 1);
        size_t to = random() % (reference.size() + 1);
        size_t size = reference.size();
        std::vector<Frame> moved(reference.begin() + from, reference.end());
        std::function<uint32_t(uint32_t)> outside;
        if (random() % 2)
          outside = [](uint32_t parent) {
            return parent % 5 == 0 ? Frame::NoParent : parent ^ 0x2a5u;
          };
        for (Frame &frame : moved) {
          if (frame.parent >= from && frame.parent < size)
            frame.parent = uint32_t(frame.parent - from + to);
          else if (outside)
            frame.parent = outside(frame.parent);
        }
        reference.resize(to);
        ours.shift(from, to, outside);
        for (size_t i = 0; i < to; ++i) {
          reference[i] = randomFrame(random, base);
          reference[i].parent = randomParent(random, i);
          ours.set(i, reference[i]);
        }
        reference.insert(reference.end(), moved.begin(), moved.end());
        ASSERT_NO_FATAL_FAILURE(expectSameFrames(ours, reference));
        break;
      }
      case 7:
        if (random() % 8 == 0) {
          size_t count = random() % (reference.size() + 1);
          reference.resize(count);
          ours.truncate(count);
        }
        break;
      }
    }
    expectSameFrames(ours, reference);
    std::vector<Frame> iterated(ours.begin(), ours.end());
    ASSERT_EQ(iterated.size(), reference.size());
    ours.shrinkToFit();
    expectSameFrames(ours, reference);
  }
}

TEST(FrameList, TakesItsBaseFromTheFirstFrame) {
  FrameList ours;
  Frame first;
  first.begin = 1234567890123456;
  first.end = first.begin + 5;
  ours.push_back(first);
  EXPECT_EQ(ours.bytes(),
            ours.capacity() * sizeof(PackedFrame) + FrameList::BlockBytes)
      << "a frame near the first needs no wide time, only the block's base";
  EXPECT_EQ(ours.endOf(0), first.end);
  ours.clear();
  Frame early;
  early.begin = early.end = 3;
  ours.push_back(early);
  EXPECT_EQ(ours.bytes(),
            ours.capacity() * sizeof(PackedFrame) + FrameList::BlockBytes)
      << "clear() forgets the base";
}

TEST(FrameList, LongTracesStayInTheirBits) {
  // 100 s of calls 1 ms apart, each a child of the one before it, of its
  // parent, or (every third, as two loops' calls, in turn) of the first or
  // the second frame: every block of 256 frames has a base of its own, so
  // no begin needs a wide time although the trace is 2^36 ns long, and the
  // first two frames, far back from most, are each block's far parents.
  // Then a cut moves all but the first frames down, across blocks, and
  // every field still reads back.
  FrameList ours;
  std::vector<Frame> reference;
  const uint64_t start = uint64_t(1) << 50;
  for (uint32_t i = 0; i < 100000; ++i) {
    Frame frame;
    frame.begin = start + uint64_t(i) * 1000000;
    frame.end = frame.begin + 999000;
    frame.parent = i < 2 ? Frame::NoParent : i % 3 == 0 ? i % 2 : i - 1 - i % 2;
    frame.site = i % 1000;
    reference.push_back(frame);
    ours.pushAt(frame.begin, frame.parent, frame.site, false);
    ours.setEnd(i, frame.end);
  }
  ours.shrinkToFit();
  // Each block keeps each of its far parents once in its list.
  size_t blocks = (reference.size() + 255) / 256, farParents = 0;
  for (size_t block = 0; block < blocks; ++block) {
    std::set<uint32_t> far;
    for (size_t i = block * 256; i < (block + 1) * 256; ++i)
      if (i % 3 == 0 && i - i % 2 >= PackedFrame::FarParents)
        far.insert(i % 2);
    farParents += far.size();
  }
  EXPECT_GT(farParents, blocks);
  EXPECT_EQ(ours.bytes(), reference.size() * sizeof(PackedFrame) +
                              blocks * FrameList::BlockBytes +
                              farParents * sizeof(uint32_t))
      << "no field needed its wide table";
  expectSameFrames(ours, reference);
  ours.shift(1000, 3, [](uint32_t parent) {
    return parent == Frame::NoParent ? parent : parent % 3;
  });
  std::vector<Frame> moved(reference.begin() + 1000, reference.end());
  for (Frame &frame : moved)
    frame.parent = frame.parent >= 1000 ? frame.parent - 997 : frame.parent % 3;
  reference.resize(3);
  for (uint32_t i = 0; i < 3; ++i) {
    reference[i].parent = i ? i - 1 : Frame::NoParent;
    ours.set(i, reference[i]);
  }
  reference.insert(reference.end(), moved.begin(), moved.end());
  expectSameFrames(ours, reference);
}

} // namespace
