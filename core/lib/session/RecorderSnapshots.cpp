//===- RecorderSnapshots.cpp - The QEMU recorder's own snapshots ----------===//
#include "magic_trace/RecorderSnapshots.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/GroundTruth.h"
#include "magic_trace/PodVector.h"
#include "magic_trace/QemuRings.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace magic_trace {

RecorderSnapshots::RecorderSnapshots(std::string ringDir, SnapshotLog &log,
                                     std::mutex &sessionLock,
                                     SymbolCache *symbols, Host host,
                                     uint32_t maxPending, uint32_t waitMs)
    : ringDir(std::move(ringDir)), log(log), sessionLock(sessionLock),
      symbols(symbols), host(std::move(host)), maxPending(maxPending),
      waitMs(waitMs) {
  // Snapshots a session before this one decoded (attach again) count as
  // collected: only new ones are this object's.
  decoded = qemuTriggerSnapshots(this->ringDir);
  if (llvm::Error error =
          setQemuTriggersCollected(this->ringDir, decoded, maxPending, waitMs))
    llvm::consumeError(std::move(error));
}

RecorderSnapshots::~RecorderSnapshots() {
  stopping = true;
  wake.notify_all();
  if (worker.joinable())
    worker.join();
}

void RecorderSnapshots::start() {
  if (!worker.joinable())
    worker = std::thread([this] { work(); });
}

void RecorderSnapshots::work() {
  bool published = false;
  while (!stopping) {
    // The bound reaches a recorder whose header appeared after this object
    // (a session made as QEMU starts).
    if (!published) {
      uint32_t done = 0;
      {
        std::lock_guard<std::mutex> hold(lock);
        done = decoded;
      }
      llvm::Error error =
          setQemuTriggersCollected(ringDir, done, maxPending, waitMs);
      published = !error;
      llvm::consumeError(std::move(error));
    }
    while (!stopping && decodeNext()) {
    }
    uint32_t seen = 0;
    {
      std::lock_guard<std::mutex> hold(lock);
      seen = decoded;
    }
    // Woken by the recorder as it writes the next snapshot (the program
    // waits for it meanwhile); at most 20 ms, for `stopping`. Without a
    // header (not there yet, or gone), every 20 ms.
    if (published && waitForQemuTriggerSnapshot(ringDir, seen,
                                                std::chrono::milliseconds(20)))
      continue;
    std::unique_lock<std::mutex> hold(wakeLock);
    wake.wait_for(hold, std::chrono::milliseconds(20));
  }
}

