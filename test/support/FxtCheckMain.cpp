//===- FxtCheckMain.cpp - magic-trace-fxt-check ---------------------------===//
//
// Validates a Fuchsia trace (.fxt or .fxt.gz) with the test reader and prints
// a one-line summary, or the first error; `--dump` also prints every event,
// one per line, for FileCheck, indented by Perfetto's nesting;
// `--perfetto-tree` prints only the complete events as "TID DEPTH NAME".
// Fails when Perfetto's slice tracker would nest the slices otherwise than
// the file means (FxtReader.h, perfettoDepths).
//
//===----------------------------------------------------------------------===//
#include "FxtReader.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <map>

using namespace magic_trace::fxt_test;

namespace {

const char *eventTypeName(EventType type) {
  switch (type) {
  case EventType::Instant:
    return "instant";
  case EventType::Counter:
    return "counter";
  case EventType::DurationBegin:
    return "begin";
  case EventType::DurationEnd:
    return "end";
  case EventType::DurationComplete:
    return "complete";
  }
  return "other";
}

void printArg(llvm::raw_ostream &os, const FxtArg &arg) {
  os << ' ' << arg.name << '=';
  switch (arg.type) {
  case ArgType::String:
    os << '"' << arg.text << '"';
    break;
  case ArgType::Pointer:
    os << llvm::format_hex(arg.value, 0);
    break;
  case ArgType::Bool:
    os << (arg.value ? "true" : "false");
    break;
  default:
    os << arg.value;
  }
}

void dump(llvm::raw_ostream &os, const FxtTrace &trace) {
  for (const FxtKernelObject &object : trace.objects)
    os << (object.objectType == 1 ? "process " : "thread ") << object.koid
       << " \"" << object.name << "\"\n";
  for (const FxtEvent &event : trace.events) {
    os << "tid " << event.tid << ' ' << eventTypeName(event.type) << ' '
       << event.timestamp;
    if (event.type == EventType::DurationComplete)
      os << ".." << event.endTimestamp;
    os << ' ';
    os.indent(2 * std::max(0, event.perfettoDepth)) << event.name;
    for (const FxtArg &arg : event.args)
      printArg(os, arg);
    os << '\n';
  }
}

/// One line per complete event, "TID DEPTH NAME", DEPTH as Perfetto nests
/// it: what a comparison with the text tree reads.
void perfettoTree(llvm::raw_ostream &os, const FxtTrace &trace) {
  for (const FxtEvent &event : trace.events)
    if (event.type == EventType::DurationComplete)
      os << event.tid << ' ' << event.perfettoDepth << ' ' << event.name
         << '\n';
}

/// Reads FILE.fxt[.gz] with the test reader; prints the error and fails.
llvm::Expected<FxtTrace> readFile(const char *path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(std::string(path) + ": " +
                                   buffer.getError().message() +
                                   " (check the path)");
  llvm::ArrayRef<uint8_t> bytes(
      reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
      (*buffer)->getBufferSize());
  std::vector<uint8_t> inflated;
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    auto plain = gunzip(bytes);
    if (!plain)
      return llvm::createStringError(std::string(path) + ": " +
                                     toString(plain.takeError()));
    inflated = std::move(*plain);
    bytes = inflated;
  }
  auto trace = readFxt(bytes);
  if (!trace)
    return llvm::createStringError(std::string(path) + ": " +
                                   toString(trace.takeError()));
  return trace;
}

/// The instants a writer adds where a thread starts, which only the
/// windowed file has (or has elsewhere).
bool isThreadMark(const FxtEvent &event) {
  return event.type == EventType::Instant &&
         (event.name == "[window start]" ||
          event.name == "[times estimated from instruction counts]");
}

/// What a slice of the whole trace becomes in a window from `from`: kept
/// when it ends after `from` or begins there or later, clipped to begin
/// there (ModelWindow.h, and docs/formats.md "Windows").
struct CutSlice {
  std::string name;
  uint64_t begin = 0, end = 0;
  int depth = 0;
  EventType type = EventType::Instant;
};

std::string describe(const CutSlice &slice) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << slice.name << " " << slice.begin << ".." << slice.end << " depth "
     << slice.depth;
  return text;
}

CutSlice expectedOf(const FxtEvent &event, uint64_t from) {
  CutSlice slice;
  slice.name = event.name;
  slice.type = event.type;
  slice.begin = std::max(event.timestamp, from);
  slice.end = event.type == EventType::DurationComplete
                  ? std::max(event.endTimestamp, from)
                  : slice.begin;
  slice.depth = event.perfettoDepth;
  return slice;
}

