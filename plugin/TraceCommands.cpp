//===- TraceCommands.cpp - attach, status, detach, continue, snapshots ----===//
//
// The recording commands. Each parses its options with CommandArgs, turns SB
// objects into core types (Session.h) and reports failures with failCommand.
//
//===----------------------------------------------------------------------===//
#include "CommandArgs.h"
#include "Commands.h"
#include "EmulateStepper.h"
#include "PerfBackend.h"
#include "Session.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/MachineFacts.h"
#include "magic_trace/TraceWriters.h"
#include "magic_trace/VirtualClock.h"

#include "lldb/API/SBBreakpoint.h"
#include "lldb/API/SBFile.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace magic_trace::plugin {
namespace {

llvm::Error error(const char *format) {
  return llvm::createStringError("%s", format);
}
template <typename... Ts> llvm::Error error(const char *format, Ts... values) {
  return llvm::createStringError(format, values...);
}

bool succeed(lldb::SBCommandReturnObject &result, llvm::StringRef text) {
  if (!text.empty())
    result.AppendMessage(text.str().c_str());
  result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
  return true;
}

std::string jsonText(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text;
}

/// "4M", "64KiB", "1G", "65536" -> bytes.
llvm::Expected<uint64_t> parseSize(llvm::StringRef text) {
  llvm::StringRef digits = text.take_while(llvm::isDigit);
  uint64_t value = 0;
  if (digits.empty() || digits.getAsInteger(10, value))
    return error("bad size '%s' (use bytes or K, M, G: e.g. 4M)",
                 text.str().c_str());
  uint64_t scale = 1;
  std::string lower = text.drop_front(digits.size()).lower();
  llvm::StringRef u(lower);
  u.consume_back("ib");
  u.consume_back("b");
  if (u == "k")
    scale = 1 << 10;
  else if (u == "m")
    scale = 1 << 20;
  else if (u == "g")
    scale = 1 << 30;
  else if (!u.empty())
    return error("bad size unit in '%s' (use K, M or G: e.g. 4M)",
                 text.str().c_str());
  uint64_t bytes = value * scale;
  if (bytes < 4096 || (bytes & (bytes - 1)))
    return error("snapshot size %s is not a power of two of at least 4K "
                 "(e.g. 64K, 4M)",
                 text.str().c_str());
  return bytes;
}

llvm::Expected<unsigned> parseCount(llvm::StringRef text,
                                    llvm::StringRef what) {
  unsigned value = 0;
  if (text.getAsInteger(0, value))
    return error("bad %s '%s' (give a number)", what.str().c_str(),
                 text.str().c_str());
  return value;
}

/// Parses a command that takes options only: a positional argument is an
/// error.
llvm::Expected<ParsedArgs> parseOptionsOnly(const char *const *argv,
                                            llvm::ArrayRef<OptionSpec> specs,
                                            llvm::StringRef command) {
  llvm::Expected<ParsedArgs> args = parseArgs(argv, specs, command);
  if (!args || args->positional.empty())
    return args;
  return error("unexpected argument '%s' (see 'help magic-trace %s')",
               args->positional.front().c_str(), command.str().c_str());
}

/// The session, which must be recording a live process.
llvm::Expected<Session *> attachedSession(lldb::SBDebugger &debugger) {
  Session &session = sessionFor(debugger);
  if (!session.attached)
    return error("magic-trace is not attached (run 'magic-trace attach' "
                 "first)");
  return &session;
}

/// Prints a line now (progress during a long command).
void printNow(lldb::SBDebugger &debugger, llvm::StringRef line) {
  lldb::SBFile out = debugger.GetOutputFile();
  if (!out.IsValid())
    return;
  std::string text = line.str() + "\n";
  size_t written = 0;
  out.Write(reinterpret_cast<const uint8_t *>(text.data()), text.size(),
            &written);
  out.Flush();
}

// --- attach --------------------------------------------------------------

const OptionSpec attachOptions[] = {
    {'b', "backend", true, "auto|perf|emulate",
     "Recording backend (default auto: perf where Intel PT exists, else "
     "emulate)."},
    {'s', "snapshot-size", true, "SIZE",
     "Ring buffer per thread, a power of two (default 4M)."},
    {'t', "timer-resolution", true, "low|normal|high",
     "Timing packets: TSC only, +MTC/CYC, +every return as TIP."},
    {'T', "threads", true, "all|current|TID,...",
     "Threads to trace (default all)."},
};

class AttachCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, attachOptions, "attach");
    if (!args)
      return failCommand(result, args.takeError());
    Session &session = sessionFor(debugger);
    lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
    if (!process.IsValid() || process.GetState() == lldb::eStateExited ||
        process.GetState() == lldb::eStateInvalid)
      return failCommand(result,
                         error("no process to trace (start one first, e.g. "
                               "'b main' and 'run')"));
    if (session.attached && session.pid == process.GetProcessID() &&
        !session.exited)
      return failCommand(
          result, error("magic-trace is already attached to process %llu "
                        "(run 'magic-trace detach' first)",
                        (unsigned long long)session.pid));
    if (process.GetState() != lldb::eStateStopped)
      return failCommand(result,
                         error("the process is running (stop it first with "
                               "'process interrupt')"));

    std::string backend = args->get("backend", "auto");
    std::string note;
    if (backend == "auto") {
      MachineFacts facts = probeMachine();
      bool perfWorks = facts.backends.size() > 0 && facts.backends[0].available;
      note = perfWorks ? " (auto: Intel PT is present)"
                       : " (auto: " + facts.backends[0].reason + ")";
      backend = perfWorks ? "perf" : "emulate";
    } else if (backend != "emulate" && backend != "perf") {
      return failCommand(result,
                         error("unknown backend '%s' (use auto, perf or "
                               "emulate)",
                               backend.c_str()));
    }

    PacketWriter::Options writerOptions;
    if (args->has("snapshot-size")) {
      llvm::Expected<uint64_t> size = parseSize(args->get("snapshot-size", ""));
      if (!size)
        return failCommand(result, size.takeError());
      writerOptions.bufferSize = *size;
    }
    std::string timer = args->get("timer-resolution", "normal");
    if (timer == "low")
      writerOptions.timer = TimerResolution::Low;
    else if (timer == "normal")
      writerOptions.timer = TimerResolution::Normal;
    else if (timer == "high") {
      writerOptions.timer = TimerResolution::High;
      writerOptions.noRetComp = true;
    } else
      return failCommand(result, error("unknown timer resolution '%s' (use "
                                       "low, normal or high)",
                                       timer.c_str()));

    bool allThreads = true;
    std::vector<uint64_t> filter;
    std::string threads = args->get("threads", "all");
    if (threads == "current") {
      allThreads = false;
      filter.push_back(process.GetSelectedThread().GetThreadID());
    } else if (threads != "all") {
      allThreads = false;
      llvm::SmallVector<llvm::StringRef> parts;
      llvm::StringRef(threads).split(parts, ',');
      for (llvm::StringRef part : parts) {
        uint64_t tid = 0;
        if (part.trim().getAsInteger(0, tid) ||
            !process.GetThreadByID(tid).IsValid())
          return failCommand(result,
                             error("no thread '%s' in the process (see 'thread "
                                   "list'; use all, current or TIDs)",
                                   part.str().c_str()));
        filter.push_back(tid);
      }
    }

    std::vector<std::string> perfNotes;
    std::unique_ptr<PerfRecorder> perfRecorder;
    if (backend == "perf") {
      // Start the hardware first: on failure the session stays as it was.
      Session trial;
      trial.allThreads = allThreads;
      trial.threadFilter = filter;
      if (llvm::Error err = startPerf(trial, process, writerOptions.timer,
                                      writerOptions.bufferSize, perfNotes))
        return failCommand(result, std::move(err));
      perfRecorder = std::move(trial.perf);
    }

    llvm::Expected<std::unique_ptr<InsnClassifier>> classifier =
        InsnClassifier::create();
    if (!classifier)
      return failCommand(result, classifier.takeError());

    // A new recording; snapshots of earlier ones stay for save/report.
    session.attached = true;
    session.exited = false;
    session.pid = process.GetProcessID();
    session.backend = backend;
    session.writerOptions = writerOptions;
    session.timerName = timer;
    session.allThreads = allThreads;
    session.threadFilter = filter;
    session.recorders.clear();
    session.triggers.clear();
    session.stats = {};
    session.classifier = std::move(*classifier);
    session.perf = std::move(perfRecorder);
    // The emulator's packets come from a virtual CPU without errata; the
    // perf backend's from this machine's CPU, whose errata libipt applies.
    session.cpu = session.perf ? probeMachine().cpu : emulatorCpu();
    lldb::SBTarget target = debugger.GetSelectedTarget();
    session.lastModules = captureModules(target);
    for (uint32_t i = 0; i < process.GetNumThreads() && !session.perf; ++i) {
      uint64_t tid = process.GetThreadAtIndex(i).GetThreadID();
      if (!session.traces(tid))
        continue;
      llvm::Expected<ThreadRecorder *> recorder = session.recorder(tid);
      if (!recorder) {
        session.attached = false;
        return failCommand(result, recorder.takeError());
      }
    }

    std::string text;
    llvm::raw_string_ostream os(text);
    os << "magic-trace: recording process " << session.pid << " with backend "
       << backend << note << ", " << (writerOptions.bufferSize >> 10)
       << " KiB per thread, timer " << timer << ", threads " << threads << "\n";
    for (const std::string &perfNote : perfNotes)
      os << "note: " << perfNote << "\n";
    if (session.perf)
      os << "magic-trace: the hardware records while the process runs; "
            "'magic-trace continue' or 'continue' both trace";
    else
      os << "warning: under the emulate backend only 'magic-trace continue' "
            "records; a plain 'continue' runs untraced (shown as [untraced])";
    return succeed(result, text);
  }
};

