//===- ModelStitchingTest.cpp - Segments joined across losses -------------===//
//
// Stitching (docs/model.md): after a loss, the new segment's stack is
// joined to the old one down to the last frame both agree on (return
// addresses tell activations apart), calls inside the gap allowed; stacks
// that disagree are not joined. Each case is a hand-written item stream and
// the tree it must give.
//
//===----------------------------------------------------------------------===//
#include "ModelBuilderFixture.h"

using namespace magic_trace;
using namespace magic_trace::model_test;

namespace {

TEST_F(ModelBuilderTest, StitchingJoinsAgreeingStacks) {
  // Segment 1: _start -> main -> a, then an overflow. Segment 2 starts in a
  // and returns into main: its start stack [main, a] is the end of segment
  // 1's stack, so _start continues as its root and the gap nests in a.
  add(block(0x1000, 0x1010, 0, BranchClass::DirectCall));
  add(block(0x2000, 0x2010, 10, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 20, BranchClass::Other));
  add(event(ItemKind::Overflow, 30, 0x3020));
  add(block(0x3020, 0x3030, 40, BranchClass::Return));
  add(block(0x2020, 0x2030, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  std::string stitched = tree();
  EXPECT_EQ(stitched, "segment 0-40\n"
                      "_start 0-40 inferred\n"
                      "  main 10-40\n"
                      "    a 20-40\n"
                      "      [overflow] 30-40\n"
                      "segment 40-60 stitched after overflow\n"
                      "_start 40-60 inferred\n"
                      "  main 40-60 inferred\n"
                      "    a 40-50 inferred\n");
  EXPECT_EQ(stats.stitchedJoins, 1u);

  EXPECT_EQ(tree({.stitch = false, .anchor = true}),
            "segment 0-40\n"
            "_start 0-30 inferred\n"
            "  main 10-30\n"
            "    a 20-30\n"
            "[overflow] 30-40\n"
            "segment 40-60 after overflow\n"
            "main 40-60 inferred\n"
            "  a 40-50 inferred\n");
  EXPECT_EQ(stats.stitchedJoins, 0u);
}

TEST_F(ModelBuilderTest, StitchingAllowsCallsInsideTheGap) {
  // During the gap main called b: segment 2's start [main, b] extends the
  // end stack [_start, main] by one frame.
  add(block(0x1000, 0x1010, 0, BranchClass::DirectCall));
  add(block(0x2000, 0x2010, 10, BranchClass::Other));
  add(event(ItemKind::Overflow, 20, 0x4000));
  add(block(0x4000, 0x4010, 40, BranchClass::Return));
  add(block(0x2020, 0x2030, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "_start 0-40 inferred\n"
                    "  main 10-40\n"
                    "    [overflow] 20-40\n"
                    "segment 40-60 stitched after overflow\n"
                    "_start 40-60 inferred\n"
                    "  main 40-60 inferred\n"
                    "    b 40-50 inferred\n");
}

TEST_F(ModelBuilderTest, StitchingJoinsDownToTheLastAgreeingFrame) {
  // During the gap a returned and main called b: segment 2's start [main, b]
  // agrees with the end stack [_start, main, a] down to main, so _start and
  // main continue, a ends at the loss, b is new.
  add(block(0x1000, 0x1010, 0, BranchClass::DirectCall));
  add(block(0x2000, 0x2010, 10, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 20, BranchClass::Other));
  add(event(ItemKind::Overflow, 30, 0x4000));
  add(block(0x4000, 0x4010, 40, BranchClass::Return));
  add(block(0x2020, 0x2030, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "_start 0-40 inferred\n"
                    "  main 10-40\n"
                    "    a 20-30\n"
                    "    [overflow] 30-40\n"
                    "segment 40-60 stitched after overflow\n"
                    "_start 40-60 inferred\n"
                    "  main 40-60 inferred\n"
                    "    b 40-50 inferred\n");
  EXPECT_EQ(stats.stitchedJoins, 1u);
}

TEST_F(ModelBuilderTest, StitchingSeparatesActivationsByReturnAddress) {
  // main calls a from 0x2010 (return address 0x2015); inside the gap a
  // returned and main called it again from 0x2020. Segment 2 starts in a
  // and returns to 0x2025: not where the open a was to return, so it is
  // another activation: main continues, the open a ends at the loss, and
  // the reader's join (continuedFrames) stops at main.
  add(callBlock(0x1000, 0x1010, 0));
  add(callBlock(0x2000, 0x2010, 10));
  add(block(0x3000, 0x3010, 20, BranchClass::Other));
  add(event(ItemKind::Overflow, 30, 0x3020));
  add(block(0x3020, 0x3030, 40, BranchClass::Return));
  add(block(0x2025, 0x2030, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "_start 0-40 inferred\n"
                    "  main 10-40\n"
                    "    a 20-30\n"
                    "    [overflow] 30-40\n"
                    "segment 40-60 stitched after overflow\n"
                    "_start 40-60 inferred\n"
                    "  main 40-60 inferred\n"
                    "    a 40-50 inferred\n");
  ThreadModel model = build();
  ASSERT_EQ(model.segments.size(), 2u);
  EXPECT_EQ(model.segments[1].continuedFrames, 2u); // _start, main.

  // The same return to 0x2015: the open a continues (three frames).
  decode.items[4] = block(0x3020, 0x3030, 40, BranchClass::Return);
  decode.items[5] = block(0x2015, 0x2030, 50, BranchClass::Other);
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "_start 0-40 inferred\n"
                    "  main 10-40\n"
                    "    a 20-40\n"
                    "      [overflow] 30-40\n"
                    "segment 40-60 stitched after overflow\n"
                    "_start 40-60 inferred\n"
                    "  main 40-60 inferred\n"
                    "    a 40-50 inferred\n");
  model = build();
  EXPECT_EQ(model.segments[1].continuedFrames, 3u);
}

TEST_F(ModelBuilderTest, StitchingRefusesDisagreeingStacks) {
  // Segment 2 runs in c and returns into b: [b, c] appears nowhere in the
  // end stack [_start, main, a].
  add(block(0x1000, 0x1010, 0, BranchClass::DirectCall));
  add(block(0x2000, 0x2010, 10, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 20, BranchClass::Other));
  add(event(ItemKind::Overflow, 30, 0x5020));
  add(block(0x5020, 0x5030, 40, BranchClass::Return));
  add(block(0x4020, 0x4030, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "_start 0-30 inferred\n"
                    "  main 10-30\n"
                    "    a 20-30\n"
                    "[overflow] 30-40\n"
                    "segment 40-60 after overflow\n"
                    "b 40-60 inferred\n"
                    "  c 40-50 inferred\n");
  EXPECT_EQ(stats.stitchRefused, 1u);
}

} // namespace
