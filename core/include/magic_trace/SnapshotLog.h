//===- SnapshotLog.h - The snapshots a debugger session took ----*- C++ -*-===//
//
// What every host (the LLDB plugin, the GDB host) keeps of its snapshots and
// how it names, prints and saves them: the record of one snapshot, their
// numbering, the one-line summary a snapshot prints, and `save` in every
// format. Host-neutral: no debugger header.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SNAPSHOTLOG_H
#define MAGIC_TRACE_SNAPSHOTLOG_H

#include "magic_trace/GroundTruth.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/Snapshot.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

/// A snapshot taken, with its decoded model.
struct SnapshotRecord {
  unsigned number = 0;
  std::string reason; ///< "breakpoint 1", "exit", "command".
  std::string path;   ///< The file written, or empty.
  Snapshot snapshot;
  PipelineResult result;
  /// The window `result` was decoded in (Pipeline.h).
  WindowOptions window;
  /// Memory the record holds while kept: its model, its raw trace and its
  /// truth (SnapshotLog's budget counts it).
  uint64_t bytes = 0;
  /// Wall time from the recorder's bytes to the written file: decode,
  /// model, write (`--json`'s decodeSeconds; scripts/bench-busy.sh).
  double decodeSeconds = 0;
  /// The recorder's ground truth up to the snapshot (--ground-truth only).
  std::vector<ThreadTruth> truth;
  /// The snapshot, model and truth were released to keep the session's
  /// memory flat (SnapshotLog::setKeep); the summary and the file stay.
  bool released = false;
};

/// Decoded snapshots a session keeps in memory at most by default, within
/// the memory budget (docs/user-guide.md, "Long sessions").
constexpr unsigned kDefaultKeptSnapshots = 8;

/// The memory budget of kept snapshots by default: a 32nd of the machine's
/// memory (768 MiB on 24 GiB), at least 256 MiB. A windowed snapshot of
/// the default budget's 10 M slices holds about 300 MB.
uint64_t defaultSnapshotMemory();

/// The snapshots of a session, numbered from 1 in the order taken. The last
/// ones keep their decoded model and raw trace while they fit the memory
/// budget (and the count, keep()); older ones are released (their summary
/// line and file stay), so memory stays flat however many snapshots a
/// session takes and however big they are. The last snapshot is always
/// kept.
class SnapshotLog {
public:
  /// Numbers `record`, counts its bytes and keeps it; releases what falls
  /// out of the budget.
  SnapshotRecord &add(std::unique_ptr<SnapshotRecord> record);
  /// Before the next snapshot is decoded: releases the older kept ones
  /// that add() would release once a snapshot the size of the last one
  /// joined them, so that their pages go to the pool for that decode to
  /// take (PodVector.h) and the kept ones and the decode together stay
  /// within the budget. The last snapshot stays.
  void makeRoom();
  /// Once a snapshot of `recordBytes` (its model `modelBytes`) is decoded,
  /// before add(): the bytes of new pages the next decode would need for
  /// a model as big, beyond the pool's and those makeRoom() would then
  /// release. The session fills the pool with them while it writes
  /// (fillPagePool).
  uint64_t newPagesAfter(uint64_t recordBytes, uint64_t modelBytes) const;
  /// Snapshot `number` (0: the last one). Errors say how many there are.
  llvm::Expected<SnapshotRecord *> find(unsigned number);
  /// find(), for what needs the decoded snapshot (report, save). Errors
  /// also when it was released: one line saying where its trace is and how
  /// to keep more.
  llvm::Expected<SnapshotRecord *> findDecoded(unsigned number);
  /// How many decoded snapshots to keep at most (at least 1); releases
  /// older ones.
  void setKeep(unsigned count);
  unsigned keep() const { return kept; }
  /// The memory budget of kept snapshots, in bytes; releases older ones.
  void setMemory(uint64_t bytes);
  uint64_t memory() const { return budget; }
  /// Bytes the kept snapshots hold now, and how many are kept.
  uint64_t keptBytes() const;
  unsigned keptCount() const;
  size_t size() const { return records.size(); }
  /// The number the next snapshot will get.
  unsigned next() const { return unsigned(records.size()) + 1; }
  const std::vector<std::unique_ptr<SnapshotRecord>> &all() const {
    return records;
  }

private:
  /// Releases every kept snapshot but the last that does not fit the
  /// budget and the count beside `incoming` more snapshots of
  /// `incomingBytes` in all.
  void releaseOld(unsigned incoming = 0, uint64_t incomingBytes = 0);
  /// The first of the kept snapshots that stay beside `incoming` more of
  /// `incomingBytes` in all (`lastStays`: the last one always does); those
  /// before it are released.
  size_t keptFrom(unsigned incoming, uint64_t incomingBytes,
                  bool lastStays) const;
  /// The bytes of the kept snapshots before `from`.
  uint64_t releasedBy(size_t from) const;
  std::vector<std::unique_ptr<SnapshotRecord>> records;
  unsigned kept = kDefaultKeptSnapshots;
  uint64_t budget = defaultSnapshotMemory();
};

