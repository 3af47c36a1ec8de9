// Files on a shared machine (issue 42): what makes a path trusted, who owns
// a temporary directory, which leftovers a later session removes, and the
// modes of the outputs we write.
#include "magic_trace/PrivateFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace magic_trace;

namespace {

/// Whether `error` is a failure (consumed either way).
bool failed(llvm::Error error) {
  bool failure = bool(error);
  llvm::consumeError(std::move(error));
  return failure;
}

/// A fresh directory standing in for $TMPDIR, removed at the end.
class PrivateFilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> base, made;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, base);
    llvm::sys::path::append(base, "mt-private");
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory(base, made));
    root = made.str().str();
    const char *old = std::getenv("TMPDIR");
    savedTmpdir = old ? old : "";
    hadTmpdir = old != nullptr;
    setenv("TMPDIR", root.c_str(), 1);
    unsetenv("MAGIC_TRACE_KEEP_UMASK");
  }
  void TearDown() override {
    if (hadTmpdir)
      setenv("TMPDIR", savedTmpdir.c_str(), 1);
    else
      unsetenv("TMPDIR");
    unsetenv("MAGIC_TRACE_KEEP_UMASK");
    llvm::sys::fs::remove_directories(root);
  }
  static unsigned modeOf(const std::string &path) {
    struct stat info;
    return lstat(path.c_str(), &info) == 0 ? info.st_mode & 07777 : ~0u;
  }
  /// The pid of a process that has exited and been reaped.
  static int deadPid() {
    pid_t child = fork();
    if (child == 0)
      _exit(0);
    waitpid(child, nullptr, 0);
    return child;
  }
  std::string root, savedTmpdir;
  bool hadTmpdir = false;
};

TEST_F(PrivateFilesTest, PrivateTempDirIsNewModeSevenHundredAndNamesItsOwner) {
  llvm::Expected<std::string> dir = makePrivateTempDir("magic-trace-test");
  ASSERT_TRUE(bool(dir)) << llvm::toString(dir.takeError());
  EXPECT_TRUE(llvm::StringRef(*dir).starts_with(root + "/magic-trace-test-"));
  EXPECT_EQ(modeOf(*dir), 0700u);
  std::string owner = *dir + "/" + kOwnerFileName;
  EXPECT_EQ(modeOf(owner), 0600u);
  auto text = llvm::MemoryBuffer::getFile(owner);
  ASSERT_TRUE(bool(text));
  EXPECT_TRUE((*text)->getBuffer().starts_with(std::to_string(getpid()) + " "));
  EXPECT_TRUE(ownerAlive((*text)->getBuffer()));
  EXPECT_FALSE(failed(checkPrivate(*dir, /*directory=*/true)));
}

TEST_F(PrivateFilesTest, OwnerIsDeadWhenItsPidIsGoneOrReusedLater) {
  EXPECT_FALSE(ownerAlive(std::to_string(deadPid()) + " 12345\n"));
  // Our pid with another start time: a process that reused the pid.
  EXPECT_FALSE(ownerAlive(std::to_string(getpid()) + " 1\n"));
  EXPECT_FALSE(ownerAlive("garbage"));
}

TEST_F(PrivateFilesTest, StaleDirectoriesOfDeadOwnersGoAndOthersStay) {
  llvm::Expected<std::string> alive = makePrivateTempDir("magic-trace-alive");
  ASSERT_TRUE(bool(alive));
  std::string dead = root + "/magic-trace-dead";
  ASSERT_FALSE(llvm::sys::fs::create_directory(dead));
  ASSERT_FALSE(failed(claimTempDir(dead, deadPid())));
  ASSERT_FALSE(llvm::sys::fs::create_directory(dead + "/rings"));
  // A socket, as QEMU's gdbstub leaves (LLVM's remove_directories cannot
  // remove one, and then keeps the directory).
  int sock = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string sockPath = dead + "/rings/gdb.sock";
  ASSERT_LT(sockPath.size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, sockPath.c_str());
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr *>(&address), sizeof(address)),
            0);
  close(sock);
  // Not ours to judge: no owner file, and a symlink to a dead owner's dir.
  std::string unknown = root + "/magic-trace-unknown";
  ASSERT_FALSE(llvm::sys::fs::create_directory(unknown));
  std::string target = root + "/elsewhere";
  ASSERT_FALSE(llvm::sys::fs::create_directory(target));
  ASSERT_FALSE(failed(claimTempDir(target, deadPid())));
  ASSERT_EQ(symlink(target.c_str(), (root + "/magic-trace-link").c_str()), 0);

  EXPECT_GE(removeStaleTempDirs(), 1u);
  EXPECT_FALSE(llvm::sys::fs::exists(dead));
  EXPECT_TRUE(llvm::sys::fs::exists(*alive));
  EXPECT_TRUE(llvm::sys::fs::exists(unknown));
  EXPECT_TRUE(llvm::sys::fs::exists(target + "/" + kOwnerFileName));
}

