//===- ModelBuilderTest.cpp - Rules of the model builder ------------------===//
//
// Each test feeds a hand-written item stream (what the decoder would emit for
// a small, known execution) and fake symbol ranges into buildThreadModel and
// checks the frame tree the rules of docs/model.md imply, written out by hand
// as an indented tree: "name begin-end [flags]".
//
//===----------------------------------------------------------------------===//

#include "ModelBuilderFixture.h"

#include "llvm/ADT/StringExtras.h"

#include "gtest/gtest.h"

#include <deque>
#include <initializer_list>
#include <map>
#include <string>

using namespace magic_trace;
using namespace magic_trace::model_test;

namespace {

TEST_F(ModelBuilderTest, CallPushesReturnPops) {
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3020, 10, BranchClass::Return));
  add(block(0x2015, 0x2030, 20, BranchClass::DirectCall));
  add(block(0x4000, 0x4008, 30, BranchClass::Return));
  add(block(0x2035, 0x2040, 40, BranchClass::Other));
  add(event(ItemKind::Disable, 50));
  EXPECT_EQ(tree(), "segment 0-50\n"
                    "main 0-50 inferred\n"
                    "  a 10-20\n"
                    "  b 30-40\n");
  EXPECT_EQ(stats.inferredFrames, 1u);
  EXPECT_EQ(stats.frames, 3u);
}

TEST_F(ModelBuilderTest, ReturnPopsSeveralFrames) {
  // main -> a -> b -> c, then c returns straight into main (longjmp-like).
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::IndirectCall));
  add(block(0x4000, 0x4010, 20, BranchClass::DirectCall));
  add(block(0x5000, 0x5010, 30, BranchClass::Return));
  add(block(0x2020, 0x2030, 40, BranchClass::Other));
  add(event(ItemKind::Disable, 50));
  EXPECT_EQ(tree(), "segment 0-50\n"
                    "main 0-50 inferred\n"
                    "  a 10-40\n"
                    "    b 20-40\n"
                    "      c 30-40\n");
}

TEST_F(ModelBuilderTest, RecursiveReturnGoesToNearestFrame) {
  // a calls itself twice; each return lands in the nearest a below.
  add(block(0x3000, 0x3010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectCall));
  add(block(0x3000, 0x3020, 20, BranchClass::Return));
  add(block(0x3015, 0x3020, 30, BranchClass::Return));
  add(block(0x3015, 0x3020, 40, BranchClass::Return));
  add(block(0x2010, 0x2020, 50, BranchClass::Other));
  add(event(ItemKind::Disable, 60));
  EXPECT_EQ(tree(), "segment 0-60\n"
                    "main 0-60 inferred\n"
                    "  a 0-50 inferred\n"
                    "    a 10-40\n"
                    "      a 20-30\n");
}

TEST_F(ModelBuilderTest, ReturnIntoUnseenFrameCreatesInferredParent) {
  // The segment starts in a; a returns into main, main calls b, b returns,
  // main returns into _start: both callers are created at the segment start.
  add(block(0x3000, 0x3010, 100, BranchClass::Return));
  add(block(0x2010, 0x2020, 110, BranchClass::DirectCall));
  add(block(0x4000, 0x4010, 120, BranchClass::Return));
  add(block(0x2025, 0x2030, 130, BranchClass::Return));
  add(block(0x1040, 0x1050, 140, BranchClass::Other));
  add(event(ItemKind::Disable, 150));
  EXPECT_EQ(tree(), "segment 100-150\n"
                    "_start 100-150 inferred\n"
                    "  main 100-140 inferred\n"
                    "    a 100-110 inferred\n"
                    "    b 120-130\n");
  EXPECT_EQ(stats.inferredFrames, 3u);
}

TEST_F(ModelBuilderTest, ReturnGoesToTheFrameThatPushedItsAddress) {
  // Stripped code: the caller's code after the call symbolizes as another
  // "function" (the next page of unknown code). The return address, not
  // the name, says where the return goes: no inferred parent for it.
  symbols.function("[unknown page]", 0x6000, 0x7000);
  symbols.function("[unknown next page]", 0x7000, 0x8000);
  add(callBlock(0x6f00, 0x6ffb, 0));
  add(block(0x3000, 0x3020, 10, BranchClass::Return));
  add(block(0x7000, 0x7010, 20, BranchClass::Other));
  add(event(ItemKind::Disable, 30));
  EXPECT_EQ(tree(), "segment 0-30\n"
                    "[unknown page] 0-30 inferred\n"
                    "  a 10-20\n");
  EXPECT_EQ(stats.inferredFrames, 1u);
}

