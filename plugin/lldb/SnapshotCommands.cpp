//===- SnapshotCommands.cpp - snapshot, snapshot-on --------------------===//
//
// Snapshots now (snapshot) and whenever a breakpoint hits (snapshot-on).
//
//===----------------------------------------------------------------------===//
#include "CommandArgs.h"
#include "CommandSupport.h"
#include "Commands.h"
#include "QemuBackend.h"
#include "Session.h"

#include "lldb/API/SBBreakpoint.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace magic_trace::plugin {
namespace {

// --- snapshot ------------------------------------------------------------

const OptionSpec snapshotOptions[] = {
    {'o', "output", true, "FILE",
     "Write the trace here (default magic-trace-%N.fxt; the suffix picks "
     "the format: .fxt, .fxt.gz, .json, .json.gz, .folded, .txt)."},
    {'j', "json", false, nullptr, "Also print the snapshot as JSON."},
    kWindowOption,
    kMaxSlicesOption,
    kMaxTraceOption,
};

class SnapshotCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, snapshotOptions, "snapshot");
    if (!args)
      return failCommand(result, args.takeError());
    llvm::Expected<WindowOptions> window = parseWindowArgs(*args);
    if (!window)
      return failCommand(result, window.takeError());
    llvm::Expected<Session *> session = attachedSession(debugger);
    if (!session)
      return failCommand(result, session.takeError());
    std::string path = expandPattern(args->get("output", "magic-trace-%N.fxt"),
                                     (*session)->snapshots.next());
    lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
    uint64_t tid =
        process.IsValid() ? process.GetSelectedThread().GetThreadID() : 0;
    llvm::Expected<SnapshotRecord *> record =
        takeSnapshot(debugger, **session, tid, "command", path, *window);
    if (!record)
      return failCommand(result, record.takeError());
    std::string text = snapshotLine(**record);
    if (args->has("json"))
      text += "\n" + jsonText(snapshotJson(**record));
    return succeed(result, text);
  }
};

// --- snapshot-on ---------------------------------------------------------

const OptionSpec snapshotOnOptions[] = {
    {'n', "name", true, "FUNCTION", "Trigger on entry to this function."},
    {'f', "file", true, "FILE", "Trigger at a source line (with --line)."},
    {'l', "line", true, "LINE", "The line of --file."},
    {'a', "address", true, "ADDRESS", "Trigger at this load address."},
    {'c', "count", true, "N",
     "Stop triggering after N hits (default: every "
     "hit)."},
    {'C', "continue", false, nullptr,
     "Resume (traced) after each snapshot instead of stopping."},
    {'o', "output", true, "PATTERN",
     "Output file; %N is the snapshot number (default magic-trace-%N.fxt)."},
    kWindowOption,
    kMaxSlicesOption,
    kMaxTraceOption,
};

class SnapshotOnCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseArgs(command, snapshotOnOptions, "snapshot-on");
    if (!args)
      return failCommand(result, args.takeError());
    llvm::Expected<WindowOptions> window = parseWindowArgs(*args);
    if (!window)
      return failCommand(result, window.takeError());
    llvm::Expected<Session *> session = attachedSession(debugger);
    if (!session)
      return failCommand(result, session.takeError());
    lldb::SBTarget target = debugger.GetSelectedTarget();
    int given = args->has("name") + args->has("file") + args->has("address") +
                !args->positional.empty();
    if (given != 1 || args->positional.size() > 1)
      return failCommand(
          result, error("give exactly one of -n FUNCTION, -f FILE -l LINE, "
                        "-a ADDRESS or a BREAKPOINT-ID (see 'help "
                        "magic-trace snapshot-on')"));
    Trigger trigger;
    lldb::SBBreakpoint breakpoint;
    bool created = true;
    if (args->has("name")) {
      std::string name = args->get("name", "");
      breakpoint = target.BreakpointCreateByName(name.c_str());
      trigger.description = "function " + name;
    } else if (args->has("file")) {
      if (!args->has("line"))
        return failCommand(result, error("--file needs --line LINE"));
      llvm::Expected<unsigned> line = parseCount(args->get("line", ""), "line");
      if (!line)
        return failCommand(result, line.takeError());
      std::string file = args->get("file", "");
      breakpoint = target.BreakpointCreateByLocation(file.c_str(), *line);
      trigger.description = file + ":" + std::to_string(*line);
    } else if (args->has("address")) {
      uint64_t address = 0;
      if (llvm::StringRef(args->get("address", "")).getAsInteger(0, address))
        return failCommand(result, error("bad address '%s' (e.g. 0x401136)",
                                         args->get("address", "").c_str()));
      breakpoint = target.BreakpointCreateByAddress(address);
      trigger.description = "address " + args->get("address", "");
    } else {
      lldb::break_id_t id = 0;
      if (llvm::StringRef(args->positional.front()).getAsInteger(0, id))
        return failCommand(result, error("bad breakpoint id '%s' (see "
                                         "'breakpoint list')",
                                         args->positional.front().c_str()));
      breakpoint = target.FindBreakpointByID(id);
      if (!breakpoint.IsValid())
        return failCommand(result, error("no breakpoint %d (see 'breakpoint "
                                         "list')",
                                         id));
      created = false;
      trigger.description = "breakpoint " + std::to_string(id);
    }
    // A function or line of a library not loaded yet (a process stopped at
    // its first instruction has none), or a user's breakpoint that waits for
    // one: pending, as LLDB's own breakpoints. An address is not a name
    // that a library can bring.
    bool pending = breakpoint.IsValid() && breakpoint.GetNumLocations() == 0 &&
                   !args->has("address");
    if (!breakpoint.IsValid() ||
        (breakpoint.GetNumLocations() == 0 && !pending)) {
      if (breakpoint.IsValid() && created)
        target.BreakpointDelete(breakpoint.GetID());
      return failCommand(result,
                         error("%s matches no code in the target (check the "
                               "address)",
                               trigger.description.c_str()));
    }
    if (args->has("count")) {
      llvm::Expected<unsigned> count =
          parseCount(args->get("count", ""), "count");
      if (!count)
        return failCommand(result, count.takeError());
      trigger.count = *count;
    }
    trigger.breakpoint = breakpoint.GetID();
    trigger.ownsBreakpoint = created;
    trigger.continueAfter = args->has("continue");
    trigger.pattern = args->get("output", "magic-trace-%N.fxt");
    trigger.window = *window;
    // Under QEMU, --continue on a function or address fires inside the
    // recorder: no breakpoint to slow QEMU's page or stop the process.
    if ((*session)->backend == "qemu" && trigger.continueAfter && created &&
        !pending && (args->has("name") || args->has("address"))) {
      llvm::Expected<std::vector<uint64_t>> entries =
          armRecorderTrigger(target, **session, breakpoint, trigger.count);
      if (!entries)
        return failCommand(result, entries.takeError());
      trigger.breakpoint = 0;
      trigger.ownsBreakpoint = false;
      trigger.recorderAddress = entries->front();
      {
        // The recorder snapshots' worker looks triggers up by address.
        std::lock_guard<std::mutex> hold((*session)->lock);
        (*session)->triggers.push_back(trigger);
      }
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "magic-trace: the recorder takes a snapshot at each start of "
         << trigger.description << " (" << llvm::format_hex(entries->front(), 0)
         << (entries->size() > 1 ? " and more" : "") << ")";
      if (trigger.count)
        os << ", " << trigger.count << (trigger.count == 1 ? " hit" : " hits");
      os << ", and the process runs on (no breakpoint) -> " << trigger.pattern
         << "; the snapshots are listed at the next stop, exit or 'magic-trace "
            "status'";
      return succeed(result, text);
    }
    {
      std::lock_guard<std::mutex> hold((*session)->lock);
      (*session)->triggers.push_back(trigger);
    }
    bool recordsRunning =
        (*session)->backend == "qemu" || (*session)->backend == "perf";
    if (recordsRunning)
      armTrigger(debugger, breakpoint);
    std::string text;
    llvm::raw_string_ostream os(text);
    if (pending)
      os << "warning: " << trigger.description
         << " matches no code yet: the trigger waits for a library that has "
            "it to load (check the spelling)\n";
    os << "magic-trace: snapshot on breakpoint " << trigger.breakpoint << " ("
       << trigger.description << ", " << breakpoint.GetNumLocations()
       << (breakpoint.GetNumLocations() == 1 ? " location" : " locations")
       << ") -> " << trigger.pattern;
    if (trigger.count)
      os << ", " << trigger.count << (trigger.count == 1 ? " hit" : " hits");
    if (trigger.continueAfter)
      os << ", continuing after each";
    os << (recordsRunning ? "; continue as usual (any command that resumes "
                            "the process records)"
                          : "; run 'magic-trace continue'");
    return succeed(result, text);
  }
};

} // namespace

void registerSnapshotCommands(lldb::SBCommand &root) {
  addCommand(
      root, "snapshot", new SnapshotCommand(),
      "Snapshot the trace now (the process is stopped): decode, symbolize, "
      "build the call-stack timeline and write it.\n\nExample:\n  (lldb) "
      "magic-trace snapshot -o before-crash.fxt\n" +
          describeOptions(snapshotOptions),
      "magic-trace snapshot [-o FILE] [--json] [--window DURATION|all] "
      "[--max-slices N] [--max-trace SIZE]");
  addCommand(
      root, "snapshot-on", new SnapshotOnCommand(),
      "Take a snapshot whenever a breakpoint is hit (any thread) during "
      "'magic-trace continue' (with the qemu and perf backends, during any "
      "command that resumes the process), and print one line: snapshot number, "
      "threads, the window it holds of the trace, slices, errors, "
      "file.\n\nExample:\n  (lldb) magic-trace "
      "snapshot-on -n handle_order --count 2 -o order-%N.fxt\n" +
          describeOptions(snapshotOnOptions),
      "magic-trace snapshot-on (-n FUNCTION | -f FILE -l LINE | -a ADDRESS | "
      "BREAKPOINT-ID) [--count N] [--continue] [-o PATTERN] [--window "
      "DURATION|all] [--max-slices N] [--max-trace SIZE]");
}

} // namespace magic_trace::plugin
