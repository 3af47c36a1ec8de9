//===- QemuBackend.cpp - Recording under QEMU from LLDB -------------------===//
#include "QemuBackend.h"
#include "CommandArgs.h"
#include "CommandSupport.h"
#include "Commands.h"

#include "magic_trace/Bundle.h"
#include "magic_trace/GroundTruth.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/QemuRings.h"
#include "magic_trace/RecorderSnapshots.h"
#include "magic_trace/TraceWriters.h"

#include "lldb/API/SBAddress.h"
#include "lldb/API/SBBreakpointLocation.h"
#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBCommandReturnObject.h"
#include "lldb/API/SBError.h"
#include "lldb/API/SBFileSpec.h"
#include "lldb/API/SBFrame.h"
#include "lldb/API/SBFunction.h"
#include "lldb/API/SBHostOS.h"
#include "lldb/API/SBLaunchInfo.h"
#include "lldb/API/SBModule.h"
#include "lldb/API/SBPlatform.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBSymbol.h"
#include "lldb/API/SBSymbolContext.h"
#include "lldb/API/SBSymbolContextList.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/un.h>

namespace magic_trace::plugin {

bool qemuOptionsFor(lldb::SBProcess &process,
                    std::vector<std::pair<std::string, std::string>> &options) {
  // Thread ids are host thread ids under QEMU (its gdbstub reports them);
  // the process id LLDB shows is not.
  for (uint32_t i = 0; i < process.GetNumThreads(); ++i)
    if (qemuPluginOptionsOf(process.GetThreadAtIndex(i).GetThreadID(), options))
      return true;
  return false;
}

uint64_t qemuInstructions(const Session &session) {
  llvm::Expected<QemuRingStatus> status = readQemuRingStatus(session.qemuDir);
  if (!status) {
    llvm::consumeError(status.takeError());
    return 0;
  }
  return status->instructions;
}

// --- triggers in the recorder ---------------------------------------------

llvm::Expected<std::vector<uint64_t>>
armRecorderTrigger(lldb::SBTarget &target, Session &session,
                   lldb::SBBreakpoint &breakpoint, unsigned count) {
  std::vector<uint64_t> entries;
  for (uint32_t i = 0; i < breakpoint.GetNumLocations(); ++i) {
    lldb::SBAddress address = breakpoint.GetLocationAtIndex(i).GetAddress();
    // The recorder fires where a block starts: the function's entry, not
    // the breakpoint's address after the prologue.
    lldb::SBAddress entry = address.GetFunction().IsValid()
                                ? address.GetFunction().GetStartAddress()
                                : address.GetSymbol().GetStartAddress();
    uint64_t load = entry.GetLoadAddress(target);
    if (load == LLDB_INVALID_ADDRESS)
      load = address.GetLoadAddress(target);
    if (load == LLDB_INVALID_ADDRESS)
      continue;
    if (llvm::Error error = armQemuTrigger(
            session.qemuDir, load, count ? count : kQemuTriggerEvery,
            qemuAnswerDeadline(session.keepTruth)))
      return std::move(error);
    entries.push_back(load);
  }
  if (entries.empty())
    return error("no location of the trigger is loaded yet (without "
                 "--continue a breakpoint waits for its library)");
  target.BreakpointDelete(breakpoint.GetID());
  return entries;
}

void startRecorderSnapshots(lldb::SBTarget &target, Session &session,
                            unsigned keep, unsigned waitMs) {
  std::lock_guard<std::mutex> hold(session.lock);
  session.snapshots.setKeep(keep);
  RecorderSnapshots::Host host;
  host.modules = [&session] { return session.lastModules; };
  const char *exe = target.GetExecutable().GetFilename();
  std::string name = exe ? exe : "";
  host.processName = [name] { return name; };
  host.outputPath = [&session](uint64_t address, unsigned number) {
    Trigger *owner = nullptr;
    for (Trigger &trigger : session.triggers)
      if (trigger.recorderAddress == address)
        owner = &trigger;
    if (owner)
      ++owner->hits;
    return expandPattern(owner ? owner->pattern : "magic-trace-%N.fxt", number);
  };
  host.window = [&session](uint64_t address) {
    for (const Trigger &trigger : session.triggers)
      if (trigger.recorderAddress == address)
        return trigger.window;
    return WindowOptions();
  };
  session.recorderSnapshots = std::make_unique<RecorderSnapshots>(
      session.qemuDir, session.snapshots, session.lock, session.symbols.get(),
      std::move(host), kDefaultPendingSnapshots, waitMs);
  session.recorderSnapshots->start();
}

std::vector<std::string> collectRecorderSnapshots(lldb::SBDebugger &debugger,
                                                  Session &session, bool json) {
  if (!session.recorderSnapshots)
    return {};
  lldb::SBTarget target = debugger.GetSelectedTarget();
  lldb::SBProcess process = target.GetProcess();
  // The modules the worker decodes with: LLDB's at this stop (the code log
  // fills in what changed since).
  if (process.IsValid() && process.GetState() == lldb::eStateStopped) {
    std::vector<Module> modules = captureModules(target);
    std::lock_guard<std::mutex> hold(session.lock);
    session.lastModules = std::move(modules);
  }
  return session.recorderSnapshots->collect(json);
}

// --- triggers ------------------------------------------------------------

namespace {

/// A snapshot-on breakpoint was hit (LLDB's private state thread, the
/// process stopped): take the trigger's snapshot. Returns whether the
/// process stays stopped.
bool triggerHit(void *baton, lldb::SBProcess &process, lldb::SBThread &thread,
                lldb::SBBreakpointLocation &location) {
  lldb::SBDebugger debugger = lldb::SBDebugger::FindDebuggerWithID(
      static_cast<int>(reinterpret_cast<uintptr_t>(baton)));
  if (!debugger.IsValid())
    return true;
  Session &session = sessionFor(debugger);
  if (!session.attached || session.pid != process.GetProcessID() ||
      (session.backend != "qemu" && session.backend != "perf"))
    return true;
  lldb::break_id_t id = location.GetBreakpoint().GetID();
  Trigger *trigger = session.findTrigger(id);
  if (!trigger || !trigger->active())
    return true;
  llvm::Expected<SnapshotRecord *> record =
      fireTrigger(debugger, session, *trigger, thread.GetThreadID(), true);
  if (!record) {
    printNow(debugger, "error: magic-trace: snapshot at breakpoint " +
                           std::to_string(id) +
                           " failed: " + llvm::toString(record.takeError()));
    return true;
  }
  session.triggered.push_back(*record);
  printNow(debugger, snapshotLine(**record));
  return !trigger->continueAfter;
}

} // namespace

void armTrigger(lldb::SBDebugger &debugger, lldb::SBBreakpoint &breakpoint) {
  breakpoint.SetCallback(triggerHit,
                         reinterpret_cast<void *>(uintptr_t(debugger.GetID())));
}

// --- run -----------------------------------------------------------------

namespace {

const OptionSpec runOptions[] = {
    {'s', "snapshot-size", true, "SIZE",
     "Ring buffer per thread, a power of two (default 4M)."},
    {'t', "timer-resolution", true, "low|normal|high",
     "Timing packets: TSC only, +MTC/CYC, +every return as TIP."},
    {'S', "start", true, "SYMBOL",
     "Run to this function (a one-shot breakpoint) instead of stopping at "
     "the program's first instruction."},
    {'T', "threads", true, "all|current|TID,...",
     "Threads to trace (default all)."},
    {'g', "ground-truth", false, nullptr,
     "Also keep every executed address, which 'save --format bundle' "
     "writes as groundtruth/ (for tests; 8 bytes an instruction)."},
    {'k', "keep-snapshots", true, "N",
     "Decoded snapshots kept in memory for report and save (default 8; "
     "older ones keep their line and file)."},
    {'M', "keep-memory", true, "SIZE",
     "Memory for the decoded snapshots kept for report and save (default "
     "a 32nd of the machine's memory; e.g. 512M). The newest that fit stay; "
     "older ones keep their line and file."},
    {'w', "trigger-wait", true, "MS",
     "How long a recorder trigger waits while 4 snapshots wait to be "
     "decoded, before it is skipped (default 5000; 0: skip at once)."},
};

/// libmagic-trace-qemu.so: MT_QEMU_PLUGIN, else beside this plugin.
llvm::Expected<std::string> qemuPluginPath() {
  if (const char *path = std::getenv("MT_QEMU_PLUGIN"))
    return std::string(path);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&qemuPluginPath), &info) == 0 ||
      !info.dli_fname)
    return error("cannot find where the magic-trace LLDB plugin was loaded "
                 "from (set MT_QEMU_PLUGIN to libmagic-trace-qemu.so)");
  llvm::SmallString<256> path(llvm::sys::path::parent_path(info.dli_fname));
  llvm::sys::path::append(path, "libmagic-trace-qemu.so");
  if (!llvm::sys::fs::exists(path))
    return error("%s is missing (build it: it is built with the LLDB plugin; "
                 "or set MT_QEMU_PLUGIN)",
                 path.c_str());
  return std::string(path);
}

