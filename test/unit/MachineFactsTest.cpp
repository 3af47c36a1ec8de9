// Unit tests for the facts behind `magic-trace doctor`, on fake /proc and /sys
// trees laid out like the real ones.
#include "magic_trace/MachineFacts.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace magic_trace;

namespace {

class FakeRoot {
public:
  FakeRoot() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-facts", dir));
    root = dir.str().str();
  }
  ~FakeRoot() { llvm::sys::fs::remove_directories(root); }

  void write(const std::string &relative, const std::string &contents) {
    std::string path = root + "/" + relative;
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << contents;
  }

  std::string root;
};

// The first lines of a real /proc/cpuinfo of an Intel machine.
const char *intelCpuinfo = "processor\t: 0\n"
                           "vendor_id\t: GenuineIntel\n"
                           "cpu family\t: 6\n"
                           "model\t\t: 85\n"
                           "model name\t: Intel(R) Xeon(R) Gold 6148\n"
                           "stepping\t: 4\n"
                           "\n"
                           "processor\t: 1\n"
                           "vendor_id\t: SomethingElse\n";

TEST(MachineFactsTest, ParsesFirstProcessorOnly) {
  CpuIdentity cpu = parseCpuInfo(intelCpuinfo);
  EXPECT_EQ(cpu.vendor, "GenuineIntel");
  EXPECT_EQ(cpu.family, 6u);
  EXPECT_EQ(cpu.model, 85u);
  EXPECT_EQ(cpu.stepping, 4u);
}

TEST(MachineFactsTest, DoctorNamesTheErrataLibiptUsesForThisCpu) {
  // Skylake-SP (6/85): libipt's errata table (pt_cpu_errata in
  // pt_config.c) sets bdm70, skl014, skd022 and skz84 for model 0x55.
  FakeRoot fake;
  fake.write("proc/cpuinfo", intelCpuinfo);
  MachineFacts facts = probeMachine(ProbeOptions{
      fake.root + "/proc", fake.root + "/sys", 1000u, std::nullopt});
  EXPECT_EQ(facts.libiptErrata,
            (std::vector<std::string>{"bdm70", "skd022", "skl014", "skz84"}));
  EXPECT_NE(renderFactsText(facts).find(
                "(PT encoder and decoder; errata for this cpu: "
                "bdm70,skd022,skl014,skz84)"),
            std::string::npos);
  // Not Intel: no errata.
  FakeRoot amd;
  amd.write("proc/cpuinfo", "vendor_id\t: AuthenticAMD\ncpu family\t: 25\n");
  EXPECT_TRUE(probeMachine(ProbeOptions{amd.root + "/proc", amd.root + "/sys",
                                        1000u, std::nullopt})
                  .libiptErrata.empty());
}

TEST(MachineFactsTest, EmptyCpuinfoIsUnknownVendor) {
  EXPECT_EQ(parseCpuInfo("").vendor, "unknown");
}

TEST(MachineFactsTest, IntelPtPresentAndPermittedMeansPerfAvailable) {
  FakeRoot fake;
  fake.write("proc/cpuinfo", intelCpuinfo);
  fake.write("proc/sys/kernel/perf_event_paranoid", "2\n");
  fake.write("proc/sys/kernel/yama/ptrace_scope", "1\n");
  fake.write("sys/bus/event_source/devices/intel_pt/type", "8\n");
  fake.write("sys/bus/event_source/devices/intel_pt/caps/psb_cyc", "1\n");
  fake.write("sys/bus/event_source/devices/intel_pt/caps/mtc", "1\n");
  fake.write("sys/bus/event_source/devices/intel_pt/format/cyc", "config:1\n");
  MachineFacts facts = probeMachine(ProbeOptions{
      fake.root + "/proc", fake.root + "/sys", 1000u, std::nullopt});
  EXPECT_TRUE(facts.intelPt.present);
  ASSERT_TRUE(facts.intelPt.type.has_value());
  EXPECT_EQ(*facts.intelPt.type, 8);
  EXPECT_EQ(facts.intelPt.caps.at("psb_cyc"), "1");
  EXPECT_EQ(facts.intelPt.format.at("cyc"), "config:1");
  EXPECT_EQ(facts.ptraceScope, 1);
  ASSERT_EQ(facts.backends.size(), 3u);
  EXPECT_EQ(facts.backends[0].name, "perf");
  EXPECT_TRUE(facts.backends[0].available);
  EXPECT_EQ(facts.backends[1].name, "qemu");
  EXPECT_EQ(facts.backends[1].available, !facts.qemuPath.empty());
  EXPECT_EQ(facts.backends[2].name, "emulate");
  EXPECT_TRUE(facts.backends[2].available);
}

