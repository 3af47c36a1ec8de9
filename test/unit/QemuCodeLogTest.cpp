//===- QemuCodeLogTest.cpp - The QEMU directory's one definition ----------===//
//
// QemuCodeLog.h is what the recorder (plugin/qemu) writes and what every
// reader parses. Checked both ways: records written with the format
// functions parse back to the changes they say, and two recordings made
// with the recorder before the definition was shared
// (test/unit/fixtures/qemu-code-log/: emu_jit in its rewrite and unmap
// modes, recorded by magic-trace-emulate --engine qemu --ring-dir) parse to
// what their text says, and the format functions write that text again,
// byte for byte.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/QemuCodeLog.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace magic_trace;

namespace {

std::string fixture(llvm::StringRef name) {
  return std::string(MT_TEST_SOURCE_DIR) + "/unit/fixtures/qemu-code-log/" +
         name.str();
}

std::string fileText(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

struct Expected {
  CodeChange::Kind kind;
  uint64_t seq, address, size;
  std::string path;       ///< Loads.
  uint64_t binOffset = 0; ///< Bytes: where in code.bin.
};

void expectChanges(const CodeHistory &history, const std::string &bin,
                   const std::vector<Expected> &expected) {
  ASSERT_EQ(history.changes.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const CodeChange &change = history.changes[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(change.kind, expected[i].kind);
    EXPECT_EQ(change.seq, expected[i].seq);
    EXPECT_EQ(change.address, expected[i].address);
    EXPECT_EQ(change.size, expected[i].size);
    if (change.kind == CodeChange::Kind::Load)
      EXPECT_EQ(change.module.path, expected[i].path);
    if (change.kind == CodeChange::Kind::Bytes) {
      ASSERT_LE(expected[i].binOffset + expected[i].size, bin.size());
      EXPECT_EQ(std::string(change.bytes.begin(), change.bytes.end()),
                bin.substr(expected[i].binOffset, expected[i].size));
    }
  }
}

} // namespace

TEST(QemuCodeLog, WrittenRecordsParseToWhatTheySay) {
  std::string log = formatLoadRecord(1, 0x400000, 0x402000, 0x1000,
                                     "/nonexistent/lib with space.so") +
                    formatBytesRecord(2, 0x7000, 0x1000, 0) +
                    formatUnmapRecord(3, 0x7000, 0x8000) +
                    formatBytesRecord(4, 0x7000, 0x1000, 0x1000);
  std::string bin(0x2000, '\0');
  for (size_t i = 0; i < bin.size(); ++i)
    bin[i] = char(i * 7 + (i >> 12));
  CodeHistory history;
  ASSERT_FALSE(bool(parseQemuCodeLog(log, bin, "DIR", 0, history)));
  expectChanges(history, bin,
                {{CodeChange::Kind::Load, 1, 0x400000, 0x2000,
                  "/nonexistent/lib with space.so"},
                 {CodeChange::Kind::Bytes, 2, 0x7000, 0x1000, "", 0},
                 {CodeChange::Kind::Unload, 3, 0x7000, 0x1000, ""},
                 {CodeChange::Kind::Bytes, 4, 0x7000, 0x1000, "", 0x1000}});
  // A file the recorder could not read is placed by its mapping alone.
  EXPECT_EQ(history.changes[0].module.loadAddress, 0x400000u - 0x1000u);

  // Up to a seq: what a trigger's snapshot saw.
  CodeHistory upTo2;
  ASSERT_FALSE(bool(parseQemuCodeLog(log, bin, "DIR", 2, upTo2)));
  EXPECT_EQ(upTo2.changes.size(), 2u);
}

TEST(QemuCodeLog, MarksAreRebasedToTheCopy) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-marks", dir));
  {
    std::ofstream out(qemu_dir::marks(dir, 42));
    out << formatMark(0x100, 2) << formatMark(0x900, 3) << formatMark(0x2000, 5)
        << formatMark(0x2000, 6)
        << "0x3000 7"; // No newline yet: still being written.
  }
  std::vector<ImageMark> whole = readQemuMarks(dir, 42, 0);
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0].offset, 0x100u);
  EXPECT_EQ(whole[2].offset, 0x2000u);
  EXPECT_EQ(whole[2].seq, 6u);
  // A copy from ring offset 0x1000: the marks before it say what the copy
  // starts with (the later one, seq 3), at its offset 0.
  std::vector<ImageMark> copy = readQemuMarks(dir, 42, 0x1000);
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_EQ(copy[0].offset, 0u);
  EXPECT_EQ(copy[0].seq, 3u);
  EXPECT_EQ(copy[1].offset, 0x1000u);
  EXPECT_EQ(copy[1].seq, 6u);
  EXPECT_EQ(readQemuMarks(dir, 43, 0).size(), 0u);
  llvm::sys::fs::remove_directories(dir);
}