// --- status --------------------------------------------------------------

const OptionSpec statusOptions[] = {
    {'j', "json", false, nullptr, "Print the status as one JSON object."},
};

class StatusCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, statusOptions, "status");
    if (!args)
      return failCommand(result, args.takeError());
    Session &session = sessionFor(debugger);
    if (args->has("json"))
      return succeed(result, jsonText(session.statusJson()));
    std::string text;
    llvm::raw_string_ostream os(text);
    if (!session.attached)
      os << "magic-trace: not attached\n";
    else
      os << "magic-trace: recording process " << session.pid << " ("
         << session.backend << ", " << (session.writerOptions.bufferSize >> 10)
         << " KiB per thread, timer " << session.timerName << ")"
         << (session.exited ? ", process exited" : "") << "\n";
    for (const auto &[tid, recorder] : session.recorders)
      os << "  thread " << tid << ": " << recorder.writer->instructions()
         << " instructions, " << recorder.writer->buffer().written()
         << " bytes of PT"
         << (recorder.writer->buffer().wrapped() ? " (ring wrapped)" : "")
         << (recorder.gone ? ", exited" : "") << "\n";
    if (session.perf)
      for (uint64_t tid : session.perf->threadIds())
        os << "  thread " << tid << ": Intel PT ring of "
           << (session.perf->bufferSize(tid) >> 10) << " KiB\n";
    for (const Trigger &trigger : session.triggers)
      os << "  trigger: breakpoint " << trigger.breakpoint << " ("
         << trigger.description << "), " << trigger.hits << " hits"
         << (trigger.count ? ", count " + std::to_string(trigger.count) : "")
         << (trigger.continueAfter ? ", continue" : "") << ", -> "
         << trigger.pattern << (trigger.active() ? "" : " (done)") << "\n";
    if (session.stats.seconds > 0)
      os << "  stepper: " << session.stats.instructions << " instructions in "
         << llvm::format("%.2f", session.stats.seconds) << " s ("
         << llvm::format("%.0f",
                         session.stats.instructions / session.stats.seconds)
         << " instructions/s)\n";
    for (const auto &record : session.snapshots)
      os << "  " << snapshotLine(*record) << "\n";
    return succeed(result, llvm::StringRef(text).rtrim());
  }
};

