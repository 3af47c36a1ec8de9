//===- QemuEngine.cpp - Recording a program under the QEMU plugin ---------===//
#include "magic_trace/QemuEngine.h"

#include "magic_trace/PrivateFiles.h"
#include "magic_trace/ProcessModules.h"
#include "magic_trace/QemuRings.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace magic_trace {

llvm::Expected<std::string> findQemu(llvm::StringRef explicitPath) {
  if (!explicitPath.empty()) {
    if (!llvm::sys::fs::can_execute(explicitPath))
      return llvm::createStringError(
          ("cannot run " + explicitPath + " (give the path of qemu-x86_64)")
              .str());
    return explicitPath.str();
  }
  llvm::ErrorOr<std::string> found =
      llvm::sys::findProgramByName("qemu-x86_64");
  if (!found)
    return llvm::createStringError(
        "qemu-x86_64 not found in PATH: install Debian's qemu-user package "
        "(apt-get install qemu-user), or use --engine ptrace");
  return *found;
}

namespace {

/// `value` (`what`, as the user gave it) is a power of two of at least
/// `least`; `example` is one that is.
llvm::Error checkPowerOfTwo(uint64_t value, uint64_t least,
                            llvm::StringRef what, llvm::StringRef example) {
  if (value < least || (value & (value - 1)))
    return llvm::createStringError(
        llvm::formatv("{0} {1} is not a power of two of at least {2} "
                      "(use e.g. {3})",
                      what, value, least, example)
            .str());
  return llvm::Error::success();
}

llvm::Expected<std::string> makeRingDir(const std::string &wanted) {
  if (!wanted.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(wanted))
      return llvm::createStringError("cannot create the ring directory " +
                                     wanted + ": " + ec.message() +
                                     " (choose a writable directory)");
    return wanted;
  }
  // A directory of this run's own (mkdtemp, 0700) that names this process
  // as its owner, so a later run removes it if this one is killed.
  removeStaleTempDirs();
  for (std::string base : {std::string("/dev/shm"), tempRoot()}) {
    llvm::Expected<std::string> dir =
        makePrivateTempDir("magic-trace-qemu", base);
    if (dir)
      return *dir;
    llvm::consumeError(dir.takeError());
  }
  return llvm::createStringError(
      std::string("cannot create a ring directory in /dev/shm or ") +
      tempRoot() + ": " + std::strerror(errno) + " (give one with --ring-dir)");
}

/// True when the plugin has stopped and every thread's ring is final.
bool allThreadsDone(const std::string &dir) {
  std::string path = dir + "/header";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat info{};
  bool done = false;
  if (fstat(fd, &info) == 0 &&
      uint64_t(info.st_size) >= sizeof(QemuRingHeader)) {
    void *address =
        mmap(nullptr, sizeof(QemuRingHeader), PROT_READ, MAP_SHARED, fd, 0);
    if (address != MAP_FAILED) {
      const auto &header = *static_cast<const QemuRingHeader *>(address);
      done = __atomic_load_n(&header.stopped, __ATOMIC_ACQUIRE) != 0;
      uint32_t count = std::min(header.threadCount, kQemuRingMaxThreads);
      for (uint32_t i = 0; done && i < count; ++i)
        done = __atomic_load_n(&header.threads[i].state, __ATOMIC_ACQUIRE) ==
               uint32_t(QemuThreadState::Done);
      munmap(address, sizeof(QemuRingHeader));
    }
  }
  ::close(fd);
  return done;
}

} // namespace