TEST(QemuCodeLog, RecordingsFromBeforeTheSharedDefinition) {
  // emu_jit rewrite: three files, then one page of JIT code in two
  // versions; the thread marked its trace where it moved to the second.
  const char *ldso = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  const char *program = "/work/main/build/test/inputs/emu_jit";
  std::string rewriteBin = fileText(fixture("rewrite/code.bin"));
  CodeHistory rewrite;
  ASSERT_FALSE(bool(readQemuCodeLog(fixture("rewrite"), 0, rewrite)));
  expectChanges(
      rewrite, rewriteBin,
      {{CodeChange::Kind::Load, 1, 0x4002806000, 0x31000, ldso},
       {CodeChange::Kind::Load, 2, 0x400284a000, 0x1cf000, libc},
       {CodeChange::Kind::Load, 3, 0x4000000000, 0x3000, program},
       {CodeChange::Kind::Bytes, 4, 0x4002a2e000, 0x1000, "", 0},
       {CodeChange::Kind::Bytes, 5, 0x4002a2e000, 0x1000, "", 0x1000}});
  EXPECT_NE(rewrite.changes[3].bytes, rewrite.changes[4].bytes);
  std::vector<ImageMark> marks = readQemuMarks(fixture("rewrite"), 31013, 0);
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].offset, 0x7e9eu);
  EXPECT_EQ(marks[0].seq, 5u);
  EXPECT_EQ(fileText(fixture("rewrite/code.log")),
            formatLoadRecord(1, 0x4002806000, 0x4002837000, 0, ldso) +
                formatLoadRecord(2, 0x400284a000, 0x4002a19000, 0, libc) +
                formatLoadRecord(3, 0x4000000000, 0x4000003000, 0, program) +
                formatBytesRecord(4, 0x4002a2e000, 0x1000, 0) +
                formatBytesRecord(5, 0x4002a2e000, 0x1000, 0x1000));
  EXPECT_EQ(fileText(fixture("rewrite/marks.31013")), formatMark(0x7e9e, 5));

  // emu_jit unmap: the page is unmapped, and the code runs from a copy.
  std::string unmapBin = fileText(fixture("unmap/code.bin"));
  CodeHistory unmap;
  ASSERT_FALSE(bool(readQemuCodeLog(fixture("unmap"), 0, unmap)));
  expectChanges(
      unmap, unmapBin,
      {{CodeChange::Kind::Load, 1, 0x4002806000, 0x31000, ldso},
       {CodeChange::Kind::Load, 2, 0x400284a000, 0x1cf000, libc},
       {CodeChange::Kind::Load, 3, 0x4000000000, 0x3000, program},
       {CodeChange::Kind::Bytes, 4, 0x4002a2e000, 0x1000, "", 0},
       {CodeChange::Kind::Unload, 5, 0x4002a2e000, 0x1000, ""},
       {CodeChange::Kind::Bytes, 6, 0x4002a2f000, 0x1000, "", 0x1000}});
  EXPECT_EQ(fileText(fixture("unmap/code.log")),
            formatLoadRecord(1, 0x4002806000, 0x4002837000, 0, ldso) +
                formatLoadRecord(2, 0x400284a000, 0x4002a19000, 0, libc) +
                formatLoadRecord(3, 0x4000000000, 0x4000003000, 0, program) +
                formatBytesRecord(4, 0x4002a2e000, 0x1000, 0) +
                formatUnmapRecord(5, 0x4002a2e000, 0x4002a2f000) +
                formatBytesRecord(6, 0x4002a2f000, 0x1000, 0x1000));
}
