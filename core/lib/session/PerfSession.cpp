//===- PerfSession.cpp - The perf backend, for any debugger host ----------===//
#include "magic_trace/PerfSession.h"

namespace magic_trace {

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
  return llvm::Error::success();
}

} // namespace magic_trace
