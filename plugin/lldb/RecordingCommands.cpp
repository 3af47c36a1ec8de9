//===- RecordingCommands.cpp - status, detach, continue ----------------===//
//
// The recording commands: show the recording, stop it, and run the process
// traced (AttachCommand.cpp starts it). Each parses its options with
// CommandArgs, turns SB objects into core types (Session.h) and reports
// failures with failCommand.
//
//===----------------------------------------------------------------------===//
#include "CommandArgs.h"
#include "CommandSupport.h"
#include "Commands.h"
#include "EmulateStepper.h"
#include "PerfBackend.h"
#include "QemuBackend.h"
#include "Session.h"

#include "magic_trace/MachineFacts.h"
#include "magic_trace/QemuRings.h"
#include "magic_trace/VirtualClock.h"

#include "lldb/API/SBBreakpoint.h"
#include "lldb/API/SBProcess.h"
#include "lldb/API/SBTarget.h"
#include "lldb/API/SBThread.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>

namespace magic_trace::plugin {
namespace {

// --- status --------------------------------------------------------------

/// The recorder's lines of `status`: each thread it knows, then its own.
std::string recorderStatus(const ProcessRecorder &recorder) {
  std::string text;
  llvm::raw_string_ostream os(text);
  bool perCpu = recorder.perCpuBuffers();
  for (const RecorderThreadStatus &thread : recorder.threads()) {
    if (perCpu)
      continue;
    os << "  thread " << thread.tid << ": " << thread.instructions
       << " instructions";
    if (recorder.backend() == "emulate")
      os << ", " << thread.bytes << " bytes of PT"
         << (thread.wrapped ? " (ring wrapped)" : "");
    os << (thread.exited ? ", exited" : "") << "\n";
  }
  for (const std::string &line : recorder.statusLines())
    os << line << "\n";
  return text;
}

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
    std::vector<std::string> collected =
        collectRecorderSnapshots(debugger, session);
    std::lock_guard<std::mutex> hold(session.lock);
    if (args->has("json"))
      return succeed(result, jsonText(session.statusJson()));
    std::string text;
    llvm::raw_string_ostream os(text);
    for (const std::string &line : collected)
      os << line << "\n";
    if (!session.attached)
      os << "magic-trace: not attached\n";
    else
      os << "magic-trace: recording process "
         << (session.qemuPid ? session.qemuPid : session.pid) << " ("
         << session.backend << ", " << (session.recorder->bufferBytes() >> 10)
         << (session.recorder->perCpuBuffers() ? " KiB per CPU"
                                               : " KiB per thread")
         << ", timer " << session.timerName << ")"
         << (session.exited ? ", process exited" : "") << "\n";
    if (session.attached)
      os << recorderStatus(*session.recorder);
    if (session.recorderSnapshots) {
      RecorderSnapshots::Status queue = session.recorderSnapshots->status();
      if (queue.written)
        os << "  recorder snapshots: " << queue.written << " written, "
           << queue.decoded << " decoded, " << queue.waiting
           << " waiting (at most " << queue.maxPending << "), " << queue.skipped
           << " skipped, " << llvm::format("%.1f", double(queue.waitedNs) / 1e9)
           << " s waited for the decoder\n";
    }
    if (session.snapshots.size())
      os << "  " << keptSnapshotsLine(session.snapshots) << "\n";
    for (const Trigger &trigger : session.triggers)
      os << "  trigger: "
         << (trigger.recorderAddress
                 ? "in the recorder at 0x" +
                       llvm::utohexstr(trigger.recorderAddress, true)
                 : "breakpoint " + std::to_string(trigger.breakpoint))
         << " (" << trigger.description << "), " << trigger.hits << " hits"
         << (trigger.count ? ", count " + std::to_string(trigger.count) : "")
         << (trigger.continueAfter ? ", continue" : "") << ", -> "
         << trigger.pattern << (trigger.active() ? "" : " (done)") << "\n";
    if (session.stats.seconds > 0)
      os << "  stepper: " << session.stats.instructions << " instructions in "
         << llvm::format("%.2f", session.stats.seconds) << " s ("
         << llvm::format("%.0f",
                         session.stats.instructions / session.stats.seconds)
         << " instructions/s)\n";
    for (const auto &record : session.snapshots.all())
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
    // Recorder snapshots taken so far are decoded and listed; then the
    // worker stops.
    std::string collected;
    for (const std::string &line :
         collectRecorderSnapshots(debugger, **session))
      collected += line + "\n";
    (*session)->recorderSnapshots.reset();
    for (const Trigger &trigger : (*session)->triggers)
      if (trigger.ownsBreakpoint)
        target.BreakpointDelete(trigger.breakpoint);
    (*session)->triggers.clear();
    // Closes the perf events and unmaps the rings, or drops the writers.
    (*session)->recorder.reset();
    (*session)->attached = false;
    if (!(*session)->qemuDir.empty())
      return succeed(result,
                     collected + "magic-trace: detached from process " +
                         std::to_string((*session)->qemuPid) +
                         " (its QEMU recorder keeps writing its rings until "
                         "it exits: 'magic-trace attach' takes them up "
                         "again; snapshots stay available to save and "
                         "report)");
    return succeed(result, collected +
                               "magic-trace: stopped recording process " +
                               std::to_string((*session)->pid) +
                               " (snapshots stay available to save and "
                               "report)");
  }
};

