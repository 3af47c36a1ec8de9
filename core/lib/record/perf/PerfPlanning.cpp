//===- PerfPlanning.cpp - What a perf recording will be, before it is -----===//
//
// The perf backend's plans and words (PerfRecorder.h): the AUX and data
// buffers sized within the user's locked-memory budget as perf sizes them,
// the intel_pt config described term by term, what `doctor` and `attach`
// say a recording will be, and the errors of perf_event_open in the user's
// terms. PerfRecorder.cpp opens and reads the rings.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PerfRecorder.h"

#include "magic_trace/MachineFacts.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace magic_trace {
namespace {

uint64_t floorPowerOfTwo(uint64_t value) {
  uint64_t result = 1;
  while (result <= value / 2)
    result *= 2;
  return value ? result : 0;
}

std::string kib(uint64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

} // namespace

uint64_t psbPeriodBytes(const IntelPtPmuDescription &pmu,
                        const perf_event_attr &attr) {
  auto field = pmu.format.find("psb_period");
  if (field == pmu.format.end())
    return 2048;
  uint64_t value = field->second.read(attr.config);
  // RTIT_CTL.PSBFreq: a PSB every 2^(n + 11) bytes (Intel SDM vol. 3C).
  return uint64_t(1) << (value + 11);
}

uint64_t perfDataBytes(const KernelInterface &kernel) {
  // tools/perf/util/evlist.c, perf_event_mlock_kb_in_pages (what
  // evlist__mmap_size gives perf record's default mmap_pages): the user's
  // per-CPU budget less one page, a power of two of pages; 512 KiB when
  // the sysctl is unreadable.
  uint64_t page = kernel.pageSize();
  std::optional<uint64_t> mlockKb = kernel.perfMlockKb();
  uint64_t maxKb = 512;
  if (mlockKb)
    maxKb = *mlockKb > page / 1024 ? *mlockKb - page / 1024 : 0;
  return floorPowerOfTwo(maxKb * 1024 / page) * page;
}

namespace {

/// The largest AUX area that fits `perCpuLimit` beside the perf page and
/// `dataBytes` of data pages: a power of two of pages, or 0.
uint64_t auxRoom(uint64_t wantedAux, uint64_t perCpuLimit, uint64_t page,
                 uint64_t dataBytes) {
  uint64_t fixed = page + dataBytes;
  uint64_t room = perCpuLimit > fixed ? perCpuLimit - fixed : 0;
  uint64_t aux = floorPowerOfTwo(std::min(wantedAux, room));
  return aux < page ? 0 : aux;
}

} // namespace

llvm::Expected<BufferPlan> planBuffers(uint64_t wantedAux, unsigned cpus,
                                       const KernelInterface &kernel,
                                       uint64_t psbPeriodBytes,
                                       std::optional<uint64_t> dataBytes) {
  uint64_t page = kernel.pageSize();
  BufferPlan plan;
  plan.cpus = std::max(cpus, 1u);
  uint64_t perCpuLimit = UINT64_MAX;
  if (!kernel.lockLimitExempt()) {
    // perf_mmap: the user may lock perf_event_mlock_kb on each online CPU;
    // beyond that the process's RLIMIT_MEMLOCK (pinned_vm) takes the rest.
    uint64_t mlockKb = kernel.perfMlockKb().value_or(516);
    std::optional<uint64_t> rlimit = kernel.memlockLimit();
    if (rlimit) {
      plan.budgetBytes = mlockKb * 1024 * plan.cpus + *rlimit;
      perCpuLimit = plan.budgetBytes / plan.cpus;
    }
  }
  // The perf page and the data pages come first out of each CPU's share.
  // The data pages are perf's default; where that costs AUX, they go down
  // to what perf maps for an unprivileged Intel PT snapshot; where two PSB
  // periods of AUX still do not fit, down to kMinDataBytes, with a note.
  // (The reader consumes them as the target runs, so they need to hold only
  // what comes between two of its rounds.)
  uint64_t wantedData = dataBytes ? *dataBytes : perfDataBytes(kernel);
  uint64_t minimum = std::max(2 * psbPeriodBytes, page);
  uint64_t data = std::max(wantedData, page);
  uint64_t aux = auxRoom(wantedAux, perCpuLimit, page, data);
  while (data / 2 >= kPerfSnapshotDataBytes &&
         auxRoom(wantedAux, perCpuLimit, page, data / 2) > aux) {
    data /= 2;
    aux = auxRoom(wantedAux, perCpuLimit, page, data);
  }
  while (aux < minimum && data / 2 >= kMinDataBytes) {
    data /= 2;
    aux = auxRoom(wantedAux, perCpuLimit, page, data);
  }
  if (aux < minimum)
    return llvm::createStringError(
        "the locked-memory budget (%s for this user on %u CPUs) leaves no "
        "room for a %s AUX buffer per CPU, two PSB periods (raise "
        "/proc/sys/kernel/perf_event_mlock_kb or 'ulimit -l')",
        kib(plan.budgetBytes).c_str(), plan.cpus, kib(minimum).c_str());
  plan.auxBytes = aux;
  plan.dataBytes = data;
  if (data < std::min(wantedData, kPerfSnapshotDataBytes))
    plan.note = "the locked-memory budget (" + kib(plan.budgetBytes) +
                " for this user on " + std::to_string(plan.cpus) +
                " CPUs) fits " + kib(data) + " of sideband per CPU, not " +
                kib(wantedData) +
                " (raise /proc/sys/kernel/perf_event_mlock_kb for more)";
  else if (aux < wantedAux)
    plan.note = "the locked-memory budget (" + kib(plan.budgetBytes) +
                " for this user on " + std::to_string(plan.cpus) +
                " CPUs) fits " + kib(aux) + " of AUX buffer per CPU, not " +
                kib(wantedAux) +
                " (raise /proc/sys/kernel/perf_event_mlock_kb for more)";
  return plan;
}

llvm::Error perfOpenError(int error, uint64_t tid, llvm::StringRef procRoot) {
  if (error == EACCES || error == EPERM) {
    std::string paranoid = "unreadable";
    if (auto buffer = llvm::MemoryBuffer::getFileAsStream(
            procRoot + "/sys/kernel/perf_event_paranoid"))
      paranoid = (*buffer)->getBuffer().trim().str();
    return llvm::createStringError(
        "perf_event_open refused for thread %llu: perf_event_paranoid is %s "
        "(set it to 2 or lower: sysctl kernel.perf_event_paranoid=2, or grant "
        "CAP_PERFMON)",
        (unsigned long long)tid, paranoid.c_str());
  }
  if (error == ESRCH)
    return llvm::createStringError("thread %llu exited before tracing started "
                                   "(it is skipped)",
                                   (unsigned long long)tid);
  // Intel PT is an exclusive PMU (PERF_PMU_CAP_EXCLUSIVE): perf_event_open
  // returns EBUSY while a CPU-wide PT session (perf record -a) or another
  // PT event on the same thread exists (kernel/events/core.c,
  // exclusive_event_init and exclusive_event_installable).
  if (error == EBUSY)
    return llvm::createStringError(
        "Intel PT is in use by another tracer (perf record, or a hypervisor) "
        "for thread %llu (stop it and attach again)",
        (unsigned long long)tid);
  if (error == ENOENT || error == ENODEV || error == EOPNOTSUPP)
    return llvm::createStringError(
        "the kernel refused the intel_pt event for thread %llu: %s (%s)",
        (unsigned long long)tid, strerror(error),
        withoutIntelPtAdvice().c_str());
  return llvm::createStringError("perf_event_open failed for thread %llu: %s",
                                 (unsigned long long)tid, strerror(error));
}

namespace {

/// The intel_pt PMU of a Skylake as the kernel describes it: the format
/// layout is fixed in arch/x86/events/intel/pt.c (PMU_FORMAT_ATTR, the
/// RTIT_CTL bits); the capabilities are a Skylake's CPUID leaf 0x14.
IntelPtPmuDescription referencePmu() {
  IntelPtPmuDescription pmu;
  pmu.type = -1;
  const std::pair<const char *, const char *> format[] = {
      {"pt", "config:0"},
      {"cyc", "config:1"},
      {"pwr_evt", "config:4"},
      {"fup_on_ptw", "config:5"},
      {"mtc", "config:9"},
      {"tsc", "config:10"},
      {"noretcomp", "config:11"},
      {"ptw", "config:12"},
      {"branch", "config:13"},
      {"mtc_period", "config:14-17"},
      {"cyc_thresh", "config:19-22"},
      {"psb_period", "config:24-27"}};
  for (auto [name, text] : format)
    if (llvm::Expected<PmuFormatField> field = parseFormatField(text))
      pmu.format[name] = *field;
    else
      llvm::consumeError(field.takeError());
  pmu.caps = {{"psb_cyc", "1"},
              {"mtc", "1"},
              {"mtc_periods", "249"},
              {"cycle_thresholds", "3fff"},
              {"psb_periods", "3f"}};
  return pmu;
}

/// The config's terms by name: "pt tsc mtc_period=3 ...", in bit order.
std::string describeConfig(const IntelPtPmuDescription &pmu, uint64_t config) {
  std::vector<std::pair<unsigned, std::string>> terms;
  for (const auto &[name, field] : pmu.format) {
    if (field.word != 0 || field.bitRanges.empty())
      continue;
    uint64_t value = field.read(config);
    bool flag = field.width() == 1;
    // Multi-bit terms are shown even at 0 (mtc_period=0 is a choice).
    if (flag && !value)
      continue;
    if (!flag &&
        !(name == "mtc_period" || name == "cyc_thresh" ||
          name == "psb_period") &&
        !value)
      continue;
    terms.push_back({field.bitRanges.front().first,
                     flag ? name : name + "=" + std::to_string(value)});
  }
  std::sort(terms.begin(), terms.end());
  std::string text;
  for (const auto &[bit, term] : terms)
    text += (text.empty() ? "" : " ") + term;
  return text;
}

} // namespace

std::vector<std::string> describePerfRecording(const KernelInterface &kernel,
                                               TimerResolution timer,
                                               uint64_t auxSize) {
  std::vector<std::string> lines;
  IntelPtPmuDescription pmu;
  llvm::Expected<IntelPtPmuDescription> loaded =
      loadIntelPtPmu(kernel.sysRoot());
  if (loaded) {
    pmu = std::move(*loaded);
  } else {
    llvm::consumeError(loaded.takeError());
    pmu = referencePmu();
    lines.push_back("no intel_pt PMU here; on a Skylake-class CPU with this "
                    "kernel and user it would do:");
  }
  llvm::Expected<IntelPtAttr> attr = buildIntelPtAttr(pmu, timer);
  if (!attr) {
    lines.push_back("cannot build the attr: " +
                    llvm::toString(attr.takeError()));
    return lines;
  }
  std::string type =
      pmu.type >= 0 ? std::to_string(pmu.type) : std::string("<intel_pt/type>");
  unsigned cpus = unsigned(kernel.onlineCpus().size());
  llvm::SmallString<32> config;
  llvm::raw_svector_ostream(config) << llvm::format_hex(attr->attr.config, 10);
  lines.push_back(
      "perf_event_open per thread on each of " + std::to_string(cpus) +
      " CPUs: type=" + type + " config=" + config.str().str() + " (" +
      describeConfig(pmu, attr->attr.config) +
      ") exclude_kernel exclude_hv inherit sample_id_all "
      "sample_type=TID|TIME|CPU, output of a CPU's threads into one ring");
  for (const std::string &note : attr->notes)
    lines.push_back("note: " + note);
  uint64_t psb = psbPeriodBytes(pmu, attr->attr);
  llvm::Expected<BufferPlan> plan = planBuffers(auxSize, cpus, kernel, psb);
  if (!plan) {
    lines.push_back("buffers: " + llvm::toString(plan.takeError()));
    return lines;
  }
  std::string budget =
      plan->budgetBytes
          ? kib(plan->budgetBytes) + " (perf_event_mlock_kb " +
                std::to_string(kernel.perfMlockKb().value_or(516)) + " x " +
                std::to_string(plan->cpus) + " CPUs + RLIMIT_MEMLOCK " +
                kib(kernel.memlockLimit().value_or(0)) + ")"
          : std::string("unlimited (CAP_IPC_LOCK, or no RLIMIT_MEMLOCK)");
  uint64_t perCpu = kernel.pageSize() + plan->dataBytes + plan->auxBytes;
  lines.push_back(
      "buffers per CPU: perf page " + kib(kernel.pageSize()) + " + sideband " +
      kib(plan->dataBytes) + " + AUX " + kib(plan->auxBytes) +
      " read-only (snapshot mode, " + std::to_string(plan->auxBytes / psb) +
      " PSB periods of " + kib(psb) + "); " + std::to_string(plan->cpus) +
      " CPUs lock " + kib(perCpu * plan->cpus) + " of this user's budget " +
      budget + ", whatever the number of threads");
  if (!plan->note.empty())
    lines.push_back("note: " + plan->note);
  return lines;
}

} // namespace magic_trace
