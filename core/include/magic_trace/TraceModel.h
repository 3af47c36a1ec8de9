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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
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

/// A frame as a segment stores it, in 11 bytes: the model holds one per
/// call and inlined frame traced, so it is most of a snapshot's memory.
/// The record's 88 bits, little-endian, hold:
/// - bits 0-29: the begin, as an offset from its block's base (a block is
///   256 consecutive frames, whose begins pre-order keeps close);
/// - bits 30-51: the length, end - begin;
/// - bits 52-54: inferred, anchored, open;
/// - bits 55-67: the parent, as how far back it is (0: no parent), or from
///   FarParents on, an index into its block's list of far parents (a
///   loop's calls are far from their parent, as are the calls a recursion
///   makes between its deeper calls; a block's frames share few);
/// - bits 68-87: the site.
/// A field of all ones says the value is in the list's wide table for that
/// field instead: a frame beginning 1 s or more after its block's base or
/// before it, lasting 4 ms or more, with its block's far parents all taken,
/// or with a site id of 2^20 - 1 or more.
struct PackedFrame {
  static constexpr unsigned BeginBits = 30;
  static constexpr uint64_t WideBegin = (uint64_t(1) << BeginBits) - 1;
  static constexpr unsigned LengthShift = BeginBits;
  static constexpr uint64_t WideLength = (uint64_t(1) << 22) - 1;
  // The rest is read from the record's bits 24-87 (`high`).
  static constexpr unsigned HighShift = 24;
  static constexpr unsigned InferredShift = 52 - HighShift;
  static constexpr unsigned AnchoredShift = 53 - HighShift;
  static constexpr unsigned OpenShift = 54 - HighShift;
  static constexpr unsigned ParentShift = 55 - HighShift;
  static constexpr uint64_t WideParent = (uint64_t(1) << 13) - 1;
  static constexpr uint64_t FarParents = WideParent - 256;
  static constexpr unsigned SiteShift = 68 - HighShift;
  static constexpr uint64_t WideSite = (uint64_t(1) << 20) - 1;

  unsigned char bytes[11];
};
static_assert(sizeof(PackedFrame) == 11, "a frame is the model's unit");