// --- continue ------------------------------------------------------------

/// After the recorded program ended (it exited, or exec replaced it) with
/// triggers never hit, the buffer still holds the end of the run: the first
/// such trigger gets a snapshot of it. Lines go to `os`.
llvm::Error snapshotAtEnd(lldb::SBDebugger &debugger, Session &session,
                          llvm::raw_ostream &os, bool json,
                          llvm::StringRef reason, llvm::StringRef event) {
  for (Trigger &trigger : session.triggers) {
    if (trigger.hits != 0)
      continue;
    std::string path = expandPattern(trigger.pattern, session.snapshots.next());
    llvm::Expected<SnapshotRecord *> record =
        takeSnapshot(debugger, session, 0, reason.str(), path, trigger.window);
    if (!record)
      return record.takeError();
    os << "magic-trace: the process " << event << " before breakpoint "
       << trigger.breakpoint << " (" << trigger.description
       << ") was hit; snapshot at " << reason << "\n";
    os << snapshotLine(**record) << "\n";
    if (json)
      os << jsonText(snapshotJson(**record)) << "\n";
    break;
  }
  return llvm::Error::success();
}

std::string progressLine(const StepProgress &progress) {
  std::string line;
  llvm::raw_string_ostream os(line);
  os << "magic-trace: " << progress.instructions << " instructions in "
     << int(progress.seconds) << " s ("
     << llvm::format("%.0f", progress.seconds > 0
                                 ? progress.instructions / progress.seconds
                                 : 0.0)
     << "/s), " << progress.threads
     << (progress.threads == 1 ? " thread" : " threads");
  if (progress.parked)
    os << " (" << progress.parked << " blocked in the kernel)";
  os << "; Ctrl-C stops";
  return line;
}

