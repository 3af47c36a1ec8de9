//===- SnapshotLog.cpp - The snapshots a debugger session took ------------===//
#include "magic_trace/SnapshotLog.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/PerfData.h"
#include "magic_trace/PodVector.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <malloc.h>
#include <unistd.h>

namespace magic_trace {
namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(message.str());
}

} // namespace

uint64_t defaultSnapshotMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  uint64_t total = pages > 0 && pageSize > 0 ? uint64_t(pages) * pageSize : 0;
  return std::max<uint64_t>(total / 32, uint64_t(256) << 20);
}

uint64_t recordBytes(const SnapshotRecord &record) {
  uint64_t bytes = sizeof(SnapshotRecord);
  for (const ThreadModel &thread : record.result.model.threads)
    bytes += threadModelBytes(thread);
  for (const ThreadTrace &thread : record.snapshot.threads)
    bytes += thread.bytes.capacity() +
             thread.imageMarks.capacity() * sizeof(ImageMark);
  for (const CodeChange &change : record.snapshot.code.changes)
    bytes += sizeof(CodeChange) + change.bytes.capacity();
  for (const ThreadTruth &truth : record.truth)
    bytes += truth.insns.capacity() * sizeof(uint64_t) +
             truth.events.capacity() * sizeof(TruthEvent);
  return bytes;
}

SnapshotRecord &SnapshotLog::add(std::unique_ptr<SnapshotRecord> record) {
  record->number = next();
  record->bytes = recordBytes(*record);
  records.push_back(std::move(record));
  releaseOld();
  return *records.back();
}

void SnapshotLog::setKeep(unsigned count) {
  kept = std::max(1u, count);
  releaseOld();
}

void SnapshotLog::setMemory(uint64_t bytes) {
  budget = bytes;
  releaseOld();
}

uint64_t SnapshotLog::keptBytes() const {
  uint64_t bytes = 0;
  for (const auto &record : records)
    if (!record->released)
      bytes += record->bytes;
  return bytes;
}

unsigned SnapshotLog::keptCount() const {
  unsigned count = 0;
  for (const auto &record : records)
    count += !record->released;
  return count;
}

llvm::json::Value keptSnapshotsJson(const SnapshotLog &log) {
  return llvm::json::Object{{"snapshots", int64_t(log.keptCount())},
                            {"bytes", int64_t(log.keptBytes())},
                            {"budgetBytes", int64_t(log.memory())},
                            {"maxSnapshots", int64_t(log.keep())},
                            {"pooledBytes", int64_t(pagePoolBytes())}};
}

std::string keptSnapshotsLine(const SnapshotLog &log) {
  unsigned kept = log.keptCount();
  std::string text = "kept in memory for report and save: ";
  if (kept == 0)
    return text + "none";
  unsigned first = unsigned(log.size()) - kept + 1;
  text += kept == 1 ? "snapshot " + std::to_string(first)
                    : "snapshots " + std::to_string(first) + "-" +
                          std::to_string(log.size());
  text += llvm::formatv(" ({0} of {1}), {2} MB of the {3} MB budget (at most "
                        "{4} snapshots)",
                        kept, log.size(), (log.keptBytes() + (1 << 19)) >> 20,
                        log.memory() >> 20, log.keep())
              .str();
  // Pages of released models, and those made ready while a core was free,
  // which the next decode takes (PodVector.h).
  if (size_t pooled = pagePoolBytes())
    text += llvm::formatv("; {0} MB of pages kept ready for the next "
                          "decode (at most half the budget)",
                          (pooled + (1 << 19)) >> 20)
                .str();
  return text;
}

void SnapshotLog::makeRoom() {
  // The decode takes both cores, and the pool's pages as they are.
  stopPagePoolFill();
  if (!records.empty() && !records.back()->released)
    releaseOld(1, records.back()->bytes);
}

