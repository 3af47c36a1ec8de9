//===- GdbModule.cpp - magic_trace_gdb: the core, for GDB's Python --------===//
//
// The Python extension module magic-trace-gdb.py imports (pybind11, built for
// the Python GDB embeds). GDB's side — commands, breakpoints, threads,
// registers, the module list from the dynamic linker's r_map — is Python;
// everything from the recorder's rings to the written trace is the core's,
// as in the LLDB plugin: readQemuRings/flushQemuRings, runPipeline, the
// writers, the bundle and perf.data writers. Errors reach Python as
// RuntimeError with the core's one-line message.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/GroundTruth.h"
#include "magic_trace/Libipt.h"
#include "magic_trace/MachineFacts.h"
#include "magic_trace/PerfData.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/ProcessModules.h"
#include "magic_trace/ProcessRecorder.h"
#include "magic_trace/QemuRings.h"
#include "magic_trace/RecorderSnapshots.h"
#include "magic_trace/SizeOptions.h"
#include "magic_trace/SnapshotLog.h"
#include "magic_trace/TraceWriters.h"
#include "magic_trace/Views.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace py = pybind11;
using namespace magic_trace;

namespace {

[[noreturn]] void raise(llvm::Error error) {
  throw std::runtime_error(llvm::toString(std::move(error)));
}

template <typename T> T take(llvm::Expected<T> value) {
  if (!value)
    raise(value.takeError());
  return std::move(*value);
}

/// --window and --max-slices as the Python side passes them ("" when not
/// given); raises their one-line error.
WindowOptions windowOf(const std::string &window, const std::string &maxSlices,
                       const std::string &maxTrace) {
  WindowOptions options;
  if (llvm::Error error =
          parseWindowOptions(window, maxSlices, maxTrace, options))
    raise(std::move(error));
  return options;
}

/// A module as GDB's Python finds it in the dynamic linker's r_map: the
/// file and its load bias (l_addr).
using LinkMapEntry = std::pair<std::string, uint64_t>;

/// A thread at the stop: tid, physical frames innermost first (PC, then
/// return addresses), their function names, whether it hit the trigger.
using StopFrames =
    std::tuple<uint64_t, std::vector<uint64_t>, std::vector<std::string>, bool>;

/// The recording of one `magic-trace run` under GDB: the recorder's ring
/// directory and the snapshots taken from it.
class GdbSession {
public:
  GdbSession(std::string ringDir, bool keepTruth, unsigned keep,
             unsigned waitMs, uint64_t keepMemory)
      : ringDir(std::move(ringDir)), keepTruth(keepTruth),
        recorderSnapshots(this->ringDir, log, lock, symbols.get(),
                          recorderHost(), kDefaultPendingSnapshots, waitMs) {
    log.setKeep(keep);
    if (keepMemory)
      log.setMemory(keepMemory);
    // A QEMU recording, and its own snapshots (the perf backend's recorder
    // comes with attachPerf).
    if (!this->ringDir.empty()) {
      recorder = take(openQemuRecorder(this->ringDir, keepTruth));
      recorderSnapshots.start();
    }
  }

