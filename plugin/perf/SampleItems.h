//===- SampleItems.h - perf's branch samples -> one thread's items -*- C++
//-*-===//
//
// perf script --itrace=b hands a filter one sample per taken branch: its
// source (ip), its target (addr), perf's time and flags (call, return,
// trace begin/end, syscall, async). The instructions between one branch's
// target and the next branch's source ran straight through: they are one
// Block of the core's item stream (TraceItems.h), ending in the branch's
// instruction. Trace begin and end are Enable and Disable; a trace begin
// that no trace end preceded is a loss perf's decoder met (an overflow or
// a decode error it resynchronized after), and becomes an Overflow item: a
// marked gap in the model, never a join (docs/dlfilter.md).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_PERF_SAMPLEITEMS_H
#define MAGIC_TRACE_PLUGIN_PERF_SAMPLEITEMS_H

#include "magic_trace/InsnClassifier.h"
#include "magic_trace/TraceItems.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace magic_trace {

/// What the items need of one perf sample (perf_dlfilter_sample's fields).
struct BranchSample {
  uint64_t ip = 0;   ///< The branch; 0 for a trace begin.
  uint64_t addr = 0; ///< Its target; 0 for a trace end.
  uint64_t timeNs = 0;
  uint32_t flags = 0; ///< PERF_DLFILTER_FLAG_*.
};

/// One thread's items, built a sample at a time.
class SampleItems {
public:
  explicit SampleItems(uint64_t tid) : threadId(tid) {}

  /// The next sample of the thread, in perf's order; `insn` is the
  /// instruction at sample.ip (unused for a trace begin).
  void add(const BranchSample &sample, const ClassifiedInsn &insn);
  /// A sample left out (outside the time window): the next one taken
  /// starts a new stretch, as after a trace end.
  void skip();
  /// Losses met so far (trace begins without a trace end).
  uint64_t losses() const { return lossCount; }
  /// Blocks so far (perf gives no instruction counts: each block counts as
  /// one instruction, docs/dlfilter.md).
  uint64_t blocks() const { return blockCount; }
  uint64_t tid() const { return threadId; }
  /// Hands every item so far to `sink` in order, a chunk at a time, and
  /// frees each chunk once consumed; the builder is left empty.
  void feed(ItemSink &sink);

private:
  void block(uint64_t lastIp, BranchClass lastClass, uint8_t lastSize);
  void push(ItemKind kind, uint64_t ip, uint64_t timeNs);

  void append(const TraceItem &item);

  uint64_t threadId;
  /// Items in chunks of fixed capacity: a thread's millions of items are
  /// never copied to grow (a growing vector's copies and fresh pages were
  /// a third of the filter's time), and each chunk is one huge page where
  /// the kernel gives them (one page fault, not 512).
  struct FreeChunk {
    void operator()(TraceItem *items) const;
  };
  struct Chunk {
    std::unique_ptr<TraceItem, FreeChunk> items;
    size_t size = 0;
  };
  std::vector<Chunk> chunks;
  uint64_t blockCount = 0;
  /// Where the running block began (the last branch's target), and when;
  /// 0 while tracing is off or the start is unknown.
  uint64_t blockStart = 0;
  uint64_t blockTime = 0;
  bool tracing = false; ///< The last sample left tracing on.
  uint64_t lastTime = 0;
  uint64_t lossCount = 0;
};

} // namespace magic_trace

#endif