// --- detach --------------------------------------------------------------

class DetachCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args = parseOptionsOnly(command, {}, "detach");
    if (!args)
      return failCommand(result, args.takeError());
    llvm::Expected<Session *> session = attachedSession(debugger);
    if (!session)
      return failCommand(result, session.takeError());
    lldb::SBTarget target = debugger.GetSelectedTarget();
    for (const Trigger &trigger : (*session)->triggers)
      if (trigger.ownsBreakpoint)
        target.BreakpointDelete(trigger.breakpoint);
    (*session)->triggers.clear();
    (*session)->recorders.clear();
    (*session)->perf.reset(); // Closes the perf events and unmaps the rings.
    (*session)->attached = false;
    return succeed(result, "magic-trace: stopped recording process " +
                               std::to_string((*session)->pid) +
                               " (snapshots stay available to save and "
                               "report)");
  }
};

// --- continue ------------------------------------------------------------

Trigger *findTrigger(Session &session, lldb::break_id_t breakpoint) {
  for (Trigger &trigger : session.triggers)
    if (trigger.breakpoint == breakpoint)
      return &trigger;
  return nullptr;
}

/// Runs traced until a stop that is not a trigger with --continue, taking
/// snapshots on the way. Lines go to `os`.
llvm::Error continueTraced(lldb::SBDebugger &debugger, Session &session,
                           llvm::raw_ostream &os, bool json) {
  lldb::SBTarget target = debugger.GetSelectedTarget();
  auto progress = [&](uint64_t instructions, double seconds) {
    printNow(debugger, "magic-trace: " + std::to_string(instructions) +
                           " instructions traced in " +
                           std::to_string(int(seconds)) +
                           " s (Ctrl-C stops)...");
  };
  uint64_t before = session.stats.instructions;
  while (true) {
    llvm::Expected<StepOutcome> outcome =
        session.perf ? runPerf(debugger, session)
                     : runTraced(debugger, session, progress);
    if (!outcome)
      return outcome.takeError();
    if (outcome->kind == StepOutcome::Breakpoint) {
      Trigger *trigger = findTrigger(session, outcome->breakpoint);
      if (!trigger || !trigger->active()) {
        os << "magic-trace: thread " << outcome->tid
           << " stopped at breakpoint " << outcome->breakpoint << " at "
           << llvm::format_hex(outcome->pc, 0) << "\n";
        break;
      }
      ++trigger->hits;
      std::string path =
          expandPattern(trigger->pattern, session.snapshots.size() + 1);
      llvm::Expected<SnapshotRecord *> record = takeSnapshot(
          debugger, session, outcome->tid,
          "breakpoint " + std::to_string(trigger->breakpoint), path);
      if (!record)
        return record.takeError();
      os << snapshotLine(**record) << "\n";
      if (json)
        os << jsonText(snapshotJson(**record)) << "\n";
      if (!trigger->active())
        target.FindBreakpointByID(trigger->breakpoint).SetEnabled(false);
      if (trigger->continueAfter)
        continue;
      break;
    }
    if (outcome->kind == StepOutcome::Exited) {
      os << "magic-trace: process exited with status " << outcome->exitStatus
         << "\n";
      for (Trigger &trigger : session.triggers) {
        if (trigger.hits != 0)
          continue;
        // The buffer still holds the end of the run: keep it.
        std::string path =
            expandPattern(trigger.pattern, session.snapshots.size() + 1);
        llvm::Expected<SnapshotRecord *> record =
            takeSnapshot(debugger, session, 0, "exit", path);
        if (!record)
          return record.takeError();
        os << "magic-trace: the process exited before breakpoint "
           << trigger.breakpoint << " (" << trigger.description
           << ") was hit; snapshot at exit\n";
        os << snapshotLine(**record) << "\n";
        if (json)
          os << jsonText(snapshotJson(**record)) << "\n";
        break;
      }
      break;
    }
    if (outcome->kind == StepOutcome::Interrupted) {
      os << "magic-trace: interrupted\n";
      break;
    }
    os << "magic-trace: thread " << outcome->tid
       << " stopped: " << outcome->description << "\n";
    break;
  }
  uint64_t traced = session.stats.instructions - before;
  os << "magic-trace: traced " << traced << " instructions ("
     << llvm::format("%.0f",
                     session.stats.seconds > 0
                         ? session.stats.instructions / session.stats.seconds
                         : 0.0)
     << " instructions/s)";
  return llvm::Error::success();
}