  /// Takes a snapshot. `pcs` (tid, PC) are every stopped thread's, for the
  /// stop flush; `alive` false reads the rings as they are (the process
  /// exited). `readMemory` (or None): `(address, size) -> bytes` of the
  /// stopped process, GDB's Inferior.read_memory, for the code outside
  /// files as at the stop (addCodeAtStop). Returns {number, line, tid,
  /// calls, errors, instructions, notes}.
  py::dict snapshot(const std::vector<std::pair<uint64_t, uint64_t>> &pcs,
                    bool alive, const std::vector<LinkMapEntry> &linkMap,
                    const std::vector<StopFrames> &stops,
                    const std::string &reason, const std::string &path,
                    const std::string &processName, const std::string &window,
                    const std::string &maxSlices, const std::string &maxTrace,
                    const py::object &readMemory) {
    WindowOptions windowOptions = windowOf(window, maxSlices, maxTrace);
    std::vector<std::string> notes;
    SnapshotRecord *added = nullptr;
    {
      py::gil_scoped_release release;
      if (!recorder)
        raise(llvm::createStringError(
            "nothing is being recorded (start with 'magic-trace run' or "
            "'magic-trace attach')"));
      SnapshotRequest request;
      request.reason = reason;
      request.path = path;
      request.pid = perfPid;
      request.processName = processName;
      request.stop.alive = alive;
      request.stop.pcs = pcs;
      // Under QEMU's gdbstub GDB's stop holds only the thread it is about.
      request.stop.othersRun = recorder->backend() == "qemu";
      // Called with the GIL released: it takes it back to call GDB, on
      // this (GDB's) thread. `readMemory` outlives the request.
      if (alive && !readMemory.is_none())
        request.readMemory = [&readMemory](uint64_t address, uint8_t *buffer,
                                           size_t size) -> size_t {
          py::gil_scoped_acquire gil;
          try {
            std::string bytes = py::bytes(readMemory(address, size));
            size_t got = std::min(bytes.size(), size);
            std::memcpy(buffer, bytes.data(), got);
            return got;
          } catch (const py::error_already_set &) {
            return 0; // Unreadable: the code there stays a gap.
          } catch (const std::exception &) {
            return 0; // Not bytes (pybind11's cast_error): the same.
          }
        };
      request.pipeline = progressOptions();
      request.pipeline.window = windowOptions;
      // The recorder snapshots' worker uses the modules, symbols and log too.
      std::lock_guard<std::mutex> hold(lock);
      if (alive) {
        lastModules = modulesOf(linkMap, notes);
        lastStops.clear();
        for (const auto &[tid, frames, names, triggered] : stops) {
          ThreadStop stop;
          stop.tid = tid;
          stop.frames = frames;
          stop.functionNames = names;
          stop.triggered = triggered;
          lastStops.push_back(std::move(stop));
        }
        request.stacks = lastStops;
      }
      request.modules = lastModules;
      added = take(
          recordSnapshot(*recorder, std::move(request), log, symbols.get()));
    }
    py::dict result;
    result["number"] = added->number;
    result["line"] = snapshotLine(*added);
    result["notes"] = notes;
    if (const ThreadSummary *thread = added->result.mainThread()) {
      result["tid"] = thread->tid;
      result["calls"] = thread->calls;
      result["errors"] = thread->errors;
      result["instructions"] = thread->instructions;
    }
    return result;
  }

  /// A long decode's progress, GDB's way: a line every 2 s on GDB's console,
  /// and Ctrl-C (Python's KeyboardInterrupt, which GDB raises) stops it.
  static PipelineOptions progressOptions() {
    PipelineOptions options;
    auto began = std::chrono::steady_clock::now();
    auto lastLine = began;
    options.progress = [began, lastLine](uint64_t instructions) mutable {
      py::gil_scoped_acquire gil;
      // Signals reach Python on its main thread only; another decode
      // worker's call just reports.
      if (PyErr_CheckSignals() != 0) {
        PyErr_Clear();
        return false;
      }
      auto now = std::chrono::steady_clock::now();
      if (now - lastLine >= std::chrono::seconds(2)) {
        lastLine = now;
        py::print(
            llvm::formatv("magic-trace: decoding, {0} instructions so "
                          "far ({1:f1} s; Ctrl-C stops)",
                          withCommas(instructions),
                          std::chrono::duration<double>(now - began).count())
                .str());
      }
      return true;
    };
    return options;
  }

  /// The perf backend (magic-trace attach): records process `pid`, whose
  /// threads are `tids`, from now on (PerfSession.h). Raises its one-line
  /// error (no intel_pt PMU: use 'magic-trace run'; permissions; ...).
  void attachPerf(uint64_t pid, const std::vector<uint64_t> &tids,
                  const std::string &timer, uint64_t bufferSize) {
    PerfStartOptions options;
    options.timer = timer == "low"    ? TimerResolution::Low
                    : timer == "high" ? TimerResolution::High
                                      : TimerResolution::Normal;
    options.bufferSize = bufferSize;
    options.debugger = "GDB";
    std::vector<std::string> notes;
    {
      py::gil_scoped_release release;
      recorder = take(startPerfRecorder(pid, tids, options, notes));
    }
    perfPid = pid;
    for (const std::string &note : notes)
      py::print("magic-trace: note: " + note);
  }