TEST(MachineFactsTest, StrictParanoidBlocksPerfForNonRoot) {
  FakeRoot fake;
  fake.write("proc/cpuinfo", intelCpuinfo);
  fake.write("proc/sys/kernel/perf_event_paranoid", "3\n");
  fake.write("sys/bus/event_source/devices/intel_pt/type", "8\n");
  MachineFacts user = probeMachine(ProbeOptions{
      fake.root + "/proc", fake.root + "/sys", 1000u, std::nullopt});
  EXPECT_FALSE(user.backends[0].available);
  EXPECT_NE(user.backends[0].reason.find("perf_event_paranoid is 3"),
            std::string::npos);
  MachineFacts root = probeMachine(
      ProbeOptions{fake.root + "/proc", fake.root + "/sys", 0u, std::nullopt});
  EXPECT_TRUE(root.backends[0].available);
}

TEST(MachineFactsTest, CapPerfmonLiftsParanoid) {
  FakeRoot fake;
  fake.write("proc/cpuinfo", intelCpuinfo);
  fake.write("proc/sys/kernel/perf_event_paranoid", "3\n");
  fake.write("sys/bus/event_source/devices/intel_pt/type", "8\n");
  // CapEff with bit 38 (CAP_PERFMON), as /proc/self/status prints it.
  fake.write("proc/self/status", "Name:\tlldb\nCapEff:\t0000004000000000\n");
  MachineFacts facts = probeMachine(ProbeOptions{
      fake.root + "/proc", fake.root + "/sys", 1000u, std::nullopt});
  EXPECT_TRUE(facts.backends[0].available) << facts.backends[0].reason;
  EXPECT_NE(renderFactsText(facts).find("(CAP_PERFMON: not limited by it)"),
            std::string::npos);
  // CAP_SYS_ADMIN (bit 21) too; neither: refused.
  MachineFacts admin = probeMachine(ProbeOptions{
      fake.root + "/proc", fake.root + "/sys", 1000u, uint64_t(1) << 21});
  EXPECT_TRUE(admin.backends[0].available);
  MachineFacts none = probeMachine(
      ProbeOptions{fake.root + "/proc", fake.root + "/sys", 1000u, 0});
  EXPECT_FALSE(none.backends[0].available);
}

