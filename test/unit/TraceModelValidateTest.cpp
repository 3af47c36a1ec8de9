// Unit tests for validateModel, the invariants every writer relies on
// (TraceModel.h): each broken invariant named, exactly the valid models
// accepted, deep stacks followed; and the frame kinds' stable names.
#include "SyntheticModel.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

using namespace magic_trace;
using magic_trace::test::ModelBuilder;

namespace {

TEST(TraceModel, ValidateModelNamesTheBrokenInvariant) {
  auto check = [](auto build, llvm::StringRef expected) {
    ModelBuilder b;
    Segment &seg = ModelBuilder::segment(b.thread(3), 0, 100);
    build(b, seg);
    llvm::Error err = validateModel(b.model);
    if (expected.empty()) {
      EXPECT_FALSE(bool(err)) << toString(std::move(err));
      return;
    }
    ASSERT_TRUE(bool(err)) << "expected: " << expected.str();
    std::string text = toString(std::move(err));
    EXPECT_NE(text.find(expected), std::string::npos) << text;
  };
  check(
      [](ModelBuilder &b, Segment &s) {
        b.frame(s, "a", 0, 50);
        b.frame(s, "b", 10, 20, 0);
        b.frame(s, "c", 20, 30, 0);
      },
      "");
  check(
      [](ModelBuilder &b, Segment &s) {
        b.frame(s, "a", 0, 50);
        b.frame(s, "b", 10, 25, 0);
        b.frame(s, "c", 20, 30, 0);
      },
      "before previous sibling");
  check(
      [](ModelBuilder &b, Segment &s) {
        b.frame(s, "a", 0, 50);
        b.frame(s, "b", 10, 20, 0);
        b.frame(s, "c", 60, 70);
        b.frame(s, "d", 61, 62, 1); // Parent b is closed: not pre-order.
      },
      "pre-order");
  check([](ModelBuilder &b, Segment &s) { b.frame(s, "a", 30, 20); },
        "after end");
  check([](ModelBuilder &b, Segment &s) { b.frame(s, "a", 90, 120); },
        "outside segment");
  check([](ModelBuilder &b,
           Segment &s) { ModelBuilder::segment(b.model.threads[0], 50, 150); },
        "before segment 0 ends");
}

/// Whether frames [0, i] of `seg` keep the invariants of TraceModel.h,
/// given that frames [0, i) do: checked from the definitions (the parent
/// chain of frame i - 1, searched), independently of validateModel's stack.
/// A parent at or after frame i is not on that chain: false.
bool frameKeepsInvariants(const Segment &seg, size_t i) {
  const Frame &f = seg.frames[i];
  if (f.begin > f.end || f.begin < seg.begin || f.end > seg.end)
    return false;
  // The frames still open before frame i: frame i - 1 and its ancestors.
  uint32_t sibling = Frame::NoParent;
  for (uint32_t up = i ? uint32_t(i - 1) : Frame::NoParent;;
       up = seg.frames[up].parent) {
    if (up == f.parent)
      break;
    if (up == Frame::NoParent)
      return false; // The parent is not open: not pre-order.
    sibling = up;
  }
  if (f.parent != Frame::NoParent && (f.begin < seg.frames[f.parent].begin ||
                                      f.end > seg.frames[f.parent].end))
    return false;
  return sibling == Frame::NoParent || seg.frames[sibling].end <= f.begin;
}

TEST(TraceModel, ValidateModelAcceptsExactlyTheValidModels) {
  // Random small frame trees, most of them broken somewhere: validateModel
  // must fail exactly when some frame breaks an invariant.
  std::mt19937 random(20);
  int valid = 0;
  for (int round = 0; round < 4000; ++round) {
    ModelBuilder b;
    Segment &seg = ModelBuilder::segment(b.thread(1), 10, 90);
    size_t count = 1 + random() % 8;
    bool expected = true;
    for (size_t i = 0; i < count; ++i) {
      uint64_t begin = 5 + random() % 90;
      uint64_t end = begin + random() % 40 - (random() % 8 == 0 ? 3 : 0);
      uint32_t parent =
          i && random() % 4 ? uint32_t(random() % (i + 1)) : Frame::NoParent;
      if (parent == i && random() % 2)
        parent = uint32_t(i - 1);
      b.frame(seg, "f", begin, end, parent);
      expected = expected && frameKeepsInvariants(seg, i);
    }
    llvm::Error err = validateModel(b.model);
    EXPECT_EQ(!err, expected) << "round " << round;
    llvm::consumeError(std::move(err));
    valid += expected;
  }
  // Both answers were exercised.
  EXPECT_GT(valid, 100);
  EXPECT_LT(valid, 3900);
}

TEST(TraceModel, ValidateModelChecksBigSegmentsInRunsExactly) {
  // validateModel checks a segment of a million frames or more in runs (on
  // several workers), each starting from the stack of open frames it
  // rebuilds from the parent chain. Random frames across the first run's
  // end (frame 2^20), valid or broken, after a valid prefix: it must fail
  // exactly when the independent check above finds a broken frame.
  const size_t prefix = (size_t(1) << 20) - 4;
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 1000);
  b.frame(seg, "root", 0, 1000);
  for (size_t i = 1; i < prefix; ++i)
    b.frame(seg, "f", 1, 1, 0);
  llvm::Error prefixErr = validateModel(b.model);
  ASSERT_FALSE(bool(prefixErr)) << toString(std::move(prefixErr));
  const Frame proto = seg.frames[1];
  std::mt19937 random(51);
  int valid = 0;
  const int rounds = 40;
  for (int round = 0; round < rounds; ++round) {
    Segment &tail = b.model.threads[0].segments[0];
    tail.frames.truncate(prefix);
    // 5 to 8 frames, the 5th the second run's first: a valid random tree
    // below the root (each frame closes some open ones, then nests in the
    // innermost still open)...
    size_t count = 5 + random() % 4;
    std::vector<Frame> added;
    std::vector<size_t> open;
    uint64_t at = 1;
    for (size_t k = 0; k < count; ++k) {
      for (size_t pops = random() % (open.size() + 1); pops > 0; --pops) {
        at = std::max(at, added[open.back()].end);
        open.pop_back();
      }
      uint64_t parentEnd = open.empty() ? 1000 : added[open.back()].end;
      Frame frame = proto;
      frame.parent = open.empty() ? 0 : uint32_t(prefix + open.back());
      frame.begin = std::min(parentEnd, at + random() % 3);
      frame.end = frame.begin + random() % (parentEnd - frame.begin + 1);
      at = frame.begin;
      open.push_back(added.size());
      added.push_back(frame);
    }
    // ... then, in half of the rounds, one field of one frame changed.
    if (random() % 2) {
      Frame &changed = added[random() % count];
      switch (random() % 4) {
      case 0:
        changed.begin += 1 + random() % 20;
        break;
      case 1:
        changed.end -= 1 + random() % 20; // May wrap: past the segment.
        break;
      case 2:
        changed.end += 1 + random() % 20;
        break;
      default:
        uint32_t parents[] = {Frame::NoParent, 0, uint32_t(prefix - 1),
                              uint32_t(prefix + random() % count)};
        changed.parent = parents[random() % 4];
      }
    }
    bool expected = true;
    for (size_t k = 0; k < count; ++k) {
      tail.frames.push_back(added[k]);
      expected = expected && frameKeepsInvariants(tail, prefix + k);
    }
    llvm::Error err = validateModel(b.model);
    EXPECT_EQ(!err, expected) << "round " << round;
    llvm::consumeError(std::move(err));
    valid += expected;
  }
  EXPECT_GT(valid, 10);
  EXPECT_LT(valid, rounds - 5);
}

