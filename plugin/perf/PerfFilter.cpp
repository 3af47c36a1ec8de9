//===- PerfFilter.cpp - libmagic-trace-perf.so, a perf dlfilter -----------===//
//
// perf script --itrace=be --dlfilter libmagic-trace-perf.so --dlarg out=F:
// perf's own Intel PT decoder hands us every branch; each thread's branches
// become the core's items (SampleItems.h), perf's maps name the modules
// (PerfModules.h), and at the end the core's model builder (stitching
// included) and writers make the trace, as magic-trace-decode does with
// our decoder. perf 6.1's interface: /usr/include/perf/perf_dlfilter.h and
// `man perf-dlfilter`; docs/dlfilter.md.
//
// Nothing may escape into perf: every entry point catches, says what went
// wrong in one line and returns perf's error status.
//
//===----------------------------------------------------------------------===//
#include "FilterOptions.h"
#include "PerfModules.h"
#include "SampleItems.h"

#include "magic_trace/InsnClassifier.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/OutputFiles.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

// perf's header is C and declares the filter's entry points.
extern "C" {
#include <perf/perf_dlfilter.h>
}

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

using namespace llvm;
using namespace magic_trace;

/// perf fills this table in before it calls start().
extern "C" {
__attribute__((
    visibility("default"))) struct perf_dlfilter_fns perf_dlfilter_fns;
}

namespace {

void printError(const Twine &message) {
  errs() << "magic-trace-perf: error: " << message << "\n";
}

/// The class of a branch perf names when its bytes cannot be read.
ClassifiedInsn classFromFlags(uint32_t flags) {
  ClassifiedInsn insn;
  if ((flags & PERF_DLFILTER_FLAG_SYSCALLRET) &&
      (flags & PERF_DLFILTER_FLAG_CALL))
    insn.branch = BranchClass::Syscall;
  else if (flags & PERF_DLFILTER_FLAG_CALL)
    insn.branch = BranchClass::IndirectCall;
  else if (flags & PERF_DLFILTER_FLAG_RETURN)
    insn.branch = BranchClass::Return;
  else if (flags & PERF_DLFILTER_FLAG_CONDITIONAL)
    insn.branch = BranchClass::CondBranch;
  else
    insn.branch = BranchClass::DirectJump;
  return insn;
}

class Filter {
public:
  static Expected<std::unique_ptr<Filter>> create(FilterOptions options);

  /// perf's return value for the sample: 0 keep, 1 drop, negative to stop.
  int onSample(const perf_dlfilter_sample &sample, void *ctx);
  /// Builds the model and writes it. Errors: nothing was taken, the file
  /// cannot be written.
  Error finish();

private:
  explicit Filter(FilterOptions options) : options(std::move(options)) {}
  bool keepInPerfOutput(const perf_dlfilter_sample &sample, void *ctx);
  const ClassifiedInsn &classify(const perf_dlfilter_sample &sample, void *ctx,
                                 bool modelProcess);
  SampleItems &threadOf(const perf_dlfilter_sample &sample, void *ctx);