/// A segment's frames: a std::vector-like list of Frame values kept as
/// PackedFrames. Reads return copies; writes go through set() and the
/// field setters. Every field's value round-trips exactly.
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
    __attribute__((always_inline)) Frame operator*() const {
      return (*list)[index];
    }
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
  /// A block's own bytes (its base and its list of far parents, but not
  /// the list's heap), per 256 frames.
  static constexpr size_t BlockBytes = 32;
  /// Heap bytes: the packed frames, the blocks and the wide tables.
  size_t bytes() const;

  /// The first block's base: the first frame's begin unless set first (the
  /// builder sets the segment's start, which no frame of it precedes).
  /// Only while the list is empty.
  void setBase(uint64_t time) {
    blocks.clear();
    blocks.push_back(Block{time, {}});
    origin = 0;
  }

  __attribute__((always_inline)) Frame operator[](size_t i) const {
    uint64_t low = lowOf(i), high = highOf(i);
    Frame frame;
    frame.begin = beginFrom(i, low);
    frame.end = endFrom(i, low, frame.begin);
    frame.parent = parentFrom(i, high);
    frame.site = siteFrom(i, high);
    frame.inferred = high >> PackedFrame::InferredShift & 1;
    frame.anchored = high >> PackedFrame::AnchoredShift & 1;
    frame.open = high >> PackedFrame::OpenShift & 1;
    return frame;
  }
  Frame front() const { return (*this)[0]; }
  Frame back() const { return (*this)[size() - 1]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  __attribute__((always_inline)) uint64_t beginOf(size_t i) const {
    return beginFrom(i, lowOf(i));
  }
  __attribute__((always_inline)) uint64_t endOf(size_t i) const {
    uint64_t low = lowOf(i);
    return endFrom(i, low, beginFrom(i, low));
  }
  uint32_t parentOf(size_t i) const { return parentFrom(i, highOf(i)); }
  SiteId siteOf(size_t i) const { return siteFrom(i, highOf(i)); }
  bool inferredAt(size_t i) const {
    return highOf(i) >> PackedFrame::InferredShift & 1;
  }
  bool anchoredAt(size_t i) const {
    return highOf(i) >> PackedFrame::AnchoredShift & 1;
  }
  bool openAt(size_t i) const {
    return highOf(i) >> PackedFrame::OpenShift & 1;
  }

  void push_back(const Frame &frame) {
    appendSlot(frame.begin);
    set(packed.size() - 1, frame);
  }
  /// Appends a frame that begins and ends at `time` (the builder's append,
  /// written in place).
  __attribute__((always_inline)) void pushAt(uint64_t time, uint32_t parent,
                                             SiteId site, bool inferred) {
    size_t i = appendSlot(time);
    uint64_t base = blocks[blockOf(i)].base;
    uint64_t offset = time - base;
    uint64_t back = i - uint64_t(parent);
    if (time >= base && offset < PackedFrame::WideBegin &&
        (parent == Frame::NoParent ||
         (parent < i && back < PackedFrame::FarParents)) &&
        site < PackedFrame::WideSite) [[likely]] {
      uint64_t fields = uint64_t(inferred) << PackedFrame::InferredShift |
                        (parent == Frame::NoParent ? 0 : back)
                            << PackedFrame::ParentShift |
                        uint64_t(site) << PackedFrame::SiteShift;
      store(i, offset | fields << PackedFrame::HighShift,
            offset >> PackedFrame::HighShift | fields);
      return;
    }
    Frame frame;
    frame.begin = frame.end = time;
    frame.parent = parent;
    frame.site = site;
    frame.inferred = inferred;
    set(i, frame);
  }
  /// Writes every field of frame `i`.
  void set(size_t i, const Frame &frame);
  __attribute__((always_inline)) void setEnd(size_t i, uint64_t end) {
    uint64_t low = lowOf(i);
    uint64_t begin = beginFrom(i, low);
    uint64_t length = end - begin;
    if (end >= begin && length < PackedFrame::WideLength &&
        (low >> PackedFrame::LengthShift & PackedFrame::WideLength) !=
            PackedFrame::WideLength) [[likely]] {
      low = (low & ~(PackedFrame::WideLength << PackedFrame::LengthShift)) |
            length << PackedFrame::LengthShift;
      setLow(i, low);
      return;
    }
    setTimes(i, begin, end);
  }
  void setParent(size_t i, uint32_t parent);
  void setOpen(size_t i, bool open) { setBit(i, PackedFrame::OpenShift, open); }
  void setInferred(size_t i, bool inferred) {
    setBit(i, PackedFrame::InferredShift, inferred);
  }
  void setAnchored(size_t i, bool anchored) {
    setBit(i, PackedFrame::AnchoredShift, anchored);
  }

  /// Empties the list and forgets its blocks.
  void clear() {
    packed.clear();
    blocks.clear();
    origin = 0;
    wideBegins.clear();
    wideEnds.clear();
    wideParents.clear();
    wideSites.clear();
  }
  void reserve(size_t wanted) { packed.reserve(wanted); }
  /// Drops the frames from `count` on.
  void truncate(size_t count);
  /// Gives back the capacity beyond size() + `spare`.
  void shrinkToFit(size_t spare = 0);
  /// Moves frames [from, size()) to start at `to` (either direction); the
  /// frames before `to` are left for the caller to set(). A moved frame's
  /// parent that moved too is renumbered with it; any other parent (one
  /// before `from`, none, or an index past the list) becomes
  /// `outside(parent)`, or stays without `outside`.
  void shift(size_t from, size_t to,
             const std::function<uint32_t(uint32_t)> &outside = {});

private:
  static constexpr unsigned BlockBits = 8;
  static constexpr uint64_t UnsetBase = UINT64_MAX;

  /// What a block of frames shares: the time its begin offsets count from
  /// (UnsetBase: none yet), and the parents too far back from its frames
  /// for their fields, each once.
  struct Block {
    uint64_t base = UnsetBase;
    std::vector<uint32_t> far;
  };
  static_assert(sizeof(Block) == BlockBytes, "BlockBytes is a Block");

  /// Values of one field that do not fit its bits, sorted by frame index.
  template <typename Value> class WideTable {
  public:
    struct Entry {
      uint32_t index;
      Value value;
    };
    /// Frame `i`'s value, which it has.
    Value at(size_t i) const {
      auto found = entryAt(i);
      return found != entries.end() && found->index == i ? found->value
                                                         : Value();
    }
    /// Stores `value` as frame `i`'s, or drops its entry.
    void set(size_t i, std::optional<Value> value) {
      if (!value && entries.empty())
        return;
      // Appends come in index order: the common case is the end.
      auto found = !entries.empty() && entries.back().index < i ? entries.end()
                                                                : entryAt(i);
      bool present = found != entries.end() && found->index == i;
      if (!value) {
        if (present)
          entries.erase(found);
        return;
      }
      if (present)
        found->value = *value;
      else
        entries.insert(found, Entry{uint32_t(i), *value});
    }
    void truncate(size_t count) {
      while (!entries.empty() && entries.back().index >= count)
        entries.pop_back();
    }
    /// Drops the entries before `from` and renumbers the rest by to - from.
    void shift(size_t from, size_t to) {
      entries.erase(entries.begin(), entryAt(from));
      for (Entry &entry : entries)
        entry.index = uint32_t(entry.index - from + to);
    }
    void clear() { entries.clear(); }
    void shrinkToFit() { entries.shrink_to_fit(); }
    size_t bytes() const { return entries.capacity() * sizeof(Entry); }

    std::vector<Entry> entries;

  private:
    /// The first entry of `list` at frame `i` or after it.
    template <typename List> static auto entryAt(List &list, size_t i) {
      return std::lower_bound(
          list.begin(), list.end(), i,
          [](const Entry &entry, size_t index) { return entry.index < index; });
    }
    auto entryAt(size_t i) const { return entryAt(entries, i); }
    auto entryAt(size_t i) { return entryAt(entries, i); }
  };

  size_t blockOf(size_t i) const { return (i + origin) >> BlockBits; }
  /// Appends an unwritten frame, giving a new block `begin` as its base.
  __attribute__((always_inline)) size_t appendSlot(uint64_t begin) {
    size_t i = packed.size();
    packed.appendUninitialized(1);
    if (blockOf(i) >= blocks.size()) [[unlikely]]
      blocks.push_back(Block{begin, {}});
    return i;
  }
  /// A record's bits 0-63 (`low`) and 24-87 (`high`), read and written
  /// as unaligned uint64_t words: typed, so that the compiler knows stores
  /// of other types (a reader's stacks and buffers) leave them be.
  struct __attribute__((packed)) Word {
    uint64_t value;
  };
  uint64_t lowOf(size_t i) const {
    return reinterpret_cast<const Word *>(packed[i].bytes)->value;
  }
  uint64_t highOf(size_t i) const {
    return reinterpret_cast<const Word *>(packed[i].bytes +
                                          PackedFrame::HighShift / 8)
        ->value;
  }
  void setLow(size_t i, uint64_t low) {
    reinterpret_cast<Word *>(packed[i].bytes)->value = low;
  }
  void setHigh(size_t i, uint64_t high) {
    reinterpret_cast<Word *>(packed[i].bytes + PackedFrame::HighShift / 8)
        ->value = high;
  }
  /// Writes the record whose bits 0-63 are `low` and 24-87 are `high`.
  void store(size_t i, uint64_t low, uint64_t high) {
    setLow(i, low);
    setHigh(i, high);
  }
  uint64_t beginFrom(size_t i, uint64_t low) const {
    uint64_t offset = low & PackedFrame::WideBegin;
    return offset != PackedFrame::WideBegin ? blocks[blockOf(i)].base + offset
                                            : wideBegins.at(i);
  }
  uint64_t endFrom(size_t i, uint64_t low, uint64_t begin) const {
    uint64_t length = low >> PackedFrame::LengthShift & PackedFrame::WideLength;
    return length != PackedFrame::WideLength ? begin + length : wideEnds.at(i);
  }
  uint32_t parentFrom(size_t i, uint64_t high) const {
    uint64_t back = high >> PackedFrame::ParentShift & PackedFrame::WideParent;
    if (back == 0)
      return Frame::NoParent;
    if (back < PackedFrame::FarParents) [[likely]]
      return uint32_t(i - back);
    if (back != PackedFrame::WideParent)
      return blocks[blockOf(i)].far[back - PackedFrame::FarParents];
    return wideParents.at(i);
  }
  SiteId siteFrom(size_t i, uint64_t high) const {
    uint64_t site = high >> PackedFrame::SiteShift;
    return site != PackedFrame::WideSite ? SiteId(site) : wideSites.at(i);
  }
  void setBit(size_t i, unsigned shift, bool on) {
    uint64_t high = highOf(i);
    high = on ? high | uint64_t(1) << shift : high & ~(uint64_t(1) << shift);
    setHigh(i, high);
  }
  /// Frame `i`'s parent field for `parent`, with its wide entry kept.
  uint64_t parentField(size_t i, uint32_t parent);
  void setTimes(size_t i, uint64_t begin, uint64_t end);

  PodVector<PackedFrame> packed;
  std::vector<Block> blocks;
  /// Frame i is in block (i + origin) >> BlockBits: shifts move frames
  /// between indices, not between blocks.
  size_t origin = 0;
  WideTable<uint64_t> wideBegins, wideEnds;
  WideTable<uint32_t> wideParents, wideSites;
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
