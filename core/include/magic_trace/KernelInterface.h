//===- KernelInterface.h - The kernel calls of the perf backend -*- C++ -*-===//
//
// Everything the perf backend asks of the kernel, behind one narrow interface
// so that tests can put a fake kernel behind it (test/unit/FakeKernel.h):
// perf_event_open, mmap/munmap of the perf and AUX areas, the ioctls, close,
// poll (the sideband reader waits on it while the target runs), the sysfs root
// the PMU is read from, the CPU the trace comes from, and the numbers the
// per-user locked memory budget is computed from (kernel/events/core.c,
// perf_mmap).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_KERNELINTERFACE_H
#define MAGIC_TRACE_KERNELINTERFACE_H

#include "magic_trace/CpuIdentity.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/ErrorOr.h"

#include <linux/perf_event.h>
#include <poll.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace magic_trace {

class KernelInterface {
public:
  virtual ~KernelInterface();

  /// perf_event_open(2) with PERF_FLAG_FD_CLOEXEC: a descriptor, or the
  /// kernel's errno (EACCES/EPERM, ESRCH, EBUSY, EINVAL, ...).
  virtual llvm::ErrorOr<int> perfEventOpen(const perf_event_attr &attr, int pid,
                                           int cpu) = 0;
  /// mmap(2) of `length` bytes of event `fd` at `offset`, MAP_SHARED; PROT_READ
  /// plus PROT_WRITE when `writable`. Errors: EINVAL, EPERM (locked memory
  /// budget), ENOMEM.
  virtual llvm::ErrorOr<void *> mmap(int fd, size_t length, bool writable,
                                     uint64_t offset) = 0;
  virtual void munmap(void *address, size_t length) = 0;
  /// ioctl(2) on an event: PERF_EVENT_IOC_ENABLE/DISABLE/SET_OUTPUT.
  virtual std::error_code ioctl(int fd, unsigned long request,
                                unsigned long argument) = 0;
  virtual void close(int fd) = 0;
  /// poll(2) on events for POLLIN, waiting at most `timeoutMs`: fills each
  /// entry's revents and returns how many have any (0: the time passed).
  /// POLLIN: the event's ring passed its wakeup watermark since the last
  /// poll (half the data pages without attr.watermark; kernel/events/
  /// ring_buffer.c: ring_buffer_init, perf_output_wakeup; core.c:
  /// perf_poll); POLLHUP: its thread and every inherited copy exited.
  /// Errors: poll's (EINTR is retried by the caller's loop).
  virtual llvm::ErrorOr<unsigned> poll(llvm::MutableArrayRef<pollfd> fds,
                                       int timeoutMs) = 0;

  /// The root the intel_pt PMU is read from ("/sys").
  virtual std::string sysRoot() const = 0;
  /// The root /proc files are read from ("/proc").
  virtual std::string procRoot() const = 0;
  virtual uint64_t pageSize() const = 0;
  /// The online CPUs (devices/system/cpu/online), ascending: where a
  /// per-CPU recording opens events. Their count is num_online_cpus().
  virtual std::vector<unsigned> onlineCpus() const = 0;
  /// /proc/sys/kernel/perf_event_mlock_kb (the per-user budget per CPU);
  /// nullopt when unreadable.
  virtual std::optional<uint64_t> perfMlockKb() const = 0;
  /// RLIMIT_MEMLOCK's soft limit in bytes (what the budget overflows into);
  /// nullopt when unlimited.
  virtual std::optional<uint64_t> memlockLimit() const = 0;
  /// Whether the locked memory limits do not apply (CAP_IPC_LOCK, root, or
  /// perf_event_paranoid -1: perf_mmap's checks).
  virtual bool lockLimitExempt() const = 0;
  /// The TSC now (RDTSC; 0 off x86).
  virtual uint64_t readTsc() const = 0;
  /// The CPU whose PT the rings get (<procRoot>/cpuinfo's first processor):
  /// the decoder applies its errata.
  virtual CpuIdentity cpu() const = 0;
};

/// Capability numbers (include/uapi/linux/capability.h).
constexpr unsigned kCapIpcLock = 14;
constexpr unsigned kCapSysAdmin = 21;
constexpr unsigned kCapPerfmon = 38;

/// This process's effective capabilities (CapEff in <procRoot>/self/status);
/// nullopt when unreadable.
std::optional<uint64_t> effectiveCapabilities(const std::string &procRoot);

/// The running kernel, reading sysfs and /proc at the given roots.
std::unique_ptr<KernelInterface>
makeLinuxKernel(std::string sysRoot = "/sys", std::string procRoot = "/proc");

} // namespace magic_trace

#endif
