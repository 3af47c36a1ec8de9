//===- TraceModel.cpp - Invariants of the segmented call-stack trace ------===//
//
// The writers rely on these invariants: the FXT writer emits frames in
// pre-order as complete events, which a reader nests correctly only if
// children lie inside parents and siblings do not overlap.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/TraceModel.h"

#include "magic_trace/Parallel.h"

#include "FrameRuns.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

const char *frameKindName(FrameKind kind) {
  switch (kind) {
  case FrameKind::Physical:
    return "physical";
  case FrameKind::Inlined:
    return "inlined";
  case FrameKind::Untraced:
    return "untraced";
  case FrameKind::Syscall:
    return "syscall";
  case FrameKind::DecodeError:
    return "decode-error";
  case FrameKind::Unknown:
    return "unknown";
  }
  return "unknown";
}

std::string estimatedTimesNote(uint64_t estimated, uint64_t instructions) {
  if (estimated == 0)
    return "";
  std::string note = "times estimated from instruction counts";
  if (estimated >= instructions)
    return note;
  double percent = 100.0 * double(estimated) / double(instructions);
  if (percent >= 1)
    note += llvm::formatv(" ({0:F0}% of instructions)", percent).str();
  else if (percent >= 0.1)
    note += llvm::formatv(" ({0:F1}% of instructions)", percent).str();
  else
    note += " (under 0.1% of instructions)";
  return note;
}

std::string clockNote(const ThreadModel &thread) {
  return estimatedTimesNote(thread.estimatedInstructions, thread.instructions);
}

void FrameList::setTimes(size_t i, uint64_t begin, uint64_t end) {
  uint64_t &base = blocks[blockOf(i)].base;
  if (base == UnsetBase)
    base = begin;
  uint64_t offset = begin - base;
  bool wideBegin = begin < base || offset >= PackedFrame::WideBegin;
  uint64_t length = end - begin;
  bool wideEnd = end < begin || length >= PackedFrame::WideLength;
  uint64_t low = lowOf(i);
  low &= ~(PackedFrame::WideBegin | PackedFrame::WideLength
                                        << PackedFrame::LengthShift);
  low |= (wideBegin ? PackedFrame::WideBegin : offset) |
         (wideEnd ? PackedFrame::WideLength : length)
             << PackedFrame::LengthShift;
  setLow(i, low);
  wideBegins.set(i, wideBegin ? std::optional<uint64_t>(begin) : std::nullopt);
  wideEnds.set(i, wideEnd ? std::optional<uint64_t>(end) : std::nullopt);
}

uint64_t FrameList::parentField(size_t i, uint32_t parent) {
  if (parent == Frame::NoParent) {
    wideParents.set(i, std::nullopt);
    return 0;
  }
  if (parent < i && i - parent < PackedFrame::FarParents) {
    wideParents.set(i, std::nullopt);
    return i - parent;
  }
  std::vector<uint32_t> &far = blocks[blockOf(i)].far;
  // The latest first: a frame's far parent is most often the one before's.
  auto found = std::find(far.rbegin(), far.rend(), parent);
  size_t slot =
      found != far.rend() ? size_t(far.rend() - found - 1) : far.size();
  if (slot + PackedFrame::FarParents >= PackedFrame::WideParent) {
    wideParents.set(i, parent); // Taken by frames set again and again.
    return PackedFrame::WideParent;
  }
  if (slot == far.size())
    far.push_back(parent);
  wideParents.set(i, std::nullopt);
  return PackedFrame::FarParents + slot;
}

void FrameList::set(size_t i, const Frame &frame) {
  bool wideSite = frame.site >= PackedFrame::WideSite;
  wideSites.set(i,
                wideSite ? std::optional<uint32_t>(frame.site) : std::nullopt);
  uint64_t fields = uint64_t(frame.inferred) << PackedFrame::InferredShift |
                    uint64_t(frame.anchored) << PackedFrame::AnchoredShift |
                    uint64_t(frame.open) << PackedFrame::OpenShift |
                    parentField(i, frame.parent) << PackedFrame::ParentShift |
                    (wideSite ? PackedFrame::WideSite : frame.site)
                        << PackedFrame::SiteShift;
  // The flags, parent and site first (record bits 52-87); the times then
  // write bits 0-51.
  uint64_t low = fields << PackedFrame::HighShift;
  store(i, low, fields);
  setTimes(i, frame.begin, frame.end);
}