TEST(MachineFactsTest, DoctorSaysWhatPerfWouldDoWithoutIntelPt) {
  FakeRoot fake;
  fake.write("proc/cpuinfo", "vendor_id : AuthenticAMD\ncpu family : 25\n");
  fake.write("proc/sys/kernel/perf_event_mlock_kb", "516\n");
  fake.write("sys/devices/system/cpu/online", "0-2,5\n"); // 3, 4 offline
  MachineFacts facts = probeMachine(
      ProbeOptions{fake.root + "/proc", fake.root + "/sys", 1000u, 0});
  std::string text = renderFactsText(facts);
  // The attr of the normal resolution at the SDM's RTIT_CTL bits: pt (0),
  // cyc (1), mtc (9), tsc (10), branch (13), mtc_period 0 (14-17),
  // cyc_thresh 1 (19-22), psb_period 3 (24-27).
  EXPECT_NE(text.find("perf plan: no intel_pt PMU here; on a Skylake-class "
                      "CPU"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("on each of 4 CPUs: type=<intel_pt/type> "
                      "config=0x03082603 (pt cyc mtc tsc branch mtc_period=0 "
                      "cyc_thresh=1 psb_period=3) exclude_kernel"),
            std::string::npos)
      << text;
  // 516 KiB x 4 CPUs (+ the process's RLIMIT_MEMLOCK) per user: each CPU
  // gets the page, perf's 512 KiB of sideband for perf_event_mlock_kb 516
  // (256 KiB when this process's RLIMIT_MEMLOCK is small enough that the
  // AUX would get less) and a power-of-two AUX that fits.
  const char *plan = "perf plan: buffers per CPU: perf page 4 KiB + sideband ";
  EXPECT_TRUE(
      text.find(std::string(plan) + "512 KiB + AUX") != std::string::npos ||
      text.find(std::string(plan) + "256 KiB + AUX") != std::string::npos)
      << text;
  EXPECT_NE(text.find("whatever the number of threads"), std::string::npos);
}

TEST(MachineFactsTest, NoPmuMeansOnlyEmulate) {
  FakeRoot fake;
  fake.write("proc/cpuinfo", "vendor_id : AuthenticAMD\ncpu family : 25\n");
  MachineFacts facts = probeMachine(
      ProbeOptions{fake.root + "/proc", fake.root + "/sys", 0u, std::nullopt});
  EXPECT_FALSE(facts.intelPt.present);
  EXPECT_FALSE(facts.backends[0].available);
  EXPECT_NE(facts.backends[0].reason.find("--backend emulate"),
            std::string::npos);
  // With qemu-x86_64 in PATH the advice leads with the QEMU recorder.
  EXPECT_EQ(facts.backends[0].reason.find("'magic-trace run'") !=
                std::string::npos,
            !facts.qemuPath.empty());
  ASSERT_EQ(facts.backends.size(), 3u);
  EXPECT_EQ(facts.backends[1].available, !facts.qemuPath.empty());
  EXPECT_TRUE(facts.backends[2].available);
  EXPECT_FALSE(facts.perfEventParanoid.has_value());
  std::string text = renderFactsText(facts);
  EXPECT_NE(text.find("perf_event_paranoid: unreadable"), std::string::npos);
  EXPECT_NE(text.find("intel_pt PMU: absent"), std::string::npos);
}

} // namespace

// The Intel VM of issue 39 (GenuineIntel 6/167, no intel_pt PMU exposed)
// and an AMD machine: the perf backend cannot record on either, so every
// line of doctor that mentions the CPU or the PMU must send the user to
// the same place. The vendor changes the wording of the cpu line only.
TEST(MachineFactsTest, NoPmuGivesTheSameAdviceOnIntelAndAmd) {
  auto textFor = [](const std::string &cpuinfo) {
    FakeRoot fake;
    fake.write("proc/cpuinfo", cpuinfo);
    fake.write("proc/sys/kernel/perf_event_paranoid", "2\n");
    MachineFacts facts = probeMachine(ProbeOptions{
        fake.root + "/proc", fake.root + "/sys", 1000u, std::nullopt});
    // The machine's QEMU must not decide the test.
    facts.qemuPath = "/usr/bin/qemu-x86_64";
    return renderFactsText(facts);
  };
  std::string intel = textFor("vendor_id\t: GenuineIntel\ncpu family\t: 6\n"
                              "model\t\t: 167\nstepping\t: 1\n");
  std::string amd = textFor("vendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
                            "model\t\t: 17\nstepping\t: 1\n");
  for (const std::string &text : {intel, amd}) {
    llvm::StringRef cpu = llvm::StringRef(text).split('\n').first;
    EXPECT_TRUE(cpu.contains("'magic-trace run' (the QEMU recorder)"))
        << cpu.str();
    EXPECT_FALSE(cpu.contains("possible")) << cpu.str();
    EXPECT_NE(text.find("the perf backend cannot record here"),
              std::string::npos);
  }
  // Every other line but libipt's errata (which are by CPU model) agrees
  // word for word.
  auto withoutCpuLines = [](llvm::StringRef text) {
    std::string kept;
    llvm::SmallVector<llvm::StringRef, 16> lines;
    text.split(lines, '\n');
    for (llvm::StringRef line : lines)
      if (!line.starts_with("cpu:") && !line.starts_with("libipt:"))
        kept += line.str() + "\n";
    return kept;
  };
  EXPECT_EQ(withoutCpuLines(intel), withoutCpuLines(amd));
}