  /// Stops the perf backend's recording (snapshots stay for save, report).
  void detachPerf() { recorder.reset(); }

  /// The modules (r_map) and process name the recorder's own snapshots
  /// are read with: they carry no module list.
  py::list setModules(const std::vector<LinkMapEntry> &linkMap,
                      const std::string &processName) {
    std::vector<std::string> notes;
    std::lock_guard<std::mutex> hold(lock);
    lastModules = modulesOf(linkMap, notes);
    this->processName = processName;
    py::list result;
    for (const std::string &note : notes)
      result.append(note);
    return result;
  }

  /// Arms a recorder trigger (QemuRings.h) at `address` for `count`
  /// snapshots (0: every hit), whose files follow `pattern` (%N).
  void armTrigger(uint64_t address, uint32_t count, const std::string &pattern,
                  const std::string &window, const std::string &maxSlices,
                  const std::string &maxTrace) {
    WindowOptions windowOptions = windowOf(window, maxSlices, maxTrace);
    py::gil_scoped_release release;
    if (llvm::Error error =
            armQemuTrigger(ringDir, address, count ? count : kQemuTriggerEvery,
                           qemuAnswerDeadline(keepTruth)))
      raise(std::move(error));
    std::lock_guard<std::mutex> hold(lock);
    patterns[address] = pattern;
    windows[address] = windowOptions;
  }

  /// The lines of the snapshots the recorder's triggers took since the
  /// last call (bundles DIR/snap-N, decoded as they come by the session's
  /// worker: RecorderSnapshots.h).
  std::vector<std::string> collectTriggered() {
    py::gil_scoped_release release;
    return recorderSnapshots.collect(/*json=*/false);
  }

  /// The call tree, as the LLDB plugin's `magic-trace report` prints it.
  std::string report(unsigned number, const std::string &last, unsigned depth,
                     int64_t tid, const std::string &window,
                     const std::string &maxSlices,
                     const std::string &maxTrace) {
    std::lock_guard<std::mutex> hold(lock);
    std::optional<PipelineResult> storage;
    SnapshotRecord &record = *take(log.findDecoded(number));
    TraceModel &model =
        viewed(record, window, maxSlices, maxTrace, storage)->model;
    TreeOptions options;
    if (!last.empty())
      options.lastNs = take(parseDuration(last));
    options.maxDepth = depth;
    if (tid < 0)
      return renderTree(model, options);
    // Render only that thread: move the others aside and back.
    std::vector<ThreadModel> all = std::move(model.threads);
    model.threads.clear();
    std::vector<ThreadModel> kept;
    for (ThreadModel &thread : all)
      (int64_t(thread.tid) == tid ? model.threads : kept)
          .push_back(std::move(thread));
    bool found = !model.threads.empty();
    std::string tree = found ? renderTree(model, options) : "";
    for (ThreadModel &thread : kept)
      model.threads.push_back(std::move(thread));
    std::sort(model.threads.begin(), model.threads.end(),
              [](const ThreadModel &a, const ThreadModel &b) {
                return a.tid < b.tid;
              });
    if (!found)
      raise(llvm::createStringError(
          "snapshot %u has no thread %lld (see 'magic-trace status')",
          record.number, (long long)tid));
    return tree;
  }

  /// report --annotate / --top (Views.h): the text (or JSON line) to print.
  /// `by` is --top's order ("" for self time).
  std::string view(unsigned number, const std::string &annotate, bool insns,
                   bool top, unsigned topRows, const std::string &by,
                   unsigned rows, uint64_t tid, bool json,
                   const std::string &window, const std::string &maxSlices,
                   const std::string &maxTrace) {
    ViewRequest request;
    request.annotate = annotate;
    request.instructions = insns;
    request.top = top;
    request.topRows = topRows;
    if (!by.empty())
      request.order = take(parseFunctionOrder(by));
    request.rows = rows;
    request.tid = tid;
    request.json = json;
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> hold(lock);
    std::optional<PipelineResult> storage;
    SnapshotRecord &record = *take(log.findDecoded(number));
    const TraceModel &model =
        viewed(record, window, maxSlices, maxTrace, storage)->model;
    return take(renderReportView(record, model, symbols.get(), request));
  }