/// --cut-of FULL: every thread of the windowed file `window` holds exactly
/// the slices of FULL's thread cut at its "[window start]" (a thread
/// without one is FULL's whole), with the same name, begin, end and
/// Perfetto depth, in the same order. Returns the mismatches (printing
/// the first few).
size_t compareCut(const FxtTrace &window, const FxtTrace &full,
                  size_t &checked) {
  std::map<uint64_t, uint64_t> starts;
  std::map<uint64_t, std::vector<CutSlice>> got, want;
  for (const FxtEvent &event : window.events) {
    if (event.type == EventType::Instant && event.name == "[window start]")
      starts[event.tid] = event.timestamp;
    else if (!isThreadMark(event))
      got[event.tid].push_back(expectedOf(event, 0));
  }
  for (const FxtEvent &event : full.events) {
    if (isThreadMark(event) || !got.count(event.tid))
      continue;
    uint64_t from = starts.count(event.tid) ? starts[event.tid] : 0;
    uint64_t end = event.type == EventType::DurationComplete
                       ? event.endTimestamp
                       : event.timestamp;
    bool kept = event.type == EventType::DurationComplete
                    ? end > from || event.timestamp >= from
                    : event.timestamp >= from;
    // A gap instant at a clipped segment's begin is before the window.
    if (event.type == EventType::Instant && from && event.timestamp == from)
      kept = false;
    if (kept)
      want[event.tid].push_back(expectedOf(event, from));
  }
  size_t mismatches = 0;
  for (auto &[tid, slices] : got) {
    std::vector<CutSlice> &expected = want[tid];
    size_t n = std::max(slices.size(), expected.size());
    for (size_t i = 0; i < n; ++i) {
      bool same = i < slices.size() && i < expected.size() &&
                  slices[i].name == expected[i].name &&
                  slices[i].begin == expected[i].begin &&
                  slices[i].end == expected[i].end &&
                  slices[i].depth == expected[i].depth;
      ++checked;
      if (same)
        continue;
      if (++mismatches <= 5)
        llvm::errs() << "thread " << tid << " slice " << i << ": window has "
                     << (i < slices.size() ? describe(slices[i]) : "nothing")
                     << ", the cut whole trace "
                     << (i < expected.size() ? describe(expected[i])
                                             : "nothing")
                     << "\n";
    }
  }
  return mismatches;
}

} // namespace

int main(int argc, char **argv) {
  bool dumpEvents = false, tree = false;
  const char *path = nullptr, *cutOf = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dump") == 0)
      dumpEvents = true;
    else if (std::strcmp(argv[i], "--perfetto-tree") == 0)
      tree = true;
    else if (std::strcmp(argv[i], "--cut-of") == 0 && i + 1 < argc)
      cutOf = argv[++i];
    else if (!path)
      path = argv[i];
  }
  if (!path) {
    llvm::errs() << "usage: magic-trace-fxt-check [--dump|--perfetto-tree] "
                    "[--cut-of WHOLE.fxt] FILE.fxt[.gz]\n";
    return 2;
  }
  if (cutOf) {
    auto window = readFile(path);
    if (!window) {
      llvm::errs() << "error: " << toString(window.takeError()) << "\n";
      return 1;
    }
    auto full = readFile(cutOf);
    if (!full) {
      llvm::errs() << "error: " << toString(full.takeError()) << "\n";
      return 1;
    }
    size_t checked = 0;
    size_t mismatches = compareCut(*window, *full, checked);
    if (checked == 0) {
      llvm::errs() << "error: " << path << " has no slice to compare\n";
      return 1;
    }
    if (mismatches) {
      llvm::errs() << "error: " << mismatches << " of " << checked
                   << " slices differ from the whole trace's cut\n";
      return 1;
    }
    llvm::outs() << "window ok: " << checked
                 << " slices, each the whole trace's cut at its window\n";
    return 0;
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    llvm::errs() << "error: " << path << ": " << buffer.getError().message()
                 << " (check the path)\n";
    return 1;
  }
  llvm::ArrayRef<uint8_t> bytes(
      reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
      (*buffer)->getBufferSize());
  std::vector<uint8_t> inflated;
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    auto plain = gunzip(bytes);
    if (!plain) {
      llvm::errs() << "error: " << path << ": " << toString(plain.takeError())
                   << '\n';
      return 1;
    }
    inflated = std::move(*plain);
    bytes = inflated;
  }
  auto trace = readFxt(bytes);
  if (!trace) {
    llvm::errs() << "error: " << path << ": " << toString(trace.takeError())
                 << '\n';
    return 1;
  }
  if (tree) {
    perfettoTree(llvm::outs(), *trace);
  } else {
    llvm::outs() << "fxt ok: " << trace->records << " records, "
                 << trace->stringRecords << " strings, "
                 << trace->threadsWithEvents << " threads, "
                 << trace->events.size() << " events\n";
    if (dumpEvents)
      dump(llvm::outs(), *trace);
  }
  // What Perfetto draws must be the file's nesting (docs/formats.md).
  if (trace->perfettoDropped || trace->perfettoMisnested) {
    llvm::errs() << "error: " << path << ": Perfetto's slice tracker would "
                 << "drop " << trace->perfettoDropped << " and misplace "
                 << trace->perfettoMisnested
                 << " slices (zero-length slices at one timestamp stack; a "
                    "slice overlapping an open one is dropped)\n";
    return 1;
  }
  return 0;
}
