// Unit tests for what LLDB's trace load is given of a code history
// (core/lib/formats/bundle/LldbView.h): where an epoch starts, which code
// each holds, and where a thread's trace is cut. Each case is a short
// history whose right answer follows from the decoder's rule
// (codeChangeWins, CodeHistory.h).
#include "../../core/lib/formats/bundle/LldbView.h"

#include <gtest/gtest.h>

using namespace magic_trace;
using namespace magic_trace::bundle_detail;

namespace {

CodeChange bytesAt(uint64_t seq, uint64_t address, std::vector<uint8_t> bytes) {
  CodeChange change;
  change.kind = CodeChange::Kind::Bytes;
  change.seq = seq;
  change.address = address;
  change.size = bytes.size();
  change.bytes = std::move(bytes);
  return change;
}

CodeChange loadAt(uint64_t seq, uint64_t address, uint64_t size,
                  std::string path) {
  CodeChange change;
  change.kind = CodeChange::Kind::Load;
  change.seq = seq;
  change.address = address;
  change.size = size;
  change.module.path = std::move(path);
  change.module.loadAddress = address;
  return change;
}

CodeChange unloadAt(uint64_t seq, uint64_t address, uint64_t size) {
  CodeChange change;
  change.kind = CodeChange::Kind::Unload;
  change.seq = seq;
  change.address = address;
  change.size = size;
  return change;
}

TEST(LldbView, NoHistoryIsOneEpochOfNothing) {
  std::vector<LldbEpoch> epochs = lldbEpochs(CodeHistory{});
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_TRUE(epochs[0].changes.empty());
}

TEST(LldbView, CodeRewrittenInPlaceStartsAnEpochAtTheRewrite) {
  CodeHistory history;
  history.changes = {loadAt(1, 0x1000, 0x1000, "/bin/app"),
                     bytesAt(2, 0x9000, {0x90, 0xc3}),
                     bytesAt(3, 0x9000, {0xcc, 0xc3})};
  std::vector<LldbEpoch> epochs = lldbEpochs(history);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[1].firstSeq, 3u);
  // The file stays in both; each version of the code is in its own.
  EXPECT_EQ(epochs[0].changes, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(epochs[1].changes, (std::vector<size_t>{0, 2}));
}

TEST(LldbView, TheSameBytesAgainAreNoNewEpoch) {
  CodeHistory history;
  history.changes = {bytesAt(1, 0x9000, {0x90, 0xc3}),
                     bytesAt(2, 0x9000, {0x90, 0xc3})};
  EXPECT_EQ(lldbEpochs(history).size(), 1u);
}

TEST(LldbView, ALibraryLoadedAgainWhereItWasIsNoNewEpoch) {
  CodeHistory history;
  history.changes = {loadAt(1, 0x7000, 0x1000, "/lib/plugin.so"),
                     unloadAt(2, 0x7000, 0x1000),
                     loadAt(3, 0x7000, 0x1000, "/lib/plugin.so")};
  EXPECT_EQ(lldbEpochs(history).size(), 1u);
}

TEST(LldbView, AnotherLibraryWhereOneWasUnloadedStartsAnEpoch) {
  CodeHistory history;
  history.changes = {loadAt(1, 0x7000, 0x1000, "/lib/a.so"),
                     unloadAt(2, 0x7000, 0x1000),
                     loadAt(3, 0x7000, 0x1000, "/lib/b.so")};
  std::vector<LldbEpoch> epochs = lldbEpochs(history);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].changes, (std::vector<size_t>{0}));
  // The unloaded library is not live at the second epoch's start.
  EXPECT_EQ(epochs[1].changes, (std::vector<size_t>{2}));
}

TEST(LldbView, CodeFirstLoggedLaterIsInEarlierEpochsWhereNothingIs) {
  // Code first logged after the rewrite, elsewhere: a stretch before the
  // rewrite that ran it ran that code (codeChangeWins: the earliest change
  // at an address no earlier change holds).
  CodeHistory history;
  history.changes = {bytesAt(1, 0x9000, {0x90}), bytesAt(2, 0x9000, {0xcc}),
                     bytesAt(3, 0xa000, {0xc3})};
  std::vector<LldbEpoch> epochs = lldbEpochs(history);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].changes, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(epochs[1].changes, (std::vector<size_t>{1, 2}));
}

TEST(LldbView, AThreadIsCutWhereItsMarksMoveItToAnotherEpoch) {
  Snapshot snapshot;
  snapshot.code.changes = {bytesAt(1, 0x9000, {0x90}),
                           bytesAt(2, 0x9000, {0xcc}),
                           bytesAt(3, 0xa000, {0xc3})};
  ThreadTrace thread;
  thread.tid = 7;
  thread.bytes.resize(300);
  // seq 1 is still the first epoch; seq 2 the second; seq 3 adds nothing
  // that replaces code, so no cut; a mark past the end is ignored.
  thread.imageMarks = {{50, 1}, {100, 2}, {200, 3}, {400, 3}};
  snapshot.threads.push_back(thread);
  ThreadTrace empty;
  empty.tid = 8;
  snapshot.threads.push_back(empty);
  std::vector<LldbPiece> pieces =
      lldbPieces(snapshot, lldbEpochs(snapshot.code));
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].tid, 7u);
  EXPECT_EQ(pieces[0].epoch, 0u);
  EXPECT_EQ(pieces[0].begin, 0u);
  EXPECT_EQ(pieces[0].end, 100u);
  EXPECT_EQ(pieces[1].epoch, 1u);
  EXPECT_EQ(pieces[1].begin, 100u);
  EXPECT_EQ(pieces[1].end, 300u);
  // A thread with no trace keeps its entry, in the first epoch.
  EXPECT_EQ(pieces[2].tid, 8u);
  EXPECT_EQ(pieces[2].epoch, 0u);
  EXPECT_EQ(pieces[2].end, 0u);
}

