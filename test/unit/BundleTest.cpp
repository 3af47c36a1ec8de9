// Unit tests for LLDB intel-pt trace bundles: our own round trip, a bundle in
// the exact shape `trace save` writes (nulls, dashed upper-case UUIDs, hex
// strings), segments derived from ELF headers checked against the kernel's
// own mapping of libc (/proc/self/maps), and the errors for broken bundles.
#include "magic_trace/Bundle.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace magic_trace;

namespace {

class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-bundle", dir));
    path = dir.str().str();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string operator/(const std::string &relative) const {
    return path + "/" + relative;
  }
  void write(const std::string &relative, const std::string &contents) const {
    llvm::sys::fs::create_directories(
        llvm::sys::path::parent_path(*this / relative));
    std::ofstream os(*this / relative, std::ios::binary);
    os << contents;
  }
  std::string path;
};

std::string readText(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

Snapshot sampleSnapshot() {
  Snapshot snapshot;
  snapshot.pid = 4242;
  snapshot.processName = "orders";
  snapshot.cpu = CpuIdentity{"GenuineIntel", 6, 0x7a, 1};
  snapshot.time.timeZero = 0x123456789;
  snapshot.time.timeMult = 715827883;
  snapshot.time.timeShift = 31;
  snapshot.timing = PtTimingConfig{3, 30, 1, 120};
  Module exe;
  exe.path = "/usr/bin/orders";
  exe.buildId = "f952dad727d7d7822d5e08c948d5240b70dc6efb";
  exe.loadAddress = 0x555555554000;
  exe.segments = {{0x555555554000, 0x1000, 0, false},
                  {0x555555555000, 0x2345, 0x1000, true}};
  Module copy;
  copy.path = "/lib/x86_64-linux-gnu/libc.so.6";
  copy.fileCopy = "/tmp/copies/libc.so.6";
  copy.loadAddress = 0x7ffff7d80000;
  copy.segments = {{0x7ffff7da8000, 0x165000, 0x28000, true}};
  snapshot.modules = {exe, copy};
  snapshot.threads = {{4242, {0x02, 0x82, 0x00, 0xff}, true},
                      {4243, {}, false}};
  snapshot.stop = {{4242,
                    {0x555555555176, 0x7ffff7dab24a},
                    {"handle_order", "__libc_start_call_main"},
                    true},
                   {4243, {0x7ffff7e5a11d}, {}, false}};
  return snapshot;
}

TEST(BundleTest, RoundTripKeepsEverything) {
  TempDir dir;
  Snapshot written = sampleSnapshot();
  std::string bundle = dir / "bundle";
  ASSERT_FALSE(bool(writeBundle(written, bundle)));
  for (const char *file :
       {"trace.json", "magic-trace.json", "threads/4242.intelpt_trace",
        "threads/4243.intelpt_trace"})
    EXPECT_TRUE(llvm::sys::fs::exists(bundle + "/" + file)) << file;

  for (const std::string &path : {bundle, bundle + "/trace.json"}) {
    auto loaded = loadBundle(path);
    ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
    EXPECT_EQ(loaded->pid, written.pid);
    EXPECT_EQ(loaded->processName, written.processName);
    EXPECT_EQ(loaded->cpu.vendor, "GenuineIntel");
    EXPECT_EQ(loaded->cpu.model, 0x7au);
    EXPECT_EQ(loaded->cpu.stepping, 1u);
    EXPECT_EQ(loaded->time.timeZero, written.time.timeZero);
    EXPECT_EQ(loaded->time.timeMult, written.time.timeMult);
    EXPECT_EQ(loaded->time.timeShift, written.time.timeShift);
    EXPECT_EQ(loaded->timing.mtcFreq, 3);
    EXPECT_EQ(loaded->timing.cpuid15Ebx, 120u);
    ASSERT_EQ(loaded->modules.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const Module &a = loaded->modules[i], &b = written.modules[i];
      EXPECT_EQ(a.path, b.path);
      EXPECT_EQ(a.fileCopy, b.fileCopy);
      EXPECT_EQ(a.buildId, b.buildId);
      EXPECT_EQ(a.loadAddress, b.loadAddress);
      ASSERT_EQ(a.segments.size(), b.segments.size());
      for (size_t j = 0; j < a.segments.size(); ++j) {
        EXPECT_EQ(a.segments[j].address, b.segments[j].address);
        EXPECT_EQ(a.segments[j].size, b.segments[j].size);
        EXPECT_EQ(a.segments[j].fileOffset, b.segments[j].fileOffset);
        EXPECT_EQ(a.segments[j].executable, b.segments[j].executable);
      }
    }
    ASSERT_EQ(loaded->threads.size(), 2u);
    EXPECT_EQ(loaded->threads[0].bytes, written.threads[0].bytes);
    EXPECT_TRUE(loaded->threads[0].wrapped);
    EXPECT_TRUE(loaded->threads[1].bytes.empty());
    EXPECT_FALSE(loaded->threads[1].wrapped);
    ASSERT_EQ(loaded->stop.size(), 2u);
    EXPECT_EQ(loaded->stop[0].frames, written.stop[0].frames);
    EXPECT_EQ(loaded->stop[0].functionNames, written.stop[0].functionNames);
    EXPECT_TRUE(loaded->stop[0].triggered);
    EXPECT_FALSE(loaded->stop[1].triggered);
  }
}

/// The fields LLDB's schema asks for, in the forms it documents.
TEST(BundleTest, TraceJsonFollowsLldbSchema) {
  TempDir dir;
  Snapshot snapshot = sampleSnapshot();
  snapshot.cpu.vendor = "AuthenticAMD"; // LLDB knows only two vendors
  ASSERT_FALSE(bool(writeBundle(snapshot, dir.path)));
  auto json = llvm::json::parse(readText(dir / "trace.json"));
  ASSERT_TRUE(bool(json)) << llvm::toString(json.takeError());
  const llvm::json::Object &root = *json->getAsObject();
  EXPECT_EQ(root.getString("type"), "intel-pt");
  EXPECT_EQ(root.getObject("cpuInfo")->getString("vendor"), "unknown");
  const llvm::json::Object &process =
      *root.getArray("processes")->front().getAsObject();
  EXPECT_EQ(process.getInteger("pid"), 4242);
  EXPECT_EQ(process.getString("triple"), "x86_64-unknown-linux-gnu");
  const llvm::json::Object &thread =
      *process.getArray("threads")->front().getAsObject();
  EXPECT_EQ(thread.getString("iptTrace"), "threads/4242.intelpt_trace");
  const llvm::json::Object &module =
      *process.getArray("modules")->front().getAsObject();
  EXPECT_EQ(module.getString("systemPath"), "/usr/bin/orders");
  EXPECT_EQ(module.getString("loadAddress"), "0x555555554000");
  EXPECT_EQ(module.getString("uuid"),
            "f952dad727d7d7822d5e08c948d5240b70dc6efb");
  EXPECT_FALSE(module.get("file"));
  const llvm::json::Object *conversion =
      root.getObject("tscPerfZeroConversion");
  ASSERT_TRUE(conversion);
  EXPECT_EQ(conversion->getInteger("timeMult"), 715827883);
  EXPECT_EQ(conversion->getInteger("timeShift"), 31);
  EXPECT_EQ(conversion->getString("timeZero"), "0x123456789");
}

struct Mapping {
  uint64_t start, end, offset;
  bool executable;
};

/// This process's mappings of `path`, as the kernel reports them.
std::vector<Mapping> mappingsOf(const std::string &path) {
  std::ifstream maps("/proc/self/maps");
  std::vector<Mapping> result;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, file;
    fields >> range >> perms >> offset >> device >> inode >> file;
    if (file != path)
      continue;
    size_t dash = range.find('-');
    result.push_back({std::stoull(range.substr(0, dash), nullptr, 16),
                      std::stoull(range.substr(dash + 1), nullptr, 16),
                      std::stoull(offset, nullptr, 16), perms[2] == 'x'});
  }
  return result;
}

