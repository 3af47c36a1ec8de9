//===- Pipeline.cpp - Snapshot -> decoded, symbolized trace model ---------===//
#include "magic_trace/Pipeline.h"

#include "WindowedBuild.h"

#include "magic_trace/ModelWindow.h"
#include "magic_trace/SizeOptions.h"
#include "magic_trace/VirtualClock.h"

#include "magic_trace/FxtWriter.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

namespace magic_trace {
namespace {

using namespace pipeline;

const ThreadStop *findStop(const Snapshot &snapshot, uint64_t tid) {
  for (const ThreadStop &stop : snapshot.stop)
    if (stop.tid == tid)
      return &stop;
  return nullptr;
}

uint64_t traceBytes(const Snapshot &snapshot, uint64_t tid) {
  for (const ThreadTrace &trace : snapshot.threads)
    if (trace.tid == tid)
      return trace.bytes.size();
  return 0;
}

ThreadSummary summarize(const ThreadModel &thread, const ThreadStop *stop,
                        uint64_t bytes) {
  ThreadSummary summary;
  summary.tid = thread.tid;
  summary.instructions = thread.instructions;
  summary.estimatedInstructions = thread.estimatedInstructions;
  summary.calls = thread.calls;
  summary.errors = thread.errors;
  summary.traceBytes = bytes;
  summary.undecodedBytes = thread.undecodedBytes;
  summary.firstError = thread.firstError;
  summary.triggered = stop && stop->triggered;
  if (!thread.segments.empty()) {
    summary.beginNs = thread.segments.front().begin;
    summary.endNs = thread.segments.back().end;
  }
  return summary;
}

void addStats(ModelStats &total, const ModelStats &part) {
  total.segments += part.segments;
  total.frames += part.frames;
  total.inferredFrames += part.inferredFrames;
  total.gaps += part.gaps;
  total.stitchedJoins += part.stitchedJoins;
  total.stitchRefused += part.stitchRefused;
  total.anchoredFrames += part.anchoredFrames;
  total.anchorAdded += part.anchorAdded;
  total.anchorInner += part.anchorInner;
  total.anchorConflicts += part.anchorConflicts;
  total.modelBytes += part.modelBytes;
}

/// Workers when the caller asks for the default (0): the cores no other
/// task is running on right now. Like make's --load-average, so that a
/// shared machine does not make the default slower than one worker: a
/// second worker that must wait for a busy core only adds the cost of
/// handing items over (docs/performance.md measured 1.1-1.3x the wall time
/// of one worker that way). The instantaneous count of runnable tasks (the
/// fourth field of /proc/loadavg, this one included) is used, not the load
/// average, which remembers the last minute. A task runnable for a moment
/// (a kernel thread's tick, the shell that started us) is not a competitor:
/// a count above ours is read again, up to 4 times 1 ms apart, and the
/// least is used (one read of a busy moment had halved a decode's workers).
/// All cores when it cannot be read.
unsigned defaultWorkers() {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  auto othersRunning = []() -> std::optional<unsigned> {
    std::ifstream loadavg("/proc/loadavg");
    double averages[3];
    unsigned running = 0;
    char slash = 0;
    if (!(loadavg >> averages[0] >> averages[1] >> averages[2] >> running >>
          slash) ||
        slash != '/' || running == 0)
      return std::nullopt;
    return running - 1;
  };
  std::optional<unsigned> others = othersRunning();
  if (!others)
    return cores;
  for (unsigned again = 0; again < 4 && *others > 0; ++again) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::optional<unsigned> now = othersRunning())
      others = std::min(*others, *now);
  }
  return *others >= cores ? 1 : cores - *others;
}