TEST_F(ModelBuilderTest, ATailCallReturnsWhereTheFrameItReplacedWould) {
  // main calls a (returns to 0x2015), a tail-calls b, b returns to 0x2015
  // in code named otherwise: b's frame ends, main continues.
  symbols.function("main.cold", 0x2015, 0x2100);
  add(callBlock(0x2000, 0x2010, 0));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectJump));
  add(block(0x4000, 0x4010, 20, BranchClass::Return));
  add(block(0x2015, 0x2020, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  a 10-20\n"
                    "  b 20-30\n");
}

TEST_F(ModelBuilderTest, ReturnAddressOfADeeperFrameEndsTheFramesAbove) {
  // main -> a -> b; b returns straight to main's return address (a return
  // that skips a frame, as a longjmp-like return does).
  add(callBlock(0x2000, 0x2010, 0));
  add(callBlock(0x3000, 0x3010, 10));
  add(block(0x4000, 0x4010, 20, BranchClass::Return));
  add(block(0x2015, 0x2020, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  a 10-30\n"
                    "    b 20-30\n");
}

TEST_F(ModelBuilderTest, ReturnToALandingPadUnwindsToItsFunction) {
  // C++ unwinding: the unwinder's last return goes to a landing pad in
  // main, not an address any call pushed: unwind to main.
  add(callBlock(0x2000, 0x2010, 0));
  add(callBlock(0x3000, 0x3010, 10));
  add(block(0x4000, 0x4010, 20, BranchClass::Return));
  add(block(0x2080, 0x2090, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  a 10-30\n"
                    "    b 20-30\n");
}

TEST_F(ModelBuilderTest, ACallToTheNextInstructionPushesNoReturnAddress) {
  // main: call next (the PIC idiom), then call a, which returns to 0x2015.
  // The zero-length call's frame is never a return target.
  add(callBlock(0x2000, 0x2004, 0, 5)); // call 0x2009, the next insn
  add(callBlock(0x2009, 0x2010, 10));   // call a, returns to 0x2015
  add(block(0x3000, 0x3010, 20, BranchClass::Return));
  add(block(0x2015, 0x2020, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  main 10-40\n"
                    "    a 20-30\n");
}

TEST_F(ModelBuilderTest, JumpToEntryIsTailCall) {
  // main calls a; a jumps to b's entry (tail call); b returns into main.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectJump));
  add(block(0x4000, 0x4010, 20, BranchClass::Return));
  add(block(0x2015, 0x2020, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  a 10-20\n"
                    "  b 20-30\n");
}

TEST_F(ModelBuilderTest, JumpIntoMiddleUnwindsOrReplaces) {
  // main -> a -> b; b jumps into the middle of main (longjmp): unwind to
  // main. Then main -> a, and a jumps directly into the middle of c, which
  // is on no stack (another entry of a multi-entry function): c replaces a.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectCall));
  add(block(0x4000, 0x4010, 20, BranchClass::IndirectJump));
  add(block(0x2050, 0x2060, 30, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 40, BranchClass::DirectJump));
  add(block(0x5050, 0x5060, 50, BranchClass::Return));
  add(block(0x2065, 0x2070, 60, BranchClass::Other));
  add(event(ItemKind::Disable, 70));
  EXPECT_EQ(tree(), "segment 0-70\n"
                    "main 0-70 inferred\n"
                    "  a 10-30\n"
                    "    b 20-30\n"
                    "  a 40-50\n"
                    "  c 50-60\n");
}

TEST_F(ModelBuilderTest, IndirectJumpIntoAnUnseenCaller) {
  // The trace starts in b, which jumps indirectly into the middle of main,
  // on no stack (an exception's landing pad in a caller from before the
  // trace): main called b before the segment, as for a return into it.
  add(block(0x4000, 0x4010, 0, BranchClass::IndirectJump));
  add(block(0x2050, 0x2060, 10, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 20, BranchClass::Return));
  add(block(0x2065, 0x2070, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  b 0-10 inferred\n"
                    "  a 20-30\n");
}

TEST_F(ModelBuilderTest, IndirectJumpBackFromAColdPart) {
  // Stripped code with a hot part c and its cold part (its own FDE, so its
  // own function): c branches to the cold part's entry, which replaces c,
  // and the cold part's computed goto jumps back into c's middle (CPython's
  // eval loop): c replaces it again, it is no unseen caller.
  symbols.function("c.cold", 0x6000, 0x6100);
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x5000, 0x5010, 10, BranchClass::CondBranch));
  add(block(0x6000, 0x6010, 20, BranchClass::IndirectJump));
  add(block(0x5050, 0x5060, 30, BranchClass::Return));
  add(block(0x2015, 0x2020, 40, BranchClass::Other));
  add(event(ItemKind::Disable, 50));
  EXPECT_EQ(tree(), "segment 0-50\n"
                    "main 0-50 inferred\n"
                    "  c 10-20\n"
                    "  c.cold 20-30\n"
                    "  c 30-40\n");
}

TEST_F(ModelBuilderTest, InlinedFramesFollowTheChainInsideOneBlock) {
  // f's code: [f] [f>g] [f>g>h] [f>g] [f], one block of 0x50 bytes from
  // t=100 to t=180: times are interpolated by address (16 bytes = 32 ns).
  symbols.range(0x6000, 0x6010, 0x6000, {"f"});
  symbols.range(0x6010, 0x6020, 0x6000, {"f", "g"}, {7, 1});
  symbols.range(0x6020, 0x6030, 0x6000, {"f", "g", "h"}, {7, 3, 1});
  symbols.range(0x6030, 0x6040, 0x6000, {"f", "g"}, {7, 5});
  symbols.range(0x6040, 0x6100, 0x6000, {"f"}, {9});
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x6000, 0x604f, 100, BranchClass::Return, 20));
  add(block(0x2015, 0x2020, 180, BranchClass::Other));
  add(event(ItemKind::Disable, 190));
  EXPECT_EQ(tree(), "segment 0-190\n"
                    "main 0-190 inferred\n"
                    "  f 100-180\n"
                    "    g 116-164\n"
                    "      h 132-148\n");
}

TEST_F(ModelBuilderTest, InlinedInstancesAreTellApartByCallSite) {
  // g inlined twice in a row into f, from lines 7 and 8: two frames.
  symbols.range(0x6000, 0x6010, 0x6000, {"f", "g"}, {7, 1});
  symbols.range(0x6010, 0x6020, 0x6000, {"f", "g"}, {8, 1});
  symbols.range(0x6020, 0x6100, 0x6000, {"f"}, {9});
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x6000, 0x602f, 100, BranchClass::Return, 20));
  add(block(0x2015, 0x2020, 148, BranchClass::Other));
  add(event(ItemKind::Disable, 150));
  EXPECT_EQ(tree(), "segment 0-150\n"
                    "main 0-150 inferred\n"
                    "  f 100-148\n"
                    "    g 100-116\n"
                    "    g 116-132\n");
}

