//===- Session.cpp - One debugger's magic-trace recording -----------------===//
#include "Session.h"
#include "PerfBackend.h"
#include "QemuBackend.h"
#include "StepDeadline.h"

#include "magic_trace/PrivateFiles.h"
#include "magic_trace/QemuRings.h"
#include "magic_trace/TraceWriters.h"
#include "magic_trace/VirtualClock.h"

#include "lldb/API/SBAddress.h"
#include "lldb/API/SBBreakpoint.h"
#include "lldb/API/SBCommandInterpreter.h"
#include "lldb/API/SBError.h"
#include "lldb/API/SBFileSpec.h"
#include "lldb/API/SBFrame.h"
#include "lldb/API/SBFunction.h"
#include "lldb/API/SBModule.h"
#include "lldb/API/SBProgress.h"
#include "lldb/API/SBSection.h"
#include "lldb/API/SBSymbol.h"
#include "lldb/API/SBThread.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <mutex>
#include <set>

namespace magic_trace::plugin {
namespace {

std::string filePath(const lldb::SBFileSpec &spec) {
  char buffer[4096];
  uint32_t length = spec.GetPath(buffer, sizeof(buffer));
  return length ? std::string(buffer, length) : std::string();
}

/// LLDB's UUID text ("1A2B3C4D-...") as a lower-case hex build-id.
std::string buildIdOf(lldb::SBModule &module) {
  const char *uuid = module.GetUUIDString();
  std::string id;
  for (const char *c = uuid ? uuid : ""; *c; ++c)
    if (*c != '-')
      id += char(llvm::toLower(*c));
  return id;
}

/// Files this plugin wrote to the temp directory (copies of the vdso), which
/// snapshots read until the debugger exits: removed when it exits. (Not on
/// signals: LLVM's signal handlers would take over the debugger's Ctrl-C.)
class TemporaryFiles {
public:
  void add(const std::string &path) {
    std::lock_guard<std::mutex> hold(lock);
    paths.insert(path);
  }
  ~TemporaryFiles() {
    for (const std::string &path : paths)
      removeTree(path);
  }

private:
  std::mutex lock;
  std::set<std::string> paths;
};

TemporaryFiles &temporaryFiles() {
  static TemporaryFiles files;
  return files;
}

/// A module with no file on disk (the vdso) is copied out of the process so
/// the decoder and the symbolizer can read it like any other ELF file.
void copyFromMemory(lldb::SBProcess &process, Module &module, uint64_t pid) {
  if (module.segments.empty() || llvm::sys::fs::exists(module.path))
    return;
  uint64_t end = 0;
  for (const LoadedSegment &segment : module.segments)
    end = std::max(end, segment.address + segment.size);
  // Mappings are whole pages; the ELF section headers may lie past the end
  // of the last segment's bytes.
  end = (end + 4095) & ~uint64_t(4095);
  if (end <= module.loadAddress || end - module.loadAddress > (64u << 20))
    return;
  std::vector<uint8_t> bytes(end - module.loadAddress);
  lldb::SBError error;
  size_t read =
      process.ReadMemory(module.loadAddress, bytes.data(), bytes.size(), error);
  if (read != bytes.size())
    return;
  llvm::Expected<std::string> dir = privateDir();
  if (!dir) {
    llvm::consumeError(dir.takeError());
    return;
  }
  llvm::SmallString<128> path(*dir);
  std::string name = llvm::sys::path::filename(module.path).str();
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !llvm::isAlnum(c); }, '_');
  llvm::sys::path::append(path, std::to_string(pid) + "-" + name + ".so");
  // In a directory only this user can write, a fixed name is safe.
  int fd = -1;
  if (llvm::sys::fs::openFileForWrite(path, fd, llvm::sys::fs::CD_CreateAlways,
                                      llvm::sys::fs::OF_None, 0600))
    return;
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  os.close();
  if (!os.has_error())
    module.fileCopy = path.str().str();
}

} // namespace

void removeAtExit(const std::string &path) { temporaryFiles().add(path); }

llvm::Expected<std::string> privateDir() {
  static std::mutex lock;
  static std::string made;
  std::lock_guard<std::mutex> hold(lock);
  if (!made.empty() && llvm::sys::fs::is_directory(made))
    return made;
  removeStaleTempDirs();
  llvm::Expected<std::string> dir = makePrivateTempDir("magic-trace-lldb");
  if (!dir)
    return dir.takeError();
  made = *dir;
  removeAtExit(made);
  return made;
}

bool Session::traces(uint64_t tid) const {
  if (allThreads)
    return true;
  return std::find(threadFilter.begin(), threadFilter.end(), tid) !=
         threadFilter.end();
}

Trigger *Session::findTrigger(lldb::break_id_t breakpoint) {
  for (Trigger &trigger : triggers)
    if (trigger.breakpoint == breakpoint)
      return &trigger;
  return nullptr;
}

