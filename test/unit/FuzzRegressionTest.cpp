// Every input a fuzz target or issue 50's mutation run crashed on, kept in
// test/fuzz/regressions/<target>/ and fed to the same entry point as the
// target's, in this build and (test.sh stage 2) under ASan+UBSan, where a
// read outside the input or undefined behaviour fails the test. Each must
// give a result or one error line.
#include "magic_trace/Bundle.h"
#include "magic_trace/JitRecords.h"
#include "magic_trace/QemuRings.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace magic_trace;

namespace {

/// The files of test/fuzz/regressions/TARGET.
std::vector<std::string> regressions(const std::string &target) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(
           std::string(MT_TEST_SOURCE_DIR) + "/fuzz/regressions/" + target, ec),
       end;
       !ec && it != end; it.increment(ec))
    files.push_back(it->path());
  return files;
}

std::string bytesOf(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// An error's one line, or "" on success.
std::string line(llvm::Error error) {
  std::string text = error ? llvm::toString(std::move(error)) : "";
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  return text;
}

TEST(FuzzRegression, JitDump) {
  std::vector<std::string> files = regressions("jitdump");
  EXPECT_FALSE(files.empty());
  for (const std::string &file : files) {
    std::string bytes = bytesOf(file);
    llvm::Expected<JitDump> dump =
        parseJitDump(llvm::arrayRefFromStringRef(bytes), file);
    if (!dump)
      line(dump.takeError());
  }
}

TEST(FuzzRegression, QemuCodeLog) {
  std::vector<std::string> files = regressions("qemu-code-log");
  EXPECT_FALSE(files.empty());
  for (const std::string &file : files) {
    std::string bytes = bytesOf(file);
    auto [log, bin] = llvm::StringRef(bytes).split('\0');
    CodeHistory history;
    std::string error = line(parseQemuCodeLog(log, bin, file, 0, history));
    if (llvm::StringRef(file).contains("issue-50"))
      EXPECT_NE(error, "") << file;
  }
}

TEST(FuzzRegression, BundleHistory) {
  std::vector<std::string> files = regressions("bundle-history");
  EXPECT_FALSE(files.empty());
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-regression", dir));
  llvm::sys::fs::create_directories(dir + "/threads");
  auto write = [&](const std::string &name, llvm::StringRef bytes) {
    std::error_code ec;
    llvm::raw_fd_ostream os((dir + "/" + name).str(), ec);
    os << bytes;
  };
  write("threads/1.intelpt_trace", std::string(64, '\0'));
  write("trace.json", R"({"type": "intel-pt",
    "cpuInfo": {"vendor": "GenuineIntel", "family": 6, "model": 85,
                "stepping": 4},
    "processes": [{"pid": 1, "triple": "x86_64-unknown-linux-gnu",
      "threads": [{"tid": 1, "iptTrace": "threads/1.intelpt_trace"}],
      "modules": []}],
    "tscPerfZeroConversion": {"timeMult": 1, "timeShift": 0,
                              "timeZero": 0}})");
  for (const std::string &file : files) {
    std::string bytes = bytesOf(file);
    auto [extras, bin] = llvm::StringRef(bytes).split('\0');
    write("magic-trace.json", extras);
    write("code.bin", bin);
    llvm::Expected<Snapshot> snapshot = loadBundle(dir);
    std::string error = snapshot ? "" : line(snapshot.takeError());
    if (llvm::StringRef(file).contains("issue-50"))
      EXPECT_NE(error, "") << file;
  }
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
