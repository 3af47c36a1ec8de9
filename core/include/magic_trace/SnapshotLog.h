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
  /// The recorder's ground truth up to the snapshot (--ground-truth only).
  std::vector<ThreadTruth> truth;
  /// The snapshot, model and truth were released to keep the session's
  /// memory flat (SnapshotLog::setKeep); the summary and the file stay.
  bool released = false;
};

/// Decoded snapshots a session keeps in memory by default: a full 4 MiB
/// ring decodes to about 8 MB of model, so 8 of them are ~64 MB whatever
/// the session's length (docs/user-guide.md, "Long sessions").
constexpr unsigned kDefaultKeptSnapshots = 8;

/// The snapshots of a session, numbered from 1 in the order taken. Only the
/// last `keep()` keep their decoded model: older ones are released (their
/// summary line and file stay), so memory stays flat however many
/// snapshots a session takes.
class SnapshotLog {
public:
  /// Numbers `record` and keeps it; releases the one that falls out of the
  /// last keep().
  SnapshotRecord &add(std::unique_ptr<SnapshotRecord> record);
  /// Snapshot `number` (0: the last one). Errors say how many there are.
  llvm::Expected<SnapshotRecord *> find(unsigned number);
  /// find(), for what needs the decoded snapshot (report, save). Errors
  /// also when it was released: one line saying where its trace is and how
  /// to keep more.
  llvm::Expected<SnapshotRecord *> findDecoded(unsigned number);
  /// How many decoded snapshots to keep (at least 1); releases older ones.
  void setKeep(unsigned count);
  unsigned keep() const { return kept; }
  size_t size() const { return records.size(); }
  /// The number the next snapshot will get.
  unsigned next() const { return unsigned(records.size()) + 1; }
  const std::vector<std::unique_ptr<SnapshotRecord>> &all() const {
    return records;
  }

private:
  void releaseOld();
  std::vector<std::unique_ptr<SnapshotRecord>> records;
  unsigned kept = kDefaultKeptSnapshots;
};

/// A snapshot in which nothing was decoded: a failure, not a snapshot.
bool snapshotFailed(const SnapshotRecord &record);

/// Writes `record`'s model to `path` (the format from its suffix) and sets
/// record.path; a failed snapshot (snapshotFailed) writes nothing.
llvm::Error writeSnapshotFile(SnapshotRecord &record, std::string path);

/// "magic-trace: snapshot 1: thread 4242, 3.51ms, 115,709 calls, 0 errors
/// -> FILE (open in ui.perfetto.dev)"; with errors, what they cost ("3
/// errors (2.1% of the trace not decoded)"); for a failed snapshot,
/// "magic-trace: snapshot 7 failed: nothing was decoded (first error: ...;
/// what to do)".
std::string snapshotLine(const SnapshotRecord &record);

/// {number, reason, path, tid, spanNs, calls, errors, instructions, summary}.
llvm::json::Value snapshotJson(const SnapshotRecord &record);

/// `pattern` with each %N replaced by `number`.
std::string expandPattern(llvm::StringRef pattern, unsigned number);

/// 1234567 -> "1,234,567".
std::string withCommas(uint64_t value);

/// Writes `record` to `path` in `format`: fxt, json, folded (the model);
/// bundle (an LLDB intel-pt trace bundle in directory `path`, with the
/// ground truth when the record has it); perf (a per-thread perf.data).
/// An empty format comes from the suffix (.json, .folded, .data is perf,
/// else fxt). Returns the line to print. Errors: an unknown format, the
/// writers' errors.
llvm::Expected<std::string> saveSnapshot(const SnapshotRecord &record,
                                         llvm::StringRef path,
                                         llvm::StringRef format);

} // namespace magic_trace

#endif
