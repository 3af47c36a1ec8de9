//===- ProcessRecorder.cpp - One recording of a process, any backend ------===//
#include "magic_trace/ProcessRecorder.h"

#include "magic_trace/JitRecords.h"
#include "magic_trace/MachineFacts.h"
#include "magic_trace/PodVector.h"
#include "magic_trace/QemuRings.h"
#include "magic_trace/VirtualClock.h"

#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace magic_trace {

ProcessRecorder::~ProcessRecorder() = default;

namespace {

/// Moves the threads `stop` keeps, with trace, and their truth into place.
void keepThreads(const RecorderStop &stop, std::vector<ThreadTrace> &from,
                 std::vector<ThreadTruth> &fromTruth, Snapshot &snapshot,
                 std::vector<ThreadTruth> &truth) {
  for (size_t i = 0; i < from.size(); ++i) {
    ThreadTrace &trace = from[i];
    if (!stop.keeps(trace.tid) || trace.bytes.empty())
      continue;
    if (i < fromTruth.size())
      truth.push_back(std::move(fromTruth[i]));
    snapshot.threads.push_back(std::move(trace));
  }
}

// --- perf -----------------------------------------------------------------

class PerfProcessRecorder final : public ProcessRecorder {
public:
  explicit PerfProcessRecorder(std::unique_ptr<PerfRecorder> recorder)
      : recorder(std::move(recorder)), machineCpu(this->recorder->cpu()) {}

  llvm::StringRef backend() const override { return "perf"; }
  bool recordsWhileRunning() const override { return true; }
  uint64_t bufferBytes() const override { return recorder->plan().auxBytes; }
  bool perCpuBuffers() const override { return true; }
  // The packets come from this machine's CPU, whose errata libipt applies.
  CpuIdentity cpu() const override { return machineCpu; }

  llvm::Error snapshot(const RecorderStop &stop, Snapshot &snapshot,
                       std::vector<ThreadTruth> &truth) override {
    snapshot.cpu = machineCpu;
    return fillPerfSnapshot(
        *recorder, [&](uint64_t tid) { return stop.keeps(tid); }, snapshot);
  }

  /// The threads the kernel traces; how much each wrote is known only at a
  /// snapshot (their trace shares the CPUs' rings).
  std::vector<RecorderThreadStatus> threads() const override {
    std::vector<RecorderThreadStatus> threads;
    for (uint64_t tid : recorder->threadIds()) {
      RecorderThreadStatus thread;
      thread.tid = tid;
      threads.push_back(thread);
    }
    return threads;
  }

  std::vector<std::string> statusLines() const override {
    std::string line;
    llvm::raw_string_ostream os(line);
    os << "  Intel PT: " << recorder->plan().cpus << " CPU rings of "
       << (recorder->plan().auxBytes >> 10) << " KiB, threads";
    for (uint64_t tid : recorder->threadIds())
      os << " " << tid;
    std::string sideband;
    llvm::raw_string_ostream sidebandOs(sideband);
    sidebandOs << "  sideband: " << (recorder->plan().dataBytes >> 10)
               << " KiB per CPU, read as the process runs";
    if (uint64_t lost = recorder->lostSidebandRecords())
      sidebandOs << "; the kernel lost " << lost
                 << " records (the trace has gaps there)";
    std::vector<std::string> lines = {line, sideband};
    if (uint64_t lost = recorder->lostPieces())
      lines.push_back("  the last snapshot has " + std::to_string(lost) +
                      (lost == 1 ? " piece" : " pieces") +
                      " of trace the kernel marked lost (gaps in the trace)");
    return lines;
  }

private:
  std::unique_ptr<PerfRecorder> recorder;
  CpuIdentity machineCpu;
};

// --- qemu -----------------------------------------------------------------

class QemuProcessRecorder final : public ProcessRecorder {
public:
  QemuProcessRecorder(std::string ringDir, bool keepTruth,
                      QemuRingStatus status)
      : ringDir(std::move(ringDir)), keepTruth(keepTruth),
        ringSize(status.ringSize), recorderCpu(emulatorCpu()) {}

  llvm::StringRef backend() const override { return "qemu"; }
  bool recordsWhileRunning() const override { return true; }
  uint64_t bufferBytes() const override { return ringSize; }
  CpuIdentity cpu() const override { return recorderCpu; }

