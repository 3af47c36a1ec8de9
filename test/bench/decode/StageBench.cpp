//===- StageBench.cpp - One pipeline stage as a whole process -------------===//
//
// magic-trace-stage-bench BUNDLE --stage raw|decode|symbolize|addresses|
//                         inprocess [--jobs T] [--module NAME] [-o FILE]
//
// Runs one stage over every thread of a bundle and exits, so that
// scripts/bench.sh can time whole processes (load included) on the same
// bytes with /usr/bin/time:
//   raw        the bare libipt block-decoder loop (Decoder.h's baseline)
//   decode     decodeSnapshot with T threads (--jobs, default 1)
//   symbolize  decode, then one Symbolizer::lookup per Block
//   addresses  prints the distinct executed instruction addresses inside
//              the module whose path ends with NAME, as file addresses (what
//              llvm-symbolizer --obj takes), one a line, sorted
//   inprocess  inside one process, as the plugin runs (libraries loaded,
//              bundle read): the raw loop, then the full pipeline to an
//              .fxt file (-o, default /dev/null), each --repeat times, and
//              the pipeline again with a SymbolCache kept across runs (as a
//              session's later snapshots); prints the best wall and CPU
//              milliseconds of each on stderr
// The full pipeline to a file is magic-trace-decode BUNDLE -o FILE.
// Prints "instructions N" (and for symbolize the lookups) on stderr.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/Decoder.h"
#include "magic_trace/FxtWriter.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Pipeline.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include <sys/resource.h>

using namespace llvm;
using namespace magic_trace;

static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("BUNDLE_DIR_OR_JSON"));
static cl::opt<std::string>
    stage("stage", cl::desc("raw, decode, symbolize or addresses"),
          cl::Required);
static cl::opt<unsigned> jobs("jobs", cl::desc("Decode threads (1 = serial)"),
                              cl::init(1));
static cl::opt<std::string>
    moduleName("module", cl::desc("With addresses: the module's file name"));
static cl::opt<unsigned>
    repeat("repeat", cl::desc("With inprocess: runs of each"), cl::init(3));
static cl::opt<std::string> output("o",
                                   cl::desc("With inprocess: the .fxt file"),
                                   cl::init("/dev/null"));

/// Process CPU time (all threads), milliseconds.
static double cpuMs() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval &t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

/// Best wall and CPU milliseconds of `repeat` runs of `body`.
static Error best(StringRef name, const std::function<Error()> &body) {
  double bestWall = 1e300, bestCpu = 1e300;
  for (unsigned i = 0; i < std::max(1u, unsigned(repeat)); ++i) {
    auto start = std::chrono::steady_clock::now();
    double cpuStart = cpuMs();
    if (Error error = body())
      return error;
    double wall = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    bestWall = std::min(bestWall, wall);
    bestCpu = std::min(bestCpu, cpuMs() - cpuStart);
  }
  errs() << "inprocess " << name << " wall_ms " << format("%.1f", bestWall)
         << " cpu_ms " << format("%.1f", bestCpu) << "\n";
  return Error::success();
}