TEST_F(ModelBuilderTest, CallFromInlinedFrameNestsUnderIt) {
  symbols.range(0x6000, 0x6010, 0x6000, {"f"});
  symbols.range(0x6010, 0x6020, 0x6000, {"f", "g"}, {7, 1});
  symbols.range(0x6020, 0x6100, 0x6000, {"f"}, {9});
  add(block(0x6000, 0x6018, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 50, BranchClass::Return));
  add(block(0x601c, 0x6028, 60, BranchClass::Other));
  add(event(ItemKind::Disable, 72));
  EXPECT_EQ(tree(), "segment 0-72\n"
                    "f 0-72 inferred\n"
                    "  g 32-63\n"
                    "    a 50-60\n");
}

TEST_F(ModelBuilderTest, SyscallAndUntracedSpans) {
  // A syscall disables tracing until it returns; a plain disable (tracing
  // filtered out) is [untraced]. Both nest under the running frame.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::Syscall));
  add(event(ItemKind::Disable, 20, 0x3012));
  add(event(ItemKind::Enable, 35, 0x3012));
  add(block(0x3012, 0x3020, 35, BranchClass::Return));
  add(block(0x2015, 0x2020, 40, BranchClass::IndirectJump));
  add(event(ItemKind::Disable, 45, 0));
  add(event(ItemKind::Enable, 70, 0x2030));
  add(block(0x2030, 0x2040, 70, BranchClass::Other));
  add(event(ItemKind::Disable, 80));
  EXPECT_EQ(tree(), "segment 0-80\n"
                    "main 0-80 inferred\n"
                    "  a 10-40\n"
                    "    [syscall] 20-35\n"
                    "  [untraced] 45-70\n");
}

