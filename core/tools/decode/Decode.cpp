//===- Decode.cpp - magic-trace-decode: offline decode of a bundle --------===//
//
// Loads a trace bundle (ours or LLDB's `trace save`) or a per-thread Intel
// PT perf.data, decodes every thread with the core decoder and prints
// instructions, control-flow events or calls, then a one-line summary. Output
// formats: docs/decoder.md. With -o FILE it runs the whole pipeline instead
// (decode, symbolize, model) and writes the trace in the format FILE's
// extension names (.fxt, .json, .folded, .txt).
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/PerfData.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace llvm;
using namespace magic_trace;

namespace {

enum class DumpKind { None, Events, Calls, Insns };

const char *const kUsage =
    "usage: magic-trace-decode BUNDLE_DIR_OR_JSON|PERF_DATA [--dump "
    "events|calls|insns|none] [--threads N] [--tid T] [--chunk-bytes B]\n"
    "                          [--cpu CPU] [-o FILE] [--slice-args "
    "compact|full] [--symfs DIR]\n"
    "                          [--window DURATION|all] [--max-slices N] "
    "[--max-trace SIZE]\n"
    "  --dump events   one line per control-flow event (default)\n"
    "  --dump calls    only calls and returns\n"
    "  --dump insns    every executed instruction address\n"
    "  --dump none     only the summary\n"
    "  --threads N     decode threads (default: cores; 1 = serial)\n"
    "  --tid T         only this thread\n"
    "  --chunk-bytes B smallest piece of a buffer per decode task (65536)\n"
    "  --symfs DIR     a perf.data's modules: look under DIR first, at the\n"
    "                  paths the recording names (as perf's --symfs)\n"
    "  --cpu CPU       the CPU that recorded the trace, for libipt's errata,\n"
    "                  instead of the bundle's cpuInfo: intel/6/158/9, or\n"
    "                  none (no errata)\n"
    "  -o FILE         run the whole pipeline (decode, symbolize, model) and\n"
    "                  write the trace to FILE, in the format its extension\n"
    "                  names: .fxt (Perfetto), .json (Chrome), either with\n"
    "                  .gz, .folded, .txt (call tree); prints only the "
    "summary\n"
    "  --slice-args A  what each .fxt slice carries: compact (default; kind\n"
    "                  as category, one 'site' argument, 32 bytes a slice)\n"
    "                  or full (address, file, line, inlined; 64 bytes)\n"
    "  --window W      with -o: write the last W of the trace (5ms, 200us),\n"
    "                  at most; all: the whole trace (default: the longest\n"
    "                  window that fits --max-slices and --max-trace)\n"
    "  --max-slices N  with -o: the output's budget in slices (default\n"
    "                  10000000, what Perfetto's UI opens; 2M = 2000000)\n"
    "  --max-trace S   with -o, without --window: the default window decodes\n"
    "                  at most S bytes of trace, every thread's together\n"
    "                  (default 5M; K, M, G)\n";

struct Args {
  std::string input;
  DumpKind dump = DumpKind::Events;
  unsigned threads = 0;
  uint64_t tid = 0;
  uint64_t chunkBytes = 64 * 1024;
  std::string output;             ///< -o FILE; empty: print events instead.
  std::optional<CpuIdentity> cpu; ///< --cpu, over the bundle's cpuInfo.
  FxtOptions fxt;                 ///< --slice-args.
  std::string symfs;              ///< --symfs, for a perf.data's modules.
  /// --window, --max-slices, --max-trace (with -o).
  std::string window, maxSlices, maxTrace;
};

/// Parses the command line by hand: libLLVM.so already registers a global
/// "threads" option, so llvm::cl cannot take ours.
Expected<Args> parseArgs(int argc, char **argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    StringRef arg = argv[i];
    if (!arg.starts_with("-")) {
      if (!args.input.empty())
        return createStringError("more than one bundle given (" + arg.str() +
                                 "); pass one BUNDLE_DIR_OR_JSON");
      args.input = arg.str();
      continue;
    }
    auto [name, value] = arg.split('=');
    name = name.ltrim('-');
    if (name == "help" || name == "h")
      return createStringError("help");
    if (!arg.contains('=')) {
      if (i + 1 >= argc)
        return createStringError("--" + name.str() +
                                 " needs a value (see --help)");
      value = argv[++i];
    }
    uint64_t number = 0;
    if (name == "o" || name == "output") {
      args.output = value.str();
    } else if (name == "symfs") {
      args.symfs = value.str();
    } else if (name == "window") {
      args.window = value.str();
    } else if (name == "max-slices") {
      args.maxSlices = value.str();
    } else if (name == "max-trace") {
      args.maxTrace = value.str();
    } else if (name == "slice-args") {
      Expected<FxtSliceArgs> sliceArgs = parseFxtSliceArgs(value);
      if (!sliceArgs)
        return sliceArgs.takeError();
      args.fxt.sliceArgs = *sliceArgs;
    } else if (name == "cpu") {
      Expected<CpuIdentity> cpu = parseCpu(value);
      if (!cpu)
        return cpu.takeError();
      args.cpu = *cpu;
    } else if (name == "dump") {
      if (value == "events")
        args.dump = DumpKind::Events;
      else if (value == "calls")
        args.dump = DumpKind::Calls;
      else if (value == "insns")
        args.dump = DumpKind::Insns;
      else if (value == "none")
        args.dump = DumpKind::None;
      else
        return createStringError("unknown --dump kind '" + value.str() +
                                 "' (use events, calls, insns or none)");
    } else if (name == "threads" || name == "tid" || name == "chunk-bytes") {
      if (value.getAsInteger(0, number))
        return createStringError("--" + name.str() + " wants a number, not '" +
                                 value.str() + "'");
      if (name == "threads")
        args.threads = static_cast<unsigned>(number);
      else if (name == "tid")
        args.tid = number;
      else
        args.chunkBytes = number;
    } else {
      return createStringError("unknown option '" + arg.str() +
                               "' (see --help)");
    }
  }
  if (args.input.empty())
    return createStringError("no bundle given (pass BUNDLE_DIR_OR_JSON)");
  if (args.output.empty() && (!args.window.empty() || !args.maxSlices.empty() ||
                              !args.maxTrace.empty()))
    return createStringError("--window, --max-slices and --max-trace choose "
                             "what -o FILE writes (a --dump lists every "
                             "decoded event)");
  return args;
}

