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
#include <memory>
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

/// 24 bytes: the model holds one per call and inlined frame traced, so it is
/// most of a snapshot's memory. Times are nanoseconds on the snapshot's clock.
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
static_assert(sizeof(Frame) == 24, "Frame is the model's unit of memory");

struct Segment {
  uint64_t begin = 0;
  uint64_t end = 0;
  PodVector<Frame> frames; ///< Pre-order; parent indices point backwards.
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
