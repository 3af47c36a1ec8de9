//===- SizeOptionsTest.cpp - --snapshot-size and --keep-memory ------------===//
//
// Both debugger hosts read sizes through these (LLDB took decimal only and
// GDB hexadecimal too, and GDB's unit stripping read "0xab" as 0xa).
//
//===----------------------------------------------------------------------===//

#include "magic_trace/SizeOptions.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/PodVector.h"
#include "magic_trace/SnapshotLog.h"

#include "gtest/gtest.h"

using namespace magic_trace;

namespace {

uint64_t sizeOf(llvm::StringRef text) {
  llvm::Expected<uint64_t> bytes = parseSnapshotSize(text);
  if (!bytes) {
    ADD_FAILURE() << text.str() << ": " << llvm::toString(bytes.takeError());
    return 0;
  }
  return *bytes;
}

std::string errorOf(llvm::Expected<uint64_t> bytes) {
  if (bytes)
    return "no error: " + std::to_string(*bytes);
  return llvm::toString(bytes.takeError());
}

TEST(SizeOptions, SnapshotSizesInEveryWrittenForm) {
  EXPECT_EQ(sizeOf("4M"), 4u << 20);
  EXPECT_EQ(sizeOf("4m"), 4u << 20);
  EXPECT_EQ(sizeOf("4MiB"), 4u << 20);
  EXPECT_EQ(sizeOf("4mb"), 4u << 20);
  EXPECT_EQ(sizeOf("64K"), 64u << 10);
  EXPECT_EQ(sizeOf("1G"), 1u << 30);
  EXPECT_EQ(sizeOf("65536"), 65536u);
  EXPECT_EQ(sizeOf("4096b"), 4096u);
  EXPECT_EQ(sizeOf("0x10000"), 65536u);
  EXPECT_EQ(sizeOf("0X10000"), 65536u);
  EXPECT_EQ(sizeOf("0x10K"), 16u << 10);
  EXPECT_EQ(sizeOf(" 4M "), 4u << 20);
}

TEST(SizeOptions, BadSnapshotSizesSayWhatToGive) {
  EXPECT_EQ(errorOf(parseSnapshotSize("3000")),
            "snapshot size 3000 is not a power of two of at least 4K (e.g. "
            "64K, 4M)");
  EXPECT_EQ(errorOf(parseSnapshotSize("2K")),
            "snapshot size 2K is not a power of two of at least 4K (e.g. "
            "64K, 4M)");
  for (llvm::StringRef bad : {"", "M", "4Q", "4 M M", "-4M", "0x", "0xG",
                              "4.5M", "99999999999999999999", "17179869184G"})
    EXPECT_EQ(errorOf(parseSnapshotSize(bad)),
              "bad size '" + bad.str() + "' (give bytes or K, M, G: e.g. 4M)")
        << bad.str();
}

TEST(SizeOptions, MemorySizesAreAnyPositiveCount) {
  EXPECT_EQ(*parseMemorySize("512M"), 512u << 20);
  EXPECT_EQ(*parseMemorySize("3000"), 3000u);
  // A hexadecimal number's last digit is not a unit.
  EXPECT_EQ(*parseMemorySize("0xab"), 0xabu);
  EXPECT_EQ(*parseMemorySize("0x1b"), 0x1bu);
  EXPECT_EQ(*parseMemorySize("0x1bk"), 0x1bu << 10);
  EXPECT_EQ(errorOf(parseMemorySize("0")),
            "bad --keep-memory '0' (give bytes or K, M, G: e.g. 512M)");
  EXPECT_EQ(errorOf(parseMemorySize("lots")),
            "bad --keep-memory 'lots' (give bytes or K, M, G: e.g. 512M)");
}

TEST(SizeOptions, TraceBudgetsAreAnyPositiveCountAndTheWindowTakesThem) {
  EXPECT_EQ(*parseTraceBudget("16M"), 16u << 20);
  EXPECT_EQ(*parseTraceBudget("64KiB"), 64u << 10);
  EXPECT_EQ(*parseTraceBudget("4096"), 4096u);
  for (llvm::StringRef bad : {"0", "-1M", "much", ""})
    EXPECT_EQ(errorOf(parseTraceBudget(bad)),
              "invalid --max-trace '" + bad.str() +
                  "' (give the trace to decode in bytes or K, M, G, above 0: "
                  "e.g. 16M)")
        << bad.str();
  WindowOptions options;
  EXPECT_EQ(options.maxTraceBytes, kDefaultMaxTraceBytes);
  EXPECT_FALSE(llvm::errorToBool(parseWindowOptions("", "", "2M", options)));
  EXPECT_EQ(options.maxTraceBytes, 2u << 20);
  WindowOptions timed;
  EXPECT_EQ(llvm::toString(parseWindowOptions("5ms", "", "2M", timed)),
            "--max-trace sets the default window's length, and --window sets "
            "it itself (leave out one of them)");
}

} // namespace