TEST(TraceModel, ValidateModelFollowsDeepStacks) {
  // A chain 3000 frames deep (past the stack validateModel starts with),
  // then a sibling of the outermost frame's child; broken at the bottom
  // or not, and the broken one must be caught.
  for (bool broken : {false, true}) {
    ModelBuilder b;
    Segment &seg = ModelBuilder::segment(b.thread(1), 0, 10000);
    const uint32_t depth = 3000;
    for (uint32_t i = 0; i < depth; ++i)
      b.frame(seg, "f", i, 10000 - i - 1,
              i ? uint32_t(i - 1) : Frame::NoParent);
    // The innermost frame's child ends past it when broken.
    b.frame(seg, "g", depth, broken ? 10000 - depth + 5 : depth + 1, depth - 1);
    // A second child of frame 0, after the first one ended.
    b.frame(seg, "h", 9998, 9998, 0);
    llvm::Error err = validateModel(b.model);
    EXPECT_EQ(bool(err), broken);
    llvm::consumeError(std::move(err));
  }
}

TEST(FrameKind, NamesAreStable) {
  EXPECT_STREQ(frameKindName(FrameKind::Physical), "physical");
  EXPECT_STREQ(frameKindName(FrameKind::DecodeError), "decode-error");
  EXPECT_STREQ(frameKindName(FrameKind::Syscall), "syscall");
}

} // namespace
