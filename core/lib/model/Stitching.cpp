//===- Stitching.cpp - Join segments across gaps, anchor to the stop ------===//
//
// Both passes run after every segment of a thread is built, because both use
// what is learned later: the stack a segment implies at its start is known
// only once it has returned out of its first frames, and the debugger's stack
// at the stop is known only at the end. docs/model.md explains the rules.
//
//===----------------------------------------------------------------------===//

#include "ModelInternal.h"

#include <algorithm>

using namespace magic_trace;
using namespace magic_trace::model;

namespace {

/// What makes two frames "the same symbol" for stitching and anchoring: the
/// function name and whether it is inlined. Times and lines may differ.
struct FrameIdentity {
  StringId name = 0;
  bool inlined = false;

  bool operator==(const FrameIdentity &other) const {
    return name == other.name && inlined == other.inlined;
  }
};

FrameIdentity identityOf(const SiteTable &sites, const Frame &frame) {
  const FrameSite &site = sites[frame.site];
  return {site.name, site.kind == FrameKind::Inlined};
}

/// A frame of a stack across a gap, with the address its call pushed (the
/// previous segment's open frames) or its return went to (the next
/// segment's inferred frames): 0 when unknown.
struct GapFrame {
  FrameIdentity identity;
  uint64_t returnAddress = 0;
};

/// May `start` (a frame the next segment inferred) be the same activation
/// as `end` (a frame open at the loss)? Same function, and when both return
/// addresses are known, the same: a return elsewhere in the caller is a
/// return to another call site, so the gap returned out of `end` and called
/// the function again (a loop calling it, emu_printf's __tunable_get_val).
bool continues(const GapFrame &end, const GapFrame &start) {
  return end.identity == start.identity &&
         (end.returnAddress == 0 || start.returnAddress == 0 ||
          end.returnAddress == start.returnAddress);
}

/// How S (the next segment's start stack, outermost first) continues E (the
/// previous segment's end stack): S[0, agreed) == E[d, d + agreed).
struct Alignment {
  size_t depth = SIZE_MAX; ///< d; SIZE_MAX when nothing agrees.
  size_t agreed = 0;
};

/// Full agreement (S[i] == E[d + i] for every i both have) is preferred,
/// with the fewest net calls and returns inside the gap. Failing that, S
/// may agree with E down to a physical frame and then differ: the gap
/// returned out of E's deeper frames and called (or, with inlining, moved
/// on to) others; the longest such agreement wins.
Alignment alignStacks(const std::vector<GapFrame> &end,
                      const std::vector<GapFrame> &start) {
  Alignment full, partial;
  size_t bestChange = SIZE_MAX;
  for (size_t d = end.size(); d-- > 0;) {
    size_t overlap = std::min(start.size(), end.size() - d);
    size_t agreed = 0;
    while (agreed < overlap && continues(end[d + agreed], start[agreed]))
      ++agreed;
    if (agreed == overlap) {
      // |depth at the gap's end - depth at its start|: net calls/returns.
      size_t before = end.size() - d, after = start.size();
      size_t change = before > after ? before - after : after - before;
      if (change < bestChange) {
        full = {d, agreed};
        bestChange = change;
      }
      continue;
    }
    // Back off to the last agreeing physical frame (with its inlined
    // frames only as far as they agree).
    while (agreed > 0 && start[agreed - 1].identity.inlined)
      --agreed;
    if (agreed > partial.agreed)
      partial = {d, agreed};
  }
  return full.depth != SIZE_MAX ? full : partial;
}

} // namespace

