// A jitdump's code versions placed by time on the perf backend (issue 52,
// JitCode::ByTime in JitRecords.h): each CODE_LOAD becomes code from its
// time on, its TSC stamp converted as perf_event_open(2) says for
// time_zero, time_mult and time_shift; a jitdump on the monotonic clock
// gives names only and says why. And the TSC of a PSB+, read without
// libipt (PtBytes.h), that the LLDB bundle's epochs are cut by.
#include "magic_trace/JitRecords.h"
#include "magic_trace/ProcessRecorder.h"

#include "../../core/lib/base/PtBytes.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace magic_trace;

namespace {

template <class T> void put(std::vector<uint8_t> &bytes, T value) {
  const auto *raw = reinterpret_cast<const uint8_t *>(&value);
  bytes.insert(bytes.end(), raw, raw + sizeof(T));
}

/// jitdump-specification.txt: the 40-byte header, then a JIT_CODE_LOAD
/// record per (timestamp, address, code, name).
struct Load {
  uint64_t timestamp;
  uint64_t address;
  std::vector<uint8_t> code;
  std::string name;
};
std::vector<uint8_t> jitdump(uint64_t flags, const std::vector<Load> &loads) {
  std::vector<uint8_t> bytes;
  put<uint32_t>(bytes, 0x4A695444); // "JiTD"
  put<uint32_t>(bytes, 1);          // version
  put<uint32_t>(bytes, 40);         // header size
  put<uint32_t>(bytes, 62);         // EM_X86_64
  put<uint32_t>(bytes, 0);          // pad
  put<uint32_t>(bytes, 1);          // pid
  put<uint64_t>(bytes, 0);          // timestamp
  put<uint64_t>(bytes, flags);
  uint64_t index = 0;
  for (const Load &load : loads) {
    put<uint32_t>(bytes, 0); // JIT_CODE_LOAD
    put<uint32_t>(bytes,
                  uint32_t(16 + 40 + load.name.size() + 1 + load.code.size()));
    put<uint64_t>(bytes, load.timestamp);
    put<uint32_t>(bytes, 1); // pid
    put<uint32_t>(bytes, 1); // tid
    put<uint64_t>(bytes, load.address);
    put<uint64_t>(bytes, load.address);
    put<uint64_t>(bytes, load.code.size());
    put<uint64_t>(bytes, index++);
    bytes.insert(bytes.end(), load.name.begin(), load.name.end());
    bytes.push_back(0);
    bytes.insert(bytes.end(), load.code.begin(), load.code.end());
  }
  return bytes;
}

/// A Bytes change whose byte at each address is the address's low byte.
CodeChange bytesChange(uint64_t seq, uint64_t address, uint64_t size,
                       uint64_t timeNs = 0) {
  CodeChange change;
  change.kind = CodeChange::Kind::Bytes;
  change.seq = seq;
  change.timeNs = timeNs;
  change.address = address;
  change.size = size;
  for (uint64_t i = 0; i < size; ++i)
    change.bytes.push_back(uint8_t(address + i));
  return change;
}

class JitVersions : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("jit-versions", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }
  /// Writes jit-PID.dump in the test's directory.
  void write(const std::vector<uint8_t> &bytes) {
    std::error_code error;
    llvm::raw_fd_ostream out(
        (dir + "/jit-" + std::to_string(Pid) + ".dump").str(), error);
    ASSERT_FALSE(error);
    out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  }
  /// A pid above Linux's PID_MAX_LIMIT: no /tmp/perf-PID.map of a real
  /// process is read.
  static constexpr uint64_t Pid = 4194305;
  llvm::SmallString<128> dir;
};

