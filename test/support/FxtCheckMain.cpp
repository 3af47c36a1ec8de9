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

} // namespace

int main(int argc, char **argv) {
  bool dumpEvents = false, tree = false;
  const char *path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dump") == 0)
      dumpEvents = true;
    else if (std::strcmp(argv[i], "--perfetto-tree") == 0)
      tree = true;
    else if (!path)
      path = argv[i];
  }
  if (!path) {
    llvm::errs() << "usage: magic-trace-fxt-check [--dump|--perfetto-tree] "
                    "FILE.fxt[.gz]\n";
    return 2;
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
