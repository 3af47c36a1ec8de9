//===- PerfRecorder.cpp - Per-thread Intel PT recording with perf ---------===//
#include "magic_trace/PerfRecorder.h"

#include "magic_trace/MachineFacts.h"

#include "llvm/Support/MemoryBuffer.h"

#include <cerrno>
#include <cstring>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace magic_trace {
namespace {

/// The TSC now (RDTSC); 0 off x86, where there is no Intel PT either.
uint64_t readTsc() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return 0;
#endif
}

/// Owns one mmap.
struct Mapping {
  void *address = MAP_FAILED;
  size_t length = 0;
  Mapping() = default;
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;
  ~Mapping() {
    if (address != MAP_FAILED)
      munmap(address, length);
  }
};

/// Owns one file descriptor.
struct FileDescriptor {
  int fd = -1;
  FileDescriptor() = default;
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  ~FileDescriptor() {
    if (fd >= 0)
      close(fd);
  }
};

long perfEventOpen(perf_event_attr *attr, pid_t pid, int cpu, int groupFd,
                   unsigned long flags) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, groupFd, flags);
}

uint64_t pageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

} // namespace

struct PerfRecorder::ThreadRecording {
  uint64_t tid = 0;
  uint64_t auxSize = 0;
  // Declared in this order so the mappings go before the descriptor closes.
  FileDescriptor event;
  Mapping base; ///< The perf_event_mmap_page (no data pages).
  Mapping aux;  ///< Read-only: overwrite (snapshot) mode.

  const perf_event_mmap_page &page() const {
    return *static_cast<const perf_event_mmap_page *>(base.address);
  }
};

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
  // Intel PT's hardware is one per CPU: the kernel's pt_event_add returns
  // EBUSY while another user (perf record, a VMM's PT passthrough) holds it
  // (arch/x86/events/intel/pt.c; perf reports the same).
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

llvm::Expected<std::unique_ptr<PerfRecorder>>
PerfRecorder::create(Options options) {
  llvm::Expected<IntelPtPmuDescription> pmu = loadIntelPtPmu(options.sysRoot);
  if (!pmu)
    return pmu.takeError();
  llvm::Expected<IntelPtAttr> attr = buildIntelPtAttr(*pmu, options.timer);
  if (!attr)
    return attr.takeError();
  if (options.auxSize < pageSize() ||
      (options.auxSize & (options.auxSize - 1)) != 0)
    return llvm::createStringError("snapshot size %llu is not a power of two "
                                   "of at least one page (try 4MiB)",
                                   (unsigned long long)options.auxSize);
  std::unique_ptr<PerfRecorder> recorder(new PerfRecorder());
  recorder->attrValue = attr->attr;
  recorder->timingValue = hardwareTiming(*pmu, attr->attr);
  recorder->options = std::move(options);
  recorder->notesList = std::move(attr->notes);
  return recorder;
}

PerfRecorder::~PerfRecorder() = default;

std::vector<uint64_t> PerfRecorder::threadIds() const {
  std::vector<uint64_t> ids;
  for (const auto &thread : threads)
    ids.push_back(thread->tid);
  return ids;
}

uint64_t PerfRecorder::bufferSize(uint64_t tid) const {
  for (const auto &thread : threads)
    if (thread->tid == tid)
      return thread->auxSize;
  return 0;
}

bool PerfRecorder::isTracing(uint64_t tid) const {
  for (const auto &thread : threads)
    if (thread->tid == tid)
      return true;
  return false;
}

llvm::Error PerfRecorder::addThread(uint64_t tid) {
  if (isTracing(tid))
    return llvm::Error::success();
  auto thread = std::make_unique<ThreadRecording>();
  thread->tid = tid;
  perf_event_attr attr = attrValue;
  long fd = perfEventOpen(&attr, static_cast<pid_t>(tid), -1, -1,
                          PERF_FLAG_FD_CLOEXEC);
  if (fd < 0)
    return perfOpenError(errno, tid, options.procRoot);
  thread->event.fd = static_cast<int>(fd);

  // The mapping page is read-write so aux_offset/aux_size can be set.
  thread->base.length = pageSize();
  thread->base.address =
      mmap(nullptr, thread->base.length, PROT_READ | PROT_WRITE, MAP_SHARED,
           thread->event.fd, 0);
  if (thread->base.address == MAP_FAILED)
    return llvm::createStringError("cannot map the perf page of thread %llu: "
                                   "%s",
                                   (unsigned long long)tid, strerror(errno));
  auto *page = static_cast<perf_event_mmap_page *>(thread->base.address);

  // Halve the AUX size while the kernel refuses it (perf_event_mlock_kb).
  uint64_t wanted = options.auxSize;
  for (uint64_t size = wanted; size >= pageSize(); size /= 2) {
    page->aux_offset = thread->base.length;
    page->aux_size = size;
    void *aux = mmap(nullptr, size, PROT_READ, MAP_SHARED, thread->event.fd,
                     static_cast<off_t>(page->aux_offset));
    if (aux != MAP_FAILED) {
      thread->aux.address = aux;
      thread->aux.length = size;
      thread->auxSize = size;
      if (size != wanted)
        notesList.push_back(
            "thread " + std::to_string(tid) + ": the kernel refused a " +
            std::to_string(wanted) + "-byte AUX buffer, using " +
            std::to_string(size) +
            " bytes (raise /proc/sys/kernel/perf_event_mlock_kb for more)");
      break;
    }
    if (errno != ENOMEM && errno != EPERM)
      return llvm::createStringError("cannot map the AUX area of thread %llu: "
                                     "%s",
                                     (unsigned long long)tid, strerror(errno));
  }
  if (thread->aux.address == MAP_FAILED)
    return llvm::createStringError(
        "the kernel refused every AUX buffer size down to one page for thread "
        "%llu (raise /proc/sys/kernel/perf_event_mlock_kb)",
        (unsigned long long)tid);
  if (ioctl(thread->event.fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
    return llvm::createStringError("cannot enable tracing of thread %llu: %s",
                                   (unsigned long long)tid, strerror(errno));
  threads.push_back(std::move(thread));
  return llvm::Error::success();
}

llvm::Expected<ThreadTrace> PerfRecorder::snapshotThread(uint64_t tid) {
  for (const auto &thread : threads) {
    if (thread->tid != tid)
      continue;
    // Disable so the kernel flushes and stops writing while we copy.
    ioctl(thread->event.fd, PERF_EVENT_IOC_DISABLE, 0);
    uint64_t head = __atomic_load_n(&thread->page().aux_head, __ATOMIC_ACQUIRE);
    ThreadTrace trace;
    trace.tid = tid;
    trace.bytes = copyAuxRing(static_cast<const uint8_t *>(thread->aux.address),
                              thread->auxSize, head, trace.wrapped);
    ioctl(thread->event.fd, PERF_EVENT_IOC_ENABLE, 0);
    return trace;
  }
  return llvm::createStringError("thread %llu is not traced (it appeared after "
                                 "attach; it is added at the next stop)",
                                 (unsigned long long)tid);
}

llvm::Expected<TimeConversion> PerfRecorder::timeConversion() const {
  if (threads.empty())
    return llvm::createStringError("no thread is traced yet");
  llvm::Expected<TimeConversion> time =
      timeConversionFromPage(threads.front()->page());
  // The trace is older than now: TSC packets' missing top byte comes from
  // the TSC read here (the debugger runs on the traced machine).
  if (time)
    time->tscReference = readTsc();
  return time;
}

} // namespace magic_trace
