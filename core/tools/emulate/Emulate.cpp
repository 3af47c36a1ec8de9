//===- Emulate.cpp - magic-trace-emulate: emulated Intel PT recording -----===//
//
// Launches a program under ptrace, single-steps it from --start to --stop,
// and writes an LLDB intel-pt trace bundle with genuine PT packets plus the
// ground truth of what ran (docs/emulator-cli.md).
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/GroundTruth.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/QemuEngine.h"

#include "PerfDataOutput.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace magic_trace;

static cl::OptionCategory category("magic-trace-emulate options");

static cl::opt<std::string>
    startOption("start", cl::desc("Start tracing here (default main)"),
                cl::value_desc("SYMBOL|0xADDR"), cl::init("main"),
                cl::cat(category));
static cl::opt<std::string>
    stopOption("stop",
               cl::desc("Stop and snapshot when a thread gets here (default: "
                        "trace until exit or --max-insns)"),
               cl::value_desc("SYMBOL|0xADDR"), cl::cat(category));
static cl::opt<uint64_t>
    maxInsns("max-insns",
             cl::desc("Stop after N traced instructions, all threads (default "
                      "10,000,000; 0: no limit)"),
             cl::value_desc("N"), cl::init(10'000'000), cl::cat(category));
static cl::opt<uint64_t> bufferSize(
    "buffer-size",
    cl::desc("PT ring buffer per thread, a power of two >= 4096 (default "
             "4 MiB)"),
    cl::value_desc("BYTES"), cl::init(4 << 20), cl::cat(category));
static cl::opt<uint64_t>
    psbPeriod("psb-period", cl::desc("Bytes between PSB+ (default 4096)"),
              cl::value_desc("BYTES"), cl::init(4096), cl::cat(category));
static cl::opt<TimerResolution> timerResolution(
    "timer-resolution",
    cl::desc("Timing packets, as magic-trace's option (default normal)"),
    cl::values(clEnumValN(TimerResolution::Low, "low", "TSC in PSB+ and MTC"),
               clEnumValN(TimerResolution::Normal, "normal",
                          "MTC and CYC (default)"),
               clEnumValN(TimerResolution::High, "high",
                          "MTC, CYC, and every return a TIP")),
    cl::init(TimerResolution::Normal), cl::cat(category));
static cl::opt<bool> noRetComp("noretcomp",
                               cl::desc("Encode every return as a TIP (default "
                                        "off: compressed returns)"),
                               cl::cat(category));
static cl::opt<uint64_t> overflowEvery(
    "inject-overflow-every",
    cl::desc("Inject an overflow (OVF, lost packets) every N instructions "
             "(default 0: never)"),
    cl::value_desc("N"), cl::init(0), cl::cat(category));
static cl::opt<std::string> dialectOption(
    "dialect",
    cl::desc("Hardware packet shapes to write too, comma-separated: "
             "status-after-mode, psb-off, pad, tnt64, bdm70, deferred-tip, "
             "or all (docs/emulator.md; default none)"),
    cl::value_desc("LIST"), cl::init(""), cl::cat(category));
static cl::opt<std::string> outputDir("o", cl::desc("Bundle directory"),
                                      cl::value_desc("DIR"), cl::Required,
                                      cl::cat(category));
enum class Engine { Qemu, Ptrace };
static cl::opt<Engine> engineOption(
    "engine",
    cl::desc("How the program runs: under QEMU with the magic-trace plugin "
             "(millions of instructions a second) or single-stepped with "
             "ptrace (the reference; ~20 k instructions a second); default "
             "qemu where qemu-x86_64 is installed, else ptrace"),
    cl::values(clEnumValN(Engine::Qemu, "qemu", "qemu-x86_64 + plugin"),
               clEnumValN(Engine::Ptrace, "ptrace", "ptrace single-stepping")),
    cl::cat(category));
static cl::opt<std::string>
    qemuPath("qemu", cl::desc("qemu-x86_64 to run (default: from PATH)"),
             cl::value_desc("PATH"), cl::cat(category));
