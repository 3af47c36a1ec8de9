//===- ViewCommands.cpp - save, report, diff ---------------------------===//
//
// Views of finished snapshots: write one again in another format (save),
// print its call tree, a function's lines or its functions in the terminal
// (report, report --annotate, report --top), compare two (diff). The views
// are the core's (Views.h); this parses and prints.
//
//===----------------------------------------------------------------------===//
#include "CommandArgs.h"
#include "CommandSupport.h"
#include "Commands.h"
#include "Session.h"

#include "magic_trace/TraceWriters.h"
#include "magic_trace/Views.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace magic_trace::plugin {
namespace {

// --- save ----------------------------------------------------------------

const OptionSpec saveOptions[] = {
    {'o', "output", true, "FILE", "Where to write (a directory for bundle)."},
    {'F', "format", true, "fxt|fxt.gz|json|json.gz|folded|text|bundle|perf",
     "Output format (default: from the suffix of FILE as snapshot -o reads "
     "it, .data is perf, else fxt)."},
    {'k', "snapshot", true, "K", "Which snapshot (default: the last)."},
    kWindowOption,
    kMaxSlicesOption,
    kMaxTraceOption,
};

/// The snapshot a view reads, in the window its --window and --max-slices
/// ask for (decoded again from its raw trace when that is not the window
/// it keeps); `storage` holds such a result. The caller holds the
/// session's lock.
llvm::Expected<const PipelineResult *>
viewedResult(Session &session, const ParsedArgs &args, unsigned number,
             SnapshotRecord *&record, std::optional<PipelineResult> &storage) {
  llvm::Expected<SnapshotRecord *> found =
      session.snapshots.findDecoded(number);
  if (!found)
    return found.takeError();
  record = *found;
  if (!args.has("window") && !args.has("max-slices") && !args.has("max-trace"))
    return &record->result;
  llvm::Expected<WindowOptions> window = parseWindowArgs(args);
  if (!window)
    return window.takeError();
  return resultInWindow(*record, *window, session.symbols.get(), storage);
}

class SaveCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, saveOptions, "save");
    if (!args)
      return failCommand(result, args.takeError());
    if (!args->has("output"))
      return failCommand(result, error("save needs -o FILE (see 'help "
                                       "magic-trace save')"));
    unsigned number = 0;
    if (args->has("snapshot")) {
      llvm::Expected<unsigned> parsed =
          parseCount(args->get("snapshot", ""), "snapshot number");
      if (!parsed)
        return failCommand(result, parsed.takeError());
      number = *parsed;
    }
    Session &session = sessionFor(debugger);
    std::lock_guard<std::mutex> hold(session.lock);
    SnapshotRecord *record = nullptr;
    std::optional<PipelineResult> storage;
    llvm::Expected<const PipelineResult *> viewed =
        viewedResult(session, *args, number, record, storage);
    if (!viewed)
      return failCommand(result, viewed.takeError());
    llvm::Expected<std::string> saved = saveSnapshot(
        *record, args->get("output", ""), args->get("format", ""), *viewed);
    if (!saved)
      return failCommand(result, saved.takeError());
    return succeed(result, *saved);
  }
};

// --- report --------------------------------------------------------------

const OptionSpec reportOptions[] = {
    {'l', "last", true, "DURATION",
     "Only the final DURATION before the stop, e.g. 20us, 1.5ms."},
    {'t', "thread", true, "TID", "Only this thread."},
    {'d', "depth", true, "N", "Only frames up to depth N."},
    {'k', "snapshot", true, "K", "Which snapshot (default: the last)."},
    kWindowOption,
    kMaxSlicesOption,
    kMaxTraceOption,
    {'a', "annotate", true, "FUNCTION",
     "Per source line of FUNCTION: instructions executed (exact), times "
     "entered, self time."},
    {'i', "insns", false, nullptr,
     "With --annotate: each instruction, its count and disassembly."},
    {'T', "top", false, nullptr,
     "Functions by self time, with calls and instructions (--top N: the "
     "first N, default 20)."},
    {'b', "by", true, "self|total|calls|instructions",
     "With --top: the order (default self)."},
    {'r', "rows", true, "N", "With --annotate: lines shown (default 50)."},
    {'j', "json", false, nullptr, "With --annotate or --top: one JSON object."},
};