/// A bundle exactly as LLDB 22's `trace save` writes it (nulls, a dashed
/// upper-case UUID, decimal timeZero string, relative paths), without
/// magic-trace.json: segments come from the ELF headers and must match how
/// the kernel mapped libc into this very process.
TEST(BundleTest, LoadsPlainLldbBundleAndDerivesSegments) {
  std::string libc;
  std::vector<Mapping> mappings;
  for (const char *candidate : {"/usr/lib/x86_64-linux-gnu/libc.so.6",
                                "/lib/x86_64-linux-gnu/libc.so.6"}) {
    mappings = mappingsOf(candidate);
    if (!mappings.empty()) {
      libc = candidate;
      break;
    }
  }
  if (libc.empty())
    GTEST_SKIP() << "libc.so.6 is not mapped under a known path";
  uint64_t loadAddress = mappings.front().start;
  for (const Mapping &mapping : mappings)
    if (mapping.offset == 0)
      loadAddress = std::min(loadAddress, mapping.start);

  TempDir dir;
  dir.write("threads/77.intelpt_trace", std::string("\x02\x82\x02\x82", 4));
  std::string json = R"({
  "cpuInfo": {"family": 6, "model": 122, "stepping": 1, "vendor": "GenuineIntel"},
  "cpus": null,
  "kernel": null,
  "processes": [{
    "modules": [{
      "file": null,
      "loadAddress": "LOAD",
      "systemPath": "LIBC",
      "uuid": "F952DAD7-27D7-D782-2D5E-08C948D5240B-70DC6EFB"
    }],
    "pid": 76,
    "threads": [{"iptTrace": "threads/77.intelpt_trace", "tid": 77},
                {"iptTrace": null, "tid": 78}],
    "triple": "x86_64--linux"
  }],
  "tscPerfZeroConversion": {"timeMult": 1, "timeShift": 0, "timeZero": "1000"},
  "type": "intel-pt"
})";
  json.replace(json.find("LOAD"), 4,
               "0x" + llvm::utohexstr(loadAddress, /*LowerCase=*/true));
  json.replace(json.find("LIBC"), 4, libc);
  dir.write("trace.json", json);

  auto loaded = loadBundle(dir.path);
  ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
  EXPECT_EQ(loaded->pid, 76u);
  EXPECT_EQ(loaded->processName, "libc.so.6");
  EXPECT_EQ(loaded->time.timeZero, 1000u);
  ASSERT_EQ(loaded->threads.size(), 2u);
  EXPECT_EQ(loaded->threads[0].bytes.size(), 4u);
  EXPECT_TRUE(loaded->threads[1].bytes.empty());
  ASSERT_EQ(loaded->modules.size(), 1u);
  const Module &module = loaded->modules[0];
  EXPECT_EQ(module.buildId, "f952dad727d7d7822d5e08c948d5240b70dc6efb");
  EXPECT_EQ(module.loadAddress, loadAddress);
  ASSERT_GE(module.segments.size(), 2u);
  bool sawExecutable = false;
  for (const LoadedSegment &segment : module.segments) {
    uint64_t page = segment.address & ~uint64_t(0xfff);
    uint64_t pageOffset = segment.fileOffset & ~uint64_t(0xfff);
    bool found = false;
    for (const Mapping &mapping : mappings)
      if (mapping.start == page && mapping.offset == pageOffset) {
        found = true;
        EXPECT_EQ(mapping.executable, segment.executable)
            << std::hex << segment.address;
      }
    EXPECT_TRUE(found) << "no mapping at " << std::hex << page << " offset "
                       << pageOffset;
    sawExecutable |= segment.executable;
  }
  EXPECT_TRUE(sawExecutable);
}