const OptionSpec continueOptions[] = {
    {'j', "json", false, nullptr,
     "Also print each snapshot as one JSON object."},
};

class ContinueCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, continueOptions, "continue");
    if (!args)
      return failCommand(result, args.takeError());
    llvm::Expected<Session *> session = attachedSession(debugger);
    if (!session)
      return failCommand(result, session.takeError());
    if ((*session)->exited)
      return failCommand(result, error("the process has exited (save or "
                                       "report its snapshots, or launch it "
                                       "again and attach)"));
    std::string text;
    llvm::raw_string_ostream os(text);
    if (llvm::Error err =
            continueTraced(debugger, **session, os, args->has("json"))) {
      result.Printf("%s", text.c_str());
      return failCommand(result, std::move(err));
    }
    return succeed(result, text);
  }
};

// --- snapshot ------------------------------------------------------------

const OptionSpec snapshotOptions[] = {
    {'o', "output", true, "FILE",
     "Write the trace here (default magic-trace-%N.fxt; the suffix picks "
     "the format: .fxt, .fxt.gz, .json, .folded, .txt)."},
    {'j', "json", false, nullptr, "Also print the snapshot as JSON."},
};

class SnapshotCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, snapshotOptions, "snapshot");
    if (!args)
      return failCommand(result, args.takeError());
    llvm::Expected<Session *> session = attachedSession(debugger);
    if (!session)
      return failCommand(result, session.takeError());
    std::string path = expandPattern(args->get("output", "magic-trace-%N.fxt"),
                                     (*session)->snapshots.size() + 1);
    lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
    uint64_t tid =
        process.IsValid() ? process.GetSelectedThread().GetThreadID() : 0;
    llvm::Expected<SnapshotRecord *> record =
        takeSnapshot(debugger, **session, tid, "command", path);
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
};

class SnapshotOnCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseArgs(command, snapshotOnOptions, "snapshot-on");
    if (!args)
      return failCommand(result, args.takeError());
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
    if (!breakpoint.IsValid() || breakpoint.GetNumLocations() == 0) {
      if (breakpoint.IsValid() && created)
        target.BreakpointDelete(breakpoint.GetID());
      return failCommand(
          result, error("%s matches no code in the target (check the "
                        "spelling; for a library loaded later, set a pending "
                        "breakpoint with 'breakpoint set' and pass its id)",
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
    (*session)->triggers.push_back(trigger);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "magic-trace: snapshot on breakpoint " << trigger.breakpoint << " ("
       << trigger.description << ", " << breakpoint.GetNumLocations()
       << (breakpoint.GetNumLocations() == 1 ? " location" : " locations")
       << ") -> " << trigger.pattern;
    if (trigger.count)
      os << ", " << trigger.count << (trigger.count == 1 ? " hit" : " hits");
    if (trigger.continueAfter)
      os << ", continuing after each";
    os << "; run 'magic-trace continue'";
    return succeed(result, text);
  }
};

// --- save ----------------------------------------------------------------

const OptionSpec saveOptions[] = {
    {'o', "output", true, "FILE", "Where to write (a directory for bundle)."},
    {'F', "format", true, "fxt|json|folded|bundle",
     "Output format (default: from the suffix of FILE, else fxt)."},
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
    if (format.empty()) {
      llvm::StringRef p(path);
      format = p.ends_with(".json")     ? "json"
               : p.ends_with(".folded") ? "folded"
                                        : "fxt";
    }
    if (format == "bundle") {
      llvm::Expected<Snapshot> bundled =
          withCopiesInside((*record)->snapshot, path);
      if (!bundled)
        return failCommand(result, bundled.takeError());
      if (llvm::Error err = writeBundle(*bundled, path))
        return failCommand(result, std::move(err));
      return succeed(
          result, "magic-trace: snapshot " + std::to_string((*record)->number) +
                      " saved as an intel-pt trace bundle in " + path +
                      " (load it with 'trace load " + path + "/trace.json')");
    }
    llvm::Expected<TraceFormat> parsed = parseTraceFormat(format);
    if (!parsed || *parsed == TraceFormat::Text) {
      if (!parsed)
        llvm::consumeError(parsed.takeError());
      return failCommand(result, error("unknown format '%s' (use fxt, json, "
                                       "folded or bundle)",
                                       format.c_str()));
    }
    if (llvm::Error err = writeTrace((*record)->result, path, *parsed))
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

void add(lldb::SBCommand &root, const char *name,
         lldb::SBCommandPluginInterface *impl, const std::string &help,
         const char *syntax) {
  // `help magic-trace` lists the first paragraph; `help magic-trace NAME`
  // shows everything. LLDB keeps the pointers: the strings must outlive it.
  static std::vector<std::unique_ptr<std::string>> texts;
  texts.push_back(
      std::make_unique<std::string>(help.substr(0, help.find("\n\n"))));
  const char *brief = texts.back()->c_str();
  size_t rest = help.find("\n\n");
  texts.push_back(std::make_unique<std::string>(
      rest == std::string::npos ? "" : help.substr(rest + 2)));
  lldb::SBCommand command = root.AddCommand(name, impl, brief, syntax);
  command.SetHelpLong(texts.back()->c_str());
}

} // namespace

void registerTraceCommands(lldb::SBCommand &root) {
  add(root, "attach", new AttachCommand(),
      "Start recording the current process (stopped, e.g. at a breakpoint "
      "in main). The emulate backend records only while "
      "'magic-trace continue' runs.\n\nExample:\n  (lldb) b main\n  (lldb) "
      "run\n  (lldb) magic-trace attach --snapshot-size 1M\n" +
          describeOptions(attachOptions),
      "magic-trace attach [--backend auto|perf|emulate] [--snapshot-size "
      "SIZE] [--timer-resolution low|normal|high] [--threads "
      "all|current|TID,...]");
  add(root, "status", new StatusCommand(),
      "Show the recording: backend, threads and bytes recorded, triggers, "
      "snapshots, stepping speed.\n\nExample:\n  (lldb) magic-trace status "
      "--json\n" +
          describeOptions(statusOptions),
      "magic-trace status [--json]");
  add(root, "detach", new DetachCommand(),
      "Stop recording (and delete the breakpoints snapshot-on created). "
      "Snapshots stay "
      "available to 'save' and 'report'.\n\nExample:\n  (lldb) magic-trace "
      "detach\n",
      "magic-trace detach");
  add(root, "continue", new ContinueCommand(),
      "Resume the process traced: with the emulate backend, step every "
      "thread, writing Intel PT, until a breakpoint, a snapshot trigger, "
      "exit, or Ctrl-C. Triggers take their snapshots on the way.\n\n"
      "Example:\n  (lldb) magic-trace snapshot-on -n handle_order\n  (lldb) "
      "magic-trace continue\n" +
          describeOptions(continueOptions),
      "magic-trace continue [--json]");
  add(root, "snapshot", new SnapshotCommand(),
      "Snapshot the trace now (the process is stopped): decode, symbolize, "
      "build the call-stack timeline and write it.\n\nExample:\n  (lldb) "
      "magic-trace snapshot -o before-crash.fxt\n" +
          describeOptions(snapshotOptions),
      "magic-trace snapshot [-o FILE] [--json]");
  add(root, "snapshot-on", new SnapshotOnCommand(),
      "Take a snapshot whenever a breakpoint is hit (any thread) during "
      "'magic-trace continue', and print one line: snapshot number, thread, "
      "time span, calls, errors, file.\n\nExample:\n  (lldb) magic-trace "
      "snapshot-on -n handle_order --count 2 -o order-%N.fxt\n" +
          describeOptions(snapshotOnOptions),
      "magic-trace snapshot-on (-n FUNCTION | -f FILE -l LINE | -a ADDRESS | "
      "BREAKPOINT-ID) [--count N] [--continue] [-o PATTERN]");
  add(root, "save", new SaveCommand(),
      "Write a snapshot again in another format: Fuchsia trace (fxt, opens "
      "in ui.perfetto.dev), Chrome JSON, folded stacks, or an LLDB intel-pt "
      "trace bundle ('trace load DIR/trace.json').\n\nExample:\n  (lldb) "
      "magic-trace save -o trace-dir --format bundle\n" +
          describeOptions(saveOptions),
      "magic-trace save -o FILE [--format fxt|json|folded|bundle] "
      "[--snapshot K]");
  add(root, "report", new ReportCommand(),
      "Print the call tree of a snapshot in the terminal, with total and "
      "self times.\n\nExample:\n  (lldb) magic-trace report --last 20us "
      "--depth 6\n" +
          describeOptions(reportOptions),
      "magic-trace report [--last DURATION] [--thread TID] [--depth N] "
      "[--snapshot K]");
}

} // namespace magic_trace::plugin
