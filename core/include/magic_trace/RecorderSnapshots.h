//===- RecorderSnapshots.h - The QEMU recorder's own snapshots --*- C++ -*-===//
//
// A recorder trigger (docs/qemu.md, "Triggers in the recorder") writes a
// bundle DIR/snap-N with every ring copied. This is what a debugger host
// does with them, the same for LLDB and GDB: a worker thread of the host
// decodes each one as it arrives (loads it with the code log up to its
// trigger, decodes, symbolizes, writes the trigger's output file), adds it
// to the session's SnapshotLog, removes its directory and tells the
// recorder, so that at most `maxPending` copies wait on disk (a hit beyond
// waits for room up to `waitMs`, then is skipped; both are counted). The
// host prints the lines at its next stop, exit or status.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RECORDERSNAPSHOTS_H
#define MAGIC_TRACE_RECORDERSNAPSHOTS_H

#include "magic_trace/SnapshotLog.h"
#include "magic_trace/Symbolizer.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace magic_trace {

/// Snapshots that may wait on disk by default: each is a copy of every ring
/// (ring size x threads), so 4 of them bound the ring directory to 4 times
/// the rings themselves.
constexpr uint32_t kDefaultPendingSnapshots = 4;
/// How long a trigger hit waits for room by default before it is skipped:
/// long enough for a full ring's decode, short enough that a debugger's
/// stop request is not held up for long.
constexpr uint32_t kDefaultTriggerWaitMs = 5000;

class RecorderSnapshots {
public:
  struct Host {
    /// The modules to decode with (the debugger's list at its last stop;
    /// the code log fills in what changed), and the process's name. Called
    /// on the worker thread, with the session's lock held.
    std::function<std::vector<Module>()> modules;
    std::function<std::string()> processName;
    /// The output file of snapshot `number`, taken at the trigger at
    /// `address`, counting the hit ("" for none). Called with the
    /// session's lock held.
    std::function<std::string(uint64_t address, unsigned number)> outputPath;
    /// The window of the trigger at `address` (snapshot-on --window,
    /// --max-slices); empty: the default. Called with the session's lock
    /// held.
    std::function<WindowOptions(uint64_t address)> window;
  };

  /// `log` and `symbols` (may be null) are the session's; the worker uses
  /// them with `sessionLock` held, which the host holds too whenever it
  /// uses them.
  RecorderSnapshots(std::string ringDir, SnapshotLog &log,
                    std::mutex &sessionLock, SymbolCache *symbols, Host host,
                    uint32_t maxPending = kDefaultPendingSnapshots,
                    uint32_t waitMs = kDefaultTriggerWaitMs);
  ~RecorderSnapshots();
  RecorderSnapshots(const RecorderSnapshots &) = delete;
  RecorderSnapshots &operator=(const RecorderSnapshots &) = delete;

  /// Starts the worker (once); until then nothing is decoded but by
  /// collect().
  void start();

  /// Decodes every snapshot waiting now on the caller's thread (at a stop,
  /// at exit, for status: the process may be gone) and returns the lines of
  /// every snapshot decoded since the last call, the worker's too, in order
  /// (with `json`, each followed by its JSON). Call without the session's
  /// lock.
  std::vector<std::string> collect(bool json);

  struct Status {
    uint32_t written = 0; ///< Snapshots the recorder wrote.
    uint32_t decoded = 0;
    uint32_t waiting = 0; ///< Written and not decoded yet (on disk).
    uint32_t skipped = 0; ///< Hits skipped: `maxPending` were waiting.
    uint32_t maxPending = 0;
    uint64_t waitedNs = 0; ///< Time hits waited for room.
  };
  Status status() const;

  /// "magic-trace: 12 triggers skipped while decoding (...)" when some were
  /// skipped since the last call, else "".
  std::string skippedLine();

private:
  /// Decodes snapshot `decoded + 1`; false when none is waiting.
  bool decodeNext();
  void work();

  std::string ringDir;
  SnapshotLog &log;
  std::mutex &sessionLock;
  SymbolCache *symbols;
  Host host;
  uint32_t maxPending;
  uint32_t waitMs;
  /// Guards `decoded` and `lines`; decodeNext runs one at a time.
  mutable std::mutex lock;
  std::mutex decoding;
  uint32_t decoded = 0;
  uint32_t skippedReported = 0;
  std::vector<std::string> lines;
  std::vector<unsigned> jsonPending; ///< Numbers whose JSON to print.
  std::atomic<bool> stopping{false};
  std::condition_variable wake;
  std::mutex wakeLock;
  std::thread worker;
};

} // namespace magic_trace

#endif
