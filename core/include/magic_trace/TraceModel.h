//===- TraceModel.h - The in-memory segmented call-stack trace --*- C++ -*-===//
//
// Per thread, an ordered list of segments; each segment is a continuous,
// error-free piece of execution held as a tree of frames. Writers (FXT, Chrome
// JSON, folded stacks, text tree) read only this; they never see libipt.
//
// Invariants (checked by validateModel):
// - within a segment, frames are in pre-order; a child's [begin, end] lies
//   inside its parent's; siblings do not overlap and are ordered by begin;
// - segments of a thread are ordered and do not overlap;
// - begin <= end for every frame and segment.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TRACEMODEL_H
#define MAGIC_TRACE_TRACEMODEL_H

#include "magic_trace/PodVector.h"
#include "magic_trace/StringTable.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

enum class FrameKind : uint8_t {
  Physical,    ///< A real function call.
  Inlined,     ///< An inlined callee, nested under its physical frame.
  Untraced,    ///< Time with tracing off ("[untraced]").
  Syscall,     ///< Time in the kernel ("[syscall]").
  DecodeError, ///< Lost time: "[decode error: MSG]" / overflow.
  Unknown,     ///< Code no module covers.
};

const char *frameKindName(FrameKind kind);

/// What a frame is, shared by every frame of the same function seen at the
/// same place: frames keep only an index into their thread's SiteTable.
struct FrameSite {
  uint64_t address = 0; ///< Entry (or first seen) address, 0 if none.
  StringId name = 0;    ///< Function name or "[syscall]" etc.
  StringId file = 0;    ///< Source file of the function, may be empty.
  uint32_t line = 0;    ///< 0 when unknown.
  FrameKind kind = FrameKind::Physical;

  bool operator==(const FrameSite &other) const {
    return address == other.address && name == other.name &&
           file == other.file && line == other.line && kind == other.kind;
  }
};

using SiteId = uint32_t;

/// Interned FrameSites. Id 0 is the default site (no name, no address), so a
/// default-constructed Frame is valid. Ids are 29 bits: past MaxSite, intern
/// returns 0 (unreachable in practice: the table would hold 12 GiB).
class SiteTable {
public:
  static constexpr SiteId MaxSite = (1u << 29) - 1;

  SiteTable();
  /// The id of `site`, adding it if new.
  SiteId intern(const FrameSite &site);
  const FrameSite &operator[](SiteId id) const { return sites[id]; }
  size_t size() const { return sites.size(); }
  /// Heap bytes (sites and the index).
  size_t bytes() const;

private:
  static constexpr SiteId NoSlot = UINT32_MAX;
  /// The slot holding `site`, or the empty slot where it belongs.
  size_t slotOf(const FrameSite &site) const;
  void grow();

  std::vector<FrameSite> sites;
  std::vector<SiteId> slots; ///< Open addressing (linear probing) into sites.
};

/// A frame's fields, as readers see them: FrameList hands out copies.
/// Times are nanoseconds on the snapshot's clock.
struct Frame {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t parent = NoParent;
  SiteId site : 29; ///< Index into the thread's SiteTable.
  /// The call happened before the segment's first instruction: the frame was
  /// running at that instruction, or was created by a return into it or by
  /// anchoring to the stop context.
  bool inferred : 1;
  /// Anchoring matched this frame to the debugger's stack at the stop.
  bool anchored : 1;
  /// Still running at its segment's last decoded instruction (on the stack
  /// when the segment closed); `end` is then the segment's end or the loss.
  bool open : 1;

  Frame() : site(0), inferred(false), anchored(false), open(false) {}

  static constexpr uint32_t NoParent = UINT32_MAX;
};