uint64_t SnapshotLog::newPagesAfter(uint64_t recordBytes,
                                    uint64_t modelBytes) const {
  // As makeRoom() will count once that snapshot is the last one.
  uint64_t have = releasedBy(keptFrom(2, 2 * recordBytes, false));
  have += pagePoolBytes();
  return modelBytes > have ? modelBytes - have : 0;
}

size_t SnapshotLog::keptFrom(unsigned incoming, uint64_t incomingBytes,
                             bool lastStays) const {
  // The newest that fit the budget and the count stay; as the bytes and
  // the count only grow going back, every one before the first that does
  // not fit goes.
  uint64_t bytes = incomingBytes;
  unsigned count = incoming;
  for (size_t i = records.size(); i-- > 0;) {
    const SnapshotRecord &record = *records[i];
    if (record.released)
      return i + 1; // The ones before it were released already.
    bytes += record.bytes;
    ++count;
    bool last = lastStays && i + 1 == records.size();
    if (!last && (count > kept || bytes > budget))
      return i + 1;
  }
  return 0;
}

uint64_t SnapshotLog::releasedBy(size_t from) const {
  uint64_t bytes = 0;
  for (size_t i = from; i-- > 0 && !records[i]->released;)
    bytes += records[i]->bytes;
  return bytes;
}

void SnapshotLog::releaseOld(unsigned incoming, uint64_t incomingBytes) {
  // A released model's large arrays go to the page pool, for the next
  // decode to take (PodVector.h): at most half the budget, 512 MiB.
  setPagePoolLimit(std::min<uint64_t>(budget / 2, uint64_t(512) << 20));
  size_t from = keptFrom(incoming, incomingBytes, true);
  bool released = false;
  for (size_t i = from; i-- > 0 && !records[i]->released;) {
    SnapshotRecord &record = *records[i];
    record.snapshot = Snapshot();
    record.result.model = TraceModel();
    record.truth = {};
    record.released = released = true;
  }
  // Give the freed pages back to the system, so that the process's size
  // (what a user sees) stays flat too.
  if (released)
    malloc_trim(0);
}

llvm::Expected<SnapshotRecord *> SnapshotLog::findDecoded(unsigned number) {
  llvm::Expected<SnapshotRecord *> record = find(number);
  if (!record || !(*record)->released)
    return record;
  return failure(llvm::formatv(
      "snapshot {0} was released to keep the session's memory flat (it "
      "keeps the last {1} decoded within {2} MB{3}; keep more with "
      "--keep-snapshots N or --keep-memory SIZE on 'magic-trace run' or "
      "'attach')",
      (*record)->number, kept, budget >> 20,
      (*record)->path.empty() ? std::string()
                              : "; its trace is in " + (*record)->path));
}

bool snapshotFailed(const SnapshotRecord &record) {
  const ThreadSummary *thread = record.result.mainThread();
  return !thread || thread->instructions == 0;
}

llvm::Error writeSnapshotFile(SnapshotRecord &record, std::string path) {
  if (snapshotFailed(record) || path.empty())
    return llvm::Error::success();
  if (llvm::Error error = writeTraceFile(record.result.model, path))
    return error;
  record.path = std::move(path);
  return llvm::Error::success();
}

llvm::Expected<SnapshotRecord *> SnapshotLog::find(unsigned number) {
  if (records.empty())
    return failure("no snapshot yet (take one with 'magic-trace snapshot' or "
                   "'magic-trace snapshot-on' and 'magic-trace continue')");
  if (number == 0)
    return records.back().get();
  if (number > records.size())
    return failure(llvm::formatv("no snapshot {0} (there are {1}; see "
                                 "'magic-trace status')",
                                 number, records.size()));
  return records[number - 1].get();
}

