//===- SnapshotLog.cpp - The snapshots a debugger session took ------------===//
#include "magic_trace/SnapshotLog.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/PerfData.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <malloc.h>

namespace magic_trace {
namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(message.str());
}

/// LLDB reads a module's "file" relative to the bundle: copies made outside
/// it (the vdso) move into DIR/modules/.
llvm::Expected<Snapshot> withCopiesInside(const Snapshot &snapshot,
                                          llvm::StringRef dir) {
  Snapshot copy = snapshot;
  for (Module &module : copy.modules) {
    if (module.fileCopy.empty())
      continue;
    llvm::SmallString<256> target(dir);
    llvm::sys::path::append(target, "modules");
    if (std::error_code ec = createOutputDirectories(target))
      return failure("cannot create '" + target + "': " + ec.message() +
                     " (check the path)");
    std::string name = llvm::sys::path::filename(module.fileCopy).str();
    llvm::sys::path::append(target, name);
    if (std::error_code ec = llvm::sys::fs::copy_file(module.fileCopy, target))
      return failure("cannot copy '" + module.fileCopy +
                     "' into the bundle: " + ec.message());
    makeOutputPrivate(target);
    module.fileCopy = "modules/" + name;
  }
  return copy;
}

} // namespace

SnapshotRecord &SnapshotLog::add(std::unique_ptr<SnapshotRecord> record) {
  record->number = next();
  records.push_back(std::move(record));
  releaseOld();
  return *records.back();
}

void SnapshotLog::setKeep(unsigned count) {
  kept = std::max(1u, count);
  releaseOld();
}

void SnapshotLog::releaseOld() {
  bool released = false;
  for (size_t i = records.size() > kept ? records.size() - kept : 0; i-- > 0;) {
    SnapshotRecord &record = *records[i];
    if (record.released)
      break; // The ones before it were released already.
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
      "keeps the last {1} decoded{2}; keep more with --keep-snapshots N on "
      "'magic-trace run' or 'attach')",
      (*record)->number, kept,
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

std::string withCommas(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      text += ',';
    text += digits[i];
  }
  return text;
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

std::string snapshotLine(const SnapshotRecord &record) {
  if (snapshotFailed(record))
    return failureLine(record);
  std::string line;
  llvm::raw_string_ostream os(line);
  os << "magic-trace: snapshot " << record.number << ": ";
  const ThreadSummary *thread = record.result.mainThread();
  os << "thread " << thread->tid << ", "
     << formatDuration(thread->endNs - thread->beginNs) << ", "
     << withCommas(thread->calls) << " calls, " << withCommas(thread->errors)
     << " errors";
  if (thread->errors && thread->traceBytes)
    os << llvm::format(" (%.1f%% of the trace not decoded)",
                       100.0 * double(thread->undecodedBytes) /
                           double(thread->traceBytes));
  std::string note =
      estimatedTimesNote(thread->estimatedInstructions, thread->instructions);
  if (!note.empty())
    os << ", " << note;
  if (!record.path.empty())
    os << " -> " << record.path << " (open in ui.perfetto.dev)";
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
  object["summary"] = summaryJson(record.result);
  return std::move(object);
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
                                         llvm::StringRef formatName) {
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
    llvm::Expected<Snapshot> bundled = withCopiesInside(record.snapshot, path);
    if (!bundled)
      return bundled.takeError();
    if (llvm::Error err = writeBundle(*bundled, path))
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
  if (llvm::Error err = writeTrace(record.result.model, path, *parsed))
    return std::move(err);
  return saved + format + " to " + path.str();
}

} // namespace magic_trace