void model::reroot(Segment &segment, SegmentFacts &facts, uint32_t strip,
                   const std::vector<Frame> &roots) {
  uint32_t added = uint32_t(roots.size());
  strip = std::min<uint32_t>(strip, uint32_t(segment.frames.size()));
  if (strip == 0 && added == 0)
    return;
  auto remap = [&](uint32_t old) -> uint32_t {
    if (old == Frame::NoParent || old < strip)
      return added ? added - 1 : Frame::NoParent;
    return old - strip + added;
  };
  // In place: the frames after the stripped ones move to follow the new
  // roots (one memmove); their parents among them move with them, and the
  // others are remapped.
  FrameList &frames = segment.frames;
  frames.shift(strip, added, remap);
  for (uint32_t i = 0; i < added; ++i) {
    Frame frame = roots[i];
    frame.begin = segment.begin;
    frame.end = segment.end;
    frame.parent = i == 0 ? Frame::NoParent : i - 1;
    frame.open = true;
    frames.set(i, frame);
  }

  std::vector<uint32_t> endStack;
  std::vector<uint64_t> endReturns(added, 0);
  for (uint32_t i = 0; i < added; ++i)
    endStack.push_back(i);
  for (size_t i = 0; i < facts.endStack.size(); ++i) {
    if (facts.endStack[i] < strip)
      continue;
    endStack.push_back(facts.endStack[i] - strip + added);
    endReturns.push_back(i < facts.endReturns.size() ? facts.endReturns[i] : 0);
  }
  facts.endStack = std::move(endStack);
  facts.endReturns = std::move(endReturns);
  std::vector<std::pair<uint32_t, uint64_t>> startReturns;
  for (const auto &[frame, address] : facts.startReturns)
    if (frame >= strip)
      startReturns.push_back({frame - strip + added, address});
  facts.startReturns = std::move(startReturns);
  auto shift = [&](uint32_t count) {
    return count >= strip ? count - strip + added : added;
  };
  facts.startDepth = shift(facts.startDepth);
  facts.synthesized = shift(facts.synthesized);
  if (facts.continued)
    facts.continued = shift(facts.continued);
  if (facts.gapFrame != NoFrame)
    facts.gapFrame =
        facts.gapFrame < strip ? NoFrame : facts.gapFrame - strip + added;
}

void model::stitchSegments(ThreadModel &model, std::vector<SegmentFacts> &facts,
                           ModelStats &stats) {
  for (size_t k = 1; k < model.segments.size(); ++k) {
    Segment &previous = model.segments[k - 1];
    Segment &segment = model.segments[k];
    SegmentFacts &before = facts[k - 1];
    SegmentFacts &after = facts[k];
    std::vector<GapFrame> end, start;
    for (size_t i = 0; i < before.endStack.size(); ++i)
      end.push_back(
          {identityOf(model.sites, previous.frames[before.endStack[i]]),
           before.endReturns[i]});
    for (uint32_t i = 0; i < after.startDepth; ++i)
      start.push_back({identityOf(model.sites, segment.frames[i]), 0});
    for (const auto &[frame, address] : after.startReturns)
      if (frame < start.size())
        start[frame].returnAddress = address;
    Alignment alignment;
    if (!end.empty() && !start.empty())
      alignment = alignStacks(end, start);
    size_t d = alignment.depth;
    if (d == SIZE_MAX || before.gapFrame == NoFrame) {
      ++stats.stitchRefused;
      continue;
    }
    uint32_t continued = uint32_t(d + alignment.agreed);

    // The previous segment's continuing frames stay open across the gap,
    // and the gap span nests under the innermost of them.
    // The others returned inside the gap: they end at the loss (frames an
    // earlier pass added as roots spanned the whole segment until now).
    uint64_t loss = previous.frames.beginOf(before.gapFrame);
    for (uint32_t i = 0; i < before.endStack.size(); ++i) {
      uint32_t frame = before.endStack[i];
      previous.frames.setEnd(
          frame, i < continued ? previous.end
                               : std::min(previous.frames.endOf(frame), loss));
    }
    previous.frames.setParent(before.gapFrame, before.endStack[continued - 1]);

    // Frames the next segment never reached continue here as its roots.
    std::vector<Frame> outer;
    for (size_t i = 0; i < d; ++i) {
      Frame frame = previous.frames[before.endStack[i]];
      frame.inferred = true;
      outer.push_back(frame);
    }
    reroot(segment, after, 0, outer);
    // The continuing frames keep the return addresses their calls pushed,
    // for the join after this one.
    for (size_t i = 0; i < after.endStack.size(); ++i)
      if (after.endStack[i] < continued && after.endReturns[i] == 0)
        after.endReturns[i] = before.endReturns[after.endStack[i]];
    after.continued = continued;
    segment.stitchedToPrevious = true;
    ++stats.stitchedJoins;
  }
}