/// "kept in memory: snapshots 5-12 (8 of 12), 712 MB of the 768 MB budget"
/// (status).
std::string keptSnapshotsLine(const SnapshotLog &log);
/// The same for `status --json`: snapshots, bytes, budgetBytes,
/// maxSnapshots.
llvm::json::Value keptSnapshotsJson(const SnapshotLog &log);

/// Bytes `record` holds while kept: the model, the raw trace, the truth.
uint64_t recordBytes(const SnapshotRecord &record);

/// A snapshot in which nothing was decoded: a failure, not a snapshot.
bool snapshotFailed(const SnapshotRecord &record);

/// Writes `record`'s model to `path` (the format from its suffix) and sets
/// record.path; a failed snapshot (snapshotFailed) writes nothing.
llvm::Error writeSnapshotFile(SnapshotRecord &record, std::string path);

/// What a snapshot's file holds, in one line: "magic-trace: snapshot 8:
/// thread 4242, 9 threads in all, the last 14.200ms of 96.000ms, 9,612,345
/// slices, 0 errors -> FILE (open in ui.perfetto.dev)" (the thread that
/// hit the trigger first; "all 3.510ms" for a whole trace); with errors,
/// what they cost ("3 errors (2.1% of the trace not decoded)"); when the
/// budget cut the window, how to write the rest; for a failed snapshot,
/// "magic-trace: snapshot 7 failed: nothing was decoded (first error: ...;
/// what to do)".
std::string snapshotLine(const SnapshotRecord &record);

/// {number, reason, path, tid, spanNs, calls, errors, instructions,
/// decodeSeconds, window:
/// {lengthNs, traceNs, whole, cutByBudget, cutByTrace, maxTraceBytes,
/// slices, maxSlices, threads, decodedBytes, traceBytes, note}, summary}.
llvm::json::Value snapshotJson(const SnapshotRecord &record);

/// The model of `record` in `window`: the one it keeps when it was decoded
/// in that window, else its raw trace decoded again into `storage` (with
/// `symbols`, whose lock the caller holds). Errors: the record was
/// released (SnapshotLog::findDecoded's line), the pipeline's.
llvm::Expected<const PipelineResult *>
resultInWindow(SnapshotRecord &record, const WindowOptions &window,
               SymbolCache *symbols, std::optional<PipelineResult> &storage);

/// `pattern` with each %N replaced by `number`.
std::string expandPattern(llvm::StringRef pattern, unsigned number);

/// Writes `record` to `path` in `format`: fxt, json, folded (the model, or
/// `result`'s when given: another window of it, resultInWindow);
/// bundle (an LLDB intel-pt trace bundle in directory `path`, with the
/// ground truth when the record has it); perf (a per-thread perf.data).
/// An empty format comes from the suffix (.json, .folded, .data is perf,
/// else fxt). Returns the line to print. Errors: an unknown format, the
/// writers' errors.
llvm::Expected<std::string>
saveSnapshot(const SnapshotRecord &record, llvm::StringRef path,
             llvm::StringRef format, const PipelineResult *result = nullptr);

} // namespace magic_trace

#endif