/// Expects loadBundle(dir) to fail with a message containing every `part`.
void expectLoadError(const TempDir &dir, std::vector<std::string> parts) {
  auto loaded = loadBundle(dir.path);
  ASSERT_FALSE(bool(loaded));
  std::string message = llvm::toString(loaded.takeError());
  for (const std::string &part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "'" << part << "' not in: " << message;
}

TEST(BundleTest, BadJsonNamesTheFile) {
  TempDir dir;
  dir.write("trace.json", "{ \"type\": \"intel-pt\", ");
  expectLoadError(dir, {"trace.json", "invalid JSON"});
}

TEST(BundleTest, MissingBundleSaysSo) {
  TempDir dir;
  expectLoadError(dir, {"trace.json", "cannot read"});
}

TEST(BundleTest, MissingOrWrongFieldsNameTheField) {
  TempDir dir;
  const std::string cpu =
      R"("cpuInfo": {"vendor": "GenuineIntel", "family": 6, "model": 122, "stepping": 1})";
  dir.write("trace.json", R"({"type": "intel-pt", )" + cpu + "}");
  expectLoadError(dir, {"trace.json", "processes", "missing"});

  dir.write(
      "trace.json",
      R"({"type": "intel-pt", "cpuInfo": {"vendor": "GenuineIntel", "family": 6, "model": 1}})");
  expectLoadError(dir, {"cpuInfo.stepping", "missing"});

  dir.write("trace.json", R"({"type": "intel-pt", )" + cpu +
                              R"(, "processes": [{"pid": 1, "modules": [],
                                  "threads": [{"iptTrace": "t"}]}]})");
  expectLoadError(dir, {"processes[0].threads[0].tid", "missing"});

  dir.write("trace.json", R"({"type": "intel-pt", )" + cpu +
                              R"(, "processes": [{"pid": 1, "threads": [],
                                  "modules": [{"systemPath": "/bin/true",
                                               "loadAddress": "0xzz"}]}]})");
  expectLoadError(dir, {"processes[0].modules[0].loadAddress", "hex"});

  dir.write("trace.json", R"({"type": "intel-pt", )" + cpu +
                              R"(, "processes": [{"pid": 1, "modules": [],
                                  "threads": [{"tid": 5, "iptTrace": "threads/5.bin"}]}]})");
  expectLoadError(dir, {"processes[0].threads[0].iptTrace", "threads/5.bin"});

  dir.write(
      "trace.json",
      R"({"type": "intel-pt", )" + cpu +
          R"(, "cpus": [{"id": 0, "iptTrace": "c", "contextSwitchTrace": "s"}],
                                  "processes": []})");
  expectLoadError(dir, {"cpus", "per-cpu"});

  dir.write("trace.json", R"({"type": "perf", )" + cpu + "}");
  expectLoadError(dir, {"type", "intel-pt"});
}