namespace {

/// The debugger's stack at the stop, outermost first, with inlined frames
/// expanded from the symbolizer's chains.
std::vector<Frame> stopStack(const ThreadStop &stop, SymbolLookup lookup,
                             SiteTable &sites) {
  std::vector<Frame> stack;
  for (size_t i = stop.frames.size(); i-- > 0;) {
    // LLDB reports an inlined frame with its concrete frame's PC: skip the
    // repeats, the inline chain below already expands them.
    if (i + 1 < stop.frames.size() && stop.frames[i] == stop.frames[i + 1])
      continue;
    // A return address points after the call; the call is what is running.
    uint64_t address = i == 0 ? stop.frames[i] : stop.frames[i] - 1;
    const SymbolRange &range = lookup(address);
    for (size_t level = 0; level < range.frames.size(); ++level) {
      Frame frame;
      frame.site = sites.intern(siteForRange(range, level));
      frame.inferred = true;
      frame.anchored = true;
      stack.push_back(frame);
    }
  }
  return stack;
}

} // namespace

namespace {

bool isJump(BranchClass last) {
  return last == BranchClass::CondBranch || last == BranchClass::DirectJump ||
         last == BranchClass::IndirectJump;
}

/// Where F (the final stack, innermost last) sits in the stop stack A: F's
/// innermost frame is A[at], and `matched` frames agree from there outward.
struct StopAlignment {
  size_t at = SIZE_MAX;
  size_t matched = 0;
};

/// F's innermost frame is the stop's function or one of its callers (the
/// trace ends before the stop's function ran, or before its callees did).
/// The innermost position of A where all of F agrees wins; failing that,
/// the innermost position of F's innermost function (then the outer part
/// of F disagrees, which anchorToStop repairs or refuses).
StopAlignment alignToStop(const SiteTable &sites, const Segment &segment,
                          const std::vector<uint32_t> &final,
                          const std::vector<Frame> &truth) {
  StopAlignment best;
  FrameIdentity top = identityOf(sites, segment.frames[final.back()]);
  for (size_t at = truth.size(); at-- > 0;) {
    if (!(identityOf(sites, truth[at]) == top))
      continue;
    size_t matched = 0;
    while (
        matched < final.size() && matched <= at &&
        identityOf(sites, segment.frames[final[final.size() - 1 - matched]]) ==
            identityOf(sites, truth[at - matched]))
      ++matched;
    if (best.at == SIZE_MAX)
      best = {at, matched};
    if (matched == final.size())
      return {at, matched};
  }
  return best;
}

} // namespace