  /// diff K1 K2 (Views.h): the text (or JSON line) to print.
  std::string diff(unsigned first, unsigned second, unsigned rows, bool json) {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> hold(lock);
    return take(renderDiffView(log, first, second, symbols.get(), rows, json));
  }

  /// Writes snapshot `number` again; returns the line to print.
  std::string save(unsigned number, const std::string &path,
                   const std::string &format, const std::string &window,
                   const std::string &maxSlices, const std::string &maxTrace) {
    std::lock_guard<std::mutex> hold(lock);
    std::optional<PipelineResult> storage;
    SnapshotRecord &record = *take(log.findDecoded(number));
    return take(
        saveSnapshot(record, path, format,
                     viewed(record, window, maxSlices, maxTrace, storage)));
  }

  /// Recorded instructions so far and the recorder's note, without pausing.
  /// The QEMU recorder's counts come from its rings; any recorder gives
  /// its backend, threads and its own status lines (ProcessRecorder.h).
  py::dict status() {
    py::dict result;
    result["backend"] = recorder ? recorder->backend().str() : "";
    result["lines"] =
        recorder ? recorder->statusLines() : std::vector<std::string>();
    result["instructions"] = 0;
    result["threads"] = recorder ? recorder->threads().size() : 0;
    result["recording"] = bool(recorder);
    result["stopped"] = false;
    result["note"] = "";
    if (!ringDir.empty()) {
      QemuRingStatus status = take(readQemuRingStatus(ringDir));
      result["instructions"] = status.instructions;
      result["threads"] = status.threads.size();
      result["recording"] = status.recording;
      result["stopped"] = status.stopped;
      result["note"] = status.note;
    }
    RecorderSnapshots::Status queue = recorderSnapshots.status();
    {
      std::lock_guard<std::mutex> hold(lock);
      result["snapshots"] = log.size();
      result["kept"] = log.keep();
      result["kept_line"] = log.size() ? keptSnapshotsLine(log) : "";
    }
    result["recorder_written"] = queue.written;
    result["recorder_decoded"] = queue.decoded;
    result["recorder_waiting"] = queue.waiting;
    result["recorder_skipped"] = queue.skipped;
    result["recorder_max_pending"] = queue.maxPending;
    result["recorder_waited_s"] = double(queue.waitedNs) / 1e9;
    return result;
  }

  /// `status --json`: the backend, the recorder's queue, what is kept and
  /// every snapshot as LLDB's `status --json` lists them (snapshotJson,
  /// with its decodeSeconds and window).
  std::string statusJson() {
    RecorderSnapshots::Status queue = recorderSnapshots.status();
    llvm::json::Array snapshots;
    llvm::json::Value kept = nullptr;
    {
      std::lock_guard<std::mutex> hold(lock);
      for (const auto &record : log.all())
        snapshots.push_back(snapshotJson(*record));
      kept = keptSnapshotsJson(log);
    }
    llvm::json::Object status{
        {"backend", recorder ? recorder->backend().str() : ""},
        {"threads", int64_t(recorder ? recorder->threads().size() : 0)},
        {"snapshots", std::move(snapshots)},
        {"kept", std::move(kept)},
        {"recorder",
         llvm::json::Object{{"written", int64_t(queue.written)},
                            {"decoded", int64_t(queue.decoded)},
                            {"waiting", int64_t(queue.waiting)},
                            {"skipped", int64_t(queue.skipped)},
                            {"maxPending", int64_t(queue.maxPending)},
                            {"waitedSeconds", double(queue.waitedNs) / 1e9}}}};
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::json::Value(std::move(status));
    return text;
  }

private:
  std::string ringDir;
  bool keepTruth;
  /// The recording (ProcessRecorder.h): the QEMU recorder's rings, the perf
  /// backend's (magic-trace attach), or null after detach.
  std::unique_ptr<ProcessRecorder> recorder;
  uint64_t perfPid = 0; ///< The perf backend's process (QEMU's says its own).
  SnapshotLog log;
  /// What the last stop showed; a snapshot after the process exited uses
  /// them (its modules are gone, its stacks are the last ones seen).
  std::vector<Module> lastModules;
  std::vector<ThreadStop> lastStops;
  std::string processName;
  /// Symbol tables and DWARF read by earlier snapshots, for the next.
  std::unique_ptr<SymbolCache> symbols = std::make_unique<SymbolCache>();
  /// Recorder triggers: output pattern and window by address.
  std::map<uint64_t, std::string> patterns;
  std::map<uint64_t, WindowOptions> windows;
  /// Held by whoever uses the log, the symbols, the modules or the
  /// patterns: the recorder snapshots' worker decodes beside GDB's thread.
  std::mutex lock;
  RecorderSnapshots recorderSnapshots;