namespace {

/// A decoded snapshot holding `bytes` of raw trace.
std::unique_ptr<SnapshotRecord> recordOf(size_t bytes) {
  auto record = std::make_unique<SnapshotRecord>();
  record->snapshot.threads.emplace_back();
  record->snapshot.threads.back().bytes.reserve(bytes);
  return record;
}

std::vector<bool> releasedOf(const SnapshotLog &log) {
  std::vector<bool> released;
  for (const auto &record : log.all())
    released.push_back(record->released);
  return released;
}

} // namespace

// A session's decode takes the pages of the snapshots it will push out of
// the budget, so these go before it (SnapshotLog::makeRoom), not after.
TEST(SnapshotLog, MakeRoomReleasesBeforeTheDecodeWhatItsResultWould) {
  SnapshotLog log;
  log.setMemory(100 << 20);
  log.add(recordOf(40 << 20));
  log.add(recordOf(40 << 20));
  EXPECT_EQ(log.keptCount(), 2u);
  // 40 + 40 kept and 40 coming are over 100: the oldest goes now.
  log.makeRoom();
  EXPECT_EQ(releasedOf(log), (std::vector<bool>{true, false}));
  log.add(recordOf(40 << 20));
  EXPECT_EQ(releasedOf(log), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(log.keptBytes(), log.all()[1]->bytes + log.all()[2]->bytes);
  // Small snapshots leave room: nothing goes.
  log.add(recordOf(1 << 20));
  EXPECT_EQ(log.keptCount(), 3u);
  log.makeRoom();
  EXPECT_EQ(log.keptCount(), 3u);
  // The count counts the one coming too.
  log.setKeep(3);
  log.makeRoom();
  EXPECT_EQ(releasedOf(log), (std::vector<bool>{true, true, false, false}));
  // The last snapshot stays, even when it and the next are over the budget.
  log.setMemory(30 << 20);
  log.add(recordOf(40 << 20));
  log.makeRoom();
  EXPECT_EQ(releasedOf(log),
            (std::vector<bool>{true, true, true, true, false}));
  EXPECT_GT(log.keptBytes(), uint64_t(40) << 20);
}

// While a core is free (reading a snapshot's trace, writing it), a session
// fills the page pool (fillPagePool) with the pages the next decode's model
// would otherwise take new: what neither the pool nor the snapshots that
// makeRoom() releases give it.
TEST(SnapshotLog, NewPagesAreWhatThePoolAndTheReleasedDoNotGive) {
  SnapshotLog log;
  log.setMemory(100 << 20);
  setPagePoolLimit(0); // Empty.
  // Nothing kept: all of the next model.
  EXPECT_EQ(log.newPagesAfter(40 << 20, 30 << 20), 30u << 20);
  log.add(recordOf(40 << 20));
  const uint64_t first = log.all()[0]->bytes;
  // Once one as big is decoded, it, the next and the kept one are over
  // 100 MiB: the kept one's bytes will come back.
  EXPECT_EQ(log.newPagesAfter(first, 30 << 20), 0u);
  EXPECT_EQ(log.newPagesAfter(first, 50 << 20), (50u << 20) - first);
  // Under a bigger budget, nothing will.
  log.setMemory(1 << 30);
  EXPECT_EQ(log.newPagesAfter(first, 30 << 20), 30u << 20);
  // The pool's pages count too.
  {
    PodVector<uint64_t> freed;
    freed.appendUninitialized((size_t(16) << 20) / sizeof(uint64_t));
  }
  EXPECT_EQ(pagePoolBytes(), size_t(16) << 20);
  EXPECT_EQ(log.newPagesAfter(first, 30 << 20), 14u << 20);
  // A small one leaves room for the kept one: only the pool gives.
  log.setMemory(100 << 20);
  EXPECT_EQ(log.newPagesAfter(1 << 20, 30 << 20), 14u << 20);
  // The next decode's room then releases what was counted.
  log.add(recordOf(40 << 20));
  log.makeRoom();
  EXPECT_EQ(releasedOf(log), (std::vector<bool>{true, false}));
  setPagePoolLimit(0);
  setPagePoolLimit(size_t(256) << 20);
}
