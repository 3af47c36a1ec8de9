// Inputs made to hurt (issue 50): the QEMU code log, a bundle's code
// history, perf maps and jitdump, each parser handed sizes and offsets that
// wrap, point outside the file or name nothing. Each case is one the
// issue's mutation run or our fuzz targets found: before the fix it crashed
// (std::length_error), read outside the file, or was taken silently; now it
// is one error line naming the file and where in it.
#include "magic_trace/Bundle.h"
#include "magic_trace/JitRecords.h"
#include "magic_trace/QemuRings.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "Sanitizers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

using namespace magic_trace;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : std::string();
}

/// One page of code.bin for the log's B records.
const std::string kPage(4096, '\x90');

TEST(HostileCodeLog, WrappingBytesRecordIsAnErrorNotAnAbort) {
  // The issue's crash: offset + size wraps to 0 and passed the bounds check,
  // then std::vector::assign threw std::length_error out of the core.
  CodeHistory history;
  std::string error = errorText(parseQemuCodeLog(
      "L 1 0x4000000000 0x4000003000 0x0 /nonexistent\n"
      "B 6 0x4002a2e000 0x8000000000000000 0x8000000000000000\n",
      kPage, "/rec", 0, history));
  EXPECT_NE(error.find("/rec/code.log: offset 47:"), std::string::npos)
      << error;
  EXPECT_NE(error.find("beyond the end of code.bin"), std::string::npos)
      << error;
}

TEST(HostileCodeLog, SlightlyWrappingBytesRecordReadsNothingBeforeTheFile) {
  // offset + size wraps by a little: the record was accepted and its bytes
  // read from before code.bin's buffer (1 GiB of it in the issue's case).
  CodeHistory history;
  std::string error =
      errorText(parseQemuCodeLog("B 1 0x4002a2e000 0x2000 0xfffffffffffff000\n",
                                 kPage, "/rec", 0, history));
  EXPECT_NE(error.find("beyond the end of code.bin"), std::string::npos)
      << error;
  EXPECT_TRUE(history.changes.empty());
}

TEST(HostileCodeLog, MappingLargerThanAProcessCanHaveIsRefused) {
  CodeHistory history;
  std::string error = errorText(parseQemuCodeLog(
      "L 1 0x0 0x8000000000000000 0x0 /nonexistent\n", "", "/rec", 0, history));
  EXPECT_NE(error.find("more than a process can map"), std::string::npos)
      << error;
}

TEST(HostileCodeLog, SeqsThatDoNotAscendAreInconsistentHistory) {
  CodeHistory history;
  std::string error =
      errorText(parseQemuCodeLog("B 2 0x1000 0x10 0x0\nB 2 0x1000 0x10 0x10\n",
                                 kPage, "/rec", 0, history));
  EXPECT_NE(error.find("offset 20: a seq that does not follow"),
            std::string::npos)
      << error;
}

TEST(HostileCodeLog, BytesNamedTwiceAreNotTheRecordersLog) {
  // A million versions of one page named by records that all point at the
  // same bytes of code.bin would copy the page a million times.
  CodeHistory history;
  std::string error = errorText(
      parseQemuCodeLog("B 1 0x1000 0x1000 0x0\nB 2 0x1000 0x1000 0x0\n", kPage,
                       "/rec", 0, history));
  EXPECT_NE(error.find("bytes an earlier record of code.bin has"),
            std::string::npos)
      << error;
}

