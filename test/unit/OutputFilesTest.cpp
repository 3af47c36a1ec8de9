// Outputs no other user can redirect and inputs that are what they say
// (issue 50): the output file checked again at commit, the bundle directory
// renamed into place only when its name is still free, reads that refuse a
// FIFO, a device, a link or another user's file in a shared place, removal
// that never follows a link, and a cache directory whose parents are
// checked.
#include "magic_trace/OutputFiles.h"
#include "magic_trace/InputFiles.h"
#include "magic_trace/PrivateFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace magic_trace;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : std::string();
}

class Scratch : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> made;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-outputs", made));
    root = made.str().str();
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }
  void write(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
  }
  std::string read(const std::string &path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    return buffer ? (*buffer)->getBuffer().str() : "<none>";
  }
  /// Every name in `dir`, to see that no temporary file is left.
  std::vector<std::string> names(const std::string &dir) {
    std::vector<std::string> found;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec))
      found.push_back(llvm::sys::path::filename(it->path()).str());
    llvm::sort(found);
    return found;
  }
  std::string root;
};

TEST_F(Scratch, OutputIsWrittenOnlyAtCommitAndLeavesNoTemporary) {
  std::string path = root + "/out.fxt";
  write(path, "old");
  {
    auto file = OutputFile::create(path);
    ASSERT_TRUE(bool(file)) << errorText(file.takeError());
    (*file)->os() << "new";
    EXPECT_EQ(read(path), "old"); // Not yet: a reader never sees half.
    ASSERT_EQ(errorText((*file)->commit()), "");
  }
  EXPECT_EQ(read(path), "new");
  {
    auto dropped = OutputFile::create(root + "/dropped.fxt");
    ASSERT_TRUE(bool(dropped));
    (*dropped)->os() << "x";
  }
  EXPECT_EQ(names(root), std::vector<std::string>{"out.fxt"});
}

TEST_F(Scratch, BigOutputReplacedInPlaceLeavesTheOldFileWhole) {
  // A big destination (64 MB and more) is held open across the rename so
  // that its pages are freed after it, on a thread of its own: the rename
  // still replaces it, and the old file (here also named by a link) is let
  // go of, never changed.
  std::string path = root + "/out.fxt", kept = root + "/kept.fxt";
  write(path, "old");
  ASSERT_EQ(truncate(path.c_str(), 64 << 20), 0);
  ASSERT_EQ(link(path.c_str(), kept.c_str()), 0);
  {
    auto file = OutputFile::create(path);
    ASSERT_TRUE(bool(file)) << errorText(file.takeError());
    (*file)->os() << "new";
    ASSERT_EQ(errorText((*file)->commit()), "");
  }
  EXPECT_EQ(read(path), "new");
  std::string old = read(kept);
  EXPECT_EQ(old.size(), size_t(64) << 20);
  EXPECT_EQ(old.substr(0, 3), "old");
  EXPECT_EQ(names(root), (std::vector<std::string>{"kept.fxt", "out.fxt"}));
}

TEST_F(Scratch, LinkPlantedWhileWritingIsRefusedAtCommit) {
  std::string canary = root + "/canary", path = root + "/out.fxt";
  write(canary, "canary");
  auto file = OutputFile::create(path);
  ASSERT_TRUE(bool(file));
  (*file)->os() << "trace";
  ASSERT_EQ(symlink(canary.c_str(), path.c_str()), 0);
  std::string error = errorText((*file)->commit());
  EXPECT_NE(error.find("out.fxt': it is a symbolic link"), std::string::npos)
      << error;
  EXPECT_EQ(read(canary), "canary");
}

/// Whether the file system under `dir` takes an aligned O_DIRECT write.
bool takesDirectWrites(const std::string &dir) {
  std::string probe = dir + "/probe";
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0600);
  if (fd < 0)
    return false;
  void *block = std::aligned_alloc(4096, 4096);
  std::memset(block, 0, 4096);
  bool took = ::write(fd, block, 4096) == 4096;
  std::free(block);
  ::close(fd);
  ::unlink(probe.c_str());
  return took;
}

