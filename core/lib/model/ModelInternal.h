//===- ModelInternal.h - What segment building hands to stitching -*- C++ -*-=//
//
// Private to core/lib/model: the facts about each built segment that the
// stitching and anchoring passes need and the public Segment does not keep.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_MODEL_MODELINTERNAL_H
#define MAGIC_TRACE_LIB_MODEL_MODELINTERNAL_H

#include "magic_trace/ModelBuilder.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace magic_trace {
namespace model {

constexpr uint32_t NoFrame = UINT32_MAX;

/// Side facts of segment `i` of a ThreadModel (same index).
struct SegmentFacts {
  /// Frames open when the segment closed, outermost first (indices into
  /// Segment::frames). Never contains spans.
  std::vector<uint32_t> endStack;
  /// Parallel to endStack: the address each open physical frame's call
  /// pushed, where its return goes (0: unknown, or an inlined frame).
  std::vector<uint64_t> endReturns;
  /// (frame index < startDepth, address): an inferred frame of the start
  /// chain returned to that address, so its call had pushed it.
  std::vector<std::pair<uint32_t, uint64_t>> startReturns;
  /// Frames [0, startDepth) are the stack at the first instruction: the
  /// chain of inferred frames (outermost first).
  uint32_t startDepth = 0;
  /// Frames [0, synthesized) were added by stitching or anchoring: no
  /// instruction of this segment ran in them, so they may be wrong.
  uint32_t synthesized = 0;
  /// Stitched: frames [0, continued) continue endStack[0, continued) of the
  /// previous segment.
  uint32_t continued = 0;
  /// The lost-time span closing this segment, or NoFrame.
  uint32_t gapFrame = NoFrame;
  /// How the segment's last block ended (anchoring: a trace that ends in a
  /// jump to the stop's function entry made a tail call into it).
  BranchClass lastClass = BranchClass::Other;
};

/// What chain level `level` of `range` is (0: the physical function, kind
/// Unknown when no symbol covers it).
FrameSite siteForRange(const SymbolRange &range, size_t level);

/// Replaces the first `strip` frames of `segment` (a chain of single-child
/// ancestors of everything else) by `roots` (a chain, outermost first, whose
/// parent fields are ignored); the new frames span the whole segment.
/// Updates `facts` (indices shift).
void reroot(Segment &segment, SegmentFacts &facts, uint32_t strip,
            const std::vector<Frame> &roots);

/// Joins segments whose stacks agree across their gap (docs/model.md).
void stitchSegments(ThreadModel &model, std::vector<SegmentFacts> &facts,
                    ModelStats &stats);

/// Matches the last segment's final stack to `stop` and propagates the
/// correction backward through stitched segments (docs/model.md).
void anchorToStop(ThreadModel &model, std::vector<SegmentFacts> &facts,
                  const ThreadStop &stop, SymbolLookup lookup,
                  ModelStats &stats);

} // namespace model
} // namespace magic_trace

#endif
