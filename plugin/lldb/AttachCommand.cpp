//===- AttachCommand.cpp - magic-trace attach -----------------------------===//
//
// Starts recording the process: the backend chosen (perf where Intel PT
// exists, the QEMU recorder when the process runs under it, else the
// emulate stepper), its buffers and timing, the threads, and what the
// session keeps. Each parses its options with CommandArgs, turns SB
// objects into core types (Session.h) and reports failures with failCommand.
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

// --- attach --------------------------------------------------------------

const OptionSpec attachOptions[] = {
    {'b', "backend", true, "auto|perf|qemu|emulate",
     "Recording backend (default auto: perf where Intel PT exists, qemu "
     "when the process runs under magic-trace's QEMU recorder, else "
     "emulate)."},
    {'s', "snapshot-size", true, "SIZE",
     "Ring buffer per thread, a power of two (default 4M)."},
    {'t', "timer-resolution", true, "low|normal|high",
     "Timing packets: TSC only, +MTC/CYC, +every return as TIP."},
    {'T', "threads", true, "all|current|TID,...",
     "Threads to trace (default all)."},
    {'g', "ground-truth", false, nullptr,
     "Emulate: also keep every executed address, which 'save --format "
     "bundle' writes as groundtruth/ (for tests; 8 bytes an instruction)."},
    {'k', "keep-snapshots", true, "N",
     "Decoded snapshots kept in memory for report and save (default 8; "
     "older ones keep their line and file)."},
    {'M', "keep-memory", true, "SIZE",
     "Memory for the decoded snapshots kept for report and save (default "
     "a 32nd of the machine's memory; e.g. 512M). The newest that fit stay; "
     "older ones keep their line and file."},
    {'w', "trigger-wait", true, "MS",
     "qemu: how long a recorder trigger waits while 4 snapshots wait to be "
     "decoded, before it is skipped (default 5000; 0: skip at once)."},
};

class AttachCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    llvm::Expected<ParsedArgs> args =
        parseOptionsOnly(command, attachOptions, "attach");
    if (!args)
      return failCommand(result, args.takeError());
    unsigned keep = kDefaultKeptSnapshots;
    if (args->has("keep-snapshots")) {
      llvm::Expected<unsigned> parsed =
          parseCount(args->get("keep-snapshots", ""), "keep-snapshots");
      if (!parsed)
        return failCommand(result, parsed.takeError());
      keep = *parsed;
    }
    uint64_t keepMemory = defaultSnapshotMemory();
    if (args->has("keep-memory")) {
      llvm::Expected<uint64_t> parsed =
          parseMemorySize(args->get("keep-memory", ""));
      if (!parsed)
        return failCommand(result, parsed.takeError());
      keepMemory = *parsed;
    }
    unsigned waitMs = kDefaultTriggerWaitMs;
    if (args->has("trigger-wait")) {
      if (llvm::StringRef(args->get("trigger-wait", ""))
              .getAsInteger(10, waitMs))
        return failCommand(result,
                           error("--trigger-wait takes milliseconds, got '%s'",
                                 args->get("trigger-wait", "").c_str()));
    }
    Session &session = sessionFor(debugger);
    lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
    if (!process.IsValid() || process.GetState() == lldb::eStateExited ||
        process.GetState() == lldb::eStateInvalid)
      return failCommand(result,
                         error("no process to trace (start one first, e.g. "
                               "'b main' and 'run')"));
    std::vector<std::pair<std::string, std::string>> qemuOptions;
    bool underQemu = qemuOptionsFor(process, qemuOptions);
    std::string qemuDir;
    for (const auto &[key, value] : qemuOptions)
      if (key == "dir")
        qemuDir = value;
    // Under QEMU every process is pid 1 to LLDB: its ring directory tells
    // one launch from the next.
    if (session.attached && session.pid == process.GetProcessID() &&
        session.qemuDir == qemuDir && !session.exited && !session.execed)
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
    // When auto settles for the stepper, the fast path is one command away.
    std::string fasterPath;
    if (backend == "auto") {
      MachineFacts facts = probeMachine();
      bool perfWorks = facts.backends.size() > 0 && facts.backends[0].available;
      if (underQemu) {
        note = " (auto: the process runs under magic-trace's QEMU recorder)";
        backend = "qemu";
      } else if (perfWorks) {
        note = " (auto: Intel PT is present)";
        backend = "perf";
      } else {
        note = facts.intelPt.present
                   ? " (auto: " + facts.backends[0].reason + ")"
                   : " (auto: no Intel PT on this machine)";
        backend = "emulate";
        if (!facts.qemuPath.empty())
          fasterPath =
              "note: the emulate backend single-steps (1-2 thousand "
              "instructions a second); 'magic-trace run' relaunches the "
              "target under magic-trace's QEMU recorder (" +
              facts.qemuPath +
              "): genuine PT of every thread at ~14 M instructions a second "
              "in LLDB, and a plain 'continue' records\n";
      }
    } else if (backend != "emulate" && backend != "perf" && backend != "qemu") {
      return failCommand(result,
                         error("unknown backend '%s' (use auto, perf, qemu or "
                               "emulate)",
                               backend.c_str()));
    }
    if (backend == "qemu" && !underQemu)
      return failCommand(
          result, error("the process does not run under magic-trace's QEMU "
                        "recorder (launch it with 'magic-trace run')"));
    if (underQemu && backend != "qemu")
      return failCommand(
          result, error("the process runs under QEMU, which the %s backend "
                        "cannot record (use --backend qemu)",
                        backend.c_str()));
    QemuRingStatus qemuStatus;
    if (backend == "qemu") {
      llvm::Expected<QemuRingStatus> status = readQemuRingStatus(qemuDir);
      if (!status)
        return failCommand(result, status.takeError());
      qemuStatus = *status;
      if (args->has("snapshot-size") || args->has("timer-resolution") ||
          args->has("ground-truth"))
        return failCommand(
            result, error("under QEMU the ring size, timer and ground truth "
                          "are set at launch (give them to 'magic-trace "
                          "run')"));
    }

    PacketWriter::Options writerOptions;
    // Under QEMU the ring and timer are the recorder's (set at launch).
    std::string defaultTimer = "normal";
    if (backend == "qemu") {
      writerOptions.bufferSize = qemuStatus.ringSize;
      for (const auto &[key, value] : qemuOptions)
        if (key == "timer")
          defaultTimer = value;
    }
    if (args->has("snapshot-size")) {
      llvm::Expected<uint64_t> size =
          parseSnapshotSize(args->get("snapshot-size", ""));
      if (!size)
        return failCommand(result, size.takeError());
      writerOptions.bufferSize = *size;
    }
    std::string timer = args->get("timer-resolution", defaultTimer);
    llvm::Expected<TimerResolution> resolution = parseTimer(timer);
    if (!resolution)
      return failCommand(result, resolution.takeError());
    writerOptions.timer = *resolution;
    writerOptions.noRetComp = *resolution == TimerResolution::High;

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

    // The recorder first: on failure the session stays as it was.
    bool keepTruth = args->has("ground-truth") && backend == "emulate";
    for (const auto &[key, value] : qemuOptions)
      if (key == "ground-truth" && value != "off" && value != "0")
        keepTruth = backend == "qemu";
    std::vector<std::string> perfNotes;
    llvm::Expected<std::unique_ptr<ProcessRecorder>> recorder =
        backend == "perf" ? startPerf(process, writerOptions.timer,
                                      writerOptions.bufferSize, perfNotes)
        : backend == "qemu"
            ? openQemuRecorder(qemuDir, keepTruth)
            : llvm::Expected<std::unique_ptr<ProcessRecorder>>(
                  std::make_unique<EmulateRecorder>(writerOptions, keepTruth));
    if (!recorder)
      return failCommand(result, recorder.takeError());

    llvm::Expected<std::unique_ptr<InsnClassifier>> classifier =
        InsnClassifier::create();
    if (!classifier)
      return failCommand(result, classifier.takeError());

    // A new recording; snapshots of earlier ones stay for save/report.
    session.attached = true;
    session.exited = false;
    session.execed = false;
    session.keepTruth = keepTruth;
    session.pid = process.GetProcessID();
    session.qemuDir = qemuDir;
    session.qemuPid = qemuStatus.pid;
    session.backend = backend;
    session.writerOptions = writerOptions;
    session.timerName = timer;
    session.allThreads = allThreads;
    session.threadFilter = filter;
    session.triggers.clear();
    session.stats = {};
    session.classifier = std::move(*classifier);
    session.recorder = std::move(*recorder);
    session.recorderSnapshots.reset();
    lldb::SBTarget target = debugger.GetSelectedTarget();
    session.lastModules = captureModules(target);
    {
      std::lock_guard<std::mutex> hold(session.lock);
      session.snapshots.setMemory(keepMemory);
    }
    if (backend == "qemu")
      startRecorderSnapshots(target, session, keep, waitMs);
    else
      session.snapshots.setKeep(keep);
    for (uint32_t i = 0; i < process.GetNumThreads() && session.emulate();
         ++i) {
      uint64_t tid = process.GetThreadAtIndex(i).GetThreadID();
      if (!session.traces(tid))
        continue;
      llvm::Expected<SteppedThread *> thread = session.emulate()->thread(tid);
      if (!thread) {
        session.attached = false;
        return failCommand(result, thread.takeError());
      }
    }

    std::string text;
    llvm::raw_string_ostream os(text);
    os << "magic-trace: recording process "
       << (session.qemuPid ? session.qemuPid : session.pid) << " with backend "
       << backend << note << ", " << (session.recorder->bufferBytes() >> 10)
       << (session.recorder->perCpuBuffers() ? " KiB per CPU"
                                             : " KiB per thread")
       << ", timer " << timer << ", threads " << threads << "\n";
    for (const std::string &perfNote : perfNotes)
      os << "note: " << perfNote << "\n";
    os << fasterPath;
    if (backend == "perf")
      os << "magic-trace: the hardware records while the process runs; "
            "'magic-trace continue' or 'continue' both trace";
    else if (backend == "qemu")
      os << "magic-trace: the QEMU recorder records while the process runs: "
            "'continue', 'next', 'step', 'finish' and 'magic-trace continue' "
            "all trace";
    else
      os << "warning: under the emulate backend only 'magic-trace continue' "
            "records; a plain 'continue' runs untraced (shown as [untraced])";
    return succeed(result, text);
  }
};

} // namespace

void registerAttachCommand(lldb::SBCommand &root) {
  addCommand(
      root, "attach", new AttachCommand(),
      "Start recording the current process (stopped, e.g. at a breakpoint "
      "in main). The emulate backend records only while "
      "'magic-trace continue' runs.\n\nExample:\n  (lldb) b main\n  (lldb) "
      "run\n  (lldb) magic-trace attach --snapshot-size 1M\n" +
          describeOptions(attachOptions),
      "magic-trace attach [--backend auto|perf|qemu|emulate] [--snapshot-size "
      "SIZE] [--timer-resolution low|normal|high] [--threads "
      "all|current|TID,...] [--ground-truth]");
}

} // namespace magic_trace::plugin