/// The failure line of a snapshot in which nothing was decoded.
std::string failureLine(const SnapshotRecord &record) {
  std::string line;
  llvm::raw_string_ostream os(line);
  os << "magic-trace: snapshot " << record.number
     << " failed: nothing was decoded";
  const ThreadSummary *thread = record.result.mainThread();
  if (!thread) {
    os << " (no thread has trace; continue the process longer before it)";
    return line;
  }
  os << " in thread " << thread->tid << "'s " << withCommas(thread->traceBytes)
     << " bytes of trace (";
  if (!thread->firstError.empty())
    os << "first error: " << thread->firstError << "; ";
  os << "check that the modules it ran are readable ('magic-trace status' "
        "and the warnings above), or record again)";
  return line;
}

/// "thread 4242, 9 threads in all" (the trigger's, else the busiest; the
/// count of threads in the window when it is more than one).
std::string threadsPart(const SnapshotRecord &record) {
  const ThreadSummary *thread = record.result.mainThread();
  std::string text = "thread " + std::to_string(thread->tid);
  unsigned threads = record.result.window.threads;
  if (threads > 1)
    text += ", " + std::to_string(threads) + " threads in all";
  return text;
}

/// "the last 14.200ms of 96.000ms", or "all 3.510ms".
std::string windowPart(const WindowSummary &window) {
  if (window.whole)
    return "all " + formatDuration(window.traceNs);
  return "the last " + formatDuration(window.lengthNs) + " of " +
         formatDuration(window.traceNs);
}

std::string snapshotLine(const SnapshotRecord &record) {
  if (snapshotFailed(record))
    return failureLine(record);
  std::string line;
  llvm::raw_string_ostream os(line);
  const WindowSummary &window = record.result.window;
  uint64_t errors = 0, undecoded = 0, bytes = 0, estimated = 0,
           instructions = 0;
  for (const ThreadSummary &thread : record.result.threads) {
    errors += thread.errors;
    undecoded += thread.undecodedBytes;
    bytes += thread.traceBytes;
    estimated += thread.estimatedInstructions;
    instructions += thread.instructions;
  }
  os << "magic-trace: snapshot " << record.number << ": " << threadsPart(record)
     << ", " << windowPart(window) << ", " << withCommas(window.slices)
     << " slices, " << withCommas(errors) << " errors";
  if (errors && bytes)
    os << llvm::format(" (%.1f%% of the trace not decoded)",
                       100.0 * double(undecoded) / double(bytes));
  std::string note = estimatedTimesNote(estimated, instructions);
  if (!note.empty())
    os << ", " << note;
  if (!record.path.empty())
    os << " -> " << record.path << " (open in ui.perfetto.dev)";
  if (!window.whole && window.cutByBudget)
    os << "; the " << withCommas(record.window.maxSlices)
       << "-slice budget set the window ('magic-trace save --snapshot "
       << record.number << " --window all -o FILE' writes all of it)";
  if (!window.whole && window.cutByTrace)
    os << "; the " << formatSize(record.window.maxTraceBytes)
       << " decode budget set the window ('magic-trace save --snapshot "
       << record.number
       << " --window DURATION -o FILE' decodes more, '--window all' all of "
          "it)";
  if (!window.note.empty())
    os << "; " << window.note;
  // What the recorder skipped (a planted perf map, a FIFO): said, not
  // silent (issue 50).
  for (const std::string &skipped : record.snapshot.notes)
    os << "\nmagic-trace: warning: " << skipped;
  return line;
}

