//===- BuildModels.cpp - Models of collected items and snapshots ----------===//
//
// The entry points of ModelBuilder.h that take a whole item stream at once
// (a thread's collected items, every thread of a snapshot), over the
// streaming ThreadModelBuilder, and the byte count of a built model.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/ModelBuilder.h"

using namespace magic_trace;

size_t magic_trace::threadModelBytes(const ThreadModel &model) {
  size_t bytes = sizeof(ThreadModel) + model.name.capacity() +
                 model.segments.capacity() * sizeof(Segment) +
                 model.sites.bytes();
  for (const Segment &segment : model.segments)
    bytes += segment.frames.bytes() + segment.gapReason.capacity();
  return bytes;
}

ThreadModel
magic_trace::buildThreadModel(const ThreadDecode &decode, SymbolLookup lookup,
                              const ThreadStop *stop, StringTable &strings,
                              const ModelOptions &options, ModelStats *stats,
                              std::mutex *stringsLock) {
  ThreadModelBuilder builder(decode.tid, lookup, strings, stringsLock);
  builder.consume(decode.items, decode.errors);
  builder.timesEstimated(decode.estimatedInstructions);
  ThreadModel model = builder.finish(stop, options, stats);
  // The caller's count (a test's fake stream may not sum its blocks).
  model.instructions = decode.instructions;
  return model;
}

void magic_trace::buildTraceModel(TraceModel &model, const Snapshot &snapshot,
                                  const std::vector<ThreadDecode> &threads,
                                  SymbolLookup lookup,
                                  const ModelOptions &options,
                                  ModelStats *stats) {
  model.pid = snapshot.pid;
  model.processName = snapshot.processName;
  for (const ThreadDecode &decode : threads) {
    const ThreadStop *stop = nullptr;
    for (const ThreadStop &candidate : snapshot.stop)
      if (candidate.tid == decode.tid)
        stop = &candidate;
    model.threads.push_back(
        buildThreadModel(decode, lookup, stop, model.strings, options, stats));
  }
}
