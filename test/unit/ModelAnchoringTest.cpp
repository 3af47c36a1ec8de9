//===- ModelAnchoringTest.cpp - The stop's stack and the traced root -----===//
//
// Anchoring (docs/model.md): the debugger's backtrace at the stop names the
// frames above the oldest traced one, and deeper ones the trace has not
// entered yet; a stop that contradicts the trace is refused, never forced.
// Each case is a hand-written item stream and the tree it must give.
//
//===----------------------------------------------------------------------===//
#include "ModelBuilderFixture.h"

using namespace magic_trace;
using namespace magic_trace::model_test;

namespace {

ThreadStop stopAt(std::initializer_list<uint64_t> frames) {
  ThreadStop stop;
  stop.frames = frames;
  return stop;
}

TEST_F(ModelBuilderTest, AnchoringAddsOuterFrames) {
  // The trace only saw a call b; the debugger says the stop is in b, called
  // from a, called from main, called from _start.
  add(block(0x3000, 0x3010, 0, BranchClass::DirectCall));
  add(block(0x4000, 0x4010, 10, BranchClass::Other));
  add(event(ItemKind::Disable, 20));
  ThreadStop stop = stopAt({0x4012, 0x3011, 0x2031, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-20\n"
                             "_start 0-20 inferred anchored\n"
                             "  main 0-20 inferred anchored\n"
                             "    a 0-20 inferred anchored\n"
                             "      b 10-20 anchored\n");
  EXPECT_EQ(stats.anchorAdded, 2u);
  EXPECT_EQ(stats.anchoredFrames, 4u);

  EXPECT_EQ(tree({.stitch = true, .anchor = false}, &stop), "segment 0-20\n"
                                                            "a 0-20 inferred\n"
                                                            "  b 10-20\n");
}

TEST_F(ModelBuilderTest, AnchoringWhenTheStopFunctionWasNotTracedYet) {
  // The breakpoint is at c's entry: the trace ends in the call from b, and
  // c (which never ran) is opened under b at the stop.
  add(block(0x4000, 0x4010, 0, BranchClass::DirectCall));
  add(event(ItemKind::Disable, 10, 0x5000));
  ThreadStop stop = stopAt({0x5000, 0x4015, 0x2031});
  EXPECT_EQ(tree({}, &stop), "segment 0-10\n"
                             "main 0-10 inferred anchored\n"
                             "  b 0-10 inferred anchored\n"
                             "    c 10-10 anchored\n");
  EXPECT_EQ(stats.anchorInner, 1u);
}

TEST_F(ModelBuilderTest, AnchoringOpensTheFunctionTheStopIsAtTheEntryOf) {
  // The snapshot's usual end: main calls a, whose entry has the breakpoint;
  // the recorder's final disable says tracing stops at a's entry. The final
  // stack's innermost frame is a: zero-length at the end, open, anchored,
  // nested under main (the frame that made the call).
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(event(ItemKind::Disable, 10, 0x3000));
  ThreadStop stop = stopAt({0x3000, 0x2015, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-10\n"
                             "_start 0-10 inferred anchored\n"
                             "  main 0-10 inferred anchored\n"
                             "    a 10-10 anchored\n");
  ThreadModel model = build({}, &stop);
  ASSERT_EQ(model.segments.size(), 1u);
  const FrameList &frames = model.segments[0].frames;
  ASSERT_EQ(frames.size(), 3u);
  const Frame &innermost = frames.back();
  const SiteTable &sites = model.sites;
  EXPECT_EQ(strings.get(sites[innermost.site].name), "a");
  EXPECT_EQ(sites[innermost.site].address, 0x3000u);
  EXPECT_EQ(innermost.begin, 10u);
  EXPECT_EQ(innermost.end, 10u);
  EXPECT_TRUE(innermost.open);
  EXPECT_TRUE(innermost.anchored);
  EXPECT_FALSE(innermost.inferred);
  EXPECT_EQ(innermost.parent, 1u);
  EXPECT_EQ(strings.get(sites[frames[1].site].name), "main");
  EXPECT_TRUE(frames[1].open);
  EXPECT_EQ(stats.anchorInner, 1u);
  EXPECT_EQ(stats.anchorAdded, 1u);
  EXPECT_EQ(stats.anchorConflicts, 0u);

  // Without anchoring the trace alone cannot know where the call went.
  EXPECT_EQ(tree({.stitch = true, .anchor = false}, &stop),
            "segment 0-10\n"
            "main 0-10 inferred\n");
}

TEST_F(ModelBuilderTest, AnchoringAddsEveryDeeperFrameOfTheStop) {
  // The trace ends in main's call; the stop is further down: main called a,
  // a called f, and the stop is in g inlined into f. All of them are opened
  // below main (g as an inlined frame of f).
  symbols.range(0x6000, 0x6010, 0x6000, {"f"});
  symbols.range(0x6010, 0x6020, 0x6000, {"f", "g"}, {7, 1});
  add(block(0x2000, 0x2010, 0, BranchClass::IndirectCall));
  add(event(ItemKind::Disable, 10));
  ThreadStop stop = stopAt({0x6012, 0x3011, 0x2015});
  EXPECT_EQ(tree({}, &stop), "segment 0-10\n"
                             "main 0-10 inferred anchored\n"
                             "  a 10-10 anchored\n"
                             "    f 10-10 anchored\n"
                             "      g 10-10 anchored\n");
  EXPECT_EQ(stats.anchorInner, 3u);
}

TEST_F(ModelBuilderTest, AnchoringPrefersTheDepthWhereTheWholeStackAgrees) {
  // a calls itself and the stop is at the inner a's entry. F = [main, a]
  // agrees with the stop [_start, main, a, a] at the outer a, not at the
  // innermost one: the inner a is opened below it.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectCall));
  add(event(ItemKind::Disable, 20, 0x3000));
  ThreadStop stop = stopAt({0x3000, 0x3015, 0x2015, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-20\n"
                             "_start 0-20 inferred anchored\n"
                             "  main 0-20 inferred anchored\n"
                             "    a 10-20 anchored\n"
                             "      a 20-20 anchored\n");
  EXPECT_EQ(stats.anchorConflicts, 0u);
}

TEST_F(ModelBuilderTest, AnchoringFollowsATailCallIntoTheStopFunction) {
  // main calls a; a's last instruction jumps to c's entry (a tail call) and
  // the stop is there, returning into main: a is no longer on the stack, c
  // is opened under main.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectJump));
  add(event(ItemKind::Disable, 20, 0x5000));
  ThreadStop stop = stopAt({0x5000, 0x2015});
  EXPECT_EQ(tree({}, &stop), "segment 0-20\n"
                             "main 0-20 inferred anchored\n"
                             "  a 10-20\n"
                             "  c 20-20 anchored\n");
  ThreadModel model = build({}, &stop);
  const FrameList &frames = model.segments[0].frames;
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_FALSE(frames[1].open); // a ended with its jump.
  EXPECT_TRUE(frames[2].open);
  EXPECT_EQ(stats.anchorConflicts, 0u);
}

TEST_F(ModelBuilderTest, AnchoringAfterAFinalReturn) {
  // main calls a, and a's last instruction returns: no block ran after it,
  // so a is still open, but at the stop (in main, called from _start) main
  // is running. a is taken off the final stack; _start is added outside.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::Return));
  add(event(ItemKind::Disable, 20, 0x2015));
  ThreadStop stop = stopAt({0x2015, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-20\n"
                             "_start 0-20 inferred anchored\n"
                             "  main 0-20 inferred anchored\n"
                             "    a 10-20\n");
  ThreadModel model = build({}, &stop);
  const FrameList &frames = model.segments[0].frames;
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_FALSE(frames[2].open); // a returned.
  EXPECT_TRUE(frames[1].open);
  EXPECT_EQ(stats.anchorConflicts, 0u);
}

TEST_F(ModelBuilderTest, AnchoringAddsNoDeeperFramesAfterALoss) {
  // The trace ends in an overflow: its final stack is not the stack at the
  // stop, so nothing is opened below it (the outer frames still match).
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(event(ItemKind::Overflow, 10));
  ThreadStop stop = stopAt({0x3000, 0x2015, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-10\n"
                             "_start 0-10 inferred anchored\n"
                             "  main 0-10 inferred anchored\n"
                             "  [overflow] 10-10\n");
  EXPECT_EQ(stats.anchorInner, 0u);
}

TEST_F(ModelBuilderTest, AnchoringPropagatesThroughStitchedSegments) {
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::Other));
  add(event(ItemKind::Overflow, 20, 0x3020));
  add(block(0x3020, 0x3030, 40, BranchClass::DirectCall));
  add(block(0x4000, 0x4010, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  ThreadStop stop = stopAt({0x4012, 0x3031, 0x2011, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-40\n"
                             "_start 0-40 inferred anchored\n"
                             "  main 0-40 inferred anchored\n"
                             "    a 10-40 anchored\n"
                             "      [overflow] 20-40\n"
                             "segment 40-60 stitched after overflow\n"
                             "_start 40-60 inferred anchored\n"
                             "  main 40-60 inferred anchored\n"
                             "    a 40-60 inferred anchored\n"
                             "      b 50-60 anchored\n");
}

TEST_F(ModelBuilderTest, AnchoringReplacesWronglyStitchedFrames) {
  // Segment 2 is stitched under [_start, main, a] but the debugger says a
  // was called from b: the stitched (never executed) frames are replaced.
  // Segment 1 ran in main, so the correction stops there, is counted, and
  // the join is undone: the stacks did not agree after all.
  add(block(0x1000, 0x1010, 0, BranchClass::DirectCall));
  add(block(0x2000, 0x2010, 10, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 20, BranchClass::Other));
  add(event(ItemKind::Overflow, 30, 0x3020));
  add(block(0x3020, 0x3030, 40, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  ThreadStop stop = stopAt({0x3032, 0x4011, 0x1041});
  std::string out = tree({}, &stop);
  EXPECT_EQ(out, "segment 0-40\n"
                 "_start 0-40 inferred\n"
                 "  main 10-40\n"
                 "    a 20-40\n"
                 "      [overflow] 30-40\n"
                 "segment 40-60 after overflow\n"
                 "_start 40-60 inferred anchored\n"
                 "  b 40-60 inferred anchored\n"
                 "    a 40-60 inferred anchored\n");
  EXPECT_EQ(stats.anchorConflicts, 1u);
  EXPECT_EQ(stats.stitchedJoins, 0u);
}

TEST_F(ModelBuilderTest, AnchoringRefusesAContradictingStop) {
  // The trace saw main call a; a stop claiming a was called from b is not
  // believed over it.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::Other));
  add(event(ItemKind::Disable, 20));
  ThreadStop stop = stopAt({0x3012, 0x4011, 0x1041});
  EXPECT_EQ(tree({}, &stop), "segment 0-20\n"
                             "main 0-20 inferred\n"
                             "  a 10-20\n");
  EXPECT_EQ(stats.anchorConflicts, 1u);
  EXPECT_EQ(stats.anchorInner, 0u);
}

} // namespace