TEST(HostileCodeLog, TooManyMappingsEndQuicklyInOneLine) {
  std::string log;
  for (int i = 0; i < 100000; ++i)
    log += "L " + std::to_string(i + 1) + " 0x" +
           llvm::utohexstr(0x10000000ull + uint64_t(i) * 0x10000) + " 0x" +
           llvm::utohexstr(0x10001000ull + uint64_t(i) * 0x10000) +
           " 0x0 /nonexistent\n";
  CodeHistory history;
  auto start = std::chrono::steady_clock::now();
  std::string error = errorText(parseQemuCodeLog(log, "", "/rec", 0, history));
  if (!kSanitized)
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(5));
  EXPECT_NE(error.find("more than 4096 file mappings"), std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

/// A bundle of one thread whose magic-trace.json is `extras` and whose
/// code.bin is `bin`.
class HostileBundle : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> made;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-hostile", made));
    dir = made.str().str();
    llvm::sys::fs::create_directories(dir + "/threads");
    write("threads/1.intelpt_trace", std::string(64, '\0'));
    write("trace.json", R"({"type": "intel-pt",
      "cpuInfo": {"vendor": "GenuineIntel", "family": 6, "model": 85,
                  "stepping": 4},
      "processes": [{"pid": 1, "triple": "x86_64-unknown-linux-gnu",
        "threads": [{"tid": 1, "iptTrace": "threads/1.intelpt_trace"}],
        "modules": []}],
      "tscPerfZeroConversion": {"timeMult": 1, "timeShift": 0,
                                "timeZero": 0}})");
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }
  void write(const std::string &name, const std::string &bytes) {
    std::error_code ec;
    llvm::raw_fd_ostream os(dir + "/" + name, ec);
    os << bytes;
  }
  /// loadBundle's error with `changes` and `marks` as the JSON arrays.
  std::string load(const std::string &changes,
                   const std::string &marks = "[]") {
    write("magic-trace.json",
          R"({"formatVersion": 1, "modules": [], "stop": [],
              "threads": [{"tid": 1, "wrapped": false, "imageMarks": )" +
              marks + R"(}], "codeHistory": {"changes": )" + changes +
              R"(, "symbols": []}})");
    write("code.bin", kPage);
    llvm::Expected<Snapshot> snapshot = loadBundle(dir);
    return snapshot ? std::string() : errorText(snapshot.takeError());
  }
  std::string dir;
};

TEST_F(HostileBundle, WrappingBytesChangeIsAnErrorNotAnAbort) {
  std::string error = load(R"([{"seq": 1, "kind": "bytes", "address": "0x1000",
      "size": "0xffffffffffffffff", "codeOffset": "0x10"}])");
  EXPECT_NE(error.find("magic-trace.json: codeHistory.changes[0].size"),
            std::string::npos)
      << error;
  // No version of code is 2^64 bytes: refused before its bytes are sought.
  EXPECT_NE(error.find("more than a process can map"), std::string::npos)
      << error;
}

TEST_F(HostileBundle, CodeOffsetThatWrapsIsAnInputError) {
  // 0xfffffffffffff000 + 0x1000 wraps to 0: it changed the decode, with no
  // input error, before the fix.
  std::string error = load(R"([{"seq": 1, "kind": "bytes", "address": "0x1000",
      "size": "0x1000", "codeOffset": "0xfffffffffffff000"}])");
  EXPECT_NE(error.find("codeOffset: 0xfffffffffffff000 + 0x1000 is beyond"),
            std::string::npos)
      << error;
}

TEST_F(HostileBundle, MarksNamingNoChangeAreAnInputError) {
  std::string change = R"([{"seq": 1, "kind": "bytes", "address": "0x1000",
      "size": "0x10", "codeOffset": "0x0"}])";
  EXPECT_EQ(load(change, "[[0, 1]]"), "");
  std::string error = load(change, "[[0, 7]]");
  EXPECT_NE(error.find("a mark names seq 7, after every change"),
            std::string::npos)
      << error;
  error = load(change, "[[-1, -1]]");
  EXPECT_NE(error.find("a mark at offset -1 is past the trace"),
            std::string::npos)
      << error;
}

TEST_F(HostileBundle, SeqsThatDoNotAscendAreAnInputError) {
  std::string error = load(R"([
      {"seq": 2, "kind": "unload", "address": "0x1000", "size": "0x10"},
      {"seq": 2, "kind": "unload", "address": "0x1000", "size": "0x10"}])");
  EXPECT_NE(error.find("changes[1].seq: 2 does not follow"), std::string::npos)
      << error;
}