/// Runs traced until a stop that is not a trigger with --continue, taking
/// snapshots on the way. Lines go to `os`.
llvm::Error continueTraced(lldb::SBDebugger &debugger, Session &session,
                           llvm::raw_ostream &os, bool json) {
  auto progress = [&](const StepProgress &progress) {
    printNow(debugger, progressLine(progress));
  };
  uint64_t before = session.stats.instructions;
  bool qemu = !session.qemuDir.empty();
  uint64_t qemuBefore = qemu ? qemuInstructions(session) : 0;
  auto began = std::chrono::steady_clock::now();
  while (true) {
    session.triggered.clear();
    llvm::Expected<StepOutcome> outcome =
        session.recordsRunning() ? runPerf(debugger, session)
                                 : runTraced(debugger, session, progress);
    if (!outcome)
      return outcome.takeError();
    for (const std::string &note : outcome->notes)
      os << "magic-trace: " << note << "\n";
    // Snapshots the recorder's own triggers took on the way.
    for (const std::string &line :
         collectRecorderSnapshots(debugger, session, json))
      os << line << "\n";
    // Triggers of backends that record while the process runs took their
    // snapshots as they were hit (and printed their lines then).
    if (json)
      for (SnapshotRecord *record : session.triggered)
        os << jsonText(snapshotJson(*record)) << "\n";
    if (outcome->kind == StepOutcome::Breakpoint) {
      // A user's breakpoint and triggers may share the address: each
      // trigger there takes its snapshot, and the process stays stopped
      // when any breakpoint there is not a trigger that continues. The qemu
      // and perf backends' triggers fired in their breakpoint callbacks,
      // and LLDB stopped only because one of the breakpoints said so.
      bool recordsRunning = session.recordsRunning();
      bool stop = recordsRunning;
      std::optional<lldb::break_id_t> shown;
      for (lldb::break_id_t id : outcome->breakpoints) {
        Trigger *trigger = session.findTrigger(id);
        if (!trigger || !trigger->active()) {
          stop = true;
          shown = shown.value_or(id);
          continue;
        }
        stop |= !trigger->continueAfter;
        if (recordsRunning)
          continue;
        llvm::Expected<SnapshotRecord *> record =
            fireTrigger(debugger, session, *trigger, outcome->tid);
        if (!record)
          return record.takeError();
        os << snapshotLine(**record) << "\n";
        if (json)
          os << jsonText(snapshotJson(**record)) << "\n";
      }
      if (!stop)
        continue;
      if (!shown && !outcome->breakpoints.empty())
        shown = outcome->breakpoints.front();
      os << "magic-trace: thread " << outcome->tid << " stopped at breakpoint "
         << shown.value_or(0) << " at " << llvm::format_hex(outcome->pc, 0)
         << "\n";
      break;
    }
    if (outcome->kind == StepOutcome::Exited) {
      session.exited = true;
      os << "magic-trace: process exited with status " << outcome->exitStatus
         << "\n";
      if (llvm::Error error =
              snapshotAtEnd(debugger, session, os, json, "exit", "exited"))
        return error;
      break;
    }
    if (outcome->kind == StepOutcome::Exec) {
      os << "magic-trace: thread " << outcome->tid << " called exec at "
         << llvm::format_hex(outcome->pc, 0)
         << ": the recording ends there (the process runs another program "
            "now; attach again to trace it)\n";
      if (llvm::Error error =
              snapshotAtEnd(debugger, session, os, json, "exec", "called exec"))
        return error;
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
  if (qemu) {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count();
    uint64_t traced = qemuInstructions(session) - qemuBefore;
    os << "magic-trace: the QEMU recorder traced " << traced
       << " instructions in " << llvm::format("%.2f", seconds) << " s";
    return llvm::Error::success();
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
    if ((*session)->execed)
      return failCommand(result,
                         error("the recorded program called exec (save or "
                               "report its snapshots; 'magic-trace attach' "
                               "again traces the new program)"));
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

} // namespace

void registerRecordingCommands(lldb::SBCommand &root) {
  registerRunCommand(root);
  registerAttachCommand(root);
  addCommand(
      root, "status", new StatusCommand(),
      "Show the recording: backend, threads and bytes recorded, triggers, "
      "snapshots, stepping speed.\n\nExample:\n  (lldb) magic-trace status "
      "--json\n" +
          describeOptions(statusOptions),
      "magic-trace status [--json]");
  addCommand(
      root, "detach", new DetachCommand(),
      "Stop recording (and delete the breakpoints snapshot-on created). "
      "Snapshots stay "
      "available to 'save' and 'report'.\n\nExample:\n  (lldb) magic-trace "
      "detach\n",
      "magic-trace detach");
  addCommand(
      root, "continue", new ContinueCommand(),
      "Resume the process traced: with the emulate backend, step every "
      "thread, writing Intel PT, until a breakpoint, a snapshot trigger, "
      "exit, or Ctrl-C. Triggers take their snapshots on the way.\n\n"
      "Example:\n  (lldb) magic-trace snapshot-on -n handle_order\n  (lldb) "
      "magic-trace continue\n" +
          describeOptions(continueOptions),
      "magic-trace continue [--json]");
}

} // namespace magic_trace::plugin