TEST_F(Scratch, BigOutputIsWrittenWholeWithItsTailAndGoesDirectWhereItCan) {
  // 20 MiB and an unaligned tail, in writes of many sizes: the chunks past
  // the 8th MiB go directly where the file system takes them, the tail
  // through the page cache; the file must hold every byte in order.
  std::string expected;
  uint64_t state = 12345;
  size_t sizes[] = {1, 7, 4096, 100000, 3 << 20, 13, 1 << 20, 65536};
  for (size_t i = 0; expected.size() < (size_t(20) << 20) + 4321; ++i) {
    size_t size = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
    for (size_t j = 0; j < size; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      expected.push_back(char(state >> 56));
    }
  }
  std::string path = root + "/big.fxt";
  uint64_t directBefore = outputBytesWrittenDirect();
  {
    auto file = OutputFile::create(path);
    ASSERT_TRUE(bool(file)) << errorText(file.takeError());
    llvm::StringRef rest = expected;
    for (size_t i = 0; !rest.empty(); ++i) {
      size_t size = sizes[(i * 3) % (sizeof(sizes) / sizeof(sizes[0]))];
      (*file)->os() << rest.take_front(size);
      rest = rest.drop_front(std::min(size, rest.size()));
    }
    EXPECT_EQ((*file)->os().tell(), expected.size());
    ASSERT_EQ(errorText((*file)->commit()), "");
  }
  EXPECT_TRUE(read(path) == expected) << "the file differs from the bytes";
  uint64_t direct = outputBytesWrittenDirect() - directBefore;
  if (takesDirectWrites(root))
    EXPECT_GE(direct, uint64_t(8) << 20);
  else
    EXPECT_EQ(direct, 0u);
  EXPECT_EQ(direct % 4096, 0u);
}

TEST_F(Scratch, NewBundleDirectoryAppearsWholeAndPrivate) {
  std::string path = root + "/bundle";
  {
    auto dir = OutputDir::create(path);
    ASSERT_TRUE(bool(dir)) << errorText(dir.takeError());
    ASSERT_EQ(errorText((*dir)->writeFile("threads/1.intelpt_trace", "pt")),
              "");
    EXPECT_FALSE(llvm::sys::fs::exists(path)); // Under its temporary name.
    ASSERT_EQ(errorText((*dir)->commit()), "");
  }
  struct stat info;
  ASSERT_EQ(lstat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);
  EXPECT_EQ(read(path + "/threads/1.intelpt_trace"), "pt");
  EXPECT_EQ(names(root), std::vector<std::string>{"bundle"});
}

TEST_F(Scratch, BundleNameTakenWhileWritingIsNotReplaced) {
  std::string path = root + "/bundle";
  auto dir = OutputDir::create(path);
  ASSERT_TRUE(bool(dir));
  ASSERT_EQ(mkdir(path.c_str(), 0777), 0);
  write(path + "/theirs", "theirs");
  std::string error = errorText((*dir)->commit());
  EXPECT_NE(error.find("something took the name"), std::string::npos) << error;
  dir->reset();
  EXPECT_EQ(read(path + "/theirs"), "theirs");
  EXPECT_EQ(names(root), std::vector<std::string>{"bundle"});
}

TEST_F(Scratch, InputsThatAreNotRegularFilesAreNotRead) {
  std::string fifo = root + "/fifo", link = root + "/zero";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(symlink("/dev/zero", link.c_str()), 0);
  // O_NONBLOCK: a FIFO nobody writes is refused at once, not waited on.
  std::string error =
      errorText(readInputFile(fifo, InputPlace::Named).takeError());
  EXPECT_NE(error.find("it is a FIFO"), std::string::npos) << error;
  error = errorText(readInputFile(link, InputPlace::Named).takeError());
  EXPECT_NE(error.find("it is a device"), std::string::npos) << error;
  error = errorText(readInputFile(link, InputPlace::Shared).takeError());
  EXPECT_NE(error.find("it is a symbolic link"), std::string::npos) << error;
  auto missing = readInputFile(root + "/none", InputPlace::Shared);
  ASSERT_TRUE(bool(missing));
  EXPECT_EQ(missing->get(), nullptr);
  write(root + "/big", std::string(100, 'x'));
  error = errorText(
      readInputFile(root + "/big", InputPlace::Named, 99).takeError());
  EXPECT_NE(error.find("100 bytes, more than the 99"), std::string::npos)
      << error;

  // Read into a vector (a thread's PT), with the same checks.
  std::vector<uint8_t> bytes{1, 2, 3};
  error =
      errorText(readInputFileInto(fifo, InputPlace::Named, bytes).takeError());
  EXPECT_NE(error.find("it is a FIFO"), std::string::npos) << error;
  EXPECT_TRUE(bytes.empty());
  error =
      errorText(readInputFileInto(link, InputPlace::Named, bytes).takeError());
  EXPECT_NE(error.find("it is a device"), std::string::npos) << error;
  error =
      errorText(readInputFileInto(root + "/big", InputPlace::Named, bytes, 99)
                    .takeError());
  EXPECT_NE(error.find("100 bytes, more than the 99"), std::string::npos)
      << error;
  llvm::Expected<bool> none =
      readInputFileInto(root + "/none", InputPlace::Named, bytes);
  ASSERT_TRUE(bool(none));
  EXPECT_FALSE(*none);
  llvm::Expected<bool> big =
      readInputFileInto(root + "/big", InputPlace::Named, bytes);
  ASSERT_TRUE(bool(big));
  EXPECT_TRUE(*big);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), std::string(100, 'x'));
}