/// qemu-x86_64: MT_QEMU, else from PATH.
llvm::Expected<std::string> qemuPath() {
  if (const char *path = std::getenv("MT_QEMU")) {
    if (!llvm::sys::fs::can_execute(path))
      return error("MT_QEMU=%s is not an executable (unset it, or install "
                   "Debian's qemu-user package: apt-get install qemu-user)",
                   path);
    return std::string(path);
  }
  llvm::ErrorOr<std::string> found =
      llvm::sys::findProgramByName("qemu-x86_64");
  if (!found)
    return error("qemu-x86_64 is not installed: install Debian's qemu-user "
                 "package (apt-get install qemu-user), or record without it "
                 "with 'magic-trace attach'");
  return *found;
}

bool runCommand(lldb::SBDebugger &debugger, const std::string &command,
                std::string &failure) {
  lldb::SBCommandReturnObject result;
  debugger.GetCommandInterpreter().HandleCommand(command.c_str(), result);
  if (result.Succeeded())
    return true;
  failure = result.GetError() ? result.GetError() : command;
  failure = llvm::StringRef(failure).trim().str();
  return false;
}

/// Quotes `text` for LLDB's command line.
std::string quoted(llvm::StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// Makes LLDB keep QEMU's gdb socket in a directory only this user can
/// write. LLDB's qemu-user platform makes the socket in its process
/// temporary directory, $TMPDIR/lldb/<pid> (HostInfoBase::
/// ComputeProcessTempFileDirectory), and accepts a $TMPDIR/lldb that another
/// user made and can write, where that user could replace the socket. LLDB
/// computes the directory once per process, from TMPDIR: when it has not
/// yet, TMPDIR points into `dir` (ours, 0700) while it does, and is
/// restored, so QEMU and the program see the user's TMPDIR. A directory
/// computed before is checked, with its parent, and refused if unsafe.
llvm::Error privateLldbTempDir(std::string dir) {
  // The socket's path, DIR/lldb/<pid>/qemu-XXXXXXXX.socket, must fit a
  // sockaddr_un (108 bytes; LLDB says "Failed to set socket address"
  // otherwise): under a long TMPDIR, a private directory of its own in /tmp.
  constexpr size_t kSocketPathMax = sizeof(sockaddr_un::sun_path) - 1;
  if (dir.size() + std::strlen("/lldb/4194304/qemu-XXXXXXXX.socket") >
      kSocketPathMax) {
    llvm::Expected<std::string> shorter =
        makePrivateTempDir("magic-trace-lldb", "/tmp");
    if (!shorter)
      return shorter.takeError();
    dir = *shorter;
    removeAtExit(dir);
  }
  const char *old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", dir.c_str(), 1);
  lldb::SBFileSpec spec =
      lldb::SBHostOS::GetLLDBPath(lldb::ePathTypeLLDBTempSystemDir);
  if (old)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
  const char *path = spec.GetDirectory();
  if (!path || !*path)
    return error("LLDB has no temporary directory for QEMU's debug socket "
                 "(set TMPDIR to a directory of your own)");
  std::string lldbDir = path;
  if (spec.GetFilename())
    lldbDir += std::string("/") + spec.GetFilename();
  if (llvm::StringRef(lldbDir).starts_with(dir + "/"))
    return llvm::Error::success();
  for (const std::string &checked :
       {lldbDir, llvm::sys::path::parent_path(lldbDir).str()})
    if (llvm::Error unsafe = checkPrivate(checked, /*directory=*/true))
      return error("LLDB's temporary directory for QEMU's debug socket is "
                   "not private: %s (start lldb with TMPDIR set to a "
                   "directory of your own)",
                   llvm::toString(std::move(unsafe)).c_str());
  return llvm::Error::success();
}

/// The selected target, on LLDB's qemu-user platform: a target made for the
/// host is made again for qemu-user (same executable, launch settings and
/// breakpoints; LLDB fixes a target's platform when it creates it).
llvm::Expected<lldb::SBTarget> qemuTarget(lldb::SBDebugger &debugger,
                                          std::string &note) {
  lldb::SBTarget target = debugger.GetSelectedTarget();
  const char *name = target.GetPlatform().GetName();
  if (name && llvm::StringRef(name) == "qemu-user")
    return target;
  char exe[4096];
  if (!target.GetExecutable().GetPath(exe, sizeof(exe)))
    return error("the target has no executable (create one with 'file "
                 "PROGRAM')");
  // In the session's private directory (0700, ours): a name in TMPDIR
  // itself could be another user's link or file, read back as breakpoints.
  llvm::Expected<std::string> dir = privateDir();
  if (!dir)
    return error("cannot carry the breakpoints over to a qemu-user target: "
                 "%s",
                 llvm::toString(dir.takeError()).c_str());
  llvm::SmallString<128> saved(*dir);
  llvm::sys::path::append(saved, "breakpoints.json");
  llvm::sys::fs::remove(saved);
  lldb::SBFileSpec savedSpec(saved.c_str(), false);
  bool haveBreakpoints = target.GetNumBreakpoints() > 0;
  if (haveBreakpoints && target.BreakpointsWriteToFile(savedSpec).Fail()) {
    llvm::sys::fs::remove(saved);
    return error("cannot carry the breakpoints over to a qemu-user target "
                 "(LLDB could not write them to %s)",
                 saved.c_str());
  }
  lldb::SBLaunchInfo launch = target.GetLaunchInfo();
  lldb::SBError error;
  lldb::SBTarget made =
      debugger.CreateTarget(exe, nullptr, "qemu-user", true, error);
  if (!made.IsValid() || error.Fail()) {
    llvm::sys::fs::remove(saved);
    return llvm::createStringError(
        "cannot create a qemu-user target for %s: %s", exe,
        error.GetCString() ? error.GetCString() : "unknown error");
  }
  made.SetLaunchInfo(launch);
  if (haveBreakpoints) {
    lldb::SBBreakpointList created(made);
    made.BreakpointsCreateFromFile(savedSpec, created);
  }
  llvm::sys::fs::remove(saved);
  debugger.DeleteTarget(target);
  debugger.SetSelectedTarget(made);
  note = "the target now uses LLDB's qemu-user platform (breakpoints "
         "and launch settings carried over)";
  return made;
}

class RunCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args = parseArgs(command, runOptions, "run");
    if (!args)
      return failCommand(result, args.takeError());
    lldb::SBTarget target = debugger.GetSelectedTarget();
    if (!target.IsValid() || !target.GetExecutable().IsValid())
      return failCommand(result,
                         error("no target to run (create one first: 'file "
                               "PROGRAM', then 'magic-trace run')"));
    lldb::SBProcess old = target.GetProcess();
    if (old.IsValid() && old.GetState() != lldb::eStateExited &&
        old.GetState() != lldb::eStateDetached &&
        old.GetState() != lldb::eStateInvalid)
      return failCommand(result,
                         error("the target already has a process (kill it with "
                               "'process kill' first, or record it with "
                               "'magic-trace attach')"));
    uint64_t size = 4 << 20;
    if (args->has("snapshot-size")) {
      llvm::Expected<uint64_t> parsed =
          parseSnapshotSize(args->get("snapshot-size", ""));
      if (!parsed)
        return failCommand(result, parsed.takeError());
      size = *parsed;
    }
    std::string timer = args->get("timer-resolution", "normal");
    if (llvm::Expected<TimerResolution> resolution = parseTimer(timer);
        !resolution)
      return failCommand(result, resolution.takeError());
    llvm::Expected<std::string> qemu = qemuPath();
    if (!qemu)
      return failCommand(result, qemu.takeError());
    llvm::Expected<std::string> plugin = qemuPluginPath();
    if (!plugin)
      return failCommand(result, plugin.takeError());

    // One ring directory per launch, in the debugger's private directory
    // (removed when the debugger exits, or by the next session if it is
    // killed).
    llvm::Expected<std::string> ownDir = privateDir();
    if (!ownDir)
      return failCommand(result, ownDir.takeError());
    // A TMPDIR others could rename our directories in was not used: say so.
    if (std::string note = tempRootNote(); !note.empty())
      result.AppendWarning(note.c_str());
    if (llvm::Error unsafe = privateLldbTempDir(*ownDir))
      return failCommand(result, std::move(unsafe));
    llvm::SmallString<128> dir(*ownDir);
    llvm::sys::path::append(dir, "qemu-%%%%%%");
    llvm::SmallString<128> unique;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory(dir.str(), unique))
      return failCommand(result,
                         error("cannot create a ring directory in %s: %s "
                               "(check TMPDIR)",
                               ownDir->c_str(), ec.message().c_str()));
    removeAtExit(unique.str().str());

    // Recording starts at --start when it is a function of the program (the
    // recorder reads only the program's symbols), else at the first
    // instruction.
    std::string startSymbol;
    if (args->has("start")) {
      std::string symbol = args->get("start", "");
      lldb::SBSymbolContextList found = target.FindFunctions(symbol.c_str());
      for (uint32_t i = 0; i < found.GetSize() && startSymbol.empty(); ++i) {
        lldb::SBSymbolContext context = found.GetContextAtIndex(i);
        lldb::SBAddress entry = context.GetFunction().IsValid()
                                    ? context.GetFunction().GetStartAddress()
                                    : context.GetSymbol().GetStartAddress();
        // The recorder takes a link-time address of the program.
        if (context.GetModule().GetFileSpec() == target.GetExecutable() &&
            entry.IsValid())
          startSymbol = llvm::formatv("{0:x}", entry.GetFileAddress()).str();
      }
    }
    std::string pluginArgs = *plugin + ",dir=" + unique.str().str() +
                             ",size=" + std::to_string(size) +
                             ",timer=" + timer + ",start=" + startSymbol;
    if (timer == "high")
      pluginArgs += ",noretcomp=on";
    if (args->has("ground-truth"))
      pluginArgs += ",ground-truth=on";
    std::string failure;
    if (!runCommand(debugger,
                    "settings set platform.plugin.qemu-user.architecture "
                    "x86_64",
                    failure) ||
        !runCommand(debugger,
                    "settings set platform.plugin.qemu-user.emulator-path " +
                        quoted(*qemu),
                    failure) ||
        !runCommand(debugger,
                    "settings set -- platform.plugin.qemu-user.emulator-args "
                    "-plugin " +
                        quoted(pluginArgs),
                    failure))
      return failCommand(result,
                         error("cannot set up LLDB's qemu-user platform: %s",
                               failure.c_str()));
    std::string note;
    llvm::Expected<lldb::SBTarget> made = qemuTarget(debugger, note);
    if (!made)
      return failCommand(result, made.takeError());
    target = *made;

    lldb::SBBreakpoint start;
    bool toStart = args->has("start");
    if (toStart) {
      std::string symbol = args->get("start", "");
      start = target.BreakpointCreateByName(symbol.c_str());
      if (!start.IsValid() || start.GetNumLocations() == 0) {
        if (start.IsValid())
          target.BreakpointDelete(start.GetID());
        return failCommand(result, error("--start %s matches no code in the "
                                         "target (check the spelling)",
                                         symbol.c_str()));
      }
      start.SetOneShot(true);
    }

    lldb::SBLaunchInfo launch = target.GetLaunchInfo();
    if (!args->positional.empty()) {
      std::vector<const char *> argv;
      for (const std::string &arg : args->positional)
        argv.push_back(arg.c_str());
      argv.push_back(nullptr);
      launch.SetArguments(argv.data(), false);
    }
    launch.SetLaunchFlags(launch.GetLaunchFlags() |
                          lldb::eLaunchFlagStopAtEntry);
    bool wasAsync = debugger.GetAsync();
    debugger.SetAsync(false);
    lldb::SBError launchError;
    lldb::SBProcess process = target.Launch(launch, launchError);
    if (process.IsValid() && launchError.Success() && toStart &&
        process.GetState() == lldb::eStateStopped)
      launchError = process.Continue();
    debugger.SetAsync(wasAsync);
    if (!process.IsValid() || launchError.Fail())
      return failCommand(
          result, error("cannot launch under %s: %s", qemu->c_str(),
                        launchError.GetCString() ? launchError.GetCString()
                                                 : "unknown error"));
    if (process.GetState() != lldb::eStateStopped)
      return failCommand(result,
                         error("the program %s before it could be traced "
                               "(exit status %d)",
                               process.GetState() == lldb::eStateExited
                                   ? "exited"
                                   : "did not stop",
                               process.GetExitStatus()));

    std::string text;
    llvm::raw_string_ostream os(text);
    if (!note.empty())
      os << "magic-trace: " << note << "\n";
    os << "magic-trace: launched " << target.GetExecutable().GetFilename()
       << " under " << *qemu << " with the magic-trace recorder (rings in "
       << unique << ")";
    if (toStart)
      os << ", stopped at " << args->get("start", "")
         << (startSymbol.empty() ? " (recording since the first instruction)"
                                 : " (recording from there)");
    else
      os << ", stopped at its first instruction";
    os << "\n";
    std::string attach = "magic-trace attach --backend qemu";
    if (args->has("threads"))
      attach += " --threads " + quoted(args->get("threads", ""));
    if (args->has("keep-snapshots"))
      attach += " --keep-snapshots " + quoted(args->get("keep-snapshots", ""));
    if (args->has("keep-memory"))
      attach += " --keep-memory " + quoted(args->get("keep-memory", ""));
    if (args->has("trigger-wait"))
      attach += " --trigger-wait " + quoted(args->get("trigger-wait", ""));
    lldb::SBCommandReturnObject attached;
    debugger.GetCommandInterpreter().HandleCommand(attach.c_str(), attached);
    if (!attached.Succeeded()) {
      result.Printf("%s", text.c_str());
      return failCommand(
          result,
          error("%s",
                llvm::StringRef(attached.GetError() ? attached.GetError() : "")
                    .trim()
                    .str()
                    .c_str()));
    }
    os << llvm::StringRef(attached.GetOutput()).rtrim();
    return succeed(result, text);
  }
};

} // namespace

void registerRunCommand(lldb::SBCommand &root) {
  addCommand(
      root, "run", new RunCommand(),
      "Launch the target under QEMU (qemu-x86_64) with magic-trace's "
      "recorder, which writes Intel PT of every thread at emulator speed "
      "(no Intel PT hardware needed), and stop at its first instruction "
      "(or at --start) with recording on. Then set breakpoints and "
      "snapshot-on triggers and 'continue' as usual: the recorder runs "
      "whatever resumes the process.\n\nExample:\n  (lldb) file ./server\n  "
      "(lldb) magic-trace run --start main -- --port 8080\n  (lldb) "
      "magic-trace snapshot-on -n handle_order\n  (lldb) continue\n" +
          describeOptions(runOptions),
      "magic-trace run [--snapshot-size SIZE] [--timer-resolution "
      "low|normal|high] [--start SYMBOL] [--threads all|current|TID,...] "
      "[--ground-truth] [-- ARGS...]");
}

} // namespace magic_trace::plugin
