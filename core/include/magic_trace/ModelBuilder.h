//===- ModelBuilder.h - Decoded items + symbols -> ThreadModel --*- C++ -*-===//
//
// Turns one thread's decoded item stream (TraceItems.h) into segments of
// frame trees (TraceModel.h): calls push, returns pop to the frame they
// return into, jumps to another function's entry replace the frame (tail
// calls), inlined frames follow the symbolizer's inline chain, tracing gaps
// become [syscall]/[untraced] spans and decode errors/overflows close the
// segment with a marked gap. Then a stitching pass joins segments whose
// stacks agree across a gap, and anchoring matches the final stack to the
// debugger's stack at the stop. docs/model.md describes every rule.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_MODELBUILDER_H
#define MAGIC_TRACE_MODELBUILDER_H

#include "magic_trace/Snapshot.h"
#include "magic_trace/StringTable.h"
#include "magic_trace/SymbolRange.h"
#include "magic_trace/TraceItems.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace magic_trace {

struct ModelOptions {
  /// Join a segment to the previous one when their stacks agree across the
  /// gap (docs/model.md, "Stitching").
  bool stitch = true;
  /// Match the final stack to the stop context and add the outer frames the
  /// trace never saw called (docs/model.md, "Anchoring").
  bool anchor = true;
};

/// Counters of one or more buildThreadModel calls (they accumulate).
struct ModelStats {
  uint64_t segments = 0;
  uint64_t frames = 0;         ///< Every frame, spans included.
  uint64_t inferredFrames = 0; ///< Frames whose call the trace did not see.
  uint64_t gaps = 0;           ///< Decode errors / overflows closing a segment.
  uint64_t stitchedJoins = 0;  ///< Segments joined to their predecessor.
  uint64_t stitchRefused = 0;  ///< Gaps whose stacks did not agree.
  uint64_t anchoredFrames = 0; ///< Frames matched to (or added from) the stop.
  uint64_t anchorAdded = 0;    ///< Outer frames added from the stop context.
  /// Frames below the trace's innermost one added from the stop context
  /// (e.g. the function whose entry breakpoint triggered the snapshot).
  uint64_t anchorInner = 0;
  uint64_t anchorConflicts = 0; ///< Stop stacks that contradicted the trace.
  uint64_t modelBytes = 0;      ///< Heap + struct bytes of the built models.
};

/// The symbol range containing an address (Symbolizer::lookup, or a fake).
using SymbolLookup = llvm::function_ref<const SymbolRange &(uint64_t)>;

/// Builds the model of one thread. `lookup` must return ranges whose string
/// ids live in `strings` (the symbolizer shares the table); the builder also
/// interns "[syscall]" etc. there. `stop` is this thread's stack at the
/// snapshot, or null. Never fails: anomalies become marked spans and gaps.
/// Several threads may be built at once when `lookup` is safe to call from
/// several threads and `stringsLock` is given: the builder holds it while it
/// interns into `strings` (lookup must hold it too when it interns).
ThreadModel buildThreadModel(const ThreadDecode &decode, SymbolLookup lookup,
                             const ThreadStop *stop, StringTable &strings,
                             const ModelOptions &options,
                             ModelStats *stats = nullptr,
                             std::mutex *stringsLock = nullptr);

/// Builds one thread's model from its items as the decoder hands them over
/// (SnapshotDecoder::decodeThread into this sink), so the thread's item
/// stream is never resident: the same model as buildThreadModel on the
/// collected items. `lookup` (and what it refers to) must outlive the
/// builder; `strings` and `stringsLock` are as for buildThreadModel.
class ThreadModelBuilder : public ItemSink {
public:
  ThreadModelBuilder(uint64_t tid, SymbolLookup lookup, StringTable &strings,
                     std::mutex *stringsLock = nullptr);
  ~ThreadModelBuilder() override;

  void consume(llvm::ArrayRef<TraceItem> items,
               llvm::ArrayRef<DecodeError> errors) override;
  void timesEstimated(uint64_t instructions) override;

  /// The model of every item consumed, stitched and anchored to `stop` as
  /// `options` say; its instructions are the blocks' sum. Call once.
  ThreadModel finish(const ThreadStop *stop, const ModelOptions &options,
                     ModelStats *stats = nullptr);

private:
  struct State;
  std::unique_ptr<State> state;
};

/// Bytes the model of one thread occupies (structs plus heap storage).
size_t threadModelBytes(const ThreadModel &model);

/// Builds every decoded thread into `model`: pid and process name from
/// `snapshot`, each thread anchored to its ThreadStop (matched by tid).
/// `lookup` (Symbolizer::lookup) must intern into `model.strings`
/// (construct the symbolizer with them).
void buildTraceModel(TraceModel &model, const Snapshot &snapshot,
                     const std::vector<ThreadDecode> &threads,
                     SymbolLookup lookup, const ModelOptions &options,
                     ModelStats *stats = nullptr);

} // namespace magic_trace

#endif