/// Resident KiB of the mapping holding `address`, from /proc/self/smaps
/// (the kernel's count, not ours); -1 when no mapping holds it.
long residentKiBAt(const void *address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  uintptr_t at = uintptr_t(address);
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0)
      return std::atol(line.c_str() + 4);
  }
  return -1;
}

TEST_F(Scratch, ReleasedPagesOfAMappedFileReadTheSameAgain) {
  // 8 MiB that differ page by page: LLVM maps a file this big.
  std::string path = root + "/object";
  std::string bytes(8 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = char((i * 2654435761u) >> 13);
  write(path, bytes);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  ASSERT_TRUE(bool(buffer));
  const llvm::MemoryBuffer &mapped = **buffer;
  ASSERT_EQ(mapped.getBufferKind(), llvm::MemoryBuffer::MemoryBuffer_MMap);
  EXPECT_EQ(mapped.getBuffer(), bytes); // Every page read.
  long before = residentKiBAt(mapped.getBufferStart());
  EXPECT_GE(before, 7 << 10);
  releaseReadPages(mapped);
  long after = residentKiBAt(mapped.getBufferStart());
  EXPECT_LE(after, 64) << "before " << before;
  EXPECT_EQ(mapped.getBuffer(), bytes); // Read again from the file.

  // A buffer in memory keeps its pages and bytes.
  auto copy = llvm::MemoryBuffer::getMemBufferCopy(bytes);
  releaseReadPages(*copy);
  EXPECT_EQ(copy->getBuffer(), bytes);
}

TEST_F(Scratch, AnotherUsersFileInASharedPlaceIsNotRead) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to give a file to another user";
  std::string map = root + "/perf-1.map";
  write(map, "1000 10 planted\n");
  ASSERT_EQ(chown(map.c_str(), 65534, 65534), 0);
  std::string error =
      errorText(readInputFile(map, InputPlace::Shared).takeError());
  EXPECT_NE(error.find("not owned by current user or root"), std::string::npos)
      << error;
  EXPECT_TRUE(bool(readInputFile(map, InputPlace::Named)));
}

TEST_F(Scratch, RemovalNeverFollowsALink) {
  std::string outside = root + "/outside", tree = root + "/tree";
  ASSERT_EQ(mkdir(outside.c_str(), 0700), 0);
  write(outside + "/keep", "keep");
  ASSERT_EQ(mkdir(tree.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((tree + "/sub").c_str(), 0700), 0);
  ASSERT_EQ(symlink(outside.c_str(), (tree + "/sub/link").c_str()), 0);
  ASSERT_EQ(mkfifo((tree + "/fifo").c_str(), 0600), 0);
  EXPECT_FALSE(removeTree(tree));
  EXPECT_FALSE(llvm::sys::fs::exists(tree));
  EXPECT_EQ(read(outside + "/keep"), "keep");
}

TEST_F(Scratch, CacheUnderAnotherUsersDirectoryIsRefused) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to give a directory to another user";
  std::string theirs = root + "/theirs";
  ASSERT_EQ(mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  ASSERT_EQ(mkdir((theirs + "/cache").c_str(), 0700), 0);
  setenv("XDG_CACHE_HOME", (theirs + "/cache").c_str(), 1);
  llvm::Expected<std::string> cache = userCacheDir();
  unsetenv("XDG_CACHE_HOME");
  std::string error = errorText(cache.takeError());
  EXPECT_NE(error.find("its parent " + theirs + ": it belongs to user 65534"),
            std::string::npos)
      << error;
}

TEST_F(Scratch, TempDirWritableByOthersWithoutStickyBitIsNotUsed) {
  std::string open = root + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  EXPECT_NE(unsafeTempParent(open).find("no sticky bit (mode 777)"),
            std::string::npos);
  ASSERT_EQ(chmod(open.c_str(), 01777), 0);
  EXPECT_EQ(unsafeTempParent(open), "");
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  std::string saved = getenv("TMPDIR") ? getenv("TMPDIR") : "";
  setenv("TMPDIR", open.c_str(), 1);
  std::string chosen = tempRoot(), note = tempRootNote();
  if (saved.empty())
    unsetenv("TMPDIR");
  else
    setenv("TMPDIR", saved.c_str(), 1);
  EXPECT_NE(chosen, open);
  EXPECT_NE(note.find(open + " is not used"), std::string::npos) << note;
}

} // namespace
