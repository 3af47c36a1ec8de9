//===- MachineFacts.h - What this machine offers for tracing ----*- C++ -*-===//
//
// The facts behind `magic-trace doctor`: CPU identity, the intel_pt PMU (type,
// capabilities, config format), perf and ptrace permissions, library versions,
// and which recording backends follow from them.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_MACHINEFACTS_H
#define MAGIC_TRACE_MACHINEFACTS_H

#include "magic_trace/CpuIdentity.h"

#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

/// The intel_pt PMU as sysfs describes it.
struct IntelPtPmu {
  bool present = false;
  std::optional<int> type; ///< perf_event_attr.type for intel_pt.
  std::map<std::string, std::string> caps;   ///< caps/<name> -> contents.
  std::map<std::string, std::string> format; ///< format/<name> -> "config:0".
};

/// Whether one recording backend works on this machine, and why.
struct BackendVerdict {
  std::string name;
  bool available = false;
  std::string reason;
};

struct MachineFacts {
  CpuIdentity cpu;
  IntelPtPmu intelPt;
  std::optional<int> perfEventParanoid;
  std::optional<int> ptraceScope; ///< Absent when Yama is not built in.
  bool isRoot = false;
  /// Effective capabilities (CapEff); unset when unreadable. CAP_PERFMON
  /// (38) or CAP_SYS_ADMIN (21) lift perf_event_paranoid's limits
  /// (perfmon_capable() in include/linux/capability.h).
  std::optional<uint64_t> capabilities;
  /// What --backend perf would open and map here (describePerfRecording).
  std::vector<std::string> perfPlan;
  std::string libiptVersion;
  /// libipt's errata workarounds for this CPU (cpuErrata in Decoder.h):
  /// what a trace recorded here would be decoded with.
  std::vector<std::string> libiptErrata;
  std::string llvmVersion;
  /// qemu-x86_64 from PATH (Debian's qemu-user); empty when absent. With it,
  /// `magic-trace run` records through the QEMU recorder.
  std::string qemuPath;
  std::vector<BackendVerdict> backends;
};

/// Where to read the machine from; tests point these at a fake tree.
struct ProbeOptions {
  std::string procRoot = "/proc";
  std::string sysRoot = "/sys";
  /// Effective uid; std::nullopt means "ask the OS".
  std::optional<unsigned> euid;
  /// Effective capabilities; std::nullopt means <procRoot>/self/status.
  std::optional<uint64_t> capabilities;
};

/// What to use where Intel PT cannot record, for error messages: `magic-trace
/// run` (the QEMU recorder) when qemu-x86_64 is in PATH, and the emulate
/// backend; a clause that follows "use" or "(".
std::string withoutIntelPtAdvice();

/// The debugger magic-trace runs in, whose commands the advice names (one
/// per process: the LLDB plugin or GDB's module).
enum class DebuggerHost { Lldb, Gdb };
void setDebuggerHost(DebuggerHost host);

/// Reads the machine. Never fails: a fact that cannot be read stays unset and
/// the text says so.
MachineFacts probeMachine(const ProbeOptions &options = ProbeOptions());

/// Parses the first processor's block of /proc/cpuinfo text.
CpuIdentity parseCpuInfo(llvm::StringRef cpuinfoText);

/// One line per fact, each saying what follows from it.
std::string renderFactsText(const MachineFacts &facts);

/// The same facts as one JSON object.
llvm::json::Value renderFactsJson(const MachineFacts &facts);

} // namespace magic_trace

#endif
