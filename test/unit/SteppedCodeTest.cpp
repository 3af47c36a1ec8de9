// Unit tests for the steppers' code log (SteppedCode.h): which pages it logs,
// once per version, which versions a thread must mark, and where the marks
// are in a ring's snapshot; and the code outside files a host reads at a
// stop (addCodeAtStop). The pages are this process's own: an anonymous
// mapping is code outside files in /proc/self/maps, this test's own code is
// in a file.
#include "magic_trace/SteppedCode.h"
#include "magic_trace/ProcessRecorder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace magic_trace;

namespace {

/// Reads this process's memory, as a stepper reads its target's.
size_t readOwn(uint64_t address, uint8_t *buffer, size_t size) {
  std::memcpy(buffer, reinterpret_cast<const void *>(address), size);
  return size;
}

/// One anonymous page, unmapped at the end.
struct AnonymousPage {
  AnonymousPage() {
    void *mapped = mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memory = mapped == MAP_FAILED ? nullptr : static_cast<uint8_t *>(mapped);
  }
  ~AnonymousPage() {
    if (memory)
      munmap(memory, 4096);
  }
  uint64_t address() const { return reinterpret_cast<uint64_t>(memory); }
  uint8_t *memory;
};

TEST(SteppedCode, LogsEachVersionOfAPageOnce) {
  AnonymousPage page;
  ASSERT_NE(page.memory, nullptr);
  std::memset(page.memory, 0xcc, 4096);
  page.memory[16] = 0xc3; // ret
  uint64_t pid = uint64_t(getpid());
  SteppedCodeLog log;
  // First seen: logged, and it replaces nothing (no mark).
  SteppedCodeLog::Step step =
      log.beforeStep(pid, page.address() + 16, 1, readOwn, 0);
  EXPECT_TRUE(step.newVersion);
  EXPECT_EQ(step.markSeq, 0u);
  ASSERT_EQ(log.history().changes.size(), 1u);
  const CodeChange &first = log.history().changes[0];
  EXPECT_EQ(first.kind, CodeChange::Kind::Bytes);
  EXPECT_EQ(first.seq, 1u);
  EXPECT_EQ(first.address, page.address());
  EXPECT_EQ(first.size, 4096u);
  EXPECT_EQ(first.bytes[16], 0xc3);
  // The same bytes again, and other unchanged bytes of the page: no version.
  EXPECT_FALSE(
      log.beforeStep(pid, page.address() + 16, 1, readOwn, 0).newVersion);
  EXPECT_FALSE(
      log.beforeStep(pid, page.address() + 100, 1, readOwn, 0).newVersion);
  EXPECT_EQ(log.history().changes.size(), 1u);
  // Rewritten in place: a second version, which a thread that has seen
  // nothing must mark, and one that marked it need not.
  page.memory[16] = 0x90; // nop
  step = log.beforeStep(pid, page.address() + 16, 1, readOwn, 0);
  EXPECT_TRUE(step.newVersion);
  EXPECT_EQ(step.markSeq, 2u);
  ASSERT_EQ(log.history().changes.size(), 2u);
  EXPECT_EQ(log.history().changes[1].bytes[16], 0x90);
  EXPECT_EQ(log.beforeStep(pid, page.address() + 16, 1, readOwn, 0).markSeq,
            2u);
  EXPECT_EQ(log.beforeStep(pid, page.address() + 16, 1, readOwn, 2).markSeq,
            0u);
}

TEST(SteppedCode, CodeInFilesAndModulesIsNotLogged) {
  uint64_t pid = uint64_t(getpid());
  SteppedCodeLog log;
  // This test's own code is in a file mapping.
  uint64_t ownCode = reinterpret_cast<uint64_t>(&readOwn);
  EXPECT_FALSE(log.beforeStep(pid, ownCode, 1, readOwn, 0).newVersion);
  // An anonymous page a module of the debugger's list covers.
  AnonymousPage page;
  ASSERT_NE(page.memory, nullptr);
  Module module;
  module.path = "/covered";
  module.loadAddress = page.address();
  module.segments.push_back({page.address(), 4096, 0, true});
  log.setModules({module});
  EXPECT_FALSE(log.beforeStep(pid, page.address(), 1, readOwn, 0).newVersion);
  EXPECT_TRUE(log.history().changes.empty());
  // Without it, the page is logged.
  log.setModules({});
  EXPECT_TRUE(log.beforeStep(pid, page.address(), 1, readOwn, 0).newVersion);
}

TEST(SteppedCode, UnreadableCodeIsNotLogged) {
  AnonymousPage page;
  ASSERT_NE(page.memory, nullptr);
  SteppedCodeLog log;
  auto unreadable = [](uint64_t, uint8_t *, size_t) -> size_t { return 0; };
  EXPECT_FALSE(
      log.beforeStep(uint64_t(getpid()), page.address(), 1, unreadable, 0)
          .newVersion);
  EXPECT_TRUE(log.history().changes.empty());
}

TEST(SteppedCode, MarksAreOffsetsIntoTheSnapshot) {
  llvm::Expected<RingBuffer> ring = RingBuffer::create(4096);
  ASSERT_TRUE(bool(ring)) << llvm::toString(ring.takeError());
  std::vector<uint8_t> filler(3000, 0);
  ring->write(filler.data(), filler.size());
  SteppedMarks marks;
  marks.marks = {{1000, 2}, {2500, 3}};
  // Not wrapped: offsets as written.
  std::vector<ImageMark> kept = marks.inSnapshot(*ring);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].offset, 1000u);
  EXPECT_EQ(kept[1].offset, 2500u);
  // Wrapped: the copy starts at byte 6000 - 4096 = 1904; the mark before it
  // says what the copy starts with, the other moves down.
  ring->write(filler.data(), filler.size());
  kept = marks.inSnapshot(*ring);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].offset, 0u);
  EXPECT_EQ(kept[0].seq, 2u);
  EXPECT_EQ(kept[1].offset, 2500u - 1904u);
  EXPECT_EQ(kept[1].seq, 3u);
  // A mark at the end (the PSB the next enable() writes) has no trace yet.
  marks.marks.push_back({6000, 4});
  EXPECT_EQ(marks.inSnapshot(*ring).size(), 2u);
}

