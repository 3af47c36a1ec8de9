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

TEST(LldbView, LaterEpochsGiveLldbThreadIdsNoRealThreadHas) {
  EXPECT_EQ(lldbTid(4242, 0), 4242u);
  EXPECT_EQ(lldbTid(4242, 2), 20004242u);
  // Linux's PID_MAX_LIMIT on 64-bit (include/linux/threads.h): 4 * 1024 * 1024.
  EXPECT_GT(lldbTid(0, 1), uint64_t(4 * 1024 * 1024));
}

} // namespace