void FrameList::setParent(size_t i, uint32_t parent) {
  uint64_t high = highOf(i);
  high &= ~(PackedFrame::WideParent << PackedFrame::ParentShift);
  high |= parentField(i, parent) << PackedFrame::ParentShift;
  setHigh(i, high);
}

size_t FrameList::bytes() const {
  size_t total = packed.capacity() * sizeof(PackedFrame) +
                 blocks.capacity() * sizeof(Block) + wideBegins.bytes() +
                 wideEnds.bytes() + wideParents.bytes() + wideSites.bytes();
  for (const Block &block : blocks)
    total += block.far.capacity() * sizeof(uint32_t);
  return total;
}

void FrameList::truncate(size_t count) {
  if (count >= packed.size())
    return;
  packed.shift(packed.size(), count);
  blocks.resize(count ? blockOf(count - 1) + 1 : 0);
  if (count == 0)
    origin = 0;
  wideBegins.truncate(count);
  wideEnds.truncate(count);
  wideParents.truncate(count);
  wideSites.truncate(count);
}

void FrameList::shrinkToFit(size_t spare) {
  packed.shrinkToFit(spare);
  blocks.shrink_to_fit();
  for (Block &block : blocks)
    block.far.shrink_to_fit();
  wideBegins.shrinkToFit();
  wideEnds.shrinkToFit();
  wideParents.shrinkToFit();
  wideSites.shrinkToFit();
}

void FrameList::shift(size_t from, size_t to,
                      const std::function<uint32_t(uint32_t)> &outside) {
  size_t oldSize = packed.size();
  from = std::min(from, oldSize);
  packed.shift(from, to);
  // Every moved frame stays in its block: the blocks before the first
  // moved frame's go, or new unset ones open in front.
  int64_t shifted = int64_t(origin) + int64_t(from) - int64_t(to);
  if (shifted >= 0) {
    size_t drop = std::min(size_t(shifted) >> BlockBits, blocks.size());
    blocks.erase(blocks.begin(), blocks.begin() + drop);
    origin = size_t(shifted) - (drop << BlockBits);
  } else {
    size_t open =
        (size_t(-shifted) + (size_t(1) << BlockBits) - 1) >> BlockBits;
    blocks.insert(blocks.begin(), open, Block{});
    origin = size_t(shifted + int64_t(open << BlockBits));
  }
  if (!packed.empty() && blockOf(packed.size() - 1) >= blocks.size())
    blocks.resize(blockOf(packed.size() - 1) + 1);
  // The far parents of the blocks that hold moved frames are theirs (and
  // the caller's, who sets the frames before `to`): renumbered once a block.
  // The blocks before those only hold frames the caller sets.
  size_t firstMoved = blockOf(to);
  for (size_t block = 0; block < blocks.size(); ++block) {
    std::vector<uint32_t> &far = blocks[block].far;
    if (block < firstMoved || to == packed.size()) {
      far = {};
      continue;
    }
    for (uint32_t &parent : far) {
      if (parent >= from && parent < oldSize)
        parent = uint32_t(parent - from + to);
      else if (outside)
        parent = outside(parent);
    }
  }
  wideBegins.shift(from, to);
  wideEnds.shift(from, to);
  wideSites.shift(from, to);
  // Parents: a distance back stays right when the parent moved too (the
  // common case, read and left); every other parent is rewritten, and the
  // wide table is rebuilt in index order as the frames are walked.
  WideTable<uint32_t> oldParents;
  oldParents.entries.swap(wideParents.entries);
  oldParents.shift(from, to);
  auto oldParent = oldParents.entries.begin();
  for (size_t i = to; i < packed.size(); ++i) {
    uint64_t high = highOf(i);
    uint64_t back = high >> PackedFrame::ParentShift & PackedFrame::WideParent;
    uint32_t parent;
    if (back == PackedFrame::WideParent) {
      uint32_t old = (oldParent++)->value;
      parent = old >= from && old < oldSize ? uint32_t(old - from + to)
               : outside                    ? outside(old)
                                            : old;
    } else if (back == 0) {
      if (!outside)
        continue;
      parent = outside(Frame::NoParent);
      if (parent == Frame::NoParent)
        continue;
    } else if (back >= PackedFrame::FarParents || back <= i - to) {
      continue; // Its block's far parent, or a parent that moved with it.
    } else {
      uint32_t old = uint32_t(i - to + from - back);
      parent = outside ? outside(old) : old;
    }
    setParent(i, parent);
  }
}