static cl::opt<std::string> ringDir(
    "ring-dir",
    cl::desc("Keep the QEMU engine's shared-memory rings here (default: a "
             "temporary directory in /dev/shm, removed)"),
    cl::value_desc("DIR"), cl::cat(category));
static cl::opt<uint64_t> qemuLog(
    "qemu-log",
    cl::desc("Blocks in each thread's log in the QEMU engine (a power of two "
             "of at least 1024; default 8388608, fewer with a small "
             "--max-insns)"),
    cl::value_desc("BLOCKS"), cl::cat(category));
static cl::opt<unsigned> runOn(
    "run-on",
    cl::desc("Under QEMU, after the recording ends (--stop, --max-insns), let "
             "the program run to its end untraced for at most SECONDS, so "
             "that what it writes at exit (node --perf-prof's jitdump) is "
             "there to read (default 0: end it at once)"),
    cl::value_desc("SECONDS"), cl::cat(category));
/// Ground truth costs about 40 bytes an instruction in the recorder's
/// memory (an address each, plus events) until the run ends: past this a
/// run would need gigabytes, so --ground-truth needs a --max-insns within it.
constexpr uint64_t kGroundTruthLimit = 20'000'000;
static cl::opt<bool> groundTruth(
    "ground-truth",
    cl::desc("Under QEMU, also write every executed instruction address to "
             "DIR/groundtruth/ (a test oracle; ~40 bytes of memory an "
             "instruction, needs --max-insns of at most 20,000,000; default "
             "off). The ptrace "
             "engine writes it always"),
    cl::cat(category));
static cl::list<std::string> programArgs(cl::Positional, cl::OneOrMore,
                                         cl::desc("-- PROGRAM ARGS..."),
                                         cl::cat(category));

static int fail(const Twine &message) {
  WithColor::error(errs(), "") << message << "\n";
  return 1;
}

/// The vdso's bytes as DIR/modules/vdso.so, the module's file in the bundle
/// (LLDB reads "file" relative to the bundle, as we do).
/// Code with no file on disk goes to DIR/modules/NAME, the module's file in
/// the bundle (LLDB reads "file" relative to the bundle, as we do).
static Error writeCodeImage(EmulateResult &result, StringRef dir,
                            StringRef modulePath, StringRef name,
                            const std::vector<uint8_t> &bytes) {
  SmallString<256> path(dir);
  sys::path::append(path, "modules");
  if (std::error_code ec = createOutputDirectories(path))
    return createStringError("cannot create " + path + ": " + ec.message() +
                             " (check permissions)");
  sys::path::append(path, name);
  if (Error error = writeOutputFile(
          path, StringRef(reinterpret_cast<const char *>(bytes.data()),
                          bytes.size())))
    return error;
  for (Module &module : result.snapshot.modules)
    if (module.path == modulePath)
      module.fileCopy = ("modules/" + name).str();
  return Error::success();
}

/// The vdso's bytes as DIR/modules/vdso.so (the ptrace engine; the QEMU
/// engine's code outside files is in the snapshot's code history).
static Error writeVdso(EmulateResult &result, StringRef dir) {
  if (!result.vdsoImage.empty())
    return writeCodeImage(result, dir, "[vdso]", "vdso.so", result.vdsoImage);
  return Error::success();
}