TEST_F(ModelBuilderTest, OnlyADisableWithNothingAfterItMakesNoSpan) {
  // The recorder ends every snapshot with a disable: no span there, even
  // after a syscall. A disable followed by more trace keeps its span.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::Other));
  add(event(ItemKind::Disable, 20, 0x3012));
  add(event(ItemKind::Enable, 30, 0x3012));
  add(block(0x3012, 0x3020, 30, BranchClass::Syscall));
  add(event(ItemKind::Disable, 40, 0x3022));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  a 10-40\n"
                    "    [untraced] 20-30\n");
  EXPECT_EQ(stats.frames, 3u);
}

TEST_F(ModelBuilderTest, UntracedCodeReturningIntoAFrameOnTheStack) {
  // main -> a -> (untraced library code) which returns into main.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::IndirectCall));
  add(event(ItemKind::Disable, 20));
  add(event(ItemKind::Enable, 30, 0x2015));
  add(block(0x2015, 0x2020, 30, BranchClass::Other));
  add(event(ItemKind::Disable, 40));
  EXPECT_EQ(tree(), "segment 0-40\n"
                    "main 0-40 inferred\n"
                    "  a 10-30\n"
                    "    [untraced] 20-30\n");
}

TEST_F(ModelBuilderTest, ErrorStartsNewSegmentWithGapSpan) {
  decode.errors.push_back({0x400, -5, 0x3008, "bad packet"});
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall));
  add(block(0x3000, 0x3010, 10, BranchClass::DirectJump));
  add(event(ItemKind::Error, 20, 0, 0));
  add(block(0x4000, 0x4010, 50, BranchClass::Return));
  add(block(0x1040, 0x1050, 60, BranchClass::Other));
  add(event(ItemKind::Overflow, 70, 0x5000));
  add(event(ItemKind::Overflow, 75, 0x5000));
  add(block(0x5000, 0x5010, 90, BranchClass::Other));
  add(event(ItemKind::Disable, 100));
  ThreadModel model = build({.stitch = false, .anchor = false});
  EXPECT_EQ(render(model, strings),
            "segment 0-50\n"
            "main 0-20 inferred\n"
            "  a 10-20\n"
            "[decode error: bad packet] 20-50\n"
            "segment 50-90 after decode error: bad packet\n"
            "_start 50-70 inferred\n"
            "  b 50-60 inferred\n"
            "[overflow] 70-90\n"
            "segment 90-100 after overflow\n"
            "c 90-100 inferred\n");
  EXPECT_EQ(model.errors, 3u);
  EXPECT_EQ(stats.gaps, 2u);
}

TEST_F(ModelBuilderTest, ModelStoresFramesNotInstructions) {
  // 10,000 calls of 100 instructions each: the model holds one frame per
  // call, far below 4 bytes per instruction.
  add(block(0x2000, 0x2010, 0, BranchClass::DirectCall, 1));
  uint64_t time = 1;
  for (int i = 0; i < 10000; ++i) {
    add(block(0x3000, 0x3050, time, BranchClass::Return, 100));
    add(block(0x2015, 0x2020, time + 100, BranchClass::DirectCall, 1));
    time += 101;
  }
  decode.instructions = 10000 * 101 + 1;
  ThreadModel model = build();
  ASSERT_EQ(model.segments.size(), 1u);
  EXPECT_EQ(model.segments[0].frames.size(), 10001u);
  EXPECT_EQ(model.calls, 10001u);
  double perInstruction =
      double(threadModelBytes(model)) / double(decode.instructions);
  EXPECT_LT(perInstruction, 4.0);
  EXPECT_EQ(stats.modelBytes, threadModelBytes(model));
}

} // namespace