llvm::json::Value Session::statusJson() const {
  llvm::json::Array threads;
  int64_t recorded = 0;
  for (const RecorderThreadStatus &thread :
       recorder ? recorder->threads() : std::vector<RecorderThreadStatus>()) {
    llvm::json::Object entry{{"tid", int64_t(thread.tid)}};
    if (recorder->perCpuBuffers()) {
      entry["ringBytesPerCpu"] = int64_t(recorder->bufferBytes());
    } else {
      entry["instructions"] = int64_t(thread.instructions);
      if (emulate()) {
        entry["bytes"] = int64_t(thread.bytes);
        entry["wrapped"] = thread.wrapped;
      }
      entry["exited"] = thread.exited;
    }
    if (!emulate())
      recorded += int64_t(thread.instructions);
    threads.push_back(std::move(entry));
  }
  llvm::json::Array triggerList;
  for (const Trigger &trigger : triggers)
    triggerList.push_back(
        llvm::json::Object{{"breakpoint", int64_t(trigger.breakpoint)},
                           {"description", trigger.description},
                           {"hits", int64_t(trigger.hits)},
                           {"count", int64_t(trigger.count)},
                           {"continue", trigger.continueAfter},
                           {"pattern", trigger.pattern},
                           {"inRecorder", trigger.recorderAddress != 0},
                           {"active", trigger.active()}});
  llvm::json::Array snapshotList;
  for (const auto &record : snapshots.all())
    snapshotList.push_back(snapshotJson(*record));
  double rate = stats.seconds > 0 ? stats.instructions / stats.seconds : 0;
  return llvm::json::Object{
      {"attached", attached},
      {"pid", int64_t(qemuPid ? qemuPid : pid)},
      {"backend", backend},
      {"snapshotSize",
       int64_t(recorder ? recorder->bufferBytes() : writerOptions.bufferSize)},
      {"timerResolution", timerName},
      {"threads", std::move(threads)},
      {"triggers", std::move(triggerList)},
      {"snapshots", std::move(snapshotList)},
      {"kept", keptSnapshotsJson(snapshots)},
      {"stepper",
       llvm::json::Object{{"instructions", int64_t(stats.instructions)},
                          {"steps", int64_t(stats.steps)},
                          {"seconds", stats.seconds},
                          {"instructionsPerSecond", rate}}},
      {"exited", exited},
      {"recorderInstructions", recorded}};
}

Session &sessionFor(lldb::SBDebugger &debugger) {
  static std::map<uint64_t, std::unique_ptr<Session>> sessions;
  std::unique_ptr<Session> &session = sessions[debugger.GetID()];
  if (!session)
    session = std::make_unique<Session>();
  return *session;
}

std::vector<Module> captureModules(lldb::SBTarget &target) {
  std::vector<Module> modules;
  lldb::SBProcess process = target.GetProcess();
  for (uint32_t i = 0, n = target.GetNumModules(); i < n; ++i) {
    lldb::SBModule sbModule = target.GetModuleAtIndex(i);
    Module module;
    module.path = filePath(sbModule.GetPlatformFileSpec());
    std::string local = filePath(sbModule.GetFileSpec());
    if (module.path.empty())
      module.path = local;
    else if (local != module.path && llvm::sys::fs::exists(local))
      module.fileCopy = local;
    module.buildId = buildIdOf(sbModule);
    lldb::addr_t header =
        sbModule.GetObjectFileHeaderAddress().GetLoadAddress(target);
    // Sections of ELF files sit inside "PT_LOAD[n]" containers, one per
    // mapping; without them, every loaded top-level section is a mapping.
    bool haveSegments = false;
    for (uint32_t s = 0; s < sbModule.GetNumSections(); ++s)
      if (llvm::StringRef(sbModule.GetSectionAtIndex(s).GetName())
              .starts_with("PT_LOAD"))
        haveSegments = true;
    for (uint32_t s = 0; s < sbModule.GetNumSections(); ++s) {
      lldb::SBSection section = sbModule.GetSectionAtIndex(s);
      if (haveSegments &&
          !llvm::StringRef(section.GetName()).starts_with("PT_LOAD"))
        continue;
      lldb::addr_t address = section.GetLoadAddress(target);
      if (address == LLDB_INVALID_ADDRESS || section.GetByteSize() == 0)
        continue;
      LoadedSegment segment;
      segment.address = address;
      segment.size = section.GetByteSize();
      segment.fileOffset = section.GetFileOffset();
      segment.executable =
          (section.GetPermissions() & lldb::ePermissionsExecutable) != 0;
      module.segments.push_back(segment);
    }
    if (module.segments.empty())
      continue; // Not loaded in this process.
    std::sort(module.segments.begin(), module.segments.end(),
              [](const LoadedSegment &a, const LoadedSegment &b) {
                return a.address < b.address;
              });
    module.loadAddress = header != LLDB_INVALID_ADDRESS
                             ? header
                             : module.segments.front().address -
                                   module.segments.front().fileOffset;
    if (process.IsValid())
      copyFromMemory(process, module, process.GetProcessID());
    modules.push_back(std::move(module));
  }
  return modules;
}

