//===- TraceModel.cpp - Invariants of the segmented call-stack trace ------===//
//
// The writers rely on these invariants: the FXT writer emits frames in
// pre-order as complete events, which a reader nests correctly only if
// children lie inside parents and siblings do not overlap.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/TraceModel.h"

#include "magic_trace/Parallel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
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

/// The first entry of `table` (sorted by index) at frame `i` or after it.
template <typename Table> static auto entryAt(Table &table, size_t i) {
  return std::lower_bound(
      table.begin(), table.end(), i,
      [](const auto &entry, size_t index) { return entry.index < index; });
}

uint64_t FrameList::wide(const std::vector<WideTime> &table, size_t i) {
  auto at = entryAt(table, i);
  return at != table.end() && at->index == i ? at->time : 0;
}

void FrameList::setWide(std::vector<WideTime> &table, size_t i,
                        std::optional<uint64_t> time) {
  if (!time && table.empty())
    return;
  // Appends come in index order: the common case is the end.
  auto at = !table.empty() && table.back().index < i ? table.end()
                                                     : entryAt(table, i);
  bool present = at != table.end() && at->index == i;
  if (!time) {
    if (present)
      table.erase(at);
    return;
  }
  if (present)
    at->time = *time;
  else
    table.insert(at, WideTime{uint32_t(i), *time});
}

void FrameList::setTimes(size_t i, uint64_t begin, uint64_t end) {
  uint64_t offset = begin - base;
  bool wideBegin = begin < base || offset >= PackedFrame::WideBegin;
  uint64_t length = end - begin;
  bool wideEnd = end < begin || length >= PackedFrame::WideLength;
  packed[i].times = (wideBegin ? PackedFrame::WideBegin : offset) |
                    (wideEnd ? PackedFrame::WideLength : length)
                        << PackedFrame::BeginBits;
  setWide(wideBegins, i,
          wideBegin ? std::optional<uint64_t>(begin) : std::nullopt);
  setWide(wideEnds, i, wideEnd ? std::optional<uint64_t>(end) : std::nullopt);
}

void FrameList::truncate(size_t count) {
  if (count >= packed.size())
    return;
  packed.shift(packed.size(), count);
  for (std::vector<WideTime> *table : {&wideBegins, &wideEnds})
    while (!table->empty() && table->back().index >= count)
      table->pop_back();
}

void FrameList::shift(size_t from, size_t to) {
  packed.shift(from, to);
  // In place, and still in index order: the entries of frames the move
  // overwrote go, the moved ones follow them.
  for (std::vector<WideTime> *table : {&wideBegins, &wideEnds}) {
    table->erase(std::remove_if(table->begin(), table->end(),
                                [&](const WideTime &entry) {
                                  return entry.index >= to &&
                                         entry.index < from;
                                }),
                 table->end());
    for (WideTime &entry : *table)
      if (entry.index >= from)
        entry.index = uint32_t(entry.index - from + to);
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
/// whether every frame passes them. One pass with few branches; a model
/// that fails is checked again by validateSegment, which names the fault.
/// `open` is scratch space.
bool segmentValid(const Segment &segment, size_t siteCount,
                  std::vector<uint32_t> &open) {
  const FrameList &frames = segment.frames;
  size_t count = segment.frames.size();
  // validateSegment's stack holds indices, which could not be told from
  // NoParent past 2^32 - 1 frames.
  if (count >= Frame::NoParent)
    return false;
  // The stack grows with the depth reached, not the frame count: sizing it
  // to the frames cost a memset (and page faults) of 4 bytes a frame.
  if (open.size() < 64)
    open.resize(64);
  uint32_t *stack = open.data();
  size_t depth = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const Frame &frame = frames[i];
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
      const Frame &up = frames[parent];
      bad |= (frame.begin < up.begin) | (frame.end > up.end);
    } else {
      if (bad || parent >= i)
        return false;
      while (depth && stack[depth - 1] != parent)
        sibling = stack[--depth];
      if (depth == 0)
        return false;
      const Frame &up = frames[parent];
      bad = (frame.begin < up.begin) | (frame.end > up.end);
    }
    if (sibling != Frame::NoParent)
      bad |= frames[sibling].end > frame.begin;
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
    if (sitesGood && segmentValid(segment, thread.sites.size(), open))
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
  // A thread per worker when the model is big (the check walks every
  // frame); the first thread's error in the model's order is the one said.
  unsigned workers = frameWorkers(model);
  std::vector<std::optional<std::string>> failures(model.threads.size());
  forEachParallel(model.threads.size(), workers, [&](size_t i) {
    if (llvm::Error err =
            validateThread(model.threads[i], model.strings.size()))
      failures[i] = llvm::toString(std::move(err));
  });
  for (std::optional<std::string> &failure : failures)
    if (failure)
      return llvm::createStringError(llvm::inconvertibleErrorCode(), *failure);
  return llvm::Error::success();
}

} // namespace magic_trace