namespace {

TEST_F(ModelBuilderTest, LossBeforeAnythingDecodedIsKept) {
  decode.errors.push_back({0, -1, 0, "no psb"});
  add(event(ItemKind::Error, 0, 0, 0));
  add(block(0x2000, 0x2010, 10, BranchClass::Other));
  add(event(ItemKind::Overflow, 20));
  EXPECT_EQ(tree(), "segment 10-20 after decode error: no psb\n"
                    "main 10-20 inferred\n"
                    "[overflow] 20-20\n");
  EXPECT_EQ(stats.gaps, 1u);
}

TEST_F(ModelBuilderTest, RandomStreamsKeepTheInvariants) {
  // Whatever the decoder emits (including nonsense: returns with nothing to
  // return to, jumps into unknown code, losses anywhere, stop contexts that
  // disagree), the model is valid and nothing crashes.
  symbols.range(0x6000, 0x6010, 0x6000, {"f"});
  symbols.range(0x6010, 0x6020, 0x6000, {"f", "g"}, {7, 1});
  symbols.range(0x6020, 0x6100, 0x6000, {"f", "g", "h"}, {7, 3, 1});
  uint64_t state = 12345;
  auto next = [&state](uint32_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return uint32_t(state >> 33) % bound;
  };
  const uint64_t bases[] = {0x1000, 0x2000, 0x3000, 0x4000,
                            0x5000, 0x6000, 0x9000};
  for (int round = 0; round < 200; ++round) {
    decode = {};
    decode.errors.push_back({0, -1, 0, "bad"});
    uint64_t time = next(100);
    for (int i = 0; i < 300; ++i) {
      time += next(20);
      uint32_t what = next(100);
      if (what < 4) {
        add(event(ItemKind::Disable, time));
      } else if (what < 7) {
        add(event(ItemKind::Enable, time, bases[next(7)]));
      } else if (what < 9) {
        add(event(ItemKind::Overflow, time));
      } else if (what < 10) {
        add(event(ItemKind::Error, time, 0, next(2))); // 1 is out of range.
      } else {
        uint64_t ip = bases[next(7)] + (next(3) == 0 ? 0 : next(0x40));
        add(block(ip, ip + next(0x40), time, BranchClass(next(10)), next(4)));
      }
    }
    ThreadStop stop;
    for (int f = 0, n = int(next(5)); f < n; ++f)
      stop.frames.push_back(bases[next(7)] + next(0x40));
    ModelOptions options{next(2) == 0, next(2) == 0};
    std::string out = tree(options, &stop);
    if (HasFailure()) {
      std::string items;
      for (const TraceItem &item : decode.items)
        items += std::to_string(unsigned(item.kind)) + " " +
                 llvm::utohexstr(item.ip) + ".." +
                 llvm::utohexstr(item.lastIp) +
                 " t=" + std::to_string(item.timeNs) +
                 " c=" + std::to_string(unsigned(item.lastClass)) + "\n";
      ADD_FAILURE() << "round " << round << "\n" << out << items;
      break;
    }
  }
}

} // namespace

namespace {

TEST(BuildTraceModelTest, EveryThreadWithItsOwnStop) {
  // No modules: every address is unknown code, one range per page, which
  // is enough to see each thread get its own stop context.
  Snapshot snapshot;
  snapshot.pid = 42;
  snapshot.processName = "demo";
  ThreadStop stop;
  stop.tid = 8;
  stop.frames = {0x7010, 0x9011};
  snapshot.stop.push_back(stop);
  std::vector<ThreadDecode> threads(2);
  threads[0].tid = 7;
  threads[1].tid = 8;
  for (ThreadDecode &thread : threads) {
    thread.items.push_back(block(0x7000, 0x7010, 5, BranchClass::Other, 3));
    thread.items.push_back(event(ItemKind::Disable, 9));
    thread.instructions = 3;
  }
  TraceModel model;
  Symbolizer symbolizer({}, model.strings);
  ModelStats stats;
  buildTraceModel(
      model, snapshot, threads,
      [&](uint64_t address) -> const SymbolRange & {
        return symbolizer.lookup(address);
      },
      ModelOptions{}, &stats);
  EXPECT_EQ(model.pid, 42u);
  EXPECT_EQ(model.processName, "demo");
  ASSERT_EQ(model.threads.size(), 2u);
  EXPECT_EQ(model.threads[0].tid, 7u);
  EXPECT_EQ(model.threads[1].tid, 8u);
  EXPECT_EQ(model.threads[1].instructions, 3u);
  // Thread 8 gained the page at 0x9000 as its anchored root; thread 7 not.
  ASSERT_FALSE(model.threads[0].segments.empty());
  ASSERT_FALSE(model.threads[1].segments.empty());
  EXPECT_FALSE(model.threads[0].segments[0].frames[0].anchored);
  EXPECT_TRUE(model.threads[1].segments[0].frames[0].anchored);
  EXPECT_EQ(stats.anchorAdded, 1u);
  if (llvm::Error err = validateModel(model))
    ADD_FAILURE() << llvm::toString(std::move(err));
}

} // namespace