TEST_F(JitVersions, TscStampedLoadsBecomeCodeAtTheirTimesInTimeOrder) {
  // In file order, the rewrite (at TSC 5,000) comes before the first
  // version (at 1,000): a JIT's threads may write out of time order.
  write(jitdump(1, {{5000, 0x9000, {0x89, 0xf8, 0xc3}, "f"},
                    {1000, 0x9000, {0x90, 0xc3}, "f"},
                    {1000, 0xa000, {0xc3}, "g"}}));
  CodeHistory history;
  history.changes.push_back(bytesChange(1, 0x9000, 2)); // The stop's.
  // ns = time_zero + (tsc * time_mult) >> time_shift: 100 + tsc * 3 / 2.
  TimeConversion clock;
  clock.timeZero = 100;
  clock.timeMult = 3;
  clock.timeShift = 1;
  JitRecordNotes notes =
      addJitRecords(Pid, {std::string(dir)}, JitCode::ByTime, history, &clock);
  EXPECT_TRUE(notes.skipped.empty());
  EXPECT_TRUE(notes.unused.empty());
  ASSERT_EQ(history.changes.size(), 4u);
  EXPECT_EQ(history.changes[1].seq, 2u);
  EXPECT_EQ(history.changes[1].address, 0x9000u);
  EXPECT_EQ(history.changes[1].timeNs, 1600u);
  EXPECT_EQ(history.changes[1].bytes, (std::vector<uint8_t>{0x90, 0xc3}));
  EXPECT_EQ(history.changes[2].seq, 3u);
  EXPECT_EQ(history.changes[2].address, 0xa000u);
  EXPECT_EQ(history.changes[2].timeNs, 1600u);
  EXPECT_EQ(history.changes[3].seq, 4u);
  EXPECT_EQ(history.changes[3].timeNs, 7600u);
  EXPECT_EQ(history.changes[3].bytes, (std::vector<uint8_t>{0x89, 0xf8, 0xc3}));
  EXPECT_EQ(historyProblem(history), "");
  // Every load names its code.
  EXPECT_EQ(history.symbols.size(), 3u);
}

TEST_F(JitVersions, MonotonicStampedLoadsGiveNamesOnlyAndSayWhy) {
  write(jitdump(0, {{5000, 0x9000, {0x90, 0xc3}, "f"}}));
  CodeHistory history;
  history.changes.push_back(bytesChange(1, 0x9000, 2)); // The stop's.
  TimeConversion clock;
  JitRecordNotes notes =
      addJitRecords(Pid, {std::string(dir)}, JitCode::ByTime, history, &clock);
  EXPECT_EQ(history.changes.size(), 1u);
  ASSERT_EQ(history.symbols.size(), 1u);
  EXPECT_EQ(history.symbols[0].name, "f");
  ASSERT_EQ(notes.unused.size(), 1u);
  EXPECT_NE(notes.unused[0].find("its times are the monotonic clock"),
            std::string::npos)
      << notes.unused[0];
  EXPECT_NE(notes.unused[0].find("JITDUMP_USE_ARCH_TIMESTAMP=1"),
            std::string::npos);
}

TEST(CodeAtStop, EachPieceHoldsFromTheLastTimeItWasMadeExecutable) {
  Snapshot snapshot;
  // A recorder's own change, then the stop's bytes of [0x1000, 0x3000).
  snapshot.code.changes = {bytesChange(1, 0x9000, 4),
                           bytesChange(2, 0x1000, 0x2000)};
  // [0x2000, 0x3000) made executable at 500, [0x2800, 0x2900) again at
  // 700, and a mapping elsewhere.
  snapshot.execMappings = {
      {500, 0x2000, 0x1000}, {700, 0x2800, 0x100}, {900, 0x8000, 0x1000}};
  timeCodeAtStop(snapshot, 1);
  const std::vector<CodeChange> &changes = snapshot.code.changes;
  ASSERT_EQ(changes.size(), 5u);
  EXPECT_EQ(changes[0].address, 0x9000u); // Before firstAtStop: untouched.
  struct Expected {
    uint64_t address, size, timeNs;
  };
  std::vector<Expected> expected = {{0x1000, 0x1000, 0},
                                    {0x2000, 0x800, 500},
                                    {0x2800, 0x100, 700},
                                    {0x2900, 0x700, 500}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const CodeChange &piece = changes[i + 1];
    EXPECT_EQ(piece.seq, i + 2);
    EXPECT_EQ(piece.address, expected[i].address) << i;
    EXPECT_EQ(piece.size, expected[i].size) << i;
    EXPECT_EQ(piece.timeNs, expected[i].timeNs) << i;
    ASSERT_EQ(piece.bytes.size(), piece.size);
    // Each piece's bytes are the stop's at its addresses.
    EXPECT_EQ(piece.bytes.front(), uint8_t(piece.address));
    EXPECT_EQ(piece.bytes.back(), uint8_t(piece.end() - 1));
  }
  EXPECT_EQ(historyProblem(snapshot.code), "");
}