/// Why the run ended, for the summary line. A limit the user never gave
/// is named as the default it is, with the way to lift it.
static std::string endText(EmulateEnd end) {
  switch (end) {
  case EmulateEnd::StopHit:
    return "ended at stop point";
  case EmulateEnd::Exited:
    return "ended at exit";
  case EmulateEnd::MaxInsns:
    if (maxInsns.getNumOccurrences())
      return "ended at max-insns";
    return "stopped after the default 10,000,000 instructions (--max-insns 0 "
           "for no limit)";
  }
  return "?";
}

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions({&category, &perfDataCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "magic-trace-emulate: record genuine Intel PT of a program run under "
      "QEMU or single-stepped with ptrace\n\n"
      "  magic-trace-emulate [options] -o DIR -- PROGRAM ARGS...\n");

  // A bundle left from an earlier run must not pass for this run's result.
  SmallString<256> traceJson(outputDir.getValue());
  sys::path::append(traceJson, "trace.json");
  if (sys::fs::exists(traceJson))
    if (std::error_code ec = sys::fs::remove(traceJson))
      return fail("cannot remove the old " + traceJson + ": " + ec.message() +
                  " (check permissions)");
  SmallString<256> oldTruth(outputDir.getValue());
  sys::path::append(oldTruth, "groundtruth");
  if (sys::fs::exists(oldTruth))
    if (std::error_code ec = sys::fs::remove_directories(oldTruth))
      return fail("cannot remove the old " + oldTruth + ": " + ec.message() +
                  " (check permissions)");

  bool useQemu = engineOption.getNumOccurrences() ? engineOption == Engine::Qemu
                                                  : bool(findQemu(qemuPath));
  if (useQemu && groundTruth && (maxInsns == 0 || maxInsns > kGroundTruthLimit))
    return fail("--ground-truth keeps every instruction in memory and is "
                "limited to 20,000,000 of them (give --max-insns of at most "
                "20000000, or drop --ground-truth)");

  EmulateOptions options;
  options.argv.assign(programArgs.begin(), programArgs.end());
  options.start = startOption;
  options.stop = stopOption;
  options.maxInsns = maxInsns;
  options.writer.bufferSize = bufferSize;
  options.writer.psbPeriod = psbPeriod;
  options.writer.timer = timerResolution;
  options.writer.noRetComp = noRetComp;
  options.writer.overflowEvery = overflowEvery;
  Expected<PtDialect> dialect = parseDialect(dialectOption);
  if (!dialect)
    return fail(toString(dialect.takeError()));
  options.writer.dialect = *dialect;

  QemuEngineOptions engine;
  engine.groundTruth = groundTruth;
  engine.qemuPath = qemuPath;
  engine.ringDir = ringDir;
  engine.logBlocks = qemuLog;
  engine.runOn = std::chrono::seconds(runOn);
  SmallString<256> plugin(sys::path::parent_path(sys::path::parent_path(
      sys::fs::getMainExecutable(argv[0], (void *)&fail))));
  sys::path::append(plugin, "lib", "libmagic-trace-qemu.so");
  engine.pluginPath = std::string(plugin);
  Expected<EmulateResult> result =
      useQemu ? emulateUnderQemu(options, engine) : emulateProgram(options);
  if (!result)
    return fail(toString(result.takeError()));
  if (!result->recorderNote.empty())
    WithColor::note(errs(), "magic-trace-emulate")
        << result->recorderNote << "\n";
  if (!result->startNote.empty())
    WithColor::note(errs(), "magic-trace-emulate") << result->startNote << "\n";
  if (result->instructions == 0 && result->truth.empty())
    return fail("no instruction was traced (check --start and --stop)");
  if (!result->truth.empty())
    if (Error err = writeGroundTruth(result->truth, outputDir))
      return fail(toString(std::move(err)));
  if (Error err = writeVdso(*result, outputDir))
    return fail(toString(std::move(err)));
  if (Error err = writeBundle(result->snapshot, outputDir))
    return fail(toString(std::move(err)));
  if (Error err = writePerfDataOption(result->snapshot, options.writer))
    return fail(toString(std::move(err)));

  uint64_t ptBytes = 0;
  for (const ThreadTrace &thread : result->snapshot.threads)
    ptBytes += thread.bytes.size();
  double seconds = result->tracedSeconds > 0 ? result->tracedSeconds : 1e-9;
  outs() << "magic-trace-emulate: " << result->instructions << " instructions, "
         << result->snapshot.threads.size() << " threads, "
         << endText(result->end) << "; "
         << format("%.3f s, %.0f insns/s", seconds,
                   result->instructions / seconds)
         << "; " << ptBytes << " bytes of PT kept"
         << " -> " << traceJson << "\n";
  return 0;
}