static int fail(const Twine &message) {
  WithColor::error(errs(), "magic-trace-stage-bench") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv, "one pipeline stage\n");
  Expected<Snapshot> snapshot = loadBundle(input);
  if (!snapshot)
    return fail(toString(snapshot.takeError()));
  DecodeOptions options;
  options.threads = jobs;

  if (stage == "raw") {
    uint64_t instructions = 0;
    for (size_t i = 0; i < snapshot->threads.size(); ++i) {
      Expected<uint64_t> counted = rawBlockDecodeLoop(*snapshot, i, options);
      if (!counted)
        return fail(toString(counted.takeError()));
      instructions += *counted;
    }
    errs() << "instructions " << instructions << "\n";
    return 0;
  }
  if (stage == "inprocess") {
    Error error = best("raw", [&]() -> Error {
      for (size_t i = 0; i < snapshot->threads.size(); ++i) {
        Expected<uint64_t> counted = rawBlockDecodeLoop(*snapshot, i, options);
        if (!counted)
          return counted.takeError();
      }
      return Error::success();
    });
    // The pipeline's parts, each on the previous part's output.
    Expected<DecodeResult> decoded = decodeSnapshot(*snapshot, options);
    if (!decoded)
      return fail(toString(decoded.takeError()));
    if (!error)
      error = best("decode", [&]() -> Error {
        return decodeSnapshot(*snapshot, options).takeError();
      });
    TraceModel model;
    if (!error)
      error = best("symbolize+model", [&]() -> Error {
        model = TraceModel();
        Symbolizer symbolizer(snapshot->modules, model.strings);
        buildTraceModel(model, *snapshot, decoded->threads,
                        [&](uint64_t address) -> const SymbolRange & {
                          return symbolizer.lookup(address);
                        },
                        {});
        return Error::success();
      });
    if (!error)
      error = best("write", [&]() -> Error {
        std::error_code ec;
        raw_fd_ostream os(output, ec);
        if (ec)
          return createStringError(ec, "cannot write %s", output.c_str());
        return writeFxt(model, os);
      });
    if (!error)
      error = best("pipeline", [&]() -> Error {
        PipelineOptions pipeline;
        pipeline.decode = options;
        Expected<PipelineResult> result = runPipeline(*snapshot, pipeline);
        if (!result)
          return result.takeError();
        Expected<OutputFormat> fxt = outputFormatNamed("fxt");
        if (!fxt)
          return fxt.takeError();
        return writeTrace(result->model, output, *fxt);
      });
    // As each snapshot after the first in a debugger session: the symbol
    // cache holds what earlier snapshots read (the best run is a warm one).
    SymbolCache cache;
    if (!error)
      error = best("pipeline, warm symbol cache", [&]() -> Error {
        PipelineOptions pipeline;
        pipeline.decode = options;
        Expected<PipelineResult> result =
            runPipeline(*snapshot, pipeline, &cache);
        if (!result)
          return result.takeError();
        Expected<OutputFormat> fxt = outputFormatNamed("fxt");
        if (!fxt)
          return fxt.takeError();
        return writeTrace(result->model, output, *fxt);
      });
    if (error)
      return fail(toString(std::move(error)));
    return 0;
  }
  if (stage != "decode" && stage != "symbolize" && stage != "addresses")
    return fail("unknown --stage '" + stage +
                "' (use raw, decode, symbolize, addresses or inprocess)");

  Expected<DecodeResult> decoded = decodeSnapshot(*snapshot, options);
  if (!decoded)
    return fail(toString(decoded.takeError()));
  uint64_t instructions = 0;
  for (const ThreadDecode &thread : decoded->threads)
    instructions += thread.instructions;
  errs() << "instructions " << instructions << "\n";

  if (stage == "symbolize") {
    StringTable strings;
    Symbolizer symbolizer(snapshot->modules, strings);
    for (const ThreadDecode &thread : decoded->threads)
      for (const TraceItem &item : thread.items)
        if (item.kind == ItemKind::Block)
          symbolizer.lookup(item.ip);
    errs() << "lookups " << symbolizer.stats().lookups << " ranges "
           << symbolizer.stats().distinctRanges << "\n";
    return 0;
  }

  if (stage == "addresses") {
    auto module = std::find_if(snapshot->modules.begin(),
                               snapshot->modules.end(), [](const Module &m) {
                                 return StringRef(m.path).ends_with(moduleName);
                               });
    if (moduleName.empty() || module == snapshot->modules.end())
      return fail("no module named '" + moduleName +
                  "' in the bundle (pass --module FILE_NAME)");
    Expected<uint64_t> preferred =
        Symbolizer::preferredLoadAddress(module->fileToRead());
    if (!preferred)
      return fail(toString(preferred.takeError()));
    // Runtime -> file address: the module's lowest mapped byte is the
    // file's preferred load address.
    uint64_t bias = module->loadAddress - *preferred;
    std::vector<uint64_t> addresses;
    for (const ThreadDecode &thread : decoded->threads) {
      Expected<std::vector<uint64_t>> all =
          expandInstructions(*snapshot, thread, options);
      if (!all)
        return fail(toString(all.takeError()));
      addresses.insert(addresses.end(), all->begin(), all->end());
    }
    std::sort(addresses.begin(), addresses.end());
    addresses.erase(std::unique(addresses.begin(), addresses.end()),
                    addresses.end());
    // The module an address is in: the one loaded highest below it.
    uint64_t nextLoad = UINT64_MAX;
    for (const Module &other : snapshot->modules)
      if (other.loadAddress > module->loadAddress)
        nextLoad = std::min(nextLoad, other.loadAddress);
    uint64_t inModule = 0;
    for (uint64_t address : addresses) {
      if (address < module->loadAddress || address >= nextLoad)
        continue;
      outs() << "0x" << utohexstr(address - bias, true) << "\n";
      ++inModule;
    }
    errs() << "distinct " << addresses.size() << " in module " << inModule
           << "\n";
  }
  return 0;
}