llvm::json::Value snapshotJson(const SnapshotRecord &record) {
  llvm::json::Object object{{"number", int64_t(record.number)},
                            {"reason", record.reason},
                            {"path", record.path}};
  if (const ThreadSummary *thread = record.result.mainThread()) {
    object["tid"] = int64_t(thread->tid);
    object["spanNs"] = int64_t(thread->endNs - thread->beginNs);
    object["calls"] = int64_t(thread->calls);
    object["errors"] = int64_t(thread->errors);
    object["instructions"] = int64_t(thread->instructions);
  }
  object["decodeSeconds"] = record.decodeSeconds;
  const WindowSummary &window = record.result.window;
  object["window"] = llvm::json::Object{
      {"lengthNs", int64_t(window.lengthNs)},
      {"traceNs", int64_t(window.traceNs)},
      {"whole", window.whole},
      {"cutByBudget", window.cutByBudget},
      {"cutByTrace", window.cutByTrace},
      {"maxTraceBytes", int64_t(record.window.maxTraceBytes)},
      {"slices", int64_t(window.slices)},
      {"maxSlices", int64_t(record.window.maxSlices)},
      {"threads", int64_t(window.threads)},
      {"decodedBytes", int64_t(window.decodedBytes)},
      {"traceBytes", int64_t(window.traceBytes)},
      {"note", window.note}};
  object["summary"] = summaryJson(record.result);
  return std::move(object);
}

static bool sameWindow(const WindowOptions &a, const WindowOptions &b) {
  return a.all == b.all && a.maxLengthNs == b.maxLengthNs &&
         a.maxSlices == b.maxSlices && a.maxTraceBytes == b.maxTraceBytes;
}

llvm::Expected<const PipelineResult *>
resultInWindow(SnapshotRecord &record, const WindowOptions &window,
               SymbolCache *symbols, std::optional<PipelineResult> &storage) {
  if (sameWindow(window, record.window))
    return &record.result;
  PipelineOptions options;
  options.window = window;
  llvm::Expected<PipelineResult> result =
      runPipeline(record.snapshot, options, symbols);
  if (!result)
    return result.takeError();
  storage = std::move(*result);
  return &*storage;
}

std::string expandPattern(llvm::StringRef pattern, unsigned number) {
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'N') {
      path += std::to_string(number);
      ++i;
      continue;
    }
    path += pattern[i];
  }
  return path;
}

llvm::Expected<std::string> saveSnapshot(const SnapshotRecord &record,
                                         llvm::StringRef path,
                                         llvm::StringRef formatName,
                                         const PipelineResult *result) {
  const TraceModel &model = result ? result->model : record.result.model;
  std::string format = formatName.str();
  if (format.empty()) {
    // The suffix names a trace format (outputFormatOf); .data is perf;
    // anything else is fxt.
    llvm::Expected<OutputFormat> named = outputFormatOf(path);
    if (path.ends_with(".data"))
      format = "perf";
    else if (named)
      format = named->name.str();
    else
      format = "fxt";
    if (!named)
      llvm::consumeError(named.takeError());
  }
  std::string saved =
      "magic-trace: snapshot " + std::to_string(record.number) + " saved as ";
  if (format == "perf") {
    if (llvm::Error err = writePerfData(record.snapshot, path))
      return std::move(err);
    return saved + "perf.data to " + path.str() + " (decode it with 'perf " +
           "script -i " + path.str() + " --itrace=cr')";
  }
  if (format == "bundle") {
    // writeBundle moves copies made outside the bundle (the vdso) inside.
    if (llvm::Error err = writeBundle(record.snapshot, path))
      return std::move(err);
    // The recorder's record of what ran, as magic-trace-emulate writes it.
    if (!record.truth.empty())
      if (llvm::Error err = writeGroundTruth(record.truth, path))
        return std::move(err);
    return saved + "an intel-pt trace bundle in " + path.str() +
           " (load it with 'trace load " + path.str() + "/trace.json')";
  }
  llvm::Expected<OutputFormat> parsed = outputFormatNamed(format);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    std::string names;
    for (const OutputFormat &known : outputFormats())
      names += known.name.str() + ", ";
    return failure("unknown format '" + format + "' (use " + names +
                   "bundle or perf)");
  }
  if (llvm::Error err = writeTrace(model, path, *parsed))
    return std::move(err);
  return saved + format + " to " + path.str();
}

} // namespace magic_trace