SiteTable::SiteTable() {
  sites.emplace_back();
  slots.assign(64, NoSlot);
  slots[slotOf(sites[0])] = 0;
}

size_t SiteTable::slotOf(const FrameSite &site) const {
  uint64_t hash = site.address * 0x9e3779b97f4a7c15ull;
  hash ^= (uint64_t(site.name) << 32 | site.file) * 0xc2b2ae3d27d4eb4full;
  hash ^=
      (uint64_t(site.line) << 8 | uint64_t(site.kind)) * 0x165667b19e3779f9ull;
  hash ^= hash >> 29;
  size_t mask = slots.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask)
    if (slots[slot] == NoSlot || sites[slots[slot]] == site)
      return slot;
}

SiteId SiteTable::intern(const FrameSite &site) {
  size_t slot = slotOf(site);
  if (slots[slot] != NoSlot)
    return slots[slot];
  if (sites.size() > MaxSite)
    return 0;
  SiteId id = SiteId(sites.size());
  sites.push_back(site);
  slots[slot] = id;
  if (sites.size() * 2 > slots.size())
    grow();
  return id;
}

void SiteTable::grow() {
  slots.assign(slots.size() * 2, NoSlot);
  for (SiteId id = 0; id < sites.size(); ++id)
    slots[slotOf(sites[id])] = id;
}

size_t SiteTable::bytes() const {
  return sites.capacity() * sizeof(FrameSite) +
         slots.capacity() * sizeof(SiteId);
}

namespace {

llvm::Error frameError(const ThreadModel &thread, size_t segment, size_t frame,
                       const llvm::Twine &what) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("invalid trace model: thread {0}, segment {1}, frame {2}: ",
                    thread.tid, segment, frame) +
          what + " (this is a bug in the model builder)");
}

/// Checks one segment's frame tree: pre-order, nesting, sibling order, and
/// that every frame lies inside the segment.
llvm::Error validateSegment(const ThreadModel &thread, size_t segIndex,
                            const Segment &segment, size_t stringCount) {
  const FrameList &frames = segment.frames;
  // Indices of the frames enclosing the next one in pre-order (root first).
  std::vector<uint32_t> open;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame &frame = frames[i];
    if (frame.begin > frame.end)
      return frameError(
          thread, segIndex, i,
          llvm::formatv("begin {0} after end {1}", frame.begin, frame.end));
    if (frame.site >= thread.sites.size())
      return frameError(
          thread, segIndex, i,
          llvm::formatv("site {0} not in the thread's table", frame.site));
    const FrameSite &site = thread.sites[frame.site];
    if (site.name >= stringCount || site.file >= stringCount)
      return frameError(thread, segIndex, i,
                        llvm::formatv("string id {0} or {1} not in the table",
                                      site.name, site.file));
    if (frame.begin < segment.begin || frame.end > segment.end)
      return frameError(thread, segIndex, i,
                        llvm::formatv("[{0}, {1}] outside segment [{2}, {3}]",
                                      frame.begin, frame.end, segment.begin,
                                      segment.end));
    if (frame.parent != Frame::NoParent && frame.parent >= i)
      return frameError(
          thread, segIndex, i,
          llvm::formatv("parent {0} does not precede it", frame.parent));
    // Pop to the parent; the last frame popped is the previous sibling.
    std::optional<uint32_t> previousSibling;
    while (!open.empty() && open.back() != frame.parent) {
      previousSibling = open.back();
      open.pop_back();
    }
    if (frame.parent != Frame::NoParent && open.empty())
      return frameError(thread, segIndex, i,
                        llvm::formatv("parent {0} is not an open ancestor "
                                      "(frames are not in pre-order)",
                                      frame.parent));
    if (frame.parent != Frame::NoParent) {
      const Frame &parent = frames[frame.parent];
      if (frame.begin < parent.begin || frame.end > parent.end)
        return frameError(
            thread, segIndex, i,
            llvm::formatv("[{0}, {1}] not inside parent {2} [{3}, {4}]",
                          frame.begin, frame.end, frame.parent, parent.begin,
                          parent.end));
    }
    if (previousSibling && frames[*previousSibling].end > frame.begin)
      return frameError(
          thread, segIndex, i,
          llvm::formatv("begins at {0}, before previous sibling {1} ends at "
                        "{2}",
                        frame.begin, *previousSibling,
                        frames[*previousSibling].end));
    open.push_back(uint32_t(i));
  }
  return llvm::Error::success();
}