  RecorderSnapshots::Host recorderHost() {
    RecorderSnapshots::Host host;
    host.modules = [this] { return lastModules; };
    host.processName = [this] { return processName; };
    host.outputPath = [this](uint64_t address, unsigned number) {
      auto pattern = patterns.find(address);
      return expandPattern(pattern == patterns.end() ? "magic-trace-%N.fxt"
                                                     : pattern->second,
                           number);
    };
    host.window = [this](uint64_t address) {
      auto window = windows.find(address);
      return window == windows.end() ? WindowOptions() : window->second;
    };
    return host;
  }

  /// `record`'s result in the window a view asks for ("" and "": the one it
  /// keeps; else decoded again into `storage`). The caller holds the lock.
  PipelineResult *viewed(SnapshotRecord &record, const std::string &window,
                         const std::string &maxSlices,
                         const std::string &maxTrace,
                         std::optional<PipelineResult> &storage) {
    if (window.empty() && maxSlices.empty() && maxTrace.empty())
      return &record.result;
    take(resultInWindow(record, windowOf(window, maxSlices, maxTrace),
                        symbols.get(), storage));
    return storage ? &*storage : &record.result;
  }

  /// Modules from r_map: a file at its bias. A name that is not a file (the
  /// vdso, which QEMU 7.2 does not map for x86-64 guests) is a note.
  static std::vector<Module> modulesOf(const std::vector<LinkMapEntry> &entries,
                                       std::vector<std::string> &notes) {
    std::vector<Module> modules;
    for (const auto &[path, bias] : entries) {
      if (path.empty())
        continue;
      if (!llvm::sys::fs::is_regular_file(path)) {
        notes.push_back("no file for module '" + path +
                        "': its code is not symbolized");
        continue;
      }
      llvm::Expected<PlacedElf> placed = placeElfAtBias(path, bias);
      if (!placed) {
        notes.push_back(llvm::toString(placed.takeError()));
        continue;
      }
      Module module;
      module.path = path;
      module.buildId = readBuildId(path);
      module.loadAddress = placed->loadAddress;
      module.segments = std::move(placed->segments);
      modules.push_back(std::move(module));
    }
    return modules;
  }
};

} // namespace

