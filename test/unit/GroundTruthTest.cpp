// Unit tests for the emulator's ground truth: which instructions make an
// event, and the on-disk layout other tools read (docs/emulator-cli.md).
#include "magic_trace/GroundTruth.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>

#include <unistd.h>

using namespace magic_trace;

namespace {

TEST(GroundTruth, OnlyControlTransfersMakeEvents) {
  ThreadTruth truth;
  truth.addInstruction(0x1000, 3, BranchClass::Other, 0x1003);
  truth.addInstruction(0x1003, 2, BranchClass::CondBranch, 0x1005); // not taken
  truth.addInstruction(0x1005, 2, BranchClass::CondBranch, 0x1100); // taken
  truth.addInstruction(0x1100, 5, BranchClass::DirectCall, 0x2000);
  truth.addInstruction(0x2000, 1, BranchClass::Return, 0x1105);
  truth.addInstruction(0x1105, 2, BranchClass::IndirectJump, 0x3000);
  truth.addInstruction(0x3000, 2, BranchClass::Syscall, 0x3002);
  truth.addEvent(TruthEventKind::Enable, 0, 0x3002);
  ASSERT_EQ(truth.insns.size(), 7u);
  ASSERT_EQ(truth.events.size(), 6u);
  EXPECT_EQ(truth.events[0].kind, TruthEventKind::Jump);
  EXPECT_EQ(truth.events[0].index, 2u);
  EXPECT_EQ(truth.events[0].to, 0x1100u);
  EXPECT_EQ(truth.events[1].kind, TruthEventKind::Call);
  EXPECT_EQ(truth.events[2].kind, TruthEventKind::Return);
  EXPECT_EQ(truth.events[3].kind, TruthEventKind::Jump);
  EXPECT_EQ(truth.events[4].kind, TruthEventKind::Syscall);
  EXPECT_EQ(truth.events[4].index, 6u);
  // Enable is numbered by the next instruction to run.
  EXPECT_EQ(truth.events[5].kind, TruthEventKind::Enable);
  EXPECT_EQ(truth.events[5].index, 7u);
}

TEST(GroundTruth, WritesTheDocumentedFiles) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-truth", dir));
  ThreadTruth truth;
  truth.tid = 42;
  truth.addEvent(TruthEventKind::Enable, 0, 0x1000);
  truth.addInstruction(0x1000, 5, BranchClass::DirectCall, 0x2000);
  truth.addInstruction(0x2000, 1, BranchClass::Return, 0x1005);
  truth.addEvent(TruthEventKind::Disable, 0x2000, 0x1005);
  truth.lost = {{1, 1}};
  ASSERT_FALSE(bool(writeGroundTruth({truth}, dir)));

  std::string base = (dir + "/groundtruth/42").str();
  auto insns = readTruthInsns(base + ".insns");
  ASSERT_TRUE(bool(insns));
  EXPECT_EQ(*insns, (std::vector<uint64_t>{0x1000, 0x2000}));
  // Little-endian uint64 per instruction: 16 bytes, low byte first.
  auto raw = llvm::MemoryBuffer::getFile(base + ".insns");
  ASSERT_TRUE(bool(raw));
  ASSERT_EQ((*raw)->getBufferSize(), 16u);
  EXPECT_EQ(uint8_t((*raw)->getBuffer()[1]), 0x10);

  auto events = llvm::MemoryBuffer::getFile(base + ".events");
  ASSERT_TRUE(bool(events));
  EXPECT_EQ((*events)->getBuffer(), "0 enable 0x0 0x1000\n"
                                    "0 call 0x1000 0x2000\n"
                                    "1 return 0x2000 0x1005\n"
                                    "2 disable 0x2000 0x1005\n");
  auto lost = llvm::MemoryBuffer::getFile(base + ".lost");
  ASSERT_TRUE(bool(lost));
  EXPECT_EQ((*lost)->getBuffer(), "1 1\n");
  llvm::sys::fs::remove_directories(dir);
}

TEST(GroundTruth, EventLinesAreAsPrintfWritesThem) {
  // Against the C library's printf: the file's documented format.
  const uint64_t values[] = {0,
                             1,
                             9,
                             10,
                             0xf,
                             0x10,
                             0x4000001170,
                             0xffffffffffffffffull,
                             0x8000000000000000ull,
                             1234567890123456789ull};
  for (uint64_t index : values)
    for (uint64_t address : values) {
      TruthEvent event{index, TruthEventKind::Interrupt, address, ~address};
      std::string line;
      appendTruthEvent(line, event);
      char expected[128];
      std::snprintf(expected, sizeof(expected),
                    "%" PRIu64 " interrupt 0x%" PRIx64 " 0x%" PRIx64 "\n",
                    index, address, ~address);
      EXPECT_EQ(line, expected);
    }
}

TEST(GroundTruth, ReadsBackWhatItWrote) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-truth", dir));
  ThreadTruth truth;
  truth.tid = 7;
  truth.addEvent(TruthEventKind::Enable, 0, 0x1000);
  truth.addInstruction(0x1000, 5, BranchClass::DirectCall, 0x2000);
  truth.addInstruction(0x2000, 2, BranchClass::Syscall, 0x2002);
  truth.addEvent(TruthEventKind::Interrupt, 0x2002, 0x3000);
  truth.lost = {{0, 1}};
  ASSERT_FALSE(bool(writeGroundTruth({truth}, dir)));

  llvm::Expected<ThreadTruth> read = readGroundTruth(dir, 7);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->tid, 7u);
  EXPECT_EQ(read->insns, truth.insns);
  ASSERT_EQ(read->events.size(), truth.events.size());
  for (size_t i = 0; i < truth.events.size(); ++i) {
    EXPECT_EQ(read->events[i].index, truth.events[i].index);
    EXPECT_EQ(read->events[i].kind, truth.events[i].kind);
    EXPECT_EQ(read->events[i].from, truth.events[i].from);
    EXPECT_EQ(read->events[i].to, truth.events[i].to);
  }
  EXPECT_EQ(read->lost, truth.lost);

  // Without a .lost file nothing was lost; a bad event line is an error.
  std::string base = (dir + "/groundtruth/7").str();
  llvm::sys::fs::remove(base + ".lost");
  read = readGroundTruth(dir, 7);
  ASSERT_TRUE(bool(read));
  EXPECT_TRUE(read->lost.empty());
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(base + ".events", ec);
    out << "0 teleport 0x1 0x2\n";
  }
  read = readGroundTruth(dir, 7);
  ASSERT_FALSE(bool(read));
  EXPECT_NE(llvm::toString(read.takeError()).find("teleport"),
            std::string::npos);
  llvm::Expected<ThreadTruth> missing = readGroundTruth(dir, 8);
  EXPECT_FALSE(bool(missing)) << "no files for thread 8";
  llvm::consumeError(missing.takeError());
  llvm::sys::fs::remove_directories(dir);
}

TEST(GroundTruth, TruncatedInsnsFileIsAnError) {
  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("mt-truth", "insns", fd, path));
  ASSERT_EQ(write(fd, "12345", 5), 5);
  close(fd);
  auto insns = readTruthInsns(path);
  ASSERT_FALSE(bool(insns));
  EXPECT_NE(llvm::toString(insns.takeError()).find("truncated"),
            std::string::npos);
  llvm::sys::fs::remove(path);
}

} // namespace