TEST(BundleTest, BadExtrasNameTheirField) {
  TempDir dir;
  ASSERT_FALSE(bool(writeBundle(sampleSnapshot(), dir.path)));
  dir.write("magic-trace.json", R"({"formatVersion": 99})");
  expectLoadError(dir, {"magic-trace.json", "formatVersion", "99"});
  dir.write("magic-trace.json",
            R"({"formatVersion": 1, "modules": [], "threads": [],
                "stop": [{"tid": 1, "triggered": true, "frames": [5],
                          "functionNames": []}]})");
  expectLoadError(dir, {"magic-trace.json", "stop[0].frames[0]"});
}

TEST(BundleTest, FailedWriteLeavesNoTraceJson) {
  TempDir dir;
  ASSERT_FALSE(bool(writeBundle(sampleSnapshot(), dir.path)));
  ASSERT_TRUE(llvm::sys::fs::exists(dir / "trace.json"));
  // Rewriting fails when a thread file cannot be replaced (a directory is
  // in its place); the old trace.json must not survive to describe a
  // half-written bundle.
  llvm::sys::fs::remove(dir / "threads/4242.intelpt_trace");
  llvm::sys::fs::create_directories(dir / "threads/4242.intelpt_trace");
  llvm::Error error = writeBundle(sampleSnapshot(), dir.path);
  ASSERT_TRUE(bool(error));
  std::string message = llvm::toString(std::move(error));
  EXPECT_NE(message.find("4242.intelpt_trace"), std::string::npos) << message;
  EXPECT_FALSE(llvm::sys::fs::exists(dir / "trace.json"));
}

} // namespace