/// A frame as a segment stores it, in 16 bytes: the model holds one per
/// call and inlined frame traced, so it is most of a snapshot's memory.
/// `times` holds the begin as an offset from the list's base (low
/// BeginBits) and the length (the rest); a field of all ones says the
/// value is in the list's table of wide times instead (a segment longer
/// than 68 s, a frame longer than 268 ms).
struct PackedFrame {
  static constexpr unsigned BeginBits = 36;
  static constexpr uint64_t WideBegin = (uint64_t(1) << BeginBits) - 1;
  static constexpr uint64_t WideLength = (uint64_t(1) << (64 - BeginBits)) - 1;
  static constexpr uint32_t SiteMask = (1u << 29) - 1;
  static constexpr uint32_t InferredBit = 1u << 29;
  static constexpr uint32_t AnchoredBit = 1u << 30;
  static constexpr uint32_t OpenBit = 1u << 31;

  uint64_t times;
  uint32_t parent;
  uint32_t bits; ///< site | InferredBit | AnchoredBit | OpenBit.
};
static_assert(sizeof(PackedFrame) == 16, "a frame is the model's unit");

/// A segment's frames: a std::vector-like list of Frame values kept as
/// PackedFrames. Reads return copies; writes go through set() and the
/// field setters. Every uint64_t time round-trips exactly.
class FrameList {
public:
  class const_iterator {
  public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = Frame;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Frame;

    const_iterator() = default;
    const_iterator(const FrameList *list, size_t index)
        : list(list), index(index) {}
    Frame operator*() const { return (*list)[index]; }
    Frame operator[](difference_type n) const { return (*list)[index + n]; }
    const_iterator &operator++() { return ++index, *this; }
    const_iterator operator++(int) { return {list, index++}; }
    const_iterator &operator--() { return --index, *this; }
    const_iterator operator--(int) { return {list, index--}; }
    const_iterator &operator+=(difference_type n) { return index += n, *this; }
    const_iterator &operator-=(difference_type n) { return index -= n, *this; }
    const_iterator operator+(difference_type n) const {
      return {list, index + n};
    }
    const_iterator operator-(difference_type n) const {
      return {list, index - n};
    }
    difference_type operator-(const const_iterator &other) const {
      return difference_type(index) - difference_type(other.index);
    }
    bool operator==(const const_iterator &o) const { return index == o.index; }
    bool operator!=(const const_iterator &o) const { return index != o.index; }
    bool operator<(const const_iterator &o) const { return index < o.index; }
    bool operator>(const const_iterator &o) const { return index > o.index; }
    bool operator<=(const const_iterator &o) const { return index <= o.index; }
    bool operator>=(const const_iterator &o) const { return index >= o.index; }

  private:
    const FrameList *list = nullptr;
    size_t index = 0;
  };
  using iterator = const_iterator;
  using value_type = Frame;

  size_t size() const { return packed.size(); }
  bool empty() const { return packed.empty(); }
  size_t capacity() const { return packed.capacity(); }
  /// Heap bytes: the packed frames and the wide times.
  size_t bytes() const {
    return packed.capacity() * sizeof(PackedFrame) +
           (wideBegins.capacity() + wideEnds.capacity()) * sizeof(WideTime);
  }

  /// Times are stored as offsets from the base: the first frame's begin
  /// unless set first (the builder sets the segment's start, which no
  /// frame of it precedes). Only while the list is empty.
  void setBase(uint64_t time) {
    base = time;
    baseSet = true;
  }