/// An anonymous executable mapping of `size` bytes, unmapped at the end.
struct ExecutableMapping {
  explicit ExecutableMapping(size_t size) : size(size) {
    void *mapped = mmap(nullptr, size, PROT_READ | PROT_EXEC,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memory = mapped == MAP_FAILED ? nullptr : static_cast<uint8_t *>(mapped);
  }
  ~ExecutableMapping() {
    if (memory)
      munmap(memory, size);
  }
  uint64_t address() const { return reinterpret_cast<uint64_t>(memory); }
  size_t size;
  uint8_t *memory;
};

std::vector<const CodeChange *> changesAt(const Snapshot &snapshot,
                                          uint64_t address) {
  std::vector<const CodeChange *> found;
  for (const CodeChange &change : snapshot.code.changes)
    if (change.address == address)
      found.push_back(&change);
  return found;
}

TEST(CodeAtStop, ReadsExecutableMappingsNoModuleCovers) {
  ExecutableMapping code(2 * 4096);
  ASSERT_NE(code.memory, nullptr);
  auto read = [](uint64_t address, uint8_t *buffer, size_t size) {
    return readOwn(address, buffer, size);
  };
  Snapshot snapshot;
  // A change the recorder logged comes first; the stop's code after it.
  snapshot.code.changes.push_back(
      {CodeChange::Kind::Bytes, 1, 0, 0x1000, 1, {}, {0x90}});
  addCodeAtStop(uint64_t(getpid()), read, snapshot);
  std::vector<const CodeChange *> found = changesAt(snapshot, code.address());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->kind, CodeChange::Kind::Bytes);
  EXPECT_GT(found[0]->seq, 1u);
  EXPECT_EQ(found[0]->size, 2u * 4096);
  EXPECT_EQ(found[0]->bytes, std::vector<uint8_t>(2 * 4096, 0));
  EXPECT_TRUE(snapshot.notes.empty());
  // This test's own code is in a file: never read.
  uint64_t ownCode = reinterpret_cast<uint64_t>(&readOwn);
  for (const CodeChange &change : snapshot.code.changes)
    EXPECT_FALSE(change.address <= ownCode && ownCode < change.end());

  // A module of the list covers it: not read.
  Snapshot covered;
  Module module;
  module.path = "/covered";
  module.loadAddress = code.address();
  module.segments.push_back({code.address(), 2 * 4096, 0, true});
  covered.modules.push_back(module);
  addCodeAtStop(uint64_t(getpid()), read, covered);
  EXPECT_TRUE(changesAt(covered, code.address()).empty());

  // Unreadable: nothing, and no error.
  Snapshot unreadable;
  addCodeAtStop(
      uint64_t(getpid()),
      [](uint64_t, uint8_t *, size_t) -> size_t { return 0; }, unreadable);
  EXPECT_TRUE(unreadable.code.changes.empty());
}

TEST(CodeAtStop, SaysWhatItLeftOutPastItsLimit) {
  // Never touched: its pages are the zero page until read.
  ExecutableMapping huge(kMaxCodeAtStop + 4096);
  ASSERT_NE(huge.memory, nullptr);
  Snapshot snapshot;
  addCodeAtStop(
      uint64_t(getpid()),
      [](uint64_t address, uint8_t *buffer, size_t size) {
        return readOwn(address, buffer, size);
      },
      snapshot);
  EXPECT_TRUE(changesAt(snapshot, huge.address()).empty());
  ASSERT_EQ(snapshot.notes.size(), 1u);
  EXPECT_NE(snapshot.notes[0].find("has 65 MiB of code outside files at the "
                                   "stop, more than the 64 MiB read at a "
                                   "snapshot: 0 MiB were read"),
            std::string::npos)
      << snapshot.notes[0];
}

} // namespace
