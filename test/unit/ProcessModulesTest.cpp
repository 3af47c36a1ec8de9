// Unit tests for the emulator's module list: /proc/PID/maps parsing and
// grouping, build-ids and symbols checked against llvm-readelf / llvm-nm.
#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

using namespace magic_trace;

namespace {

std::string inputPath(const std::string &name) {
  return std::string(MT_TEST_BINARY_DIR) + "/inputs/" + name;
}

std::string runCommand(const std::string &command) {
  std::string output;
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    return output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe))
    output.append(buffer, n);
  pclose(pipe);
  return output;
}

TEST(ProcessModules, ParsesMapsLines) {
  std::vector<MapsEntry> entries = parseProcMaps(
      "555555554000-555555555000 r--p 00000000 08:01 1234   /bin/prog\n"
      "555555555000-555555556000 r-xp 00001000 08:01 1234   /bin/prog\n"
      "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0      [vdso]\n"
      "7ffff7fc3000-7ffff7fc4000 rw-p 00000000 00:00 0 \n"
      "garbage line\n");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[1].start, 0x555555555000u);
  EXPECT_EQ(entries[1].end, 0x555555556000u);
  EXPECT_EQ(entries[1].fileOffset, 0x1000u);
  EXPECT_TRUE(entries[1].executable);
  EXPECT_FALSE(entries[0].executable);
  EXPECT_EQ(entries[1].path, "/bin/prog");
  EXPECT_EQ(entries[2].path, "[vdso]");
  EXPECT_EQ(entries[3].path, "");
}

TEST(ProcessModules, GroupsFileMappingsAndSkipsTheRest) {
  // The offset-0 mapping is the load address even when it is not first.
  std::vector<MapsEntry> maps = {
      {0x2000, 0x3000, 0x1000, true, "/lib/a.so"},
      {0x1000, 0x2000, 0x0, false, "/lib/a.so"},
      {0x5000, 0x6000, 0x0, true, "[vdso]"},
      {0x7000, 0x8000, 0x0, false, ""},
      {0x9000, 0xa000, 0x0, true, "/tmp/gone.so (deleted)"},
      {0xb000, 0xc000, 0x0, true, "/lib/b.so"},
  };
  std::vector<Module> modules =
      modulesFromMaps(maps, {{"/lib/a.so", "aa"}, {"/lib/b.so", ""}});
  ASSERT_EQ(modules.size(), 2u);
  EXPECT_EQ(modules[0].path, "/lib/a.so");
  EXPECT_EQ(modules[0].loadAddress, 0x1000u);
  EXPECT_EQ(modules[0].buildId, "aa");
  ASSERT_EQ(modules[0].segments.size(), 2u);
  EXPECT_EQ(modules[0].segments[0].address, 0x2000u);
  EXPECT_EQ(modules[0].segments[0].size, 0x1000u);
  EXPECT_EQ(modules[0].segments[0].fileOffset, 0x1000u);
  EXPECT_TRUE(modules[0].segments[0].executable);
  EXPECT_EQ(modules[1].path, "/lib/b.so");
}

TEST(ProcessModules, BuildIdAgreesWithReadelf) {
  std::string path = inputPath("emu_calls");
  std::string notes = runCommand("llvm-readelf-22 -n " + path);
  size_t at = notes.find("Build ID: ");
  ASSERT_NE(at, std::string::npos) << notes;
  std::string expected =
      llvm::StringRef(notes).substr(at + 10).take_while(llvm::isHexDigit).str();
  EXPECT_EQ(readBuildId(path), expected);
  EXPECT_EQ(readBuildId("/nonexistent/file"), "");
}

TEST(ProcessModules, SymbolAddressAgreesWithNm) {
  std::string path = inputPath("emu_calls");
  std::string nm = runCommand("llvm-nm-22 " + path + " | grep ' stop_here$'");
  uint64_t expected = 0;
  ASSERT_FALSE(llvm::StringRef(nm)
                   .take_while(llvm::isHexDigit)
                   .getAsInteger(16, expected))
      << nm;
  llvm::Expected<uint64_t> address = findElfSymbol(path, "stop_here");
  ASSERT_TRUE(bool(address)) << llvm::toString(address.takeError());
  EXPECT_EQ(*address, expected);

  llvm::Expected<uint64_t> missing = findElfSymbol(path, "no_such_symbol");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("not found"),
            std::string::npos);
}

TEST(ProcessModules, RejectsNonElfAndAcceptsX86_64) {
  EXPECT_FALSE(bool(checkX86_64Elf(inputPath("emu_calls"))));
  llvm::Error notElf =
      checkX86_64Elf(std::string(MT_TEST_INPUTS_DIR) + "/emu_calls.cpp");
  ASSERT_TRUE(bool(notElf));
  EXPECT_NE(llvm::toString(std::move(notElf)).find("not an ELF program"),
            std::string::npos);
}

} // namespace
