//===- Decode.cpp - magic-trace-decode: offline decode of a bundle --------===//
//
// Loads a trace bundle (ours or LLDB's `trace save`), decodes every thread
// with the core decoder and prints instructions, control-flow events or
// calls, then a one-line summary. Output formats: docs/decoder.md.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/Symbolizer.h"

#include "llvm/ADT/StringExtras.h"
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

/// Names and places addresses through the symbolizer.
class Namer {
public:
  Namer(const Snapshot &snapshot) : symbolizer(snapshot.modules, strings) {}

  const SymbolRange &range(uint64_t address) {
    return symbolizer.lookup(address);
  }

  /// "0xADDR function+0xOFF", plus " {inlined > chain}" when the address is
  /// inside inlined code.
  std::string describe(uint64_t address) {
    const SymbolRange &where = range(address);
    std::string text = hex(address);
    if (where.frames.empty())
      return text;
    text += " " + strings.get(where.frames.front().function).str();
    if (where.functionEntry && address >= where.functionEntry)
      text += "+" + hex(address - where.functionEntry);
    if (where.frames.size() > 1) {
      text += " {";
      for (size_t i = 1; i < where.frames.size(); ++i) {
        if (i > 1)
          text += " > ";
        text += strings.get(where.frames[i].function).str();
      }
      text += "}";
    }
    return text;
  }

  const SymbolizerStats &stats() const { return symbolizer.stats(); }
  std::vector<std::string> problems() const {
    return symbolizer.moduleProblems();
  }

private:
  StringTable strings;
  Symbolizer symbolizer;
};

/// The event a Block's last instruction makes, or nullptr: calls and
/// returns always; jumps and taken conditional branches only into another
/// function (tail calls, PLT stubs); syscalls and far transfers.
const char *transferName(Namer &namer, const TraceItem &block, uint64_t target,
                         bool callsOnly) {
  switch (block.lastClass) {
  case BranchClass::DirectCall:
  case BranchClass::IndirectCall:
    return "call";
  case BranchClass::Return:
    return "return";
  case BranchClass::Syscall:
    return callsOnly ? nullptr : "syscall";
  case BranchClass::FarTransfer:
    return callsOnly ? nullptr : "far";
  case BranchClass::DirectJump:
  case BranchClass::IndirectJump:
  case BranchClass::CondBranch: {
    if (callsOnly || !target)
      return nullptr;
    uint64_t from = namer.range(block.lastIp).functionEntry;
    uint64_t to = namer.range(target).functionEntry;
    return from != to ? "jump" : nullptr;
  }
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

/// Where control went after item `i`: the next Block's IP, 0 if an event
/// comes first or nothing follows.
uint64_t targetAfter(const std::vector<TraceItem> &items, size_t i) {
  if (i + 1 < items.size() && items[i + 1].kind == ItemKind::Block)
    return items[i + 1].ip;
  return 0;
}

/// Prints events of one thread; returns how many.
uint64_t printEvents(raw_ostream &out, Namer &namer, const ThreadDecode &decode,
                     bool callsOnly) {
  uint64_t events = 0;
  const std::vector<TraceItem> &items = decode.items;
  for (size_t i = 0; i < items.size(); ++i) {
    const TraceItem &item = items[i];
    if (item.kind == ItemKind::Block) {
      uint64_t target = targetAfter(items, i);
      const char *name = transferName(namer, item, target, callsOnly);
      if (!name)
        continue;
      ++events;
      out << item.timeNs << " " << name << " " << namer.describe(item.lastIp)
          << " -> " << (target ? namer.describe(target) : std::string("?"))
          << "\n";
      continue;
    }
    if (callsOnly)
      continue;
    ++events;
    out << item.timeNs << " " << itemName(item.kind) << " "
        << (item.ip ? namer.describe(item.ip) : std::string("0x0"));
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


  auto started = std::chrono::steady_clock::now();
  Expected<DecodeResult> result = decodeSnapshot(*snapshot, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  if (!result)
    return fail(toString(result.takeError()));

  for (const ModuleImageStatus &module : result->modules)
    if (!module.problem.empty())
      WithColor::warning(errs(), "magic-trace-decode")
          << module.problem << "\n";

  Namer namer(*snapshot);
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
      events += printEvents(out, namer, decode, dump == DumpKind::Calls);
      break;
    case DumpKind::None:
      events += printEvents(nulls(), namer, decode, false);
      break;
    }
  }
  out << "summary: " << result->threads.size() << " threads, " << instructions
      << " instructions, " << events << " events, " << errors << " errors, "
      << "symbol cache hit rate "
      << format("%.1f%%", namer.stats().lookups ? 100.0 * namer.stats().hits /
                                                      namer.stats().lookups
                                                : 0.0)
      << " (" << namer.stats().lookups << " lookups, "
      << namer.stats().distinctRanges << " ranges), decode "
      << format("%.3f", seconds * 1000) << " ms ("
      << (threads ? threads.getValue() : 0) << " threads requested, "
      << result->stats.chunks << " pieces)\n";
  return 0;
}