PYBIND11_MODULE(magic_trace_gdb, m) {
  m.doc() = "magic-trace's core for GDB (plugin/gdb/magic-trace-gdb.py)";
  // Advice names GDB's commands ('run', not 'process launch').
  setDebuggerHost(DebuggerHost::Gdb);
  m.def("libipt_version", &libiptVersion);
  m.def(
      "check_window",
      [](const std::string &window, const std::string &maxSlices,
         const std::string &maxTrace) {
        windowOf(window, maxSlices, maxTrace);
      },
      "Raises the one-line error of a bad --window or --max-slices.");
  m.def(
      "parse_snapshot_size",
      [](const std::string &text) { return take(parseSnapshotSize(text)); },
      "A --snapshot-size in bytes, read as LLDB's commands read it; raises "
      "its one-line error.");
  m.def(
      "parse_memory_size",
      [](const std::string &text) { return take(parseMemorySize(text)); },
      "A --keep-memory in bytes, read as LLDB's commands read it; raises its "
      "one-line error.");
  m.def(
      "machine_facts", [] { return renderFactsText(probeMachine()); },
      "What magic-trace doctor says of this machine, as the LLDB host "
      "prints it (cpu, intel_pt PMU, permissions, the perf plan, ...).");
  m.def(
      "find_symbol",
      [](const std::string &path, const std::string &name) {
        return take(findElfSymbol(path, name));
      },
      "The link-time address of a symbol in an ELF file.");
  m.def(
      "check_program",
      [](const std::string &path) {
        if (llvm::Error error = checkX86_64Elf(path))
          raise(std::move(error));
      },
      "Raises unless the file is an x86-64 ELF program.");
  m.def(
      "user_cache_dir", [] { return take(userCacheDir()); },
      "The user's cache directory (~/.cache/magic-trace), made 0700 when "
      "missing; raises when someone else controls it.");
  m.def(
      "check_private",
      [](const std::string &path, bool directory) -> std::string {
        if (llvm::Error error = checkPrivate(path, directory))
          return llvm::toString(std::move(error));
        return "";
      },
      "Why PATH may not be trusted (a symlink, another user's, writable by "
      "others), or '' when it may.");
  m.def(
      "make_private_temp_dir",
      [](const std::string &prefix, const std::string &parent) {
        return take(makePrivateTempDir(prefix, parent));
      },
      py::arg("prefix"), py::arg("parent") = "",
      "A new directory PARENT/PREFIX-XXXXXX (PARENT: $TMPDIR's choice when "
      "empty), 0700, naming this process as its owner.");
  m.def("remove_stale_temp_dirs", &removeStaleTempDirs,
        "Removes this user's magic-trace directories whose owner process is "
        "gone; returns how many.");
  py::class_<GdbSession>(m, "Session")
      .def(py::init<std::string, bool, unsigned, unsigned, uint64_t>(),
           py::arg("ring_dir"), py::arg("keep_truth"),
           py::arg("keep") = kDefaultKeptSnapshots,
           py::arg("wait_ms") = kDefaultTriggerWaitMs,
           py::arg("keep_memory") = 0)
      .def("snapshot", &GdbSession::snapshot, py::arg("pcs"), py::arg("alive"),
           py::arg("link_map"), py::arg("stops"), py::arg("reason"),
           py::arg("path"), py::arg("process_name"), py::arg("window") = "",
           py::arg("max_slices") = "", py::arg("max_trace") = "",
           py::arg("read_memory") = py::none())
      .def("report", &GdbSession::report, py::arg("number") = 0,
           py::arg("last") = "", py::arg("depth") = 0, py::arg("tid") = -1,
           py::arg("window") = "", py::arg("max_slices") = "",
           py::arg("max_trace") = "")
      .def("view", &GdbSession::view, py::arg("number") = 0,
           py::arg("annotate") = "", py::arg("insns") = false,
           py::arg("top") = false, py::arg("top_rows") = kDefaultTopRows,
           py::arg("by") = "", py::arg("rows") = kDefaultViewRows,
           py::arg("tid") = 0, py::arg("json") = false, py::arg("window") = "",
           py::arg("max_slices") = "", py::arg("max_trace") = "")
      .def("diff", &GdbSession::diff, py::arg("first"), py::arg("second"),
           py::arg("rows") = kDefaultViewRows, py::arg("json") = false)
      .def("save", &GdbSession::save, py::arg("number"), py::arg("path"),
           py::arg("format") = "", py::arg("window") = "",
           py::arg("max_slices") = "", py::arg("max_trace") = "")
      .def("status", &GdbSession::status)
      .def("status_json", &GdbSession::statusJson)
      .def("set_modules", &GdbSession::setModules, py::arg("link_map"),
           py::arg("process_name"))
      .def("arm_trigger", &GdbSession::armTrigger, py::arg("address"),
           py::arg("count"), py::arg("pattern"), py::arg("window") = "",
           py::arg("max_slices") = "", py::arg("max_trace") = "")
      .def("collect_triggered", &GdbSession::collectTriggered)
      .def("attach_perf", &GdbSession::attachPerf, py::arg("pid"),
           py::arg("tids"), py::arg("timer") = "normal",
           py::arg("buffer_size") = uint64_t(4) << 20)
      .def("detach_perf", &GdbSession::detachPerf);
}