TEST_F(PrivateFilesTest, CheckPrivateRefusesSymlinksAndWritableByOthers) {
  std::string dir = root + "/d";
  ASSERT_FALSE(llvm::sys::fs::create_directory(dir));
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  EXPECT_FALSE(failed(checkPrivate(dir, true)));
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  llvm::Error open = checkPrivate(dir, true);
  ASSERT_TRUE(bool(open));
  EXPECT_NE(llvm::toString(std::move(open)).find("writable by other users"),
            std::string::npos);
  ASSERT_EQ(symlink(dir.c_str(), (root + "/l").c_str()), 0);
  llvm::Error link = checkPrivate(root + "/l", true);
  ASSERT_TRUE(bool(link));
  EXPECT_NE(llvm::toString(std::move(link)).find("symbolic link"),
            std::string::npos);
  EXPECT_TRUE(failed(checkPrivate(dir, /*directory=*/false)));
}

TEST_F(PrivateFilesTest, AnotherUsersFileIsNotTrusted) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to give a file to another user";
  std::string file = root + "/theirs";
  ASSERT_FALSE(failed(writeOutputFile(file, "x")));
  ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0);
  llvm::Error theirs = checkPrivate(file, false);
  ASSERT_TRUE(bool(theirs));
  EXPECT_NE(llvm::toString(std::move(theirs)).find("belongs to user 65534"),
            std::string::npos);
}

TEST_F(PrivateFilesTest, OutputsAreSixHundredUnlessTheUmaskIsKept) {
  std::string existing = root + "/old.fxt";
  {
    int fd = creat(existing.c_str(), 0644);
    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_EQ(chmod(existing.c_str(), 0644), 0);
  }
  for (const std::string &path : {existing, root + "/new.fxt"}) {
    llvm::Error written = writeOutputFile(path, "x");
    ASSERT_FALSE(bool(written)) << llvm::toString(std::move(written));
    EXPECT_EQ(modeOf(path), 0600u) << path;
  }
  ASSERT_FALSE(createOutputDirectories(root + "/a/b"));
  EXPECT_EQ(modeOf(root + "/a"), 0700u);
  EXPECT_EQ(modeOf(root + "/a/b"), 0700u);

  setenv("MAGIC_TRACE_KEEP_UMASK", "1", 1);
  mode_t old = umask(022);
  llvm::Error kept = writeOutputFile(root + "/kept.fxt", "x");
  umask(old);
  ASSERT_FALSE(failed(std::move(kept)));
  EXPECT_EQ(modeOf(root + "/kept.fxt"), 0644u);
}

TEST_F(PrivateFilesTest, CacheDirectoryIsTheUsersAndRefusedWhenOpenToOthers) {
  setenv("XDG_CACHE_HOME", root.c_str(), 1);
  llvm::Expected<std::string> cache = userCacheDir();
  unsetenv("XDG_CACHE_HOME");
  ASSERT_TRUE(bool(cache)) << llvm::toString(cache.takeError());
  EXPECT_EQ(*cache, root + "/magic-trace");
  EXPECT_EQ(modeOf(*cache), 0700u);
  ASSERT_EQ(chmod(cache->c_str(), 0777), 0);
  setenv("XDG_CACHE_HOME", root.c_str(), 1);
  llvm::Expected<std::string> open = userCacheDir();
  unsetenv("XDG_CACHE_HOME");
  EXPECT_TRUE(failed(open.takeError()));
}

} // namespace
