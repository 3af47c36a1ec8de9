//===- BlockDecoder.cpp - The decoder's entry points ----------------------===//
//
// What Decoder.h offers, over the parts beside it: SnapshotDecoder (its
// image, the threads it decodes; PsbParallel.cpp decodes one), the
// one-call decodeSnapshot, and rawBlockDecodeLoop, the benchmarks' baseline
// (PieceDecoder's loop with no output). expandInstructions is in
// InstructionWalker.cpp.
//
//===----------------------------------------------------------------------===//
#include "Image.h"
#include "ImageTimeline.h"
#include "PieceDecoder.h"
#include "PsbTable.h"
#include "StartQuirk.h"

using namespace llvm;

namespace magic_trace {

namespace {

using decode_detail::adviseHugePages;

/// Collects a thread's items into a ThreadDecode (decodeSnapshot).
class CollectSink : public ItemSink {
public:
  CollectSink(ThreadDecode &out, uint64_t bufferBytes) : out(out) {
    // About 1.5 items per PT byte (see decodeFrom).
    out.items.reserve(bufferBytes * 2);
    adviseHugePages(out.items);
  }
  void consume(ArrayRef<TraceItem> items,
               ArrayRef<DecodeError> errors) override {
    out.items.insert(out.items.end(), items.begin(), items.end());
    out.errors.insert(out.errors.end(), errors.begin(), errors.end());
  }
  void timesEstimated(uint64_t instructions) override {
    out.estimatedInstructions = instructions;
  }

private:
  ThreadDecode &out;
};

} // namespace

Expected<std::unique_ptr<SnapshotDecoder>>
SnapshotDecoder::create(const Snapshot &snapshot,
                        const DecodeOptions &options) {
  if (Error error = checkCpu(snapshot.cpu))
    return std::move(error);
  std::unique_ptr<SnapshotDecoder> decoder(
      new SnapshotDecoder(snapshot, options));
  auto timeline = decode_detail::ImageTimeline::build(
      snapshot, options.readMemory, decoder->moduleStatus);
  if (!timeline)
    return timeline.takeError();
  decoder->timeline = std::move(*timeline);
  size_t count = snapshot.threads.size();
  decoder->tables.resize(count);
  decoder->times.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (options.onlyTid && snapshot.threads[i].tid != options.onlyTid)
      continue;
    decoder->selectedThreads.push_back(i);
    decoder->findPsbTimes(i);
  }
  if (options.onlyTid && decoder->selectedThreads.empty())
    return createStringError("no thread " + std::to_string(options.onlyTid) +
                             " in the snapshot (leave out --tid to decode "
                             "every thread)");
  return std::move(decoder);
}

SnapshotDecoder::SnapshotDecoder(const Snapshot &snapshot,
                                 const DecodeOptions &options)
    : snapshot(snapshot), options(options) {}

SnapshotDecoder::~SnapshotDecoder() = default;

uint64_t SnapshotDecoder::seqAtPsb(size_t index, size_t psb) const {
  const decode_detail::PsbTable &table = tables[index];
  if (psb >= table.offsets.size())
    return 0;
  return timeline->seqAt(snapshot.threads[index], table.offsets[psb],
                         table.tsc[psb]);
}

void SnapshotDecoder::findPsbTimes(size_t index) {
  ArrayRef<uint8_t> bytes = snapshot.threads[index].bytes;
  PsbTimes &found = times[index];
  found.bytes = bytes.size();
  if (bytes.empty())
    return;
  pt_config config =
      decode_detail::makeConfig(bytes, snapshot.cpu, snapshot.timing);
  tables[index] = decode_detail::findPsbs(config);
  const decode_detail::PsbTable &table = tables[index];
  found.offsets = table.offsets;
  found.ns.reserve(table.tsc.size());
  // As ItemStream converts a TSC sample: the top byte restored, then ns.
  for (uint64_t tsc : table.tsc)
    found.ns.push_back(tsc ? snapshot.time.tscToNs(snapshot.time.fullTsc(tsc))
                           : 0);
}

Expected<uint64_t> SnapshotDecoder::decodeThread(size_t threadIndex,
                                                 ItemSink &sink,
                                                 DecodeStats &stats,
                                                 size_t fromPsb) const {
  return decode(threadIndex, sink, stats, /*overlap=*/false, fromPsb);
}

Expected<uint64_t>
SnapshotDecoder::decodeThreadOverlapped(size_t threadIndex, ItemSink &sink,
                                        DecodeStats &stats,
                                        size_t fromPsb) const {
  return decode(threadIndex, sink, stats, /*overlap=*/true, fromPsb);
}

Expected<DecodeResult> decodeSnapshot(const Snapshot &snapshot,
                                      const DecodeOptions &options) {
  auto decoder = SnapshotDecoder::create(snapshot, options);
  if (!decoder)
    return decoder.takeError();
  DecodeResult result;
  result.modules = (*decoder)->modules();
  for (size_t index : (*decoder)->selected()) {
    const ThreadTrace &trace = snapshot.threads[index];
    ThreadDecode out;
    out.tid = trace.tid;
    CollectSink sink(out, trace.bytes.size());
    auto instructions = (*decoder)->decodeThread(index, sink, result.stats);
    if (!instructions)
      return instructions.takeError();
    out.instructions = *instructions;
    result.threads.push_back(std::move(out));
  }
  return result;
}

Expected<uint64_t> rawBlockDecodeLoop(const Snapshot &snapshot,
                                      size_t threadIndex,
                                      const DecodeOptions &options) {
  if (threadIndex >= snapshot.threads.size())
    return createStringError("no thread at index " +
                             std::to_string(threadIndex));
  std::vector<ModuleImageStatus> ignored;
  auto timeline = decode_detail::ImageTimeline::build(
      snapshot, options.readMemory, ignored);
  if (!timeline)
    return timeline.takeError();
  const ThreadTrace &trace = snapshot.threads[threadIndex];
  pt_config config =
      decode_detail::makeConfig(trace.bytes, snapshot.cpu, snapshot.timing);
  decode_detail::PsbTable table = decode_detail::findPsbs(config);
  if (table.offsets.empty())
    return 0;
  decode_detail::PieceDecoder::Options countOnly;
  countOnly.countOnly = true;
  auto decoder = decode_detail::PieceDecoder::create(config, **timeline, trace,
                                                     table, countOnly);
  if (!decoder)
    return decoder.takeError();
  (*decoder)->decodeFrom(0, table.offsets.size());
  return (*decoder)->instructionsSeen();
}

} // namespace magic_trace