  __attribute__((always_inline)) Frame operator[](size_t i) const {
    const PackedFrame &packedFrame = packed[i];
    Frame frame;
    frame.begin = beginOf(i);
    uint64_t length = packedFrame.times >> PackedFrame::BeginBits;
    frame.end = length != PackedFrame::WideLength ? frame.begin + length
                                                  : wide(wideEnds, i);
    frame.parent = packedFrame.parent;
    frame.site = packedFrame.bits & PackedFrame::SiteMask;
    frame.inferred = packedFrame.bits & PackedFrame::InferredBit;
    frame.anchored = packedFrame.bits & PackedFrame::AnchoredBit;
    frame.open = packedFrame.bits & PackedFrame::OpenBit;
    return frame;
  }
  Frame front() const { return (*this)[0]; }
  Frame back() const { return (*this)[size() - 1]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  __attribute__((always_inline)) uint64_t beginOf(size_t i) const {
    uint64_t offset = packed[i].times & PackedFrame::WideBegin;
    return offset != PackedFrame::WideBegin ? base + offset
                                            : wide(wideBegins, i);
  }
  __attribute__((always_inline)) uint64_t endOf(size_t i) const {
    uint64_t length = packed[i].times >> PackedFrame::BeginBits;
    return length != PackedFrame::WideLength ? beginOf(i) + length
                                             : wide(wideEnds, i);
  }
  uint32_t parentOf(size_t i) const { return packed[i].parent; }
  SiteId siteOf(size_t i) const {
    return packed[i].bits & PackedFrame::SiteMask;
  }
  bool inferredAt(size_t i) const {
    return packed[i].bits & PackedFrame::InferredBit;
  }
  bool anchoredAt(size_t i) const {
    return packed[i].bits & PackedFrame::AnchoredBit;
  }
  bool openAt(size_t i) const { return packed[i].bits & PackedFrame::OpenBit; }

  void push_back(const Frame &frame) {
    if (packed.empty() && !baseSet)
      setBase(frame.begin);
    packed.push_back(PackedFrame{0, frame.parent, bitsOf(frame)});
    setTimes(packed.size() - 1, frame.begin, frame.end);
  }
  /// Appends a frame that begins and ends at `time` (the builder's append,
  /// written in place).
  __attribute__((always_inline)) void pushAt(uint64_t time, uint32_t parent,
                                             SiteId site, bool inferred) {
    if (packed.empty() && !baseSet)
      setBase(time);
    PackedFrame *slot = packed.appendUninitialized(1);
    uint64_t offset = time - base;
    slot->parent = parent;
    slot->bits = site | (inferred ? PackedFrame::InferredBit : 0);
    if (time >= base && offset < PackedFrame::WideBegin) [[likely]] {
      slot->times = offset;
      return;
    }
    slot->times = 0;
    setTimes(packed.size() - 1, time, time);
  }
  void set(size_t i, const Frame &frame) {
    packed[i].parent = frame.parent;
    packed[i].bits = bitsOf(frame);
    setTimes(i, frame.begin, frame.end);
  }
  __attribute__((always_inline)) void setEnd(size_t i, uint64_t end) {
    uint64_t &times = packed[i].times;
    uint64_t offset = times & PackedFrame::WideBegin;
    uint64_t begin =
        offset != PackedFrame::WideBegin ? base + offset : wide(wideBegins, i);
    uint64_t length = end - begin;
    if (end >= begin && length < PackedFrame::WideLength &&
        (times >> PackedFrame::BeginBits) != PackedFrame::WideLength)
        [[likely]] {
      times = offset | length << PackedFrame::BeginBits;
      return;
    }
    setTimes(i, begin, end);
  }
  void setParent(size_t i, uint32_t parent) { packed[i].parent = parent; }
  void setOpen(size_t i, bool open) { setBit(i, PackedFrame::OpenBit, open); }
  void setInferred(size_t i, bool inferred) {
    setBit(i, PackedFrame::InferredBit, inferred);
  }
  void setAnchored(size_t i, bool anchored) {
    setBit(i, PackedFrame::AnchoredBit, anchored);
  }

  /// Empties the list and forgets its base.
  void clear() {
    packed.clear();
    wideBegins.clear();
    wideEnds.clear();
    baseSet = false;
  }
  void reserve(size_t wanted) { packed.reserve(wanted); }
  /// Drops the frames from `count` on.
  void truncate(size_t count);
  /// Gives back the capacity beyond size() + `spare`.
  void shrinkToFit(size_t spare = 0) {
    packed.shrinkToFit(spare);
    wideBegins.shrink_to_fit();
    wideEnds.shrink_to_fit();
  }
  /// Moves frames [from, size()) to start at `to` (either direction); the
  /// frames in a grown gap are left for the caller to set().
  void shift(size_t from, size_t to);

private:
  struct WideTime {
    uint32_t index;
    uint64_t time;
  };
  static uint32_t bitsOf(const Frame &frame) {
    return frame.site | (frame.inferred ? PackedFrame::InferredBit : 0) |
           (frame.anchored ? PackedFrame::AnchoredBit : 0) |
           (frame.open ? PackedFrame::OpenBit : 0);
  }
  void setBit(size_t i, uint32_t bit, bool on) {
    packed[i].bits = on ? packed[i].bits | bit : packed[i].bits & ~bit;
  }
  /// Frame `i`'s entry in `table` (sorted by index), which it has.
  static uint64_t wide(const std::vector<WideTime> &table, size_t i);
  /// Stores `time` as frame `i`'s entry in `table`, or drops its entry.
  static void setWide(std::vector<WideTime> &table, size_t i,
                      std::optional<uint64_t> time);
  void setTimes(size_t i, uint64_t begin, uint64_t end);

  PodVector<PackedFrame> packed;
  uint64_t base = 0;
  bool baseSet = false;
  std::vector<WideTime> wideBegins, wideEnds;
};

struct Segment {
  uint64_t begin = 0;
  uint64_t end = 0;
  FrameList frames; ///< Pre-order; parent indices point backwards.
  /// Stitching joined this segment to the previous one: the stack at the end
  /// of the previous segment equals the stack implied at this one's start.
  bool stitchedToPrevious = false;
  /// Stitched: frames [0, continuedFrames) are the previous segment's first
  /// `open` frames continuing across the gap (the same activations); the
  /// previous segment's deeper open frames returned inside the gap.
  uint32_t continuedFrames = 0;
  /// Why the previous segment ended (decode error / overflow text); empty for
  /// the first segment.
  std::string gapReason;
};

struct ThreadModel {
  uint64_t tid = 0;
  std::string name;
  std::vector<Segment> segments;
  SiteTable sites; ///< What each Frame::site names.
  uint64_t instructions = 0;
  /// Of `instructions`, those whose times the decoder estimated from
  /// instruction counts (no timing packet around them).
  uint64_t estimatedInstructions = 0;
  uint64_t calls = 0;
  uint64_t errors = 0;
  /// PT bytes the errors kept from being decoded (DecodeError::skippedBytes).
  uint64_t undecodedBytes = 0;
  /// The first decode error's message, empty without one.
  std::string firstError;
  /// Where the snapshot's window cut this thread (ModelWindow.h): nothing
  /// before it is in the model. 0: not cut.
  uint64_t windowStart = 0;
};

struct TraceModel {
  uint64_t pid = 0;
  std::string processName;
  StringTable strings;
  std::vector<ThreadModel> threads;
  /// What the window holds and how to get the rest, for the writers' mark
  /// where a cut thread starts; empty when nothing was cut.
  std::string windowNote;

  TraceModel() = default;
  TraceModel(const TraceModel &) = delete;
  TraceModel &operator=(const TraceModel &) = delete;
  TraceModel(TraceModel &&) = default;
  TraceModel &operator=(TraceModel &&) = default;
};

/// The threads a pass over every frame of `model` takes: one per core when
/// it holds 1 M frames or more, else 1 (the check, the writer's clocks).
unsigned frameWorkers(const TraceModel &model);

/// Checks the invariants above; the error names the thread, segment, frame.
llvm::Error validateModel(const TraceModel &model);

/// The name of the instant that marks where a thread's window starts.
constexpr const char *WindowStartName = "[window start]";

/// The name of the instant that marks a thread whose times were estimated.
constexpr const char *EstimatedTimesName =
    "[times estimated from instruction counts]";

/// "times estimated from instruction counts", with the share of the
/// `instructions` so timed when it is not all of them ("(3% of
/// instructions)"); empty when `estimated` is 0.
std::string estimatedTimesNote(uint64_t estimated, uint64_t instructions);

/// estimatedTimesNote of a thread's counts.
std::string clockNote(const ThreadModel &thread);

} // namespace magic_trace

#endif
