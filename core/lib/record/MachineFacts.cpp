//===- MachineFacts.cpp - What this machine offers for tracing ------------===//
#include "magic_trace/MachineFacts.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/KernelInterface.h"
#include "magic_trace/Libipt.h"
#include "magic_trace/PerfRecorder.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

namespace magic_trace {
namespace {

/// Contents of a small text file without the trailing newline, if readable.
std::optional<std::string> readSmallFile(const llvm::Twine &path) {
  auto buffer = llvm::MemoryBuffer::getFileAsStream(path);
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().trim().str();
}

std::optional<int> readIntFile(const llvm::Twine &path) {
  std::optional<std::string> text = readSmallFile(path);
  int value = 0;
  if (!text || llvm::StringRef(*text).getAsInteger(10, value))
    return std::nullopt;
  return value;
}

/// Every regular file in `dir` as name -> contents.
std::map<std::string, std::string> readDirectoryFiles(const std::string &dir) {
  std::map<std::string, std::string> entries;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    std::optional<std::string> text = readSmallFile(it->path());
    if (text)
      entries[llvm::sys::path::filename(it->path()).str()] = *text;
  }
  return entries;
}

IntelPtPmu probeIntelPt(const std::string &sysRoot) {
  IntelPtPmu pmu;
  std::string dir = sysRoot + "/bus/event_source/devices/intel_pt";
  if (!llvm::sys::fs::is_directory(dir))
    return pmu;
  pmu.present = true;
  pmu.type = readIntFile(dir + "/type");
  pmu.caps = readDirectoryFiles(dir + "/caps");
  pmu.format = readDirectoryFiles(dir + "/format");
  return pmu;
}

/// perf_event_open of a per-thread, user-only event needs paranoid <= 2
/// (Debian's 3 forbids it) unless the caller is privileged.
bool hasCapability(const MachineFacts &facts, unsigned capability) {
  return facts.capabilities && (*facts.capabilities >> capability & 1);
}

/// perf_event_open's permission check: root, CAP_PERFMON or CAP_SYS_ADMIN
/// (perfmon_capable), else perf_event_paranoid <= 2 for user-space events
/// of one's own processes (kernel/events/core.c, perf_event_open).
bool perfPermitted(const MachineFacts &facts) {
  if (facts.isRoot || hasCapability(facts, kCapPerfmon) ||
      hasCapability(facts, kCapSysAdmin))
    return true;
  return facts.perfEventParanoid && *facts.perfEventParanoid <= 2;
}

/// qemu-x86_64's path from PATH, or empty.
std::string findQemuInPath() {
  llvm::ErrorOr<std::string> found =
      llvm::sys::findProgramByName("qemu-x86_64");
  return found ? *found : std::string();
}

DebuggerHost debuggerHost = DebuggerHost::Lldb;

/// The advice for a machine without Intel PT, with or without QEMU, in the
/// words of the debugger magic-trace runs in. Speeds
/// are docs/qemu.md's measurements: `magic-trace run` 13.6 M instructions a
/// second in LLDB (hundreds of millions without a debugger), the SB-API
/// stepper 1-2 thousand.
std::string adviceWithoutIntelPt(bool haveQemu) {
  if (debuggerHost == DebuggerHost::Gdb)
    return haveQemu ? "use 'magic-trace run' instead of 'run': it relaunches "
                      "the program under magic-trace's QEMU recorder, "
                      "genuine PT at millions of instructions a second"
                    : "install Debian's qemu-user for 'magic-trace run', "
                      "which records without Intel PT";
  if (!haveQemu)
    return "use --backend emulate (single-steps, 1-2 thousand instructions a "
           "second), or install Debian's qemu-user for 'magic-trace run'";
  return "use 'magic-trace run' instead of 'process launch'/'run': it "
         "relaunches the target under magic-trace's QEMU recorder, genuine PT "
         "at millions of instructions a second; or attach with --backend "
         "emulate (single-steps, 1-2 thousand a second)";
}

std::vector<BackendVerdict> judgeBackends(const MachineFacts &facts) {
  bool haveQemu = !facts.qemuPath.empty();
  BackendVerdict perf{"perf", false, ""};
  if (!facts.intelPt.present) {
    perf.reason = "no intel_pt PMU in sysfs (Intel PT hardware is missing or "
                  "hidden by a VM); " +
                  adviceWithoutIntelPt(haveQemu);
  } else if (!perfPermitted(facts)) {
    perf.reason =
        "perf_event_paranoid is " +
        (facts.perfEventParanoid ? std::to_string(*facts.perfEventParanoid)
                                 : std::string("unreadable")) +
        "; set it to 2 or lower, or run with CAP_PERFMON";
  } else {
    perf.available = true;
    perf.reason = "intel_pt PMU present and perf_event_open is permitted";
  }
  BackendVerdict qemu{"qemu", haveQemu, ""};
  qemu.reason =
      haveQemu ? facts.qemuPath +
                     ": 'magic-trace run' relaunches the target under QEMU "
                     "with magic-trace's recorder: genuine PT of every "
                     "thread at ~14 M instructions a second in LLDB "
                     "(docs/qemu.md), and a "
                     "plain 'continue' records"
               : "qemu-x86_64 is not in PATH (install Debian's qemu-user "
                 "for 'magic-trace run', the fast recorder without Intel PT)";
  BackendVerdict emulate{"emulate", true,
                         "works everywhere: single-steps the target and "
                         "writes genuine PT packets (slow: 1-2 thousand "
                         "instructions a second)"};
  return {perf, qemu, emulate};
}

/// The CPU and what records on it. What decides is the intel_pt PMU, not the
/// vendor: an Intel CPU in a VM that hides the PMU records no more than an
/// AMD one, so every machine without it gets the same advice.
std::string cpuLine(const CpuIdentity &cpu, bool havePmu, bool haveQemu) {
  std::string line;
  llvm::raw_string_ostream os(line);
  os << "cpu: " << cpu.vendor << " family " << cpu.family << " model "
     << cpu.model << " stepping " << cpu.stepping;
  if (havePmu) {
    os << " (the intel_pt PMU is present: the perf backend can record here)";
    return line;
  }
  os << (cpu.vendor == "GenuineIntel"
             ? " (Intel, but no intel_pt PMU is exposed here: "
             : " (not Intel: no Intel PT; ");
  os << (haveQemu ? "'magic-trace run' (the QEMU recorder) and the emulate "
                    "backend record here)"
                  : "only the emulate backend records here)");
  return line;
}

std::string paranoidLine(const MachineFacts &facts) {
  std::optional<int> paranoid = facts.perfEventParanoid;
  if (!paranoid)
    return "perf_event_paranoid: unreadable (perf permissions unknown)";
  std::string line = "perf_event_paranoid: " + std::to_string(*paranoid);
  if (facts.isRoot)
    return line + " (running as root: not limited by it)";
  if (hasCapability(facts, kCapPerfmon))
    return line + " (CAP_PERFMON: not limited by it)";
  if (hasCapability(facts, kCapSysAdmin))
    return line + " (CAP_SYS_ADMIN: not limited by it)";
  if (*paranoid <= 2)
    return line + " (per-thread user-space tracing is permitted)";
  return line + " (too strict for perf: lower it to 2 or grant CAP_PERFMON)";
}

std::string ptraceLine(std::optional<int> scope) {
  if (!scope)
    return "ptrace_scope: no Yama (the debugger may trace any process it "
           "starts or may signal)";
  std::string line = "ptrace_scope: " + std::to_string(*scope);
  if (*scope <= 1)
    return line + " (the debugger can trace the processes it launches)";
  if (*scope == 2)
    return line + " (only CAP_SYS_PTRACE may attach; launching still works)";
  return line + " (ptrace is disabled: no debugging or emulation)";
}

std::string pmuLine(const IntelPtPmu &pmu) {
  if (!pmu.present)
    return "intel_pt PMU: absent (no /sys/bus/event_source/devices/intel_pt: "
           "the perf backend cannot record here)";
  std::string line = "intel_pt PMU: present, type " +
                     (pmu.type ? std::to_string(*pmu.type) : "unreadable");
  line += ", caps:";
  if (pmu.caps.empty())
    line += " none listed";
  for (const auto &[name, value] : pmu.caps)
    line += " " + name + "=" + value;
  return line;
}

} // namespace