  FilterOptions options;
  /// out=, opened once at start and kept (a private file beside it, renamed
  /// over it at the end: OutputFiles.h), so that nothing planted at the
  /// path while perf decodes is followed.
  std::unique_ptr<OutputFile> output;
  std::unique_ptr<InsnClassifier> classifier;
  /// What is known of a branch address: perf's loops repeat.
  struct Branch {
    ClassifiedInsn insn;
    bool classified = false;
    bool noted = false; ///< Its module noted, from the model's process.
  };
  DenseMap<uint64_t, Branch> branches;
  std::map<uint64_t, SampleItems> threads; ///< By tid, as the model orders.
  std::map<uint64_t, std::string> comms;
  PerfModules modules;
  uint64_t pid = 0;
  uint64_t taken = 0;
  uint64_t others = 0;    ///< Samples of other events than perf's branches.
  std::string otherEvent; ///< The first of them.
};

Expected<std::unique_ptr<Filter>> Filter::create(FilterOptions options) {
  std::unique_ptr<OutputFile> output;
  if (!options.output.empty()) {
    Expected<std::unique_ptr<OutputFile>> opened =
        OutputFile::create(options.output);
    if (!opened)
      return opened.takeError();
    output = std::move(*opened);
  }
  // perf gives a filter no call for its --symfs or --itrace; its command
  // line has them.
  if (auto cmdline = MemoryBuffer::getFileAsStream("/proc/self/cmdline")) {
    if (!options.output.empty())
      if (Error error = checkItrace((*cmdline)->getBuffer()))
        return std::move(error);
    if (options.symfs.empty())
      options.symfs = symfsFromCommandLine((*cmdline)->getBuffer());
  }
  std::unique_ptr<Filter> filter(new Filter(std::move(options)));
  filter->output = std::move(output);
  Expected<std::unique_ptr<InsnClassifier>> classifier =
      InsnClassifier::create();
  if (!classifier)
    return classifier.takeError();
  filter->classifier = std::move(*classifier);
  return std::move(filter);
}

const ClassifiedInsn &Filter::classify(const perf_dlfilter_sample &sample,
                                       void *ctx, bool modelProcess) {
  Branch &branch = branches[sample.ip];
  // A new address: its module too (one lookup per distinct branch, not per
  // sample: perf's resolve costs about as much as its decode). Modules come
  // from the model's process only: the model has one address space.
  if (modelProcess && !branch.noted) {
    branch.noted = true;
    if (const perf_dlfilter_al *al = perf_dlfilter_fns.resolve_ip(ctx))
      if (al->dso && !al->is_kernel_ip)
        modules.note(al->dso, ArrayRef<uint8_t>(al->buildid, al->buildid_size),
                     sample.ip, al->addr);
  }
  if (branch.classified)
    return branch.insn;
  branch.classified = true;
  uint32_t length = 0;
  const uint8_t *bytes = perf_dlfilter_fns.insn(ctx, &length);
  uint8_t buffer[16];
  if ((!bytes || length == 0) && perf_dlfilter_fns.object_code) {
    int read =
        perf_dlfilter_fns.object_code(ctx, sample.ip, buffer, sizeof(buffer));
    bytes = buffer;
    length = read > 0 ? static_cast<uint32_t>(read) : 0;
  }
  Expected<ClassifiedInsn> insn =
      length ? classifier->classify(ArrayRef<uint8_t>(bytes, length), sample.ip)
             : createStringError("no bytes");
  if (insn) {
    branch.insn = *insn;
  } else {
    consumeError(insn.takeError());
    branch.insn = classFromFlags(sample.flags);
  }
  return branch.insn;
}

SampleItems &Filter::threadOf(const perf_dlfilter_sample &sample, void *ctx) {
  uint64_t tid = static_cast<uint32_t>(sample.tid);
  auto [it, inserted] = threads.try_emplace(tid, tid);
  if (inserted)
    if (const perf_dlfilter_al *al = perf_dlfilter_fns.resolve_ip(ctx))
      if (al->comm)
        comms[tid] = al->comm;
  return it->second;
}

bool Filter::keepInPerfOutput(const perf_dlfilter_sample &sample, void *ctx) {
  if (!options.dropSameSymbol)
    return false;
  if (!sample.ip || !sample.addr || !sample.addr_correlates_sym)
    return true;
  const perf_dlfilter_al *from = perf_dlfilter_fns.resolve_ip(ctx);
  if (!from || !from->sym)
    return true;
  uint64_t fromStart = from->sym_start;
  const char *fromDso = from->dso;
  const perf_dlfilter_al *to = perf_dlfilter_fns.resolve_addr(ctx);
  if (!to || !to->sym || to->sym_start != fromStart || to->dso != fromDso)
    return true;
  // Within one function. magic-trace's filter dropped these all, and with
  // them every recursive call and return; a call to the function's entry
  // is a new activation, and a return ends one.
  if ((sample.flags & PERF_DLFILTER_FLAG_CALL) && to->symoff == 0)
    return true;
  return (sample.flags & PERF_DLFILTER_FLAG_RETURN) != 0;
}

int Filter::onSample(const perf_dlfilter_sample &sample, void *ctx) {
  int verdict = keepInPerfOutput(sample, ctx) ? 0 : 1;
  if (options.output.empty())
    return verdict;
  StringRef event = sample.event ? sample.event : "";
  if (!event.starts_with("branches")) {
    // Other events recorded beside Intel PT (perf record -e cycles -e
    // intel_pt//) are no branches; finish() says so when nothing else came.
    if (otherEvent.empty())
      otherEvent = event.str();
    ++others;
    return verdict;
  }
  uint64_t tid = static_cast<uint32_t>(sample.tid);
  if (!options.tids.empty() && !options.tids.count(tid))
    return verdict;
  // Every thread is modelled, as magic-trace-decode does (a forked child
  // shares its parent's modules); pid= keeps one process.
  uint64_t samplePid = static_cast<uint32_t>(sample.pid);
  if (options.pid && samplePid != options.pid)
    return verdict;
  if (!pid)
    pid = samplePid;
  SampleItems &items = threadOf(sample, ctx);
  if (sample.time < options.beginNs || sample.time > options.endNs) {
    items.skip();
    return verdict;
  }
  BranchSample branch{sample.ip, sample.addr, sample.time, sample.flags};
  static const ClassifiedInsn none;
  items.add(branch, sample.ip ? classify(sample, ctx, samplePid == pid) : none);
  ++taken;
  return verdict;
}

Error Filter::finish() {
  if (options.output.empty())
    return Error::success();
  if (taken == 0 && others != 0)
    return createStringError(
        "no Intel PT branch among " + Twine(others) +
        " samples (the first of "
        "event '" +
        otherEvent +
        "'), nothing written (record with perf "
        "record -e intel_pt//u and run perf script --itrace=be)");
  if (taken == 0)
    return createStringError(
        "no Intel PT branch sample was taken, nothing written (record with "
        "perf record -e intel_pt//u, run perf script --itrace=be, and check "
        "the time=, tid= and pid= dlargs)");
  TraceModel model;
  model.pid = pid;
  model.processName = comms.count(pid) ? comms[pid] : std::string();
  Symbolizer symbolizer(modules.modules(options.symfs), model.strings);
  auto lookup = [&symbolizer](uint64_t address) -> const SymbolRange & {
    return symbolizer.lookup(address);
  };
  ModelOptions modelOptions;
  modelOptions.stitch = options.stitch;
  ModelStats stats;
  uint64_t losses = 0, blocks = 0;
  for (auto &[tid, items] : threads) {
    losses += items.losses();
    blocks += items.blocks();
    if (items.blocks() == 0)
      continue;
    ThreadModelBuilder builder(tid, lookup, model.strings);
    items.feed(builder);
    ThreadModel thread = builder.finish(nullptr, modelOptions, &stats);
    thread.name = comms[tid];
    model.threads.push_back(std::move(thread));
  }
  // Trace begins and ends only: perf could not follow the code between
  // them (its "instruction trace error" lines say where). An empty trace is
  // never a result.
  if (blocks == 0)
    return createStringError(
        "perf decoded no code between its " + Twine(taken) +
        " trace begins and ends, nothing written (give perf the recorded "
        "binaries: perf script --symfs DIR, or perf buildid-cache)");
  for (const std::string &problem : symbolizer.moduleProblems())
    errs() << "magic-trace-perf: warning: " << problem << "\n";
  // perf's clock is one for every thread.
  Expected<WindowSummary> cut = cutToWindow(model, options.window, false);
  if (!cut)
    return cut.takeError();
  const WindowSummary &window = *cut;
  if (Error error = writeTrace(model, *output, *options.format, options.fxt))
    return error;
  uint64_t calls = 0;
  for (const ThreadModel &thread : model.threads)
    calls += thread.calls;
  errs() << "magic-trace-perf: " << model.threads.size() << " threads, "
         << calls << " calls, " << losses << " losses perf reported, " << taken
         << " branches";
  if (!window.whole)
    errs() << ", the last " << formatDuration(window.lengthNs) << " of "
           << formatDuration(window.traceNs) << " written ("
           << withCommas(window.slices) << " slices"
           << (window.cutByBudget || window.cutByTrace
                   ? "; window=all writes all of it"
                   : "")
           << ")";
  errs() << " -> " << options.output << "\n";
  return Error::success();
}

/// Runs `body`, turning an exception into perf's error status: perf is C.
template <typename Body> int guarded(Body body) {
  try {
    return body();
  } catch (const std::exception &exception) {
    printError(Twine("internal error: ") + exception.what() +
               " (please report it)");
  } catch (...) {
    printError("internal error (please report it)");
  }
  return -1;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) const char *
filter_description(const char **longDescription) {
  if (longDescription)
    *longDescription =
        "magic-trace's call-stack model of perf's Intel PT decode: "
        "--dlarg out=trace.fxt (or .json, .folded, .txt), format=, "
        "slice-args=, time=BEGIN,END, tid=, pid=, symfs=, stitch=0, "
        "drop=same-symbol (docs/dlfilter.md)";
  return "magic-trace: perf's Intel PT branches as a Perfetto call trace";
}

__attribute__((visibility("default"))) int start(void **data, void *ctx) {
  return guarded([&] {
    int argc = 0;
    char **argv =
        perf_dlfilter_fns.args ? perf_dlfilter_fns.args(ctx, &argc) : nullptr;
    std::vector<const char *> args(argv, argv + (argv ? argc : 0));
    Expected<FilterOptions> options = parseFilterOptions(args);
    if (!options) {
      printError(toString(options.takeError()));
      return -1;
    }
    Expected<std::unique_ptr<Filter>> filter =
        Filter::create(std::move(*options));
    if (!filter) {
      printError(toString(filter.takeError()));
      return -1;
    }
    *data = filter->release();
    return 0;
  });
}

__attribute__((visibility("default"))) int
filter_event(void *data, const struct perf_dlfilter_sample *sample, void *ctx) {
  return guarded(
      [&] { return static_cast<Filter *>(data)->onSample(*sample, ctx); });
}

__attribute__((visibility("default"))) int stop(void *data, void *ctx) {
  // perf calls stop() after a start() that failed, with no data: start()
  // already said why.
  if (!data)
    return 0;
  int status = guarded([&] {
    std::unique_ptr<Filter> filter(static_cast<Filter *>(data));
    if (Error error = filter->finish()) {
      printError(toString(std::move(error)));
      return -1;
    }
    return 0;
  });
  if (status == 0)
    return 0;
  // perf 6.1 ignores stop()'s status (it exits 0 after a failed stop), and
  // a trace that was not written must not look like success to a script:
  // the error is said, perf's output flushed, and the process ends with 1.
  std::fflush(nullptr);
  std::_Exit(1);
}

} // extern "C"