/// report's view options (Views.h). Errors: bad values, --top's N given
/// without --top, options of the call tree with a view.
llvm::Expected<ViewRequest> viewRequest(const ParsedArgs &args) {
  ViewRequest request;
  request.annotate = args.get("annotate", "");
  request.instructions = args.has("insns");
  request.top = args.has("top");
  request.json = args.has("json");
  if (args.positional.size() > (request.top ? 1 : 0))
    return error("unexpected argument '%s' (see 'help magic-trace report')",
                 args.positional.back().c_str());
  if (request.top && !args.positional.empty()) {
    llvm::Expected<unsigned> rows =
        parseCount(args.positional.front(), "--top count");
    if (!rows)
      return rows.takeError();
    request.topRows = *rows;
  }
  if (args.has("by")) {
    llvm::Expected<FunctionOrder> order =
        parseFunctionOrder(args.get("by", ""));
    if (!order)
      return order.takeError();
    request.order = *order;
  }
  if (args.has("rows")) {
    llvm::Expected<unsigned> rows = parseCount(args.get("rows", ""), "rows");
    if (!rows)
      return rows.takeError();
    request.rows = *rows;
  }
  if (args.has("thread") &&
      llvm::StringRef(args.get("thread", "")).getAsInteger(0, request.tid))
    return error("bad thread id '%s'", args.get("thread", "").c_str());
  if (!isView(request)) {
    for (const char *option : {"by", "rows", "json"})
      if (args.has(option))
        return error("--%s goes with --annotate or --top (see 'help "
                     "magic-trace report')",
                     option);
  } else {
    for (const char *option : {"last", "depth"})
      if (args.has(option))
        return error("--%s shapes the call tree, not --annotate or --top "
                     "(leave it out)",
                     option);
  }
  return request;
}

class ReportCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseArgs(command, reportOptions, "report");
    if (!args)
      return failCommand(result, args.takeError());
    llvm::Expected<ViewRequest> request = viewRequest(*args);
    if (!request)
      return failCommand(result, request.takeError());
    unsigned number = 0;
    if (args->has("snapshot")) {
      llvm::Expected<unsigned> parsed =
          parseCount(args->get("snapshot", ""), "snapshot number");
      if (!parsed)
        return failCommand(result, parsed.takeError());
      number = *parsed;
    }
    Session &session = sessionFor(debugger);
    std::lock_guard<std::mutex> hold(session.lock);
    SnapshotRecord *record = nullptr;
    std::optional<PipelineResult> storage;
    llvm::Expected<const PipelineResult *> viewed =
        viewedResult(session, *args, number, record, storage);
    if (!viewed)
      return failCommand(result, viewed.takeError());
    if (isView(*request)) {
      llvm::Expected<std::string> text = renderReportView(
          *record, (*viewed)->model, session.symbols.get(), *request);
      if (!text)
        return failCommand(result, text.takeError());
      result.Printf("%s", text->c_str());
      result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
      return true;
    }
    TreeOptions options;
    if (args->has("last")) {
      llvm::Expected<uint64_t> last = parseDuration(args->get("last", ""));
      if (!last)
        return failCommand(result, last.takeError());
      options.lastNs = *last;
    }
    if (args->has("depth")) {
      llvm::Expected<unsigned> depth =
          parseCount(args->get("depth", ""), "depth");
      if (!depth)
        return failCommand(result, depth.takeError());
      options.maxDepth = *depth;
    }
    // The kept model, or the one decoded for this view.
    TraceModel &model = storage ? storage->model : record->result.model;
    std::vector<ThreadModel> kept;
    if (args->has("thread")) {
      uint64_t tid = 0;
      if (llvm::StringRef(args->get("thread", "")).getAsInteger(0, tid))
        return failCommand(result, error("bad thread id '%s'",
                                         args->get("thread", "").c_str()));
      // Render only that thread: move the others aside and back.
      std::vector<ThreadModel> all = std::move(model.threads);
      model.threads.clear();
      for (ThreadModel &thread : all)
        (thread.tid == tid ? model.threads : kept).push_back(std::move(thread));
      if (model.threads.empty()) {
        model.threads = std::move(kept);
        return failCommand(result,
                           error("snapshot %u has no thread %llu (see "
                                 "'magic-trace status')",
                                 record->number, (unsigned long long)tid));
      }
    }
    std::string tree = renderTree(model, options);
    if (!kept.empty()) {
      for (ThreadModel &thread : kept)
        model.threads.push_back(std::move(thread));
      std::sort(model.threads.begin(), model.threads.end(),
                [](const ThreadModel &a, const ThreadModel &b) {
                  return a.tid < b.tid;
                });
    }
    result.Printf("%s", tree.c_str());
    result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
    return true;
  }
};

