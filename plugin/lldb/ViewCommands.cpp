//===- ViewCommands.cpp - save, report ---------------------------------===//
//
// Views of finished snapshots: write one again in another format (save),
// print its call tree in the terminal (report).
//
//===----------------------------------------------------------------------===//
#include "CommandArgs.h"
#include "CommandSupport.h"
#include "Commands.h"
#include "Session.h"

#include "magic_trace/TraceWriters.h"

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
  if (!args.has("window") && !args.has("max-slices"))
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
};

class ReportCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, reportOptions, "report");
    if (!args)
      return failCommand(result, args.takeError());
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
      "[--snapshot K] [--window DURATION|all] [--max-slices N]");
  addCommand(
      root, "report", new ReportCommand(),
      "Print the call tree of a snapshot in the terminal, with total and "
      "self times.\n\nExample:\n  (lldb) magic-trace report --last 20us "
      "--depth 6\n" +
          describeOptions(reportOptions),
      "magic-trace report [--last DURATION] [--thread TID] [--depth N] "
      "[--snapshot K] [--window DURATION|all] [--max-slices N]");
}

} // namespace magic_trace::plugin