int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-decode") << message << "\n";
  return 1;
}

/// One thread that decoded to nothing: a warning naming the likely cause.
/// `firstError` is the first decode error's text, if there was one.
void warnEmptyThread(uint64_t tid, uint64_t traceBytes, uint64_t errors,
                     StringRef firstError) {
  raw_ostream &warning = WithColor::warning(errs(), "magic-trace-decode");
  warning << "thread " << tid << ": nothing decoded";
  if (traceBytes == 0) {
    warning << " (it has no trace bytes: check its iptTrace in trace.json)\n";
    return;
  }
  if (errors == 0) {
    warning << " from " << traceBytes
            << " bytes (tracing was never enabled in them)\n";
    return;
  }
  warning << ", " << errors << " errors";
  if (!firstError.empty())
    warning << ", the first: " << firstError;
  if (firstError.contains("no memory mapped"))
    warning << " (the modules do not cover the traced code: check the "
               "bundle's modules, their files and loadAddress)";
  warning << "\n";
}

/// The exit status when nothing at all was decoded: an empty trace is an
/// error, never a silent success.
int failIfNothingDecoded(uint64_t instructions) {
  if (instructions != 0)
    return 0;
  return fail("nothing was decoded (see the warnings above; an empty trace "
              "is never a result)");
}

/// libipt's errata for `cpu`, comma-separated, or "none".
std::string errataText(const CpuIdentity &cpu) {
  std::vector<std::string> names = cpuErrata(cpu);
  return names.empty() ? "none" : join(names, ",");
}