  llvm::Error snapshot(const RecorderStop &stop, Snapshot &snapshot,
                       std::vector<ThreadTruth> &truth) override {
    // The threads wait where their traces end until the copy is made: the
    // debugger may not hold them (GDB's stop does not).
    uint32_t held = 0;
    notAtStop.clear();
    if (stop.alive) {
      if (llvm::Error error =
              flushQemuRings(ringDir, stop.pcs, qemuAnswerDeadline(keepTruth),
                             &held, &notAtStop, stop.othersRun)) {
        releaseQemuRings(ringDir, held);
        return error;
      }
    }
    llvm::Expected<QemuRecording> recording = readQemuRings(ringDir, keepTruth);
    if (held)
      releaseQemuRings(ringDir, held);
    if (!recording)
      return recording.takeError();
    Snapshot &read = recording->snapshot;
    snapshot.pid = read.pid;
    snapshot.cpu = read.cpu;
    snapshot.time = read.time;
    snapshot.timing = read.timing;
    // The code as it ran (the recorder's code log): what the debugger
    // lists now may have lost a library the trace ran in, or JIT code
    // since rewritten.
    snapshot.code = std::move(read.code);
    snapshot.notes = std::move(read.notes);
    // A ground truth asked for and missing is said, not only left out.
    if (!recording->truthNote.empty())
      snapshot.notes.push_back(recording->truthNote);
    // The recorder's own list (DIR/maps) where the host has none.
    if (snapshot.modules.empty())
      snapshot.modules = std::move(read.modules);
    keepThreads(stop, read.threads, recording->truth, snapshot, truth);
    return llvm::Error::success();
  }

  std::vector<RecorderThreadStatus> threads() const override {
    llvm::Expected<QemuRingStatus> status = readQemuRingStatus(ringDir);
    if (!status) {
      llvm::consumeError(status.takeError());
      return {};
    }
    std::vector<RecorderThreadStatus> threads;
    for (const QemuThreadSlot &slot : status->threads) {
      RecorderThreadStatus thread;
      thread.tid = slot.tid;
      thread.instructions = slot.instructions;
      thread.exited = slot.state == uint32_t(QemuThreadState::Done);
      threads.push_back(thread);
    }
    return threads;
  }

  std::vector<uint64_t> threadsNotAtStop() const override { return notAtStop; }

private:
  std::string ringDir;
  bool keepTruth;
  uint64_t ringSize;
  CpuIdentity recorderCpu;
  std::vector<uint64_t> notAtStop;
};

} // namespace

llvm::Expected<SnapshotRecord *> recordSnapshot(ProcessRecorder &recorder,
                                                SnapshotRequest request,
                                                SnapshotLog &log,
                                                SymbolCache *symbols) {
  auto record = std::make_unique<SnapshotRecord>();
  record->reason = std::move(request.reason);
  Snapshot &snapshot = record->snapshot;
  snapshot.pid = request.pid;
  snapshot.processName = std::move(request.processName);
  snapshot.modules = std::move(request.modules);
  if (llvm::Error error =
          recorder.snapshot(request.stop, snapshot, record->truth))
    return std::move(error);
  if (snapshot.threads.empty())
    return llvm::createStringError(request.nothingRecorded);
  // The QEMU recorder logs all its code and names it; the others get the
  // code outside files as at the stop, after what they logged, and its
  // names from the process's perf map and jitdump. On the perf backend the
  // trace's clock is the CPU's TSC, so a jitdump stamped with it also gives
  // the code of each moment before the stop (JitCode::ByTime); the
  // emulator's clock is its own, so there it gives names only.
  if (recorder.backend() != "qemu" && snapshot.pid) {
    bool perf = recorder.backend() == "perf";
    size_t logged = snapshot.code.changes.size();
    if (request.readMemory && request.stop.alive)
      addCodeAtStop(snapshot.pid, request.readMemory, snapshot);
    // On the perf backend the kernel's clock says since when each piece of
    // that code was there, and a TSC-stamped jitdump when older ones were.
    if (perf)
      timeCodeAtStop(snapshot, logged);
    if (!snapshot.code.changes.empty()) {
      JitRecordNotes jit =
          addJitRecords(snapshot.pid, jitRecordDirs(snapshot.pid),
                        perf ? JitCode::ByTime : JitCode::NamesOnly,
                        snapshot.code, perf ? &snapshot.time : nullptr);
      llvm::append_range(snapshot.notes, jit.skipped);
      llvm::append_range(snapshot.notes, jit.unused);
      if (perf)
        orderChangesByTime(snapshot.code);
    }
  }
  snapshot.stop = std::move(request.stacks);
  // A thread that ran on after the stop (the debugger did not hold it):
  // its stack at the stop is not where its trace ends.
  for (uint64_t tid : recorder.threadsNotAtStop())
    llvm::erase_if(snapshot.stop, [&](const ThreadStop &stop) {
      return stop.tid == tid && !stop.triggered;
    });
  log.makeRoom();
  auto began = std::chrono::steady_clock::now();
  llvm::Expected<PipelineResult> result =
      runPipeline(snapshot, request.pipeline, symbols);
  if (!result)
    return result.takeError();
  record->result = std::move(*result);
  record->window = request.pipeline.window;
  // The snapshot is written on one core: the other makes pages ready for
  // the next decode.
  fillPagePool(log.newPagesAfter(recordBytes(*record),
                                 record->result.modelStats.modelBytes));
  if (llvm::Error error = writeSnapshotFile(*record, request.path))
    return std::move(error);
  record->decodeSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  return &log.add(std::move(record));
}