/// validateSegment's checks without their messages, for a thread whose
/// sites all name strings in the table (so a site id in the table is enough):
/// whether every frame of [from, to) passes them. One pass with few
/// branches; a model that fails is checked again by validateSegment, which
/// names the fault. `open` is scratch space. Ranges check independently:
/// where the frames before `from` pass, the stack of open frames at `from`
/// is the chain of parents of the frame before it, rebuilt here, so that
/// the ranges of a segment all pass exactly when the whole segment does.
bool segmentValid(const Segment &segment, size_t siteCount,
                  std::vector<uint32_t> &open, size_t from, size_t to) {
  const FrameList &frames = segment.frames;
  size_t count = segment.frames.size();
  // validateSegment's stack holds indices, which could not be told from
  // NoParent past 2^32 - 1 frames.
  if (count >= Frame::NoParent || from > to || to > count)
    return false;
  // The stack grows with the depth reached, not the frame count: sizing it
  // to the frames cost a memset (and page faults) of 4 bytes a frame.
  if (open.size() < 64)
    open.resize(64);
  // The frame before the run and its ancestors, outermost first.
  size_t depth = 0;
  for (uint32_t up = uint32_t(from - 1); from > 0;) {
    if (depth == open.size())
      open.resize(open.size() * 2);
    open[depth++] = up;
    uint32_t parent = frames.parentOf(up);
    if (parent == Frame::NoParent)
      break;
    if (parent >= up)
      return false;
    up = parent;
  }
  std::reverse(open.begin(), open.begin() + depth);
  uint32_t *stack = open.data();
  for (uint32_t i = uint32_t(from); i < to; ++i) {
    Frame frame = frames[i];
    bool bad = (frame.begin > frame.end) | (frame.site >= siteCount) |
               (frame.begin < segment.begin) | (frame.end > segment.end);
    uint32_t parent = frame.parent;
    // The last frame popped to reach the parent is the previous sibling.
    uint32_t sibling = Frame::NoParent;
    if (parent == Frame::NoParent) {
      if (depth)
        sibling = stack[0];
      depth = 0;
    } else if (parent + 1 == i) {
      // The previous frame's first child: its parent is on top already.
      uint64_t upBegin = frames.beginOf(parent), upEnd = frames.endOf(parent);
      bad |= (frame.begin < upBegin) | (frame.end > upEnd);
    } else {
      if (bad || parent >= i)
        return false;
      while (depth && stack[depth - 1] != parent)
        sibling = stack[--depth];
      if (depth == 0)
        return false;
      uint64_t upBegin = frames.beginOf(parent), upEnd = frames.endOf(parent);
      bad = (frame.begin < upBegin) | (frame.end > upEnd);
    }
    if (sibling != Frame::NoParent)
      bad |= frames.endOf(sibling) > frame.begin;
    if (bad)
      return false;
    if (depth == open.size()) {
      open.resize(open.size() * 2);
      stack = open.data();
    }
    stack[depth++] = i;
  }
  return true;
}