llvm::Expected<EmulateResult>
emulateUnderQemu(const EmulateOptions &options,
                 const QemuEngineOptions &engine) {
  if (options.argv.empty())
    return llvm::createStringError("no program given (-- PROGRAM ARGS...)");
  llvm::Expected<std::string> qemu = findQemu(engine.qemuPath);
  if (!qemu)
    return qemu.takeError();
  if (!llvm::sys::fs::exists(engine.pluginPath))
    return llvm::createStringError(
        "the QEMU plugin " + engine.pluginPath +
        " is missing (build it: ./scripts/build.sh)");
  std::string program = options.argv[0];
  if (program.find('/') == std::string::npos) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(program);
    if (!found)
      return llvm::createStringError("cannot find program '" + program +
                                     "' in PATH (give its path)");
    program = *found;
  }
  if (llvm::Error error = checkX86_64Elf(program))
    return std::move(error);
  if (llvm::Error error = checkPowerOfTwo(options.writer.bufferSize, 4096,
                                          "ring size", "4194304"))
    return std::move(error);
  if (engine.logBlocks)
    if (llvm::Error error = checkPowerOfTwo(engine.logBlocks, 1024,
                                            "--qemu-log", "--qemu-log 4194304"))
      return std::move(error);
  if (options.writer.dialect.any())
    return llvm::createStringError(
        "--dialect is for the ptrace engine (use --engine ptrace)");
  llvm::Expected<std::string> dir = makeRingDir(engine.ringDir);
  if (!dir)
    return dir.takeError();

  std::string pluginArg = llvm::formatv(
      "{0},dir={1},size={2},psb-period={3},timer={4},max-insns={5},"
      "ground-truth={6}",
      engine.pluginPath, *dir, options.writer.bufferSize,
      options.writer.psbPeriod,
      options.writer.timer == TimerResolution::Low      ? "low"
      : options.writer.timer == TimerResolution::Normal ? "normal"
                                                        : "high",
      options.maxInsns, engine.groundTruth ? "on" : "off");
  if (options.writer.noRetComp)
    pluginArg += ",noretcomp=on";
  if (options.writer.overflowEvery)
    pluginArg +=
        ",overflow-every=" + std::to_string(options.writer.overflowEvery);
  if (engine.logBlocks)
    pluginArg += ",log=" + std::to_string(engine.logBlocks);
  pluginArg += ",start=" + options.start;
  if (!options.stop.empty())
    pluginArg += ",stop=" + options.stop;

  std::vector<std::string> args = {*qemu, "-plugin", pluginArg, program};
  args.insert(args.end(), options.argv.begin() + 1, options.argv.end());
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  auto began = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0)
    return llvm::createStringError(std::string("cannot fork: ") +
                                   std::strerror(errno));
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  bool killed = false;
  std::optional<std::chrono::steady_clock::time_point> runOnUntil;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (done < 0 && errno != EINTR)
      return llvm::createStringError(std::string("waitpid: ") +
                                     std::strerror(errno));
    if (!killed && !runOnUntil && allThreadsDone(*dir)) {
      // Recording is over; the rest of the run only costs time, unless the
      // caller wants what the program writes at its end.
      if (engine.runOn.count() == 0) {
        kill(pid, SIGKILL);
        killed = true;
      } else {
        runOnUntil = std::chrono::steady_clock::now() + engine.runOn;
      }
    }
    if (!killed && runOnUntil &&
        std::chrono::steady_clock::now() > *runOnUntil) {
      kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
      !llvm::sys::fs::exists(*dir + "/header"))
    return llvm::createStringError("cannot run " + *qemu);

  bool ran = llvm::sys::fs::exists(*dir + "/header");
  llvm::Expected<QemuRecording> recording =
      ran ? readQemuRings(*dir, engine.groundTruth)
          : llvm::Expected<QemuRecording>(llvm::createStringError(
                "qemu-x86_64 did not run the plugin (its message is above)"));
  if (engine.ringDir.empty())
    removeTree(*dir);
  if (!recording)
    return recording.takeError();

  EmulateResult result;
  result.snapshot = std::move(recording->snapshot);
  result.snapshot.processName = llvm::sys::path::filename(program).str();
  result.truth = std::move(recording->truth);
  result.instructions = recording->instructions;
  result.lostInstructions = recording->lostInstructions;
  result.recorderNote = recording->note;
  if (killed && runOnUntil)
    result.recorderNote +=
        (result.recorderNote.empty() ? "" : "; ") +
        llvm::formatv("the program did not end within --run-on {0} s after "
                      "the recording: ended it",
                      engine.runOn.count())
            .str();
  // QEMU dying (not by our kill) still leaves the rings: keep them, say so.
  if (!killed && WIFSIGNALED(status))
    result.recorderNote +=
        (result.recorderNote.empty() ? "" : "; ") +
        llvm::formatv("the program died of signal {0} ({1}), and QEMU with it: "
                      "the bundle holds "
                      "what the rings had then (modules may be missing)",
                      WTERMSIG(status), strsignal(WTERMSIG(status)))
            .str();
  result.tracedSeconds = seconds;
  // How the recording ended is the recorder's word, not whether our kill
  // came before the program's own exit (a program that exits right after
  // its stop point often wins that race).
  switch (recording->stopReason) {
  case QemuStopReason::StopPoint:
    result.end = EmulateEnd::StopHit;
    break;
  case QemuStopReason::MaxInsns:
    result.end = EmulateEnd::MaxInsns;
    break;
  default:
    result.end = EmulateEnd::Exited;
    break;
  }
  result.exitStatus =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

} // namespace magic_trace
