//===- Decode.cpp - magic-trace-decode: offline decode of a bundle --------===//
//
// Loads a trace bundle (ours or LLDB's `trace save`), decodes every thread
// with the core decoder and prints instructions, control-flow events or
// calls, then a one-line summary. Output formats: docs/decoder.md.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/Decoder.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace llvm;
using namespace magic_trace;

namespace {

enum class DumpKind { None, Events, Calls, Insns };

cl::OptionCategory category("magic-trace-decode options");
cl::opt<std::string> input(cl::Positional, cl::Required,
                           cl::desc("BUNDLE_DIR_OR_JSON"), cl::cat(category));
cl::opt<DumpKind> dump(
    "dump", cl::desc("What to print before the summary (default events)"),
    cl::values(clEnumValN(DumpKind::Events, "events",
                          "one line per control-flow event"),
               clEnumValN(DumpKind::Calls, "calls", "only calls and returns"),
               clEnumValN(DumpKind::Insns, "insns",
                          "every executed instruction address"),
               clEnumValN(DumpKind::None, "none", "only the summary")),
    cl::init(DumpKind::Events), cl::cat(category));
cl::opt<unsigned> threads("threads",
                          cl::desc("Decode threads (default: cores; 1 = "
                                   "serial)"),
                          cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::opt<uint64_t> tid("tid", cl::desc("Only this thread"), cl::value_desc("T"),
                      cl::init(0), cl::cat(category));
cl::opt<uint64_t> chunkBytes(
    "chunk-bytes",
    cl::desc("Smallest piece of a buffer per decode task (default 65536)"),
    cl::value_desc("BYTES"), cl::init(64 * 1024), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-decode") << message << "\n";
  return 1;
}

std::string hex(uint64_t value) { return "0x" + utohexstr(value, true); }

/// Event name of a Block's last instruction, or nullptr when it is not an
/// event (falls through, or a conditional branch / direct jump inside a
/// function).
const char *transferName(BranchClass branch, bool callsOnly) {
  switch (branch) {
  case BranchClass::DirectCall:
  case BranchClass::IndirectCall:
    return "call";
  case BranchClass::Return:
    return "return";
  case BranchClass::IndirectJump:
    return callsOnly ? nullptr : "jump";
  case BranchClass::Syscall:
    return callsOnly ? nullptr : "syscall";
  case BranchClass::FarTransfer:
    return callsOnly ? nullptr : "far";
  default:
    return nullptr;
  }
}

const char *itemName(ItemKind kind) {
  switch (kind) {
  case ItemKind::Enable:
    return "enable";
  case ItemKind::Disable:
    return "disable";
  case ItemKind::Overflow:
    return "overflow";
  case ItemKind::Error:
    return "error";
  case ItemKind::Block:
    return "block";
  }
  return "?";
}

/// Where control went after item `i`: the next item's IP, 0 if none.
uint64_t targetAfter(const std::vector<TraceItem> &items, size_t i) {
  for (size_t j = i + 1; j < items.size(); ++j)
    if (items[j].kind == ItemKind::Block || items[j].kind == ItemKind::Enable)
      return items[j].ip;
    else
      return 0;
  return 0;
}

/// Prints events of one thread; returns how many.
uint64_t printEvents(raw_ostream &out, const ThreadDecode &decode,
                     bool callsOnly) {
  uint64_t events = 0;
  const std::vector<TraceItem> &items = decode.items;
  for (size_t i = 0; i < items.size(); ++i) {
    const TraceItem &item = items[i];
    if (item.kind == ItemKind::Block) {
      const char *name = transferName(item.lastClass, callsOnly);
      if (!name)
        continue;
      ++events;
      uint64_t target = targetAfter(items, i);
      out << item.timeNs << " " << name << " " << hex(item.lastIp) << " -> "
          << (target ? hex(target) : std::string("?")) << "\n";
      continue;
    }
    if (callsOnly)
      continue;
    ++events;
    out << item.timeNs << " " << itemName(item.kind) << " " << hex(item.ip);
    if (item.kind == ItemKind::Error) {
      const DecodeError &error = decode.errors[item.detail];
      out << " offset " << error.offset << ": " << error.message;
    }
    out << "\n";
  }
  return events;
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "magic-trace-decode: decode an Intel PT trace bundle offline\n\n"
      "  magic-trace-decode BUNDLE_DIR_OR_JSON [--dump events|calls|insns|"
      "none] [--threads N] [--tid T]\n");

  Expected<Snapshot> snapshot = loadBundle(input);
  if (!snapshot)
    return fail(toString(snapshot.takeError()));

  DecodeOptions options;
  options.threads = threads;
  options.onlyTid = tid;
  options.minChunkBytes = chunkBytes;
  options.timing = timingFor(*snapshot);

  auto started = std::chrono::steady_clock::now();
  Expected<DecodeResult> result = decodeSnapshot(*snapshot, options);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  if (!result)
    return fail(toString(result.takeError()));

  for (const ModuleImageStatus &module : result->modules)
    if (!module.problem.empty())
      WithColor::warning(errs(), "magic-trace-decode")
          << module.problem << "\n";

  raw_ostream &out = outs();
  uint64_t instructions = 0, events = 0, errors = 0;
  for (const ThreadDecode &decode : result->threads) {
    instructions += decode.instructions;
    errors += decode.errors.size();
    switch (dump) {
    case DumpKind::Insns: {
      out << "# thread " << decode.tid << " instructions "
          << decode.instructions << "\n";
      auto addresses = expandInstructions(*snapshot, decode, options);
      if (!addresses)
        return fail(toString(addresses.takeError()));
      for (uint64_t address : *addresses)
        out << hex(address) << "\n";
      break;
    }
    case DumpKind::Events:
    case DumpKind::Calls:
      out << "# thread " << decode.tid << "\n";
      events += printEvents(out, decode, dump == DumpKind::Calls);
      break;
    case DumpKind::None:
      events += printEvents(nulls(), decode, false);
      break;
    }
  }
  out << "summary: " << result->threads.size() << " threads, " << instructions
      << " instructions, " << events << " events, " << errors << " errors, "
      << "decode " << format("%.3f", seconds * 1000) << " ms ("
      << (threads ? threads.getValue() : 0) << " threads requested, "
      << result->stats.chunks << " pieces)\n";
  return 0;
}
