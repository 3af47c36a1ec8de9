//===- KernelInterface.cpp - The running kernel ---------------------------===//
#include "magic_trace/KernelInterface.h"
#include "magic_trace/MachineFacts.h"

#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cerrno>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace magic_trace {
namespace {

std::optional<uint64_t> readNumber(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFileAsStream(path);
  if (!buffer)
    return std::nullopt;
  uint64_t value = 0;
  if ((*buffer)->getBuffer().trim().getAsInteger(10, value))
    return std::nullopt;
  return value;
}

/// The CPUs of a cpulist ("0-3,5"), as devices/system/cpu/online prints it.
std::vector<unsigned> parseCpuList(llvm::StringRef list) {
  std::vector<unsigned> cpus;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  list.trim().split(parts, ',', -1, false);
  for (llvm::StringRef part : parts) {
    auto [lowText, highText] = part.split('-');
    unsigned low = 0, high = 0;
    if (lowText.getAsInteger(10, low))
      continue;
    high = low;
    if (!highText.empty() && highText.getAsInteger(10, high))
      continue;
    for (unsigned cpu = low; cpu <= high && cpu < 65536; ++cpu)
      cpus.push_back(cpu);
  }
  return cpus;
}

class LinuxKernel final : public KernelInterface {
public:
  LinuxKernel(std::string sys, std::string proc)
      : sys(std::move(sys)), proc(std::move(proc)) {}

  llvm::ErrorOr<int> perfEventOpen(const perf_event_attr &attr, int pid,
                                   int cpu) override {
    perf_event_attr copy = attr;
    long fd =
        syscall(SYS_perf_event_open, &copy, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
      return std::error_code(errno, std::generic_category());
    return static_cast<int>(fd);
  }
  llvm::ErrorOr<void *> mmap(int fd, size_t length, bool writable,
                             uint64_t offset) override {
    void *address =
        ::mmap(nullptr, length, PROT_READ | (writable ? PROT_WRITE : 0),
               MAP_SHARED, fd, static_cast<off_t>(offset));
    if (address == MAP_FAILED)
      return std::error_code(errno, std::generic_category());
    return address;
  }
  void munmap(void *address, size_t length) override {
    ::munmap(address, length);
  }
  std::error_code ioctl(int fd, unsigned long request,
                        unsigned long argument) override {
    if (::ioctl(fd, request, argument) < 0)
      return std::error_code(errno, std::generic_category());
    return {};
  }
  void close(int fd) override { ::close(fd); }
  llvm::ErrorOr<unsigned> poll(llvm::MutableArrayRef<pollfd> fds,
                               int timeoutMs) override {
    int ready = ::poll(fds.data(), fds.size(), timeoutMs);
    if (ready < 0)
      return std::error_code(errno, std::generic_category());
    return unsigned(ready);
  }
  std::string sysRoot() const override { return sys; }
  std::string procRoot() const override { return proc; }
  uint64_t pageSize() const override {
    return static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  std::vector<unsigned> onlineCpus() const override {
    auto buffer =
        llvm::MemoryBuffer::getFileAsStream(sys + "/devices/system/cpu/online");
    std::vector<unsigned> cpus;
    if (buffer)
      cpus = parseCpuList((*buffer)->getBuffer());
    if (!cpus.empty())
      return cpus;
    long count = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < std::max(count, 1L); ++cpu)
      cpus.push_back(unsigned(cpu));
    return cpus;
  }
  std::optional<uint64_t> perfMlockKb() const override {
    return readNumber(proc + "/sys/kernel/perf_event_mlock_kb");
  }
  std::optional<uint64_t> memlockLimit() const override {
    rlimit limit{};
    if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 ||
        limit.rlim_cur == RLIM_INFINITY)
      return std::nullopt;
    return static_cast<uint64_t>(limit.rlim_cur);
  }
  bool lockLimitExempt() const override {
    std::optional<uint64_t> caps = effectiveCapabilities(proc);
    if (caps && (*caps >> kCapIpcLock & 1))
      return true;
    auto paranoid = llvm::MemoryBuffer::getFileAsStream(
        proc + "/sys/kernel/perf_event_paranoid");
    int value = 2;
    return paranoid &&
           !(*paranoid)->getBuffer().trim().getAsInteger(10, value) &&
           value < 0;
  }
  uint64_t readTsc() const override {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
  }
  CpuIdentity cpu() const override {
    auto cpuinfo = llvm::MemoryBuffer::getFileAsStream(proc + "/cpuinfo");
    return parseCpuInfo(cpuinfo ? (*cpuinfo)->getBuffer() : "");
  }

private:
  std::string sys, proc;
};

} // namespace

KernelInterface::~KernelInterface() = default;

std::optional<uint64_t> effectiveCapabilities(const std::string &procRoot) {
  auto status = llvm::MemoryBuffer::getFileAsStream(procRoot + "/self/status");
  if (!status)
    return std::nullopt;
  llvm::StringRef text = (*status)->getBuffer();
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    if (!line.consume_front("CapEff:"))
      continue;
    uint64_t caps = 0;
    if (line.trim().getAsInteger(16, caps))
      return std::nullopt;
    return caps;
  }
  return std::nullopt;
}

std::unique_ptr<KernelInterface> makeLinuxKernel(std::string sysRoot,
                                                 std::string procRoot) {
  return std::make_unique<LinuxKernel>(std::move(sysRoot), std::move(procRoot));
}

} // namespace magic_trace