std::vector<ThreadStop> captureStop(lldb::SBProcess &process,
                                    const Session &session,
                                    uint64_t triggeredTid) {
  std::vector<ThreadStop> stops;
  for (uint32_t i = 0, n = process.GetNumThreads(); i < n; ++i) {
    lldb::SBThread thread = process.GetThreadAtIndex(i);
    uint64_t tid = thread.GetThreadID();
    if (!session.traces(tid))
      continue;
    ThreadStop stop;
    stop.tid = tid;
    stop.triggered = tid == triggeredTid;
    // Inlined frames share their physical frame's PC; the stop context
    // lists physical frames only (the symbolizer re-creates the inlining).
    // Artificial frames are tail calls LLDB infers from DWARF call sites
    // (pthread_join jumping to __pthread_clockjoin_ex): no return address
    // of theirs is on the stack, and the trace shows them as jumps.
    for (uint32_t f = 0, count = thread.GetNumFrames(); f < count; ++f) {
      lldb::SBFrame frame = thread.GetFrameAtIndex(f);
      if (frame.IsInlined() || frame.IsArtificial())
        continue;
      stop.frames.push_back(frame.GetPC());
      const char *name = frame.GetFunction().IsValid()
                             ? frame.GetFunction().GetName()
                             : frame.GetSymbol().GetName();
      stop.functionNames.push_back(name ? name : "");
    }
    stops.push_back(std::move(stop));
  }
  return stops;
}

llvm::Expected<SnapshotRecord *>
takeSnapshot(lldb::SBDebugger &debugger, Session &session,
             uint64_t triggeredTid, std::string reason, std::string path,
             const WindowOptions &window, bool stopped) {
  lldb::SBTarget target = debugger.GetSelectedTarget();
  lldb::SBProcess process = target.GetProcess();
  // After an exec the process runs another program: the trace's modules
  // and stacks are the ones seen before it.
  bool alive = process.IsValid() &&
               (stopped || process.GetState() == lldb::eStateStopped) &&
               !session.execed;

  if (!session.recorder)
    return llvm::createStringError(
        "not attached (start recording with 'magic-trace attach')");
  SnapshotRequest request;
  request.reason = std::move(reason);
  request.path = std::move(path);
  request.pid = session.pid;
  const char *exe = target.GetExecutable().GetFilename();
  request.processName = exe ? exe : "";
  request.stop.alive = alive;
  if (alive) {
    for (uint32_t i = 0; i < process.GetNumThreads(); ++i) {
      lldb::SBThread thread = process.GetThreadAtIndex(i);
      request.stop.pcs.emplace_back(thread.GetThreadID(),
                                    thread.GetFrameAtIndex(0).GetPC());
    }
    request.stacks = captureStop(process, session, triggeredTid);
  }
  // The code outside files as at the stop (addCodeAtStop).
  if (alive)
    request.readMemory = [process](uint64_t address, uint8_t *buffer,
                                   size_t size) mutable {
      lldb::SBError error;
      return process.ReadMemory(address, buffer, size, error);
    };
  request.stop.traces = [&session](uint64_t tid) {
    return session.traces(tid);
  };
  if (session.emulate())
    request.nothingRecorded =
        "nothing recorded yet (run 'magic-trace continue' first: under the "
        "emulate backend only that command records)";
  request.pipeline.window = window;
  // A long decode shows LLDB's progress and stops at Ctrl-C (the session
  // goes on; the snapshot is not made).
  CtrlCWatch ctrlC;
  lldb::SBProgress progress("magic-trace: decoding the snapshot", "", debugger);
  request.pipeline.progress = [&](uint64_t instructions) {
    std::string done = withCommas(instructions) + " instructions";
    progress.Increment(1, done.c_str());
    return !(CtrlCWatch::pressed() || debugger.InterruptRequested() ||
             debugger.GetCommandInterpreter().WasInterrupted());
  };
  // The recorder snapshots' worker shares the modules, symbols and log.
  std::unique_lock<std::mutex> hold(session.lock, std::defer_lock);
  if (alive) {
    std::vector<Module> modules = captureModules(target);
    hold.lock();
    session.lastModules = std::move(modules);
  } else {
    hold.lock();
  }
  request.modules = session.lastModules;
  llvm::Expected<SnapshotRecord *> record =
      recordSnapshot(*session.recorder, std::move(request), session.snapshots,
                     session.symbols.get());
  progress.Finalize();
  return record;
}

llvm::Expected<SnapshotRecord *> fireTrigger(lldb::SBDebugger &debugger,
                                             Session &session, Trigger &trigger,
                                             uint64_t tid, bool stopped) {
  ++trigger.hits;
  llvm::Expected<SnapshotRecord *> record =
      takeSnapshot(debugger, session, tid,
                   "breakpoint " + std::to_string(trigger.breakpoint),
                   expandPattern(trigger.pattern, session.snapshots.next()),
                   trigger.window, stopped);
  if (record && !trigger.active())
    debugger.GetSelectedTarget()
        .FindBreakpointByID(trigger.breakpoint)
        .SetEnabled(false);
  return record;
}

} // namespace magic_trace::plugin