/// What the summary says of the window: nothing for the whole trace unless
/// a window was asked for (`asked`): then that the trace was shorter.
std::string windowClause(const WindowSummary &window,
                         const WindowOptions &options, bool asked) {
  if (window.whole)
    return asked ? ", window: the whole trace (" +
                       formatDuration(window.traceNs) + "), " +
                       withCommas(window.slices) + " slices"
                 : "";
  std::string text = ", window: the last " + formatDuration(window.lengthNs) +
                     " of " + formatDuration(window.traceNs) + ", " +
                     withCommas(window.slices) + " slices";
  if (window.cutByBudget)
    text += " (the " + withCommas(options.maxSlices) +
            "-slice budget; --window all writes all of it)";
  else if (window.cutByTrace)
    text += " (the " + formatSize(options.maxTraceBytes) +
            " decode budget; --window DURATION or all decodes more)";
  return text;
}

/// -o FILE: the whole pipeline, then the file and a one-line summary.
int writeOutput(const Args &args, const Snapshot &snapshot,
                const DecodeOptions &decodeOptions) {
  // The format first: a name no format has fails before the work.
  Expected<OutputFormat> format = outputFormatOf(args.output);
  if (!format)
    return fail(toString(format.takeError()));
  PipelineOptions options;
  options.decode = decodeOptions;
  if (Error error = parseWindowOptions(args.window, args.maxSlices,
                                       args.maxTrace, options.window))
    return fail(toString(std::move(error)));
  auto started = std::chrono::steady_clock::now();
  Expected<PipelineResult> result = runPipeline(snapshot, options);
  if (!result)
    return fail(toString(result.takeError()));
  for (const std::string &problem : result->moduleProblems)
    WithColor::warning(errs(), "magic-trace-decode") << problem << "\n";
  if (Error error = writeTrace(result->model, args.output, *format, args.fxt))
    return fail(toString(std::move(error)));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  uint64_t instructions = 0, calls = 0, errors = 0, estimated = 0;
  for (const ThreadSummary &thread : result->threads) {
    instructions += thread.instructions;
    estimated += thread.estimatedInstructions;
    calls += thread.calls;
    errors += thread.errors;
  }
  for (size_t i = 0; i < result->threads.size(); ++i) {
    const ThreadSummary &thread = result->threads[i];
    if (thread.instructions == 0)
      warnEmptyThread(thread.tid, thread.traceBytes, thread.errors, "");
  }
  const ModelStats &stats = result->modelStats;
  outs() << "summary: " << result->threads.size() << " threads, "
         << instructions << " instructions, " << calls << " calls, " << errors
         << " errors, " << stats.segments << " segments, " << stats.frames
         << " frames, model " << stats.modelBytes << " bytes ("
         << llvm::format("%.3f", instructions
                                     ? double(stats.modelBytes) / instructions
                                     : 0.0)
         << " per instruction, "
         << llvm::format("%.1f", stats.frames ? double(stats.modelBytes) /
                                                    double(stats.frames)
                                              : 0.0)
         << " per frame), " << llvm::format("%.3f", seconds * 1000) << " ms";
  std::string note = estimatedTimesNote(estimated, instructions);
  if (!note.empty())
    outs() << ", " << note;
  bool asked = !args.window.empty() || !args.maxSlices.empty();
  outs() << windowClause(result->window, options.window, asked) << " -> "
         << args.output << "\n";
  if (!result->window.note.empty())
    WithColor::note(errs(), "magic-trace-decode")
        << result->window.note << "\n";
  return failIfNothingDecoded(instructions);
}

std::string hex(uint64_t value) { return "0x" + utohexstr(value, true); }