TEST(CodeAtStop, EachByteHoldsFromTheLatestMappingOverItOnRandomRecords) {
  // The definition, byte by byte: the latest time of the mappings that
  // cover the byte, 0 when none does; records overlap, nest and repeat.
  std::mt19937_64 random(52);
  for (int round = 0; round < 50; ++round) {
    Snapshot snapshot;
    snapshot.code.changes = {bytesChange(1, 0x1000, 0x100)};
    for (int i = 0, n = 1 + int(random() % 200); i < n; ++i)
      snapshot.execMappings.push_back(
          {1 + random() % 50, 0xfc0 + random() % 0x160, random() % 0x40});
    std::vector<ExecMapping> mappings = snapshot.execMappings;
    timeCodeAtStop(snapshot, 0);
    ASSERT_EQ(historyProblem(snapshot.code), "");
    uint64_t next = 0x1000;
    for (const CodeChange &piece : snapshot.code.changes) {
      ASSERT_EQ(piece.address, next) << "round " << round;
      next = piece.end();
      for (uint64_t at = piece.address; at < piece.end(); ++at) {
        uint64_t latest = 0;
        for (const ExecMapping &m : mappings)
          if (m.address <= at && at < m.address + m.size)
            latest = std::max(latest, m.timeNs);
        ASSERT_EQ(piece.timeNs, latest) << "round " << round << " at " << at;
        ASSERT_EQ(piece.bytes[at - piece.address], uint8_t(at));
      }
    }
    EXPECT_EQ(next, 0x1100u);
  }
}

TEST(CodeAtStop, SeqsFollowTimeUntimedFirst) {
  CodeHistory history;
  history.changes = {
      bytesChange(1, 0x1000, 1, 700), bytesChange(2, 0x2000, 1, 0),
      bytesChange(3, 0x3000, 1, 300), bytesChange(4, 0x4000, 1, 700)};
  orderChangesByTime(history);
  std::vector<uint64_t> addresses, seqs;
  for (const CodeChange &change : history.changes) {
    addresses.push_back(change.address);
    seqs.push_back(change.seq);
  }
  EXPECT_EQ(addresses, (std::vector<uint64_t>{0x2000, 0x3000, 0x1000, 0x4000}));
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST(CodeHistoryRule, CodeWithATimeHoldsNothingBeforeIt) {
  CodeChange old = bytesChange(1, 0x1000, 4);        // no time
  CodeChange timed = bytesChange(2, 0x1000, 4, 500); // from 500 ns on
  EXPECT_TRUE(codeChangeCanHold(old, 0));
  EXPECT_FALSE(codeChangeCanHold(timed, 1));
  EXPECT_TRUE(codeChangeCanHold(timed, 2));
  // Before the timed one: the older code, whether seen or first seen later.
  EXPECT_TRUE(codeChangeWins(old, timed, 0));
  EXPECT_FALSE(codeChangeWins(timed, old, 1));
  EXPECT_TRUE(codeChangeWins(timed, old, 2));
}

TEST(PsbTsc, ReadsTheTscOfAPsbPlusAndNothingElse) {
  std::vector<uint8_t> bytes(pt_bytes::kPsb, pt_bytes::kPsb + 16);
  // PAD, MODE.Exec, FUP with 6 IP bytes, TMA, CBR, then the TSC.
  bytes.insert(bytes.end(),
               {0x00, 0x99, 0x01, 0x7d, 1, 2, 3,    4,    5,    6,   0x02,
                0x73, 1,    2,    3,    4, 5, 0x02, 0x03, 0x1e, 0x00});
  bytes.insert(bytes.end(), {0x19, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22});
  bytes.insert(bytes.end(), {0x02, 0x23});
  EXPECT_EQ(pt_bytes::psbTsc(bytes.data(), bytes.size(), 0), 0x22334455667788u);
  // Not at a PSB; cut short inside the TSC packet.
  EXPECT_EQ(pt_bytes::psbTsc(bytes.data(), bytes.size(), 2), 0u);
  EXPECT_EQ(pt_bytes::psbTsc(bytes.data(), bytes.size() - 5, 0), 0u);
  // PSBEND before any TSC: none.
  std::vector<uint8_t> none(pt_bytes::kPsb, pt_bytes::kPsb + 16);
  none.insert(none.end(), {0x02, 0x23, 0x19, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(pt_bytes::psbTsc(none.data(), none.size(), 0), 0u);
  EXPECT_EQ(pt_bytes::psbTsc(none.data(), none.size(), none.size() + 1), 0u);
}

} // namespace