/// Decodes and models each selected thread, streaming the items into its
/// model builder, on up to `jobs` threads (0: defaultWorkers()). Parallelism
/// goes where it pays (docs/performance.md): across traced threads, and,
/// when there are cores to spare (a one-thread trace on two cores), between
/// a thread's decode and its model, which overlap. Never by splitting one
/// thread's decode into PSB pieces: the model is the longer stage, and the
/// pieces would have to be held whole. Concurrent workers share the
/// symbolizer and the string table under one lock, and each keeps its own
/// table of the ranges the symbolizer returned (immutable, at stable
/// addresses), so most lookups take no lock.
/// PipelineOptions::progress over every worker's items: counts the
/// instructions and, about every 100 ms, asks whether to go on.
class Progress {
public:
  Progress(const std::function<bool(uint64_t)> &report,
           std::atomic<bool> &cancel)
      : report(report), cancel(cancel), last(std::chrono::steady_clock::now()) {
  }

  void add(llvm::ArrayRef<TraceItem> items) {
    uint64_t count = 0;
    for (const TraceItem &item : items)
      if (item.kind == ItemKind::Block)
        count += item.detail;
    uint64_t total = instructions += count;
    auto now = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> hold(lock, std::try_to_lock);
    if (!hold || now - last < std::chrono::milliseconds(100))
      return;
    last = now;
    if (!report(total))
      cancel = true;
  }

private:
  const std::function<bool(uint64_t)> &report;
  std::atomic<bool> &cancel;
  std::atomic<uint64_t> instructions{0};
  std::mutex lock;
  std::chrono::steady_clock::time_point last;
};

/// A thread's model builder, with its items counted for Progress.
class CountingSink : public ItemSink {
public:
  CountingSink(ItemSink &inner, Progress *progress)
      : inner(inner), progress(progress) {}
  void consume(llvm::ArrayRef<TraceItem> items,
               llvm::ArrayRef<DecodeError> errors) override {
    if (progress)
      progress->add(items);
    inner.consume(items, errors);
  }
  void timesEstimated(uint64_t instructions) override {
    inner.timesEstimated(instructions);
  }

private:
  ItemSink &inner;
  Progress *progress;
};

/// Decodes and models each job's thread into models[job.slot] (and its
/// stats into stats[job.slot]), streaming the items into its model builder,
/// on up to `workers` threads (0: defaultWorkers()). Parallelism
/// goes where it pays (docs/performance.md): across traced threads, and,
/// when there are cores to spare (a one-thread trace on two cores), between
/// a thread's decode and its model, which overlap. Never by splitting one
/// thread's decode into PSB pieces: the model is the longer stage, and the
/// pieces would have to be held whole. Concurrent workers share the
/// symbolizer and the string table under one lock, and each keeps its own
/// table of the ranges the symbolizer returned (immutable, at stable
/// addresses), so most lookups take no lock.
llvm::Error buildModels(const Snapshot &snapshot,
                        const SnapshotDecoder &decoder, Symbolizer &symbolizer,
                        StringTable &strings, unsigned workers,
                        const ModelOptions &options, llvm::ArrayRef<Job> jobs,
                        std::vector<ThreadModel> &models,
                        std::vector<ModelStats> &stats, Progress *progress) {
  const std::vector<size_t> &selected = decoder.selected();
  if (workers == 0)
    workers = defaultWorkers();
  size_t running = std::min<size_t>(workers, jobs.size());
  bool overlap = workers >= 2 * jobs.size();
  bool shared = running > 1;
  std::mutex lock;
  std::atomic<size_t> next{0};
  std::vector<llvm::Error> failures;
  auto work = [&] {
    constexpr unsigned Bits = 12;
    std::vector<const SymbolRange *> recent;
    if (shared)
      recent.assign(size_t(1) << Bits, nullptr);
    auto lookup = [&](uint64_t address) -> const SymbolRange & {
      if (!shared)
        return symbolizer.lookup(address);
      const SymbolRange *&slot =
          recent[(address * 0x9e3779b97f4a7c15ull) >> (64 - Bits)];
      if (slot && slot->begin <= address && address < slot->end)
        return *slot;
      std::lock_guard<std::mutex> hold(lock);
      slot = &symbolizer.lookup(address);
      return *slot;
    };
    for (size_t i; (i = next++) < jobs.size();) {
      const Job &job = jobs[i];
      size_t index = selected[job.slot];
      uint64_t tid = snapshot.threads[index].tid;
      ThreadModelBuilder builder(tid, lookup, strings,
                                 shared ? &lock : nullptr);
      CountingSink sink(builder, progress);
      DecodeStats decodeStats;
      llvm::Expected<uint64_t> decoded =
          overlap ? decoder.decodeThreadOverlapped(index, sink, decodeStats,
                                                   job.fromPsb)
                  : decoder.decodeThread(index, sink, decodeStats, job.fromPsb);
      if (!decoded) {
        std::lock_guard<std::mutex> hold(lock);
        failures.push_back(decoded.takeError());
        continue;
      }
      stats[job.slot] = ModelStats();
      models[job.slot] =
          builder.finish(findStop(snapshot, tid), options, &stats[job.slot]);
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < running; ++i)
    threads.emplace_back(work);
  work();
  for (std::thread &thread : threads)
    thread.join();
  llvm::Error all = llvm::Error::success();
  for (llvm::Error &failure : failures)
    all = llvm::joinErrors(std::move(all), std::move(failure));
  return all;
}

} // namespace