void setDebuggerHost(DebuggerHost host) { debuggerHost = host; }

std::string withoutIntelPtAdvice() {
  return adviceWithoutIntelPt(!findQemuInPath().empty());
}

CpuIdentity parseCpuInfo(llvm::StringRef text) {
  CpuIdentity cpu;
  cpu.vendor = "unknown";
  llvm::SmallVector<llvm::StringRef, 64> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    // A blank line ends the first processor's block.
    if (line.trim().empty())
      break;
    auto [key, value] = line.split(':');
    key = key.trim();
    value = value.trim();
    if (key == "vendor_id")
      cpu.vendor = value.str();
    else if (key == "cpu family")
      value.getAsInteger(10, cpu.family);
    else if (key == "model")
      value.getAsInteger(10, cpu.model);
    else if (key == "stepping")
      value.getAsInteger(10, cpu.stepping);
  }
  return cpu;
}

MachineFacts probeMachine(const ProbeOptions &options) {
  MachineFacts facts;
  auto cpuinfo =
      llvm::MemoryBuffer::getFileAsStream(options.procRoot + "/cpuinfo");
  facts.cpu =
      cpuinfo ? parseCpuInfo((*cpuinfo)->getBuffer()) : parseCpuInfo("");
  facts.intelPt = probeIntelPt(options.sysRoot);
  facts.perfEventParanoid =
      readIntFile(options.procRoot + "/sys/kernel/perf_event_paranoid");
  facts.ptraceScope =
      readIntFile(options.procRoot + "/sys/kernel/yama/ptrace_scope");
  facts.isRoot = (options.euid ? *options.euid : geteuid()) == 0;
  facts.capabilities = options.capabilities
                           ? options.capabilities
                           : effectiveCapabilities(options.procRoot);
  std::unique_ptr<KernelInterface> kernel =
      makeLinuxKernel(options.sysRoot, options.procRoot);
  facts.perfPlan =
      describePerfRecording(*kernel, TimerResolution::Normal, 4 << 20);
  facts.libiptVersion = libiptVersion();
  facts.libiptErrata = cpuErrata(facts.cpu);
  facts.llvmVersion = LLVM_VERSION_STRING;
  facts.qemuPath = findQemuInPath();
  facts.backends = judgeBackends(facts);
  return facts;
}