void model::anchorToStop(ThreadModel &model, std::vector<SegmentFacts> &facts,
                         const ThreadStop &stop, SymbolLookup lookup,
                         ModelStats &stats) {
  std::vector<Frame> truth = stopStack(stop, lookup, model.sites);
  size_t last = model.segments.size() - 1;
  Segment &segment = model.segments[last];
  SegmentFacts &fact = facts[last];
  if (truth.empty() || fact.endStack.empty()) {
    ++stats.anchorConflicts;
    return;
  }
  // The trace ends exactly at the stop (no loss after it) when its open
  // frames run to the segment's end.
  bool endsAtStop = fact.gapFrame == NoFrame &&
                    segment.frames[fact.endStack.back()].end == segment.end;

  // A trace ending in a jump to the entry of the stop's function (which
  // never ran) made a tail call: the jumping function's frame (with its
  // inlined frames) is no longer on the stack, its caller is. The same for
  // a trace ending in a return (a thread stopped anywhere, a window that
  // ended there): the returning frame is still open, since no block after
  // the return ran, but at the stop its caller is running.
  std::vector<uint32_t> final = fact.endStack;
  size_t tailCalled = 0;
  const SymbolRange &stopRange = lookup(stop.frames[0]);
  bool tailCall = isJump(fact.lastClass) && !stopRange.frames.empty() &&
                  stopRange.functionEntry == stop.frames[0];
  if (endsAtStop && (tailCall || fact.lastClass == BranchClass::Return)) {
    auto siteAt = [&](size_t i) -> const FrameSite & {
      return model.sites[segment.frames[final[i]].site];
    };
    size_t physical = final.size() - 1;
    while (physical > 0 && siteAt(physical).kind == FrameKind::Inlined)
      --physical;
    if (physical > 0 &&
        (!tailCall || siteAt(physical).name != stopRange.frames[0].function)) {
      tailCalled = final.size() - physical;
      final.resize(physical);
    }
  }

  StopAlignment alignment = alignToStop(model.sites, segment, final, truth);
  size_t j = alignment.at, matched = alignment.matched;
  if (j == SIZE_MAX) {
    ++stats.anchorConflicts;
    return;
  }

  // Frames [0, strip) of the final stack are replaced by the stop's outer
  // frames: none when all matched, else only frames no instruction ran in.
  uint32_t strip = 0;
  if (matched < final.size()) {
    size_t wrong = final.size() - 1 - matched; // Outermost wrong is 0.
    if (wrong >= fact.synthesized || final[wrong] != wrong) {
      ++stats.anchorConflicts;
      return; // The trace contradicts the stop: change nothing.
    }
    strip = uint32_t(wrong + 1);
  }
  for (size_t i = 0; i < matched; ++i)
    segment.frames.setAnchored(final[final.size() - 1 - i], true);
  // The tail-calling (or returning) frames ended with the jump (or the
  // return), at the segment's end.
  for (size_t i = 0; i < tailCalled; ++i)
    segment.frames.setOpen(fact.endStack[final.size() + i], false);
  fact.endStack.resize(final.size());
  fact.endReturns.resize(final.size());

  std::vector<Frame> outer;
  if (j + 1 > matched)
    outer.assign(truth.begin(), truth.begin() + (j + 1 - matched));
  stats.anchorAdded += outer.size();
  reroot(segment, fact, strip, outer);

  // The stop's frames below F's innermost one: the function whose entry the
  // stop is at (the call into it was the trace's last instruction), or
  // callees the trace did not see. They start and end at the stop, open,
  // nested under F's innermost frame, whose subtree ends the pre-order.
  if (endsAtStop) {
    for (size_t i = j + 1; i < truth.size(); ++i) {
      Frame frame = truth[i];
      frame.inferred = false;
      frame.open = true;
      frame.begin = frame.end = segment.end;
      frame.parent = fact.endStack.back();
      fact.endStack.push_back(uint32_t(segment.frames.size()));
      fact.endReturns.push_back(0);
      segment.frames.push_back(frame);
      ++stats.anchorInner;
    }
  }

  // Backward through stitched segments: the frames that continue across a
  // gap get the same correction and marks.
  for (size_t k = last; k > 0 && model.segments[k].stitchedToPrevious; --k) {
    Segment &previous = model.segments[k - 1];
    SegmentFacts &before = facts[k - 1];
    if (strip > before.synthesized) {
      // The previous segment ran in the frames the stop replaced: the stacks
      // did not agree across this gap after all.
      ++stats.anchorConflicts;
      model.segments[k].stitchedToPrevious = false;
      --stats.stitchedJoins;
      break;
    }
    reroot(previous, before, strip, outer);
    uint32_t continued = std::min<uint32_t>(facts[k].continued,
                                            uint32_t(before.endStack.size()));
    for (uint32_t i = 0; i < continued; ++i)
      if (model.segments[k].frames.anchoredAt(i))
        previous.frames.setAnchored(before.endStack[i], true);
  }

  for (const Segment &each : model.segments)
    for (size_t i = 0; i < each.frames.size(); ++i)
      stats.anchoredFrames += each.frames.anchoredAt(i);
}
