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

#include "magic_trace/Bundle.h"
#include "magic_trace/PerfData.h"
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
};

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
    if (std::error_code ec = llvm::sys::fs::create_directories(target))
      return error("cannot create '%s': %s (check the path)", target.c_str(),
                   ec.message().c_str());
    std::string name = llvm::sys::path::filename(module.fileCopy).str();
    llvm::sys::path::append(target, name);
    if (std::error_code ec = llvm::sys::fs::copy_file(module.fileCopy, target))
      return error("cannot copy '%s' into the bundle: %s",
                   module.fileCopy.c_str(), ec.message().c_str());
    module.fileCopy = "modules/" + name;
  }
  return copy;
}

/// The format `path`'s suffix names: a trace format's (outputFormatOf),
/// .data for perf, else fxt.
std::string formatOfPath(llvm::StringRef path) {
  if (path.ends_with(".data"))
    return "perf";
  llvm::Expected<OutputFormat> format = outputFormatOf(path);
  if (!format) {
    llvm::consumeError(format.takeError());
    return "fxt";
  }
  return format->name.str();
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
    llvm::Expected<SnapshotRecord *> record =
        sessionFor(debugger).findSnapshot(number);
    if (!record)
      return failCommand(result, record.takeError());
    std::string path = args->get("output", "");
    std::string format = args->get("format", "");
    if (format.empty())
      format = formatOfPath(path);
    if (format == "perf") {
      if (llvm::Error err = writePerfData((*record)->snapshot, path))
        return failCommand(result, std::move(err));
      return succeed(result, "magic-trace: snapshot " +
                                 std::to_string((*record)->number) +
                                 " saved as perf.data to " + path +
                                 " (decode it with 'perf script -i " + path +
                                 " --itrace=cr')");
    }
    if (format == "bundle") {
      llvm::Expected<Snapshot> bundled =
          withCopiesInside((*record)->snapshot, path);
      if (!bundled)
        return failCommand(result, bundled.takeError());
      if (llvm::Error err = writeBundle(*bundled, path))
        return failCommand(result, std::move(err));
      // The stepper's record of what ran, as magic-trace-emulate writes it.
      if (!(*record)->truth.empty())
        if (llvm::Error err = writeGroundTruth((*record)->truth, path))
          return failCommand(result, std::move(err));
      return succeed(
          result, "magic-trace: snapshot " + std::to_string((*record)->number) +
                      " saved as an intel-pt trace bundle in " + path +
                      " (load it with 'trace load " + path + "/trace.json')");
    }
    llvm::Expected<OutputFormat> parsed = outputFormatNamed(format);
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      std::string names;
      for (const OutputFormat &known : outputFormats())
        names += known.name.str() + ", ";
      return failCommand(result, error("unknown format '%s' (use %sbundle or "
                                       "perf)",
                                       format.c_str(), names.c_str()));
    }
    if (llvm::Error err = writeTrace((*record)->result.model, path, *parsed))
      return failCommand(result, std::move(err));
    return succeed(result, "magic-trace: snapshot " +
                               std::to_string((*record)->number) +
                               " saved as " + format + " to " + path);
  }
};

// --- report --------------------------------------------------------------

const OptionSpec reportOptions[] = {
    {'l', "last", true, "DURATION",
     "Only the final DURATION before the stop, e.g. 20us, 1.5ms."},
    {'t', "thread", true, "TID", "Only this thread."},
    {'d', "depth", true, "N", "Only frames up to depth N."},
    {'k', "snapshot", true, "K", "Which snapshot (default: the last)."},
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
    llvm::Expected<SnapshotRecord *> record =
        sessionFor(debugger).findSnapshot(number);
    if (!record)
      return failCommand(result, record.takeError());
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
    TraceModel &model = (*record)->result.model;
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
                                 (*record)->number, (unsigned long long)tid));
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
      "[--snapshot K]");
  addCommand(
      root, "report", new ReportCommand(),
      "Print the call tree of a snapshot in the terminal, with total and "
      "self times.\n\nExample:\n  (lldb) magic-trace report --last 20us "
      "--depth 6\n" +
          describeOptions(reportOptions),
      "magic-trace report [--last DURATION] [--thread TID] [--depth N] "
      "[--snapshot K]");
}

} // namespace magic_trace::plugin