llvm::Expected<std::unique_ptr<ProcessRecorder>>
startPerfRecorder(uint64_t pid, const std::vector<uint64_t> &tids,
                  const PerfStartOptions &options,
                  std::vector<std::string> &notes) {
  llvm::Expected<std::unique_ptr<PerfRecorder>> recorder =
      startPerfRecording(pid, tids, options, notes);
  if (!recorder)
    return recorder.takeError();
  return std::make_unique<PerfProcessRecorder>(std::move(*recorder));
}

llvm::Expected<std::unique_ptr<ProcessRecorder>>
openQemuRecorder(std::string ringDir, bool keepTruth) {
  llvm::Expected<QemuRingStatus> status = readQemuRingStatus(ringDir);
  if (!status)
    return status.takeError();
  return std::make_unique<QemuProcessRecorder>(std::move(ringDir), keepTruth,
                                               std::move(*status));
}

// --- emulate ----------------------------------------------------------------

EmulateRecorder::EmulateRecorder(PacketWriter::Options options, bool keepTruth)
    : writerOptions(options), keepTruth(keepTruth) {}

CpuIdentity EmulateRecorder::cpu() const { return emulatorCpu(); }

llvm::Expected<SteppedThread *> EmulateRecorder::thread(uint64_t tid) {
  auto it = threadsByTid.find(tid);
  if (it != threadsByTid.end())
    return &it->second;
  llvm::Expected<std::unique_ptr<PacketWriter>> writer =
      PacketWriter::create(writerOptions);
  if (!writer)
    return writer.takeError();
  SteppedThread &thread = threadsByTid[tid];
  thread.tid = tid;
  thread.writer = std::move(*writer);
  if (keepTruth) {
    thread.truth.emplace();
    thread.truth->tid = tid;
  }
  return &thread;
}

llvm::Error EmulateRecorder::snapshot(const RecorderStop &stop,
                                      Snapshot &snapshot,
                                      std::vector<ThreadTruth> &truth) {
  snapshot.cpu = emulatorCpu();
  snapshot.time = VirtualClock::conversion();
  snapshot.timing = VirtualClock::timing;
  for (auto &[tid, thread] : threadsByTid) {
    if (!stop.keeps(tid) || !thread.writer ||
        thread.writer->buffer().written() == 0)
      continue;
    ThreadTrace trace;
    trace.tid = tid;
    trace.bytes = thread.writer->buffer().snapshot();
    trace.wrapped = thread.writer->buffer().wrapped();
    trace.imageMarks = thread.marks.inSnapshot(thread.writer->buffer());
    snapshot.threads.push_back(std::move(trace));
    if (thread.truth)
      truth.push_back(*thread.truth);
  }
  // The code outside files the stepper ran, each version of it
  // (recordSnapshot adds its names).
  snapshot.code = codeLog.history();
  if (!codeLog.note().empty())
    snapshot.notes.push_back(codeLog.note());
  return llvm::Error::success();
}

std::vector<RecorderThreadStatus> EmulateRecorder::threads() const {
  std::vector<RecorderThreadStatus> threads;
  for (const auto &[tid, thread] : threadsByTid) {
    RecorderThreadStatus status;
    status.tid = tid;
    status.instructions = thread.writer->instructions();
    status.bytes = thread.writer->buffer().written();
    status.wrapped = thread.writer->buffer().wrapped();
    status.exited = thread.gone;
    threads.push_back(status);
  }
  return threads;
}

} // namespace magic_trace