/// Every site of `thread` names strings of the table.
bool sitesValid(const ThreadModel &thread, size_t stringCount) {
  for (size_t id = 0; id < thread.sites.size(); ++id)
    if (thread.sites[SiteId(id)].name >= stringCount ||
        thread.sites[SiteId(id)].file >= stringCount)
      return false;
  return true;
}

/// validateModel's check of one run of `thread`'s frames (segment
/// `segIndex`, frames [from, to)): at a segment's first run also its times
/// against the segment before, and at the thread's first its sites. False
/// when anything fails (validateThread then names it).
bool runValid(const ThreadModel &thread, size_t segIndex, size_t from,
              size_t to, size_t stringCount, std::vector<uint32_t> &open) {
  if (segIndex == 0 && from == 0 && !sitesValid(thread, stringCount))
    return false;
  if (thread.segments.empty())
    return true;
  const Segment &segment = thread.segments[segIndex];
  if (from == 0 &&
      (segment.begin > segment.end ||
       (segIndex > 0 && thread.segments[segIndex - 1].end > segment.begin)))
    return false;
  return segmentValid(segment, thread.sites.size(), open, from, to);
}

/// validateModel for one thread.
llvm::Error validateThread(const ThreadModel &thread, size_t stringCount) {
  std::vector<uint32_t> open;
  bool sitesGood = sitesValid(thread, stringCount);
  for (size_t s = 0; s < thread.segments.size(); ++s) {
    const Segment &segment = thread.segments[s];
    if (segment.begin > segment.end)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("invalid trace model: thread {0}, segment {1}: "
                        "begin {2} after end {3} (this is a bug in the "
                        "model builder)",
                        thread.tid, s, segment.begin, segment.end));
    if (s > 0 && thread.segments[s - 1].end > segment.begin)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("invalid trace model: thread {0}, segment {1}: "
                        "begins at {2}, before segment {3} ends at {4} "
                        "(this is a bug in the model builder)",
                        thread.tid, s, segment.begin, s - 1,
                        thread.segments[s - 1].end));
    if (sitesGood && segmentValid(segment, thread.sites.size(), open, 0,
                                  segment.frames.size()))
      continue;
    if (llvm::Error err = validateSegment(thread, s, segment, stringCount))
      return err;
  }
  return llvm::Error::success();
}

} // namespace

unsigned frameWorkers(const TraceModel &model) {
  uint64_t frames = 0;
  for (const ThreadModel &thread : model.threads)
    for (const Segment &segment : thread.segments)
      frames += segment.frames.size();
  return frames >= (uint64_t(1) << 20) ? machineCores() : 1;
}

llvm::Error validateModel(const TraceModel &model) {
  // Runs of a segment's frames per worker when the model is big (the check
  // walks every frame), so that one big thread keeps every worker busy. A
  // thread that fails is checked again alone, to name its fault; the first
  // such thread in the model's order is the one said.
  unsigned workers = frameWorkers(model);
  std::vector<model::FrameRun> runs = model::frameRuns(
      model.threads.size(),
      [&](size_t t) -> const ThreadModel & { return model.threads[t]; },
      model::RunFrames);
  std::vector<std::atomic<bool>> failed(model.threads.size());
  size_t strings = model.strings.size();
  std::atomic<size_t> next{0};
  forEachParallel(std::min<size_t>(workers, runs.size()), workers, [&](size_t) {
    std::vector<uint32_t> open;
    for (size_t r; (r = next++) < runs.size();) {
      const model::FrameRun &run = runs[r];
      const ThreadModel &thread = model.threads[run.thread];
      if (!failed[run.thread] &&
          !runValid(thread, run.segment, run.from, run.to, strings, open))
        failed[run.thread] = true;
    }
  });
  for (size_t t = 0; t < model.threads.size(); ++t) {
    if (!failed[t])
      continue;
    if (llvm::Error err = validateThread(model.threads[t], strings))
      return err;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("invalid trace model: thread {0} failed a check that "
                      "passed when repeated (this is a bug in the model "
                      "checks)",
                      model.threads[t].tid));
  }
  return llvm::Error::success();
}

} // namespace magic_trace