// --- diff ----------------------------------------------------------------

const OptionSpec diffOptions[] = {
    {'r', "rows", true, "N",
     "Functions and call paths shown per list (default 50)."},
    {'j', "json", false, nullptr, "Print one JSON object."},
};

class DiffCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args = parseArgs(command, diffOptions, "diff");
    if (!args)
      return failCommand(result, args.takeError());
    if (args->positional.size() != 2)
      return failCommand(result, error("diff takes two snapshot numbers, "
                                       "e.g. 'magic-trace diff 1 2'"));
    unsigned numbers[2];
    for (size_t i = 0; i < 2; ++i) {
      llvm::Expected<unsigned> number =
          parseCount(args->positional[i], "snapshot number");
      if (!number)
        return failCommand(result, number.takeError());
      numbers[i] = *number;
    }
    size_t rows = kDefaultViewRows;
    if (args->has("rows")) {
      llvm::Expected<unsigned> parsed =
          parseCount(args->get("rows", ""), "rows");
      if (!parsed)
        return failCommand(result, parsed.takeError());
      rows = *parsed;
    }
    Session &session = sessionFor(debugger);
    std::lock_guard<std::mutex> hold(session.lock);
    llvm::Expected<std::string> text =
        renderDiffView(session.snapshots, numbers[0], numbers[1],
                       session.symbols.get(), rows, args->has("json"));
    if (!text)
      return failCommand(result, text.takeError());
    result.Printf("%s", text->c_str());
    result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
    return true;
  }
};

} // namespace

void registerViewCommands(lldb::SBCommand &root) {
  addCommand(
      root, "save", new SaveCommand(),
      "Write a snapshot again in another format: Fuchsia trace (fxt, opens "
      "in ui.perfetto.dev), Chrome JSON (either gzip-compressed with .gz), "
      "folded stacks, the call tree as text, an LLDB intel-pt "
      "trace bundle ('trace load DIR/trace.json'), or a per-thread Intel PT "
      "perf.data ('perf script --itrace').\n\nExample:\n  (lldb) "
      "magic-trace save -o trace-dir --format bundle\n" +
          describeOptions(saveOptions),
      "magic-trace save -o FILE [--format "
      "fxt|fxt.gz|json|json.gz|folded|text|bundle|perf] "
      "[--snapshot K] [--window DURATION|all] [--max-slices N] [--max-trace "
      "SIZE]");
  addCommand(
      root, "report", new ReportCommand(),
      "Print the call tree of a snapshot in the terminal, with total and "
      "self times; or, with --annotate FUNCTION, the exact instructions, "
      "entries and self time of each source line of FUNCTION; or, with "
      "--top, its functions by self time, calls and instructions.\n\n"
      "Examples:\n  (lldb) magic-trace report --last 20us --depth 6\n"
      "  (lldb) magic-trace report --annotate fib --insns\n"
      "  (lldb) magic-trace report --top 10 --by calls\n" +
          describeOptions(reportOptions),
      "magic-trace report [--last DURATION] [--thread TID] [--depth N] "
      "[--snapshot K] [--window DURATION|all] [--max-slices N] [--max-trace "
      "SIZE] "
      "[--annotate FUNCTION [--insns] [--rows N] | --top [N] [--by ORDER]] "
      "[--json]");
  addCommand(
      root, "diff", new DiffCommand(),
      "Compare two snapshots of one program: per function, calls, "
      "instructions, self and total time in each and the difference, the "
      "largest change first; and the call paths that ran in one only.\n\n"
      "Example:\n  (lldb) magic-trace diff 1 2\n" +
          describeOptions(diffOptions),
      "magic-trace diff K1 K2 [--rows N] [--json]");
}

} // namespace magic_trace::plugin