llvm::Error parseWindowOptions(llvm::StringRef window,
                               llvm::StringRef maxSlices,
                               llvm::StringRef maxTrace,
                               WindowOptions &options) {
  window = window.trim();
  maxSlices = maxSlices.trim();
  maxTrace = maxTrace.trim();
  if (!maxTrace.empty()) {
    if (!window.empty())
      return llvm::createStringError(
          "--max-trace sets the default window's length, and --window "
          "sets it itself (leave out one of them)");
    llvm::Expected<uint64_t> bytes = parseTraceBudget(maxTrace);
    if (!bytes)
      return bytes.takeError();
    options.maxTraceBytes = *bytes;
  }
  if (window == "all") {
    options.all = true;
  } else if (!window.empty()) {
    llvm::Expected<uint64_t> length = parseDuration(window);
    if (!length || *length == 0) {
      if (!length)
        llvm::consumeError(length.takeError());
      return llvm::createStringError(
          "invalid --window '" + window.str() +
          "' (give a duration above 0 with its unit, e.g. 5ms, 200us or "
          "1.5s, or all for the whole trace)");
    }
    options.maxLengthNs = *length;
  }
  if (maxSlices.empty())
    return llvm::Error::success();
  if (options.all)
    return llvm::createStringError(
        "--max-slices has no effect with --window all, which writes every "
        "slice (leave out one of them)");
  uint64_t scale = 1;
  llvm::StringRef digits = maxSlices;
  if (digits.consume_back("K") || digits.consume_back("k"))
    scale = 1000;
  else if (digits.consume_back("M"))
    scale = 1000000;
  uint64_t count = 0;
  if (digits.getAsInteger(10, count) || count == 0 ||
      count > UINT64_MAX / scale)
    return llvm::createStringError(
        "invalid --max-slices '" + maxSlices.str() +
        "' (give a number of slices above 0, e.g. 2000000 or 2M)");
  options.maxSlices = count * scale;
  return llvm::Error::success();
}

const ThreadSummary *PipelineResult::mainThread() const {
  const ThreadSummary *best = nullptr;
  for (const ThreadSummary &thread : threads) {
    if (thread.triggered)
      return &thread;
    if (!best || thread.instructions > best->instructions)
      best = &thread;
  }
  return best;
}