/// A PSB+ (Intel SDM vol. 3C, "Packet Descriptions") holding a MODE.Exec,
/// a TSC of `tsc` and PSBEND, or no TSC when `tsc` is 0.
std::vector<uint8_t> psbPlus(uint64_t tsc) {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 8; ++i)
    bytes.insert(bytes.end(), {0x02, 0x82});
  bytes.insert(bytes.end(), {0x99, 0x01});
  if (tsc) {
    bytes.push_back(0x19);
    for (int i = 0; i < 7; ++i)
      bytes.push_back(uint8_t(tsc >> (8 * i)));
  }
  bytes.insert(bytes.end(), {0x02, 0x23});
  return bytes;
}

TEST(LldbView, ChangesWithTimesCutAThreadAtThePsbAfterThem) {
  // A jitdump's versions on the perf backend (JitCode::ByTime): the code as
  // at the stop (no time), then v1 at 1,000 ns and v2 at 2,000 ns at the
  // same address. The clock: ns = TSC (time_mult 1, time_shift 0).
  Snapshot snapshot;
  CodeChange v1 = bytesAt(2, 0x9000, {0x90, 0xc3});
  CodeChange v2 = bytesAt(3, 0x9000, {0xcc, 0xc3});
  v1.timeNs = 1000;
  v2.timeNs = 2000;
  snapshot.code.changes = {bytesAt(1, 0x9000, {0xcc, 0xc3}), v1, v2};
  ThreadTrace thread;
  thread.tid = 7;
  // PSBs at TSC 1,500 (v1's time), one without a TSC (a join: it keeps
  // the time before it), one at 2,500 (v2's), one at 2,400 (a clock
  // going back does not move the thread back to v1's epoch).
  std::vector<uint64_t> starts;
  for (uint64_t tsc : {1500, 0, 2500, 2400}) {
    starts.push_back(thread.bytes.size());
    std::vector<uint8_t> psb = psbPlus(tsc);
    thread.bytes.insert(thread.bytes.end(), psb.begin(), psb.end());
    thread.bytes.insert(thread.bytes.end(), 10, 0x00); // PADs
  }
  snapshot.threads.push_back(thread);
  std::vector<LldbEpoch> epochs = lldbEpochs(snapshot.code);
  ASSERT_EQ(epochs.size(), 3u);
  std::vector<LldbPiece> pieces = lldbPieces(snapshot, epochs);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].epoch, 1u);
  EXPECT_EQ(pieces[0].begin, starts[0]);
  EXPECT_EQ(pieces[0].end, starts[2]);
  EXPECT_EQ(pieces[1].epoch, 2u);
  EXPECT_EQ(pieces[1].begin, starts[2]);
  EXPECT_EQ(pieces[1].end, thread.bytes.size());
}

TEST(LldbView, CodeWithATimeStartsAnEpochWhenAStretchBeginsBeforeIt) {
  // Code whose memory was made executable at 1,000 ns (no code there
  // before) and a jitdump's load at 1,001 ns elsewhere: with a stretch of
  // trace that begins at 500 ns, LLDB must see neither there; with none
  // between 1,000 and 1,001, both come in one epoch.
  CodeHistory history;
  CodeChange first = bytesAt(1, 0x9000, {0x90, 0xc3});
  CodeChange second = bytesAt(2, 0xa000, {0xc3});
  first.timeNs = 1000;
  second.timeNs = 1001;
  history.changes = {first, second};
  std::vector<LldbEpoch> epochs = lldbEpochs(history, {500, 2000});
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_TRUE(epochs[0].changes.empty());
  EXPECT_EQ(epochs[1].firstSeq, 1u);
  EXPECT_EQ(epochs[1].changes, (std::vector<size_t>{0, 1}));
  // A stretch at 1,000: it sees the first and not the second.
  epochs = lldbEpochs(history, {500, 1000, 2000});
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_EQ(epochs[1].changes, (std::vector<size_t>{0}));
  EXPECT_EQ(epochs[2].changes, (std::vector<size_t>{0, 1}));
  // No stretch before either: one epoch.
  EXPECT_EQ(lldbEpochs(history, {2000}).size(), 1u);
}

TEST(LldbView, LaterEpochsGiveLldbThreadIdsNoRealThreadHas) {
  EXPECT_EQ(lldbTid(4242, 0), 4242u);
  EXPECT_EQ(lldbTid(4242, 2), 20004242u);
  // Linux's PID_MAX_LIMIT on 64-bit (include/linux/threads.h): 4 * 1024 * 1024.
  EXPECT_GT(lldbTid(0, 1), uint64_t(4 * 1024 * 1024));
}

} // namespace
