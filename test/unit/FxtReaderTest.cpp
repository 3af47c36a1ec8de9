// Unit tests for the test-only FXT reader: hand-built traces, word by word
// from the spec, that it must accept, and malformed ones it must reject with
// an error (never a crash).
#include "FxtReader.h"

#include "llvm/Support/Endian.h"

#include <gtest/gtest.h>

using namespace magic_trace::fxt_test;

namespace {

using Words = std::vector<uint64_t>;

std::vector<uint8_t> toBytes(const Words &words) {
  std::vector<uint8_t> bytes(words.size() * 8);
  for (size_t i = 0; i < words.size(); ++i)
    llvm::support::endian::write64le(bytes.data() + 8 * i, words[i]);
  return bytes;
}

/// Magic, initialization (1 tick = 1 ns), string 1 = "cat" and thread 1 =
/// 5/6.
Words header() {
  return {
      0x0016547846040010,                       // Magic number record.
      1 | 2 << 4,                               // Initialization record.
      1000000000,                               // Ticks per second.
      2 | 2 << 4 | 1 << 16 | uint64_t(3) << 32, // String 1, 3 bytes.
      0x746163,                                 // "cat".
      3 | 3 << 4 | 1 << 16,                     // Thread record 1.
      5,                                        // Process koid.
      6,                                        // Thread koid.
  };
}

/// A complete event on thread 1, category 1, with inline name "ab".
void complete(Words &w, uint64_t begin, uint64_t end) {
  // Event (4), 4 words, duration complete (4), 0 args, thread 1,
  // category 1, inline name of 2 bytes.
  w.push_back(4 | 4 << 4 | 4 << 16 | 1 << 24 | uint64_t(1) << 32 |
              uint64_t(0x8002) << 48);
  w.push_back(begin);  // Begin timestamp.
  w.push_back(0x6261); // Inline name "ab".
  w.push_back(end);    // End timestamp.
}

std::string errorOf(const Words &words) {
  auto trace = readFxt(toBytes(words));
  if (trace)
    return "no error";
  return toString(trace.takeError());
}

TEST(FxtReader, AcceptsAHandBuiltTrace) {
  Words w = header();
  complete(w, 10, 40);
  complete(w, 12, 20);
  // Instant (0), 6 words, 1 arg, inline thread (0), empty category, name 1.
  w.push_back(4 | 6 << 4 | 0 << 16 | 1 << 20 | uint64_t(1) << 48);
  w.push_back(30); // Timestamp.
  w.push_back(5);  // Inline process koid.
  w.push_back(6);  // Inline thread koid.
  // Int32 arg (1), 2 words, inline name "n" (0x8001), value 7.
  w.push_back(1 | 2 << 4 | uint64_t(0x8001) << 16 | uint64_t(7) << 32);
  w.push_back('n');
  auto trace = readFxt(toBytes(w));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  ASSERT_EQ(trace->events.size(), 3u);
  EXPECT_EQ(trace->events[0].name, "ab");
  EXPECT_EQ(trace->events[0].category, "cat");
  EXPECT_EQ(trace->events[1].depth, 1u);
  EXPECT_EQ(trace->events[2].depth, 1u); // Inside "ab" [10, 40].
  EXPECT_EQ(trace->events[2].tid, 6u);
  EXPECT_EQ(trace->events[2].name, "cat");
  ASSERT_NE(trace->events[2].arg("n"), nullptr);
  EXPECT_EQ(trace->events[2].arg("n")->value, 7u);
  EXPECT_EQ(trace->threadsWithEvents, 1u);
  EXPECT_EQ(trace->records, 7u);
}

void expectError(const Words &w, llvm::StringRef expected) {
  std::string error = errorOf(w);
  EXPECT_NE(error.find(expected.str()), std::string::npos)
      << "got: " << error << "\nwanted: " << expected.str();
}

TEST(FxtReader, RejectsMissingMagic) {
  Words w = header();
  w.erase(w.begin());
  expectError(w, "does not start with the magic number record");
}

TEST(FxtReader, RejectsEmptyAndRaggedInput) {
  expectError({}, "empty trace");
  std::vector<uint8_t> bytes = toBytes(header());
  bytes.pop_back();
  auto trace = readFxt(bytes);
  ASSERT_FALSE(bool(trace));
  EXPECT_NE(toString(trace.takeError()).find("whole number of 64-bit words"),
            std::string::npos);
}

TEST(FxtReader, RejectsBadRecordSizes) {
  Words zero = header();
  zero.push_back(4); // Event record with size 0.
  expectError(zero, "record size is 0 words");

  Words tooLong = header();
  complete(tooLong, 1, 2);
  tooLong.pop_back(); // The record claims 4 words, 3 remain.
  expectError(tooLong, "claims 4 words, only 3 remain");

  Words tooShortForFields = header();
  complete(tooShortForFields, 1, 2);
  tooShortForFields[tooShortForFields.size() - 4] &= ~uint64_t(0xfff0);
  tooShortForFields[tooShortForFields.size() - 4] |= 3 << 4;
  tooShortForFields.pop_back(); // Size 3: the end time does not fit.
  expectError(tooShortForFields, "event payload lies past the record's end");

  Words slack = header();
  slack.push_back(3 | 4 << 4 | 2 << 16); // Thread record of 4 words, not 3.
  slack.push_back(1);
  slack.push_back(2);
  slack.push_back(0);
  expectError(slack, "record size is 4 words but its fields take 3");
}

TEST(FxtReader, RejectsDanglingReferences) {
  Words string = header();
  // Instant event naming string index 9, which was never bound.
  string.push_back(4 | 2 << 4 | 1 << 24 | uint64_t(1) << 32 |
                   uint64_t(9) << 48);
  string.push_back(5);
  expectError(string, "name refers to string index 9, which no string record");

  Words thread = header();
  thread.push_back(4 | 2 << 4 | 7 << 24 | uint64_t(1) << 32);
  thread.push_back(5);
  expectError(thread, "thread index 7, which no thread record bound");
}

TEST(FxtReader, RejectsBadArguments) {
  Words w = header();
  // Instant with 1 argument whose size (2 words) exceeds the record.
  w.push_back(4 | 3 << 4 | 1 << 20 | 1 << 24 | uint64_t(1) << 32);
  w.push_back(5);
  w.push_back(4 | 2 << 4 | 1 << 16); // Uint64 arg claiming 2 words.
  expectError(w, "argument 0 has size 2 words, which does not fit");

  Words type = header();
  type.push_back(4 | 3 << 4 | 1 << 20 | 1 << 24 | uint64_t(1) << 32);
  type.push_back(5);
  type.push_back(12 | 1 << 4 | 1 << 16); // Argument type 12 does not exist.
  expectError(type, "unknown type 12");
}

TEST(FxtReader, RejectsOversizedStringAndReservedBits) {
  Words big = header();
  big.push_back(2 | 1 << 4 | 2 << 16 | uint64_t(32001) << 32);
  expectError(big, "exceeds the 32000-byte limit");

  Words reservedBits = header();
  reservedBits.push_back(3 | 3 << 4 | 1 << 16 | uint64_t(1) << 40);
  reservedBits.push_back(1);
  reservedBits.push_back(2);
  expectError(reservedBits, "reserved bits 24-63 are not zero");
}

TEST(FxtReader, RejectsBrokenNestingAndTime) {
  Words overlap = header();
  complete(overlap, 10, 20);
  complete(overlap, 15, 25); // Starts inside, ends after.
  expectError(overlap, "overlaps the end of enclosing 'ab'");

  Words backwards = header();
  complete(backwards, 10, 20);
  complete(backwards, 5, 8);
  expectError(backwards, "time goes backwards on thread 5/6");

  Words inverted = header();
  complete(inverted, 10, 5);
  expectError(inverted, "ends at 5, before it begins at 10");

  Words unmatchedEnd = header();
  unmatchedEnd.push_back(4 | 2 << 4 | 3 << 16 | 1 << 24 | uint64_t(1) << 32);
  unmatchedEnd.push_back(5);
  expectError(unmatchedEnd, "has no open duration begin");

  Words unterminated = header();
  unterminated.push_back(4 | 2 << 4 | 2 << 16 | 1 << 24 | uint64_t(1) << 32);
  unterminated.push_back(5);
  expectError(unterminated, "never ends");
}

// Perfetto's nesting rule (SliceTracker::MaybeCloseStack), case by case.
TEST(PerfettoNesting, ZeroLengthSlicesAtOneTimestampStack) {
  // Like instants: each opens on top of the one before.
  EXPECT_EQ(perfettoDepths({{5, 0}, {5, 0}, {5, 0}}),
            (std::vector<int>{0, 1, 2}));
  // A slice with a duration closes a zero-length one it begins at.
  EXPECT_EQ(perfettoDepths({{5, 0}, {5, 3}}), (std::vector<int>{0, 0}));
  // A zero-length slice closes one that ends where it begins.
  EXPECT_EQ(perfettoDepths({{1, 4}, {5, 0}}), (std::vector<int>{0, 0}));
  // ... and nests in one that is still open.
  EXPECT_EQ(perfettoDepths({{1, 9}, {5, 0}, {5, 0}}),
            (std::vector<int>{0, 1, 2}));
}

TEST(PerfettoNesting, SlicesNestByTimeAndCloseAtTheirEnd) {
  // [0,10) holds [0,4) and [4,10); [10,12) follows at the top.
  EXPECT_EQ(perfettoDepths({{0, 10}, {0, 4}, {4, 6}, {10, 2}}),
            (std::vector<int>{0, 1, 1, 0}));
  // A child may end with its parent.
  EXPECT_EQ(perfettoDepths({{0, 10}, {3, 7}, {10, 1}}),
            (std::vector<int>{0, 1, 0}));
}

TEST(PerfettoNesting, ASliceOverlappingAnOpenOneIsDropped) {
  EXPECT_EQ(perfettoDepths({{0, 10}, {5, 10}, {10, 1}}),
            (std::vector<int>{0, -1, 0}));
}

TEST(PerfettoNesting, TheReaderMarksWhatPerfettoWouldDrawOtherwise) {
  Words stair = header();
  complete(stair, 10, 20);
  complete(stair, 20, 20); // Zero length ...
  complete(stair, 20, 20); // ... twice at one timestamp: stacked.
  complete(stair, 20, 30);
  auto trace = readFxt(toBytes(stair));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  ASSERT_EQ(trace->events.size(), 4u);
  EXPECT_EQ(trace->events[1].perfettoDepth, 0);
  EXPECT_EQ(trace->events[2].perfettoDepth, 1); // The file means 0.
  EXPECT_EQ(trace->events[3].perfettoDepth, 0);
  EXPECT_EQ(trace->perfettoMisnested, 1u);
  EXPECT_EQ(trace->perfettoDropped, 0u);

  Words flat = header();
  complete(flat, 10, 20);
  complete(flat, 20, 21);
  complete(flat, 21, 22);
  auto ok = readFxt(toBytes(flat));
  ASSERT_TRUE(bool(ok)) << toString(ok.takeError());
  EXPECT_EQ(ok->perfettoMisnested, 0u);
}

TEST(FxtReader, RejectsEventsBeforeInitialization) {
  Words w = {0x0016547846040010};
  w.push_back(4 | 4 << 4 | 4 << 16 | uint64_t(0x8002) << 48);
  w.push_back(1);
  w.push_back(0x6261);
  w.push_back(2);
  expectError(w, "before the initialization record");
}

TEST(FxtReader, RejectsNonZeroStringPadding) {
  Words w = header();
  w[4] |= uint64_t(1) << 40; // A byte after "cat".
  expectError(w, "non-zero padding");
}

} // namespace

namespace {

/// Corrupting random words of a valid trace, or cutting it short, must give
/// an error or a trace, never a crash (run under MT_SANITIZE=ON to see).
TEST(FxtReader, SurvivesCorruptedInput) {
  Words valid = header();
  for (uint64_t t = 0; t < 40; ++t)
    complete(valid, 10 * t, 10 * t + 5);
  uint64_t state = 0x9e3779b97f4a7c15;
  auto nextRandom = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  size_t errors = 0;
  for (int round = 0; round < 1000; ++round) {
    Words w = valid;
    size_t flips = 1 + nextRandom() % 3;
    for (size_t i = 0; i < flips; ++i)
      w[nextRandom() % w.size()] ^= uint64_t(1) << (nextRandom() % 64);
    if (round % 4 == 0)
      w.resize(nextRandom() % w.size());
    auto trace = readFxt(toBytes(w));
    if (!trace) {
      ++errors;
      llvm::consumeError(trace.takeError());
    }
  }
  EXPECT_GT(errors, 300u);
}

} // namespace
