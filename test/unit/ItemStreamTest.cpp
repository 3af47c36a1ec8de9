//===- ItemStreamTest.cpp - The decoder's clock where PT has no timing ----===//
//
// A synthetic thread whose true clock is known: item k (10 instructions)
// starts at 1000 + 20 k ns, 2 ns an instruction. The items reach the
// ItemStream with the raw samples a decoder would give them (the TSC of the
// last timing packet read, 0 before any), and the stream must time them: by
// interpolation between samples, and by the instruction clock before the
// first and after the last.
//
//===----------------------------------------------------------------------===//
#include "../../core/lib/decode/ItemStream.h"

#include <gtest/gtest.h>

using namespace magic_trace;
using namespace magic_trace::decode_detail;

namespace {

constexpr uint64_t InsnsPerItem = 10;

uint64_t truthNs(size_t k) { return 1000 + 20 * k; }

class Collect : public ItemSink {
public:
  void consume(llvm::ArrayRef<TraceItem> batch,
               llvm::ArrayRef<DecodeError>) override {
    items.insert(items.end(), batch.begin(), batch.end());
  }
  void timesEstimated(uint64_t instructions) override {
    estimated = instructions;
  }
  void estimatedRange(uint64_t first, uint64_t count) override {
    // Told before the batch that holds them: none of them arrived yet.
    uint64_t arrived = 0;
    for (const TraceItem &item : items)
      arrived += item.detail;
    EXPECT_LE(arrived, first);
    // A range may be told in pieces, one per batch: joined here.
    if (!ranges.empty() && ranges.back().first + ranges.back().second == first)
      ranges.back().second += count;
    else
      ranges.push_back({first, count});
  }
  std::vector<TraceItem> items;
  uint64_t estimated = UINT64_MAX;
  /// The estimated instructions, as [first, first + count).
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
};

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

TraceItem block(size_t k, uint64_t sample) {
  TraceItem item;
  item.ip = 0x1000 + 0x100 * k;
  item.lastIp = item.ip + 0x20;
  item.detail = InsnsPerItem;
  // A branch ends every block, so the stream joins none of them.
  item.lastClass = BranchClass::DirectJump;
  item.timeNs = sample;
  return item;
}

/// Streams `count` items; item k gets sample(k) as its raw time.
Collect run(size_t count, std::function<uint64_t(size_t)> sample,
            size_t batchItems, bool anyTsc) {
  Collect sink;
  TimeConversion identity; // ns == TSC.
  ItemStream stream(sink, identity, batchItems, [=] { return anyTsc; });
  Piece piece;
  for (size_t k = 0; k < count; ++k)
    piece.items.push_back(block(k, sample(k)));
  stream.append(piece);
  EXPECT_EQ(stream.finish(), count * InsnsPerItem);
  return sink;
}

TEST(ItemStream, StretchesWithoutTimingRunOnTheMeasuredRate) {
  // Items 0-9 come before the first timing packet, 10-29 have a sample every
  // 5 items (each the true time of the item that read it), 30-39 come after
  // the last one.
  auto sample = [](size_t k) -> uint64_t {
    if (k < 10)
      return 0;
    return truthNs(std::min<size_t>(k, 30) / 5 * 5);
  };
  Collect sink = run(40, sample, 1 << 16, true);
  ASSERT_EQ(sink.items.size(), 40u);
  for (size_t k = 0; k < 40; ++k)
    EXPECT_EQ(sink.items[k].timeNs, truthNs(k)) << "item " << k;
  // 10 items before, 10 after the last sample.
  EXPECT_EQ(sink.estimated, 20 * InsnsPerItem);
  // Which ones: the first 10 items and the run of the last sample (items
  // 30-39), whose instructions are 0-99 and 300-399.
  EXPECT_EQ(sink.ranges, (Ranges{{0, 100}, {300, 100}}));
}

TEST(ItemStream, ATraceWithoutTimingCountsInstructionsFromZero) {
  for (size_t batch : {size_t(1), size_t(4), size_t(1) << 16}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Collect sink = run(25, [](size_t) { return 0; }, batch, false);
    ASSERT_EQ(sink.items.size(), 25u);
    for (size_t k = 0; k < 25; ++k)
      EXPECT_EQ(sink.items[k].timeNs,
                k * InsnsPerItem * ItemStream::DefaultNsPerInsn);
    EXPECT_EQ(sink.estimated, 25 * InsnsPerItem);
    EXPECT_EQ(sink.ranges, (Ranges{{0, 25 * InsnsPerItem}}));
  }
}

TEST(ItemStream, FullyTimedStretchesAreNotEstimated) {
  // A sample on every item, and one more item after the last: only that one
  // is timed by the instruction clock.
  Collect sink = run(
      21, [](size_t k) { return truthNs(std::min<size_t>(k, 20)); }, 1 << 16,
      true);
  for (size_t k = 0; k < 21; ++k)
    EXPECT_EQ(sink.items[k].timeNs, truthNs(k)) << "item " << k;
  EXPECT_EQ(sink.estimated, InsnsPerItem);
  // Item 20, the run no later sample closes: instructions 200-209.
  EXPECT_EQ(sink.ranges, (Ranges{{200, 10}}));
}

} // namespace

namespace {

// PT's TSC packet carries bits 55:0 (SDM vol. 3C, "TSC Packet"). With a TSC
// past 2^56 the decoder's samples lack the top byte; a reference TSC read
// after the trace restores it, also across the wrap of the low 56 bits.
TEST(ItemStream, TscPacketsPast2To56GetTheirTopByteBack) {
  constexpr uint64_t Wrap = uint64_t(1) << 56;
  TimeConversion clock; // ns == TSC.
  clock.tscReference = 3 * Wrap + 5000;
  EXPECT_EQ(clock.fullTsc(4000), 3 * Wrap + 4000);
  // Written just before the low bits wrapped, read just after.
  EXPECT_EQ(clock.fullTsc(Wrap - 100), 2 * Wrap + Wrap - 100);
  // No reference, or a TSC below 2^56 anyway: as given.
  EXPECT_EQ(TimeConversion().fullTsc(4000), 4000u);

  // Through the stream: samples on both sides of the wrap interpolate as
  // one clock, 20 ns an item.
  Collect sink;
  ItemStream stream(sink, clock, 1 << 16, [] { return true; });
  Piece piece;
  for (size_t k = 0; k < 10; ++k) {
    uint64_t truth = 3 * Wrap - 100 + 20 * k;
    piece.items.push_back(block(k, truth & (Wrap - 1)));
  }
  stream.append(piece);
  stream.finish();
  ASSERT_EQ(sink.items.size(), 10u);
  for (size_t k = 0; k < 10; ++k)
    EXPECT_EQ(sink.items[k].timeNs, 3 * Wrap - 100 + 20 * k) << "item " << k;
}

} // namespace