/// Names and places addresses through the symbolizer.
class Namer {
public:
  /// The code's names as the writers give them (Symbolizer.h): JIT code by
  /// the perf map and jitdump, code the history holds as "[jit 0x...]".
  Namer(const Snapshot &snapshot)
      : symbolizer(snapshot.modules, snapshot.code, strings) {}

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
  case ItemKind::Image:
    return "image";
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

/// Prints events of one thread; returns how many. Each line:
/// "<ns> +<insns since the previous line> <kind> <where>...". A transfer's
/// time is when its target starts (the next Block's time).
uint64_t printEvents(raw_ostream &out, Namer &namer, const ThreadDecode &decode,
                     bool callsOnly) {
  uint64_t events = 0;
  uint64_t sinceLast = 0;
  const std::vector<TraceItem> &items = decode.items;
  for (size_t i = 0; i < items.size(); ++i) {
    const TraceItem &item = items[i];
    if (item.kind == ItemKind::Block) {
      sinceLast += item.detail;
      uint64_t target = targetAfter(items, i);
      const char *name = transferName(namer, item, target, callsOnly);
      if (!name)
        continue;
      ++events;
      uint64_t time = target ? items[i + 1].timeNs : item.timeNs;
      out << time << " +" << sinceLast << " " << name << " "
          << namer.describe(item.lastIp) << " -> "
          << (target ? namer.describe(target) : std::string("?")) << "\n";
      sinceLast = 0;
      continue;
    }
    if (callsOnly)
      continue;
    ++events;
    out << item.timeNs << " +" << sinceLast << " " << itemName(item.kind) << " "
        << (item.ip ? namer.describe(item.ip) : std::string("0x0"));
    sinceLast = 0;
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
  Expected<Args> parsed = parseArgs(argc, argv);
  if (!parsed) {
    std::string message = toString(parsed.takeError());
    if (message == "help") {
      outs() << kUsage;
      return 0;
    }
    return fail(message);
  }
  const Args &args = *parsed;

  // A perf.data (per-thread or per-CPU Intel PT) reads as a bundle does.
  PerfDataReadOptions perfOptions;
  perfOptions.symfs = args.symfs;
  Expected<Snapshot> snapshot = isPerfDataFile(args.input)
                                    ? readPerfData(args.input, perfOptions)
                                    : loadBundle(args.input);
  if (!snapshot)
    return fail(toString(snapshot.takeError()));
  if (args.cpu)
    snapshot->cpu = *args.cpu;

  DecodeOptions options;
  options.threads = args.threads;
  options.onlyTid = args.tid;
  options.minChunkBytes = args.chunkBytes;
  if (!args.output.empty())
    return writeOutput(args, *snapshot, options);

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
    if (decode.instructions == 0) {
      uint64_t bytes = 0;
      for (const ThreadTrace &trace : snapshot->threads)
        if (trace.tid == decode.tid)
          bytes = trace.bytes.size();
      warnEmptyThread(decode.tid, bytes, decode.errors.size(),
                      decode.errors.empty() ? StringRef()
                                            : decode.errors[0].message);
    }
    switch (args.dump) {
    case DumpKind::Insns: {
      out << "# thread " << decode.tid << " instructions "
          << decode.instructions << "\n";
      auto addresses = expandInstructions(*snapshot, decode, options);
      if (!addresses)
        return fail(toString(addresses.takeError()));
      for (uint64_t address : *addresses)
        out << hex(address) << "\n";
      events += printEvents(nulls(), namer, decode, false);
      break;
    }
    case DumpKind::Events:
    case DumpKind::Calls:
      out << "# thread " << decode.tid << "\n";
      events += printEvents(out, namer, decode, args.dump == DumpKind::Calls);
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
      << format("%.3f", seconds * 1000) << " ms (" << args.threads
      << " threads requested, " << result->stats.chunks << " pieces), errata "
      << errataText(snapshot->cpu);
  uint64_t estimated = 0;
  for (const ThreadDecode &decode : result->threads)
    estimated += decode.estimatedInstructions;
  std::string note = estimatedTimesNote(estimated, instructions);
  if (!note.empty())
    out << ", " << note;
  out << "\n";
  return failIfNothingDecoded(instructions);
}