TEST_F(HostileBundle, AMillionSymbolsEndQuicklyInOneLine) {
  // Before the fix LLVM's JSON parser ran out of memory on these.
  std::string symbols;
  symbols.reserve(64 << 20);
  for (int i = 0; i < 1000000; ++i)
    symbols += std::string(i ? "," : "") + R"({"address":"0x)" +
               llvm::utohexstr(0x1000 + i * 16) +
               R"(","size":"0x10","name":"f"})";
  write("magic-trace.json",
        R"({"formatVersion": 1, "modules": [], "stop": [], "threads": [],
            "codeHistory": {"changes": [], "symbols": [)" +
            symbols + "]}}");
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<Snapshot> snapshot = loadBundle(dir);
  if (!kSanitized)
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(5));
  ASSERT_FALSE(bool(snapshot));
  std::string error = errorText(snapshot.takeError());
  EXPECT_NE(error.find("more than 100000 JSON objects"), std::string::npos)
      << error;
}

TEST_F(HostileBundle, CodeBinThatIsADeviceIsNotRead) {
  // code.bin -> /dev/zero ran out of memory before the fix.
  llvm::sys::fs::remove(dir + "/code.bin");
  write("magic-trace.json",
        R"({"formatVersion": 1, "modules": [], "stop": [], "threads": [],
            "codeHistory": {"changes": [{"seq": 1, "kind": "bytes",
            "address": "0x1000", "size": "0x10", "codeOffset": "0x0"}],
            "symbols": []}})");
  ASSERT_EQ(symlink("/dev/zero", (dir + "/code.bin").c_str()), 0);
  llvm::Expected<Snapshot> snapshot = loadBundle(dir);
  ASSERT_FALSE(bool(snapshot));
  std::string error = errorText(snapshot.takeError());
  EXPECT_NE(error.find("code.bin: it is a device"), std::string::npos) << error;
}

/// A jitdump header (jitdump-specification.txt: magic, version, header
/// size, machine, pad, pid, timestamp, flags) and records after it.
std::vector<uint8_t> jitdump(const std::vector<uint8_t> &records) {
  std::vector<uint8_t> bytes(40, 0);
  uint32_t magic = 0x4A695444, version = 1, size = 40, machine = 62;
  std::memcpy(&bytes[0], &magic, 4);
  std::memcpy(&bytes[4], &version, 4);
  std::memcpy(&bytes[8], &size, 4);
  std::memcpy(&bytes[12], &machine, 4);
  bytes.insert(bytes.end(), records.begin(), records.end());
  return bytes;
}

template <class T> void put(std::vector<uint8_t> &bytes, T value) {
  const auto *raw = reinterpret_cast<const uint8_t *>(&value);
  bytes.insert(bytes.end(), raw, raw + sizeof(T));
}

TEST(HostileJitDump, CodeLoadClaimingFourGibIsAnErrorNotASilentSkip) {
  std::vector<uint8_t> record;
  put<uint32_t>(record, 0);                 // id: JIT_CODE_LOAD
  put<uint32_t>(record, 16 + 40 + 2 + 4);   // total_size
  put<uint64_t>(record, 0);                 // timestamp
  put<uint32_t>(record, 1);                 // pid
  put<uint32_t>(record, 1);                 // tid
  put<uint64_t>(record, 0x1000);            // vma
  put<uint64_t>(record, 0x1000);            // code_addr
  put<uint64_t>(record, uint64_t(4) << 30); // code_size: 4 GiB
  put<uint64_t>(record, 1);                 // code_index
  record.push_back('f');                    // name "f"
  record.push_back(0);
  put<uint32_t>(record, 0xc3c3c3c3); // 4 bytes of code, not 4 GiB
  llvm::Expected<JitDump> dump =
      parseJitDump(jitdump(record), "/tmp/jit-1.dump");
  ASSERT_FALSE(bool(dump));
  std::string error = errorText(dump.takeError());
  EXPECT_NE(error.find("/tmp/jit-1.dump: offset 40: a code load of 4294967296 "
                       "bytes"),
            std::string::npos)
      << error;
}

TEST(HostilePerfMap, AMillionLinesEndQuickly) {
  std::string text;
  for (int i = 0; i < 1000000; ++i)
    text += llvm::utohexstr(0x10000 + uint64_t(i) * 16) + " 10 jit_" +
            std::to_string(i) + "\n";
  text += "ffffffffffffff00 1000 wraps\n";
  auto start = std::chrono::steady_clock::now();
  std::vector<JitSymbol> symbols = parsePerfMap(text);
  if (!kSanitized)
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(5));
  EXPECT_EQ(symbols.size(), 1000000u); // The wrapping line is skipped.
}

} // namespace
