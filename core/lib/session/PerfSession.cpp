//===- PerfSession.cpp - The perf backend, for any debugger host ----------===//
#include "magic_trace/PerfSession.h"

#include "llvm/Support/DynamicLibrary.h"

#include <cstdlib>

namespace magic_trace {

namespace {

/// The test hook (docs/perf-backend.md, "End to end in the debuggers"): with
/// MAGIC_TRACE_TEST_KERNEL naming a shared library, the perf backend asks
/// the kernel that library's magic_trace_test_kernel() makes, given
/// MAGIC_TRACE_TEST_KERNEL_ARGS, instead of the running one. The lit tests'
/// replaying kernel (test/support/ReplayKernel.cpp) serves a QEMU recording
/// of the debugged program through it; without the variable, nothing here
/// runs.
using TestKernelFactory = KernelInterface *(*)(const char *args,
                                               std::string *error);

llvm::Expected<std::shared_ptr<KernelInterface>> testKernel() {
  const char *library = std::getenv("MAGIC_TRACE_TEST_KERNEL");
  if (!library || !*library)
    return nullptr;
  std::string error;
  llvm::sys::DynamicLibrary handle =
      llvm::sys::DynamicLibrary::getPermanentLibrary(library, &error);
  if (!handle.isValid())
    return llvm::createStringError(
        "MAGIC_TRACE_TEST_KERNEL: cannot load %s: %s (unset it to trace with "
        "the running kernel)",
        library, error.c_str());
  auto factory = reinterpret_cast<TestKernelFactory>(
      handle.getAddressOfSymbol("magic_trace_test_kernel"));
  if (!factory)
    return llvm::createStringError(
        "MAGIC_TRACE_TEST_KERNEL: %s has no magic_trace_test_kernel (unset it "
        "to trace with the running kernel)",
        library);
  const char *args = std::getenv("MAGIC_TRACE_TEST_KERNEL_ARGS");
  KernelInterface *kernel = factory(args ? args : "", &error);
  if (!kernel)
    return llvm::createStringError("MAGIC_TRACE_TEST_KERNEL: %s",
                                   error.c_str());
  return std::shared_ptr<KernelInterface>(kernel);
}

} // namespace

llvm::Expected<std::unique_ptr<PerfRecorder>>
startPerfRecording(uint64_t pid, const std::vector<uint64_t> &tids,
                   const PerfStartOptions &options,
                   std::vector<std::string> &notes) {
  // The kernel is asked for this machine's pids: a target on a remote
  // platform, or seen through another PID namespace, would be the wrong
  // process here (or none).
  if (!options.platform.empty() && options.platform != "host")
    return llvm::createStringError(
        "the target runs on the '%s' platform, not this machine (--backend "
        "perf traces local processes: run %s where the target runs)",
        options.platform.c_str(), options.debugger.c_str());
  if (llvm::Error error = checkSameNamespace(pid, "/proc", tids))
    return std::move(error);
  PerfRecorder::Options recorderOptions;
  recorderOptions.timer = options.timer;
  recorderOptions.auxSize = options.bufferSize;
  llvm::Expected<std::shared_ptr<KernelInterface>> kernel = testKernel();
  if (!kernel)
    return kernel.takeError();
  recorderOptions.kernel = std::move(*kernel);
  llvm::Expected<std::unique_ptr<PerfRecorder>> recorder =
      PerfRecorder::create(recorderOptions);
  if (!recorder)
    return recorder.takeError();
  // Every thread is recorded (inherit covers the ones created later); a
  // thread filter picks among them at the snapshot.
  if (llvm::Error error = (*recorder)->attach(pid, tids))
    return std::move(error);
  for (const std::string &note : (*recorder)->notes())
    notes.push_back(note);
  return std::move(*recorder);
}

llvm::Error fillPerfSnapshot(PerfRecorder &recorder,
                             const std::function<bool(uint64_t)> &traces,
                             Snapshot &snapshot) {
  llvm::Expected<TimeConversion> time = recorder.timeConversion();
  if (!time)
    return time.takeError();
  snapshot.time = *time;
  snapshot.timing = recorder.timing();
  llvm::Expected<std::vector<ThreadTrace>> threads = recorder.snapshot();
  if (!threads)
    return threads.takeError();
  for (ThreadTrace &trace : *threads)
    if (traces(trace.tid))
      snapshot.threads.push_back(std::move(trace));
  snapshot.execMappings = recorder.execMappings();
  return llvm::Error::success();
}

} // namespace magic_trace