std::string renderFactsText(const MachineFacts &facts) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << cpuLine(facts.cpu, facts.intelPt.present, !facts.qemuPath.empty())
     << "\n";
  os << pmuLine(facts.intelPt) << "\n";
  os << paranoidLine(facts) << "\n";
  os << ptraceLine(facts.ptraceScope) << "\n";
  os << "libipt: " << facts.libiptVersion
     << " (PT encoder and decoder; errata for this cpu: "
     << (facts.libiptErrata.empty() ? std::string("none")
                                    : llvm::join(facts.libiptErrata, ","))
     << ")\n";
  os << "llvm: " << facts.llvmVersion
     << " (disassembler, DWARF symbolizer, demangler)\n";
  for (const BackendVerdict &backend : facts.backends)
    os << "backend " << backend.name << ": "
       << (backend.available ? "available" : "unavailable") << " ("
       << backend.reason << ")\n";
  for (const std::string &line : facts.perfPlan)
    os << "perf plan: " << line << "\n";
  return text;
}

llvm::json::Value renderFactsJson(const MachineFacts &facts) {
  llvm::json::Object caps, format;
  for (const auto &[name, value] : facts.intelPt.caps)
    caps[name] = value;
  for (const auto &[name, value] : facts.intelPt.format)
    format[name] = value;
  llvm::json::Array backends;
  for (const BackendVerdict &backend : facts.backends)
    backends.push_back(llvm::json::Object{{"name", backend.name},
                                          {"available", backend.available},
                                          {"reason", backend.reason}});
  auto optionalInt = [](std::optional<int> value) -> llvm::json::Value {
    if (value)
      return *value;
    return nullptr;
  };
  return llvm::json::Object{
      {"cpu", llvm::json::Object{{"vendor", facts.cpu.vendor},
                                 {"family", facts.cpu.family},
                                 {"model", facts.cpu.model},
                                 {"stepping", facts.cpu.stepping}}},
      {"intel_pt", llvm::json::Object{{"present", facts.intelPt.present},
                                      {"type", optionalInt(facts.intelPt.type)},
                                      {"caps", std::move(caps)},
                                      {"format", std::move(format)}}},
      {"perf_event_paranoid", optionalInt(facts.perfEventParanoid)},
      {"ptrace_scope", optionalInt(facts.ptraceScope)},
      {"root", facts.isRoot},
      {"capabilities", facts.capabilities
                           ? llvm::json::Value(int64_t(*facts.capabilities))
                           : llvm::json::Value(nullptr)},
      {"perf_plan", llvm::json::Array(facts.perfPlan)},
      {"libipt_version", facts.libiptVersion},
      {"libipt_errata", llvm::json::Array(facts.libiptErrata)},
      {"llvm_version", facts.llvmVersion},
      {"backends", std::move(backends)},
  };
}

} // namespace magic_trace