bool RecorderSnapshots::decodeNext() {
  std::lock_guard<std::mutex> one(decoding);
  uint32_t number = 0;
  {
    std::lock_guard<std::mutex> hold(lock);
    number = decoded + 1;
  }
  if (qemuTriggerSnapshots(ringDir) < number)
    return false;
  std::string dir = qemuTriggerSnapshotDir(ringDir, number);
  std::string line;
  unsigned added = 0;
  llvm::Expected<Snapshot> loaded = loadBundle(dir);
  if (!loaded) {
    line = "error: magic-trace: recorder snapshot in " + dir + ": " +
           llvm::toString(loaded.takeError());
  } else {
    auto record = std::make_unique<SnapshotRecord>();
    record->snapshot = std::move(*loaded);
    std::vector<uint64_t> tids;
    for (const ThreadTrace &thread : record->snapshot.threads)
      tids.push_back(thread.tid);
    record->truth = readGroundTruthOf(dir, tids);
    uint64_t address = qemuTriggerSnapshotAddress(dir);
    record->reason = llvm::formatv("recorder trigger {0:x}", address).str();
    std::lock_guard<std::mutex> session(sessionLock);
    record->snapshot.modules = host.modules();
    record->snapshot.processName = host.processName();
    PipelineOptions options;
    // The program waits while this decodes (the recorder's
    // holdWhileDecoded, when waitMs allows it): its threads, running a
    // moment ago, are not the competitors /proc/loadavg would count, and
    // the decoder takes every core (8 busy threads had left it 1 worker).
    if (waitMs)
      options.decode.threads =
          std::max(1u, std::thread::hardware_concurrency());
    if (host.window)
      options.window = host.window(address);
    record->window = options.window;
    log.makeRoom();
    auto began = std::chrono::steady_clock::now();
    llvm::Expected<PipelineResult> result =
        runPipeline(record->snapshot, options, symbols);
    if (!result) {
      line = "error: magic-trace: " + llvm::toString(result.takeError());
    } else {
      record->result = std::move(*result);
      // The snapshot is written on one core: the other makes pages ready
      // for the next decode.
      fillPagePool(log.newPagesAfter(recordBytes(*record),
                                     record->result.modelStats.modelBytes));
      std::string path = host.outputPath(address, log.next());
      llvm::Error written = writeSnapshotFile(*record, path);
      record->decodeSeconds = std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - began)
                                  .count();
      SnapshotRecord &kept = log.add(std::move(record));
      line = snapshotLine(kept);
      added = kept.number;
      if (written)
        line += "\nerror: magic-trace: " + llvm::toString(std::move(written));
    }
  }
  // Decoded (or not decodable): its copy of the rings goes, and the
  // recorder may write another.
  llvm::sys::fs::remove_directories(dir);
  {
    std::lock_guard<std::mutex> hold(lock);
    decoded = number;
    lines.push_back(std::move(line));
    jsonPending.push_back(added);
  }
  if (llvm::Error error =
          setQemuTriggersCollected(ringDir, number, maxPending, waitMs))
    llvm::consumeError(std::move(error));
  return true;
}

std::vector<std::string> RecorderSnapshots::collect(bool json) {
  while (decodeNext()) {
  }
  std::vector<std::string> taken;
  std::vector<unsigned> numbers;
  {
    std::lock_guard<std::mutex> hold(lock);
    taken.swap(lines);
    numbers.swap(jsonPending);
  }
  std::vector<std::string> result;
  std::lock_guard<std::mutex> session(sessionLock);
  for (size_t i = 0; i < taken.size(); ++i) {
    result.push_back(std::move(taken[i]));
    if (!json || !numbers[i])
      continue;
    llvm::Expected<SnapshotRecord *> record = log.find(numbers[i]);
    if (!record) {
      llvm::consumeError(record.takeError());
      continue;
    }
    std::string text;
    llvm::raw_string_ostream os(text);
    os << snapshotJson(**record);
    result.push_back(text);
  }
  std::string skipped = skippedLine();
  if (!skipped.empty())
    result.push_back(skipped);
  return result;
}

RecorderSnapshots::Status RecorderSnapshots::status() const {
  Status status;
  status.maxPending = maxPending;
  llvm::Expected<QemuRingStatus> rings = readQemuRingStatus(ringDir);
  if (rings) {
    status.written = rings->triggerSnapshots;
    status.skipped = rings->triggersSkipped;
    status.waitedNs = rings->triggerWaitNs;
  } else {
    llvm::consumeError(rings.takeError());
  }
  std::lock_guard<std::mutex> hold(lock);
  status.decoded = decoded;
  status.waiting = status.written > decoded ? status.written - decoded : 0;
  return status;
}

std::string RecorderSnapshots::skippedLine() {
  Status now = status();
  if (now.skipped <= skippedReported)
    return "";
  uint32_t skipped = now.skipped - skippedReported;
  skippedReported = now.skipped;
  return llvm::formatv("magic-trace: {0} {1} skipped while decoding (a hit "
                       "waits up to {2} ms while {3} snapshots wait to be "
                       "decoded, then is skipped; each snapshot taken is "
                       "exact)",
                       skipped, skipped == 1 ? "trigger" : "triggers", waitMs,
                       now.maxPending)
      .str();
}

} // namespace magic_trace