llvm::Expected<PipelineResult> runPipeline(const Snapshot &snapshot,
                                           const PipelineOptions &options,
                                           SymbolCache *cache) {
  // Each thread's decode is serial: buildModels parallelizes elsewhere.
  DecodeOptions decodeOptions = options.decode;
  decodeOptions.threads = 1;
  std::atomic<bool> cancel{false};
  std::optional<Progress> progress;
  if (options.progress) {
    decodeOptions.cancel = &cancel;
    progress.emplace(options.progress, cancel);
  }
  llvm::Expected<std::unique_ptr<SnapshotDecoder>> decoder =
      SnapshotDecoder::create(snapshot, decodeOptions);
  if (!decoder)
    return decoder.takeError();

  PipelineResult result;
  result.model.pid = snapshot.pid;
  result.model.processName = snapshot.processName;
  result.errata = cpuErrata(snapshot.cpu);
  for (const ModuleImageStatus &module : (*decoder)->modules())
    if (!module.problem.empty())
      result.moduleProblems.push_back(module.path + ": " + module.problem);

  // Strings go to the cache's table when there is one (its object files
  // hold ids in it); the model takes a copy at the end.
  StringTable &strings = cache ? cache->strings() : result.model.strings;
  std::optional<Symbolizer> symbolizer;
  if (cache)
    symbolizer.emplace(snapshot.modules, snapshot.code, *cache);
  else
    symbolizer.emplace(snapshot.modules, snapshot.code, strings);
  size_t count = (*decoder)->selected().size();
  std::vector<ThreadModel> models(count);
  std::vector<ModelStats> stats(count);
  auto build = [&](llvm::ArrayRef<Job> jobs) {
    return buildModels(snapshot, **decoder, *symbolizer, strings,
                       options.decode.threads, options.model, jobs, models,
                       stats, progress ? &*progress : nullptr);
  };
  unsigned workers =
      options.decode.threads ? options.decode.threads : defaultWorkers();
  llvm::Expected<WindowSummary> window =
      buildWindowed(snapshot, **decoder, options.window, models, stats,
                    onEmulatorClock(snapshot), workers, build);
  if (!window)
    return window.takeError();
  if (cancel)
    return llvm::createStringError(
        "interrupted: the snapshot was not made (the session goes on)");
  result.window = std::move(*window);
  if (!result.window.whole)
    result.model.windowNote = windowNote(result.window, options.window);
  for (size_t slot = 0; slot < count; ++slot) {
    ThreadModel &thread = models[slot];
    addStats(result.modelStats, stats[slot]);
    result.threads.push_back(summarize(thread, findStop(snapshot, thread.tid),
                                       traceBytes(snapshot, thread.tid)));
    result.model.threads.push_back(std::move(thread));
  }
  symbolizer->keepRanges();
  if (cache)
    result.model.strings = cache->strings().clone();
  for (std::string &problem : symbolizer->moduleProblems())
    if (std::find(result.moduleProblems.begin(), result.moduleProblems.end(),
                  problem) == result.moduleProblems.end())
      result.moduleProblems.push_back(std::move(problem));
  return std::move(result);
}

llvm::Expected<WindowSummary>
cutToWindow(TraceModel &model, const WindowOptions &options, bool ownClocks) {
  llvm::Expected<WindowSummary> window =
      cutModels(model.threads, options, ownClocks, defaultWorkers());
  if (window && !window->whole)
    model.windowNote = windowNote(*window, options);
  return window;
}

llvm::json::Value summaryJson(const PipelineResult &result) {
  llvm::json::Array threads;
  for (const ThreadSummary &thread : result.threads)
    threads.push_back(llvm::json::Object{
        {"tid", int64_t(thread.tid)},
        {"spanNs", int64_t(thread.endNs - thread.beginNs)},
        {"instructions", int64_t(thread.instructions)},
        {"estimatedInstructions", int64_t(thread.estimatedInstructions)},
        {"calls", int64_t(thread.calls)},
        {"errors", int64_t(thread.errors)},
        {"traceBytes", int64_t(thread.traceBytes)},
        {"triggered", thread.triggered}});
  llvm::json::Array problems;
  for (const std::string &problem : result.moduleProblems)
    problems.push_back(problem);
  return llvm::json::Object{{"threads", std::move(threads)},
                            {"moduleProblems", std::move(problems)},
                            {"errata", llvm::json::Array(result.errata)}};
}

} // namespace magic_trace
