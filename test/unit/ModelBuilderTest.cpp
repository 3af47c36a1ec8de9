//===- ModelBuilderTest.cpp - Rules of the model builder ------------------===//
//
// Each test feeds a hand-written item stream (what the decoder would emit for
// a small, known execution) and fake symbol ranges into buildThreadModel and
// checks the frame tree the rules of docs/model.md imply, written out by hand
// as an indented tree: "name begin-end [flags]".
//
//===----------------------------------------------------------------------===//

#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Symbolizer.h"

#include "llvm/ADT/StringExtras.h"

#include "gtest/gtest.h"

#include <deque>
#include <initializer_list>
#include <map>
#include <string>

using namespace magic_trace;

namespace {

/// Symbol ranges for made-up code. Every function is one or more ranges;
/// a chain lists the physical function first, then inlined callees.
class FakeSymbols {
public:
  explicit FakeSymbols(StringTable &strings) : strings(strings) {}

  /// A whole function [begin, end) with no inlining.
  void function(const char *name, uint64_t begin, uint64_t end) {
    range(begin, end, begin, {name});
  }

  /// One range of the function entered at `entry`; `lines` (optional) gives
  /// each chain frame's line, i.e. the call site of the next frame.
  void range(uint64_t begin, uint64_t end, uint64_t entry,
             std::initializer_list<const char *> chain,
             std::initializer_list<uint32_t> lines = {}) {
    SymbolRange range;
    range.begin = begin;
    range.end = end;
    range.functionEntry = entry;
    range.fromDebugInfo = true;
    auto line = lines.begin();
    for (const char *name : chain) {
      SymbolFrame frame;
      frame.function = strings.intern(name);
      frame.file = strings.intern("fake.c");
      frame.line = line != lines.end() ? *line++ : 1;
      frame.inlined = !range.frames.empty();
      range.frames.push_back(frame);
    }
    ranges[begin] = std::move(range);
  }

  const SymbolRange &lookup(uint64_t address) {
    auto it = ranges.upper_bound(address);
    if (it != ranges.begin() && address < std::prev(it)->second.end)
      return std::prev(it)->second;
    SymbolRange &range = unknowns.emplace_back();
    range.begin = address;
    range.end = address + 1;
    SymbolFrame frame;
    frame.function = strings.intern("[unknown]");
    range.frames.push_back(frame);
    range.unknown = true;
    return range;
  }

private:
  StringTable &strings;
  std::map<uint64_t, SymbolRange> ranges;
  std::deque<SymbolRange> unknowns;
};

TraceItem block(uint64_t ip, uint64_t lastIp, uint64_t time, BranchClass last,
                uint32_t count = 4) {
  TraceItem item;
  item.kind = ItemKind::Block;
  item.ip = ip;
  item.lastIp = lastIp;
  item.timeNs = time;
  item.detail = count;
  item.lastClass = last;
  return item;
}

TraceItem event(ItemKind kind, uint64_t time, uint64_t ip = 0,
                uint32_t detail = 0) {
  TraceItem item;
  item.kind = kind;
  item.ip = ip;
  item.timeNs = time;
  item.detail = detail;
  return item;
}

/// The model as an indented tree; checks the TraceModel.h invariants too.
std::string render(const ThreadModel &model, const StringTable &strings) {
  std::string out;
  uint64_t previousEnd = 0;
  for (size_t s = 0; s < model.segments.size(); ++s) {
    const Segment &segment = model.segments[s];
    EXPECT_LE(segment.begin, segment.end) << "segment " << s;
    EXPECT_LE(previousEnd, segment.begin) << "segment " << s << " overlaps";
    previousEnd = segment.end;
    out += "segment " + std::to_string(segment.begin) + "-" +
           std::to_string(segment.end);
    if (segment.stitchedToPrevious)
      out += " stitched";
    if (!segment.gapReason.empty())
      out += " after " + segment.gapReason;
    out += "\n";
    std::vector<unsigned> depth(segment.frames.size(), 0);
    std::vector<uint64_t> lastChildEnd(segment.frames.size(), 0);
    uint64_t lastRootEnd = 0;
    for (size_t i = 0; i < segment.frames.size(); ++i) {
      const Frame &frame = segment.frames[i];
      EXPECT_LE(frame.begin, frame.end) << "frame " << i;
      EXPECT_LE(segment.begin, frame.begin) << "frame " << i;
      EXPECT_LE(frame.end, segment.end) << "frame " << i;
      if (frame.parent != Frame::NoParent) {
        EXPECT_LT(frame.parent, i) << "frame " << i << " not in pre-order";
        if (frame.parent >= i)
          continue;
        const Frame &parent = segment.frames[frame.parent];
        EXPECT_LE(parent.begin, frame.begin) << "frame " << i;
        EXPECT_LE(frame.end, parent.end) << "frame " << i;
        EXPECT_LE(lastChildEnd[frame.parent], frame.begin)
            << "frame " << i << " overlaps its sibling";
        lastChildEnd[frame.parent] = frame.end;
        depth[i] = depth[frame.parent] + 1;
      } else {
        EXPECT_LE(lastRootEnd, frame.begin) << "root " << i << " overlaps";
        lastRootEnd = frame.end;
      }
      out += std::string(2 * depth[i], ' ') +
             strings.get(model.sites[frame.site].name).str() + " " +
             std::to_string(frame.begin) + "-" + std::to_string(frame.end);
      if (frame.inferred)
        out += " inferred";
      if (frame.anchored)
        out += " anchored";
      out += "\n";
    }
  }
  return out;
}

class ModelBuilderTest : public ::testing::Test {
protected:
  ModelBuilderTest() : symbols(strings) {
    symbols.function("_start", 0x1000, 0x1100);
    symbols.function("main", 0x2000, 0x2100);
    symbols.function("a", 0x3000, 0x3100);
    symbols.function("b", 0x4000, 0x4100);
    symbols.function("c", 0x5000, 0x5100);
  }

  ThreadModel build(ModelOptions options = {},
                    const ThreadStop *stop = nullptr) {
    stats = {};
    auto lookup = [this](uint64_t address) -> const SymbolRange & {
      return symbols.lookup(address);
    };
    return buildThreadModel(decode, lookup, stop, strings, options, &stats);
  }

  std::string tree(ModelOptions options = {},
                   const ThreadStop *stop = nullptr) {
    ThreadModel model = build(options, stop);
    std::string out = render(model, strings);
    // The invariants every writer relies on (TraceModel.h).
    trace.threads.push_back(std::move(model));
    if (llvm::Error err = validateModel(trace))
      ADD_FAILURE() << llvm::toString(std::move(err));
    trace.threads.clear();
    return out;
  }

  void add(TraceItem item) { decode.items.push_back(item); }

  TraceModel trace; ///< Owns the strings; validateModel checks the ids.
  StringTable &strings = trace.strings;
  FakeSymbols symbols;
  ThreadDecode decode;
  ModelStats stats;
};

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

/// A block ending in a call instruction of `size` bytes (the decoder's
/// lastSize), so the call's return address is lastIp + size.
TraceItem callBlock(uint64_t ip, uint64_t lastIp, uint64_t time,
                    uint8_t size = 5) {
  TraceItem item = block(ip, lastIp, time, BranchClass::DirectCall);
  item.lastSize = size;
  return item;
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
  const PodVector<Frame> &frames = model.segments[0].frames;
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
  const PodVector<Frame> &frames = model.segments[0].frames;
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
  const PodVector<Frame> &frames = model.segments[0].frames;
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
