//===- Pipeline.cpp - Snapshot -> decoded, symbolized trace model ---------===//
#include "magic_trace/Pipeline.h"

#include "WindowPlan.h"

#include "magic_trace/ModelWindow.h"
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
/// average, which remembers the last minute. All cores when it cannot be
/// read.
unsigned defaultWorkers() {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::ifstream loadavg("/proc/loadavg");
  double averages[3];
  unsigned running = 0;
  char slash = 0;
  if (!(loadavg >> averages[0] >> averages[1] >> averages[2] >> running >>
        slash) ||
      slash != '/' || running == 0)
    return cores;
  unsigned others = running - 1;
  return others >= cores ? 1 : cores - others;
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

/// One thread's decode and model: selected thread `slot` of the decoder,
/// from its PSB `fromPsb`.
struct Job {
  size_t slot = 0;
  size_t fromPsb = 0;
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

/// MemAvailable from /proc/meminfo, in bytes; 0 when it cannot be read.
uint64_t availableMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

/// A model's slices per byte of the trace it was decoded from, and its
/// bytes per slice.
struct Density {
  double slicesPerByte = 0;
  double bytesPerSlice = 0;
};

/// Builds the models of a snapshot in the window its options ask for
/// (runPipeline, DESIGN.md "Window"): a sample of every thread's newest
/// trace, a window planned from it (WindowPlan.h), each thread decoded from
/// the PSB that window needs (once more when the decode fell short of what
/// the budget allows), and the cut (ModelWindow.h).
class WindowedBuild {
public:
  using BuildFn = std::function<llvm::Error(llvm::ArrayRef<Job>)>;

  WindowedBuild(const Snapshot &snapshot, const SnapshotDecoder &decoder,
                const WindowOptions &options, std::vector<ThreadModel> &models,
                const std::vector<ModelStats> &stats, BuildFn build)
      : snapshot(snapshot), decoder(decoder), options(options), models(models),
        stats(&stats), build(std::move(build)), from(models.size(), 0),
        ends(models.size(), 0), firsts(models.size(), 0) {}

  /// `ownClocks`: each thread keeps its own clock (onEmulatorClock), so each
  /// window ends at its own thread's end; else at the latest end of all.
  llvm::Error run(bool ownClocks) {
    perThread = ownClocks;
    for (size_t slot = 0; slot < models.size(); ++slot)
      window.traceBytes += times(slot).bytes;
    if (options.all) {
      if (llvm::Error error = checkWholeFits())
        return error;
      if (llvm::Error error = decodeFrom(std::vector<size_t>(models.size())))
        return error;
      finishWhole();
      return llvm::Error::success();
    }
    if (llvm::Error error = sample())
      return error;
    for (unsigned round = 0; round < 2; ++round) {
      std::vector<size_t> wanted = plan();
      if (wanted == from)
        break;
      if (llvm::Error error = decodeFrom(wanted))
        return error;
      // Enough when the decode reaches as far back as the budget allows.
      if (coveredWindow() >= budgetWindow())
        break;
    }
    cut();
    return llvm::Error::success();
  }

  const WindowSummary &summary() const { return window; }

private:
  const PsbTimes &times(size_t slot) const {
    return decoder.psbTimes(decoder.selected()[slot]);
  }

  uint64_t decodedBytes(size_t slot) const {
    const PsbTimes &psbs = times(slot);
    return psbs.offsets.empty() ? 0 : psbs.bytes - psbs.offsets[from[slot]];
  }

  /// Decodes every slot whose `wanted` PSB is before the one it was
  /// decoded from (all of them the first time).
  llvm::Error decodeFrom(const std::vector<size_t> &wanted) {
    std::vector<Job> jobs;
    for (size_t slot = 0; slot < models.size(); ++slot)
      if (!decoded || wanted[slot] < from[slot])
        jobs.push_back({slot, wanted[slot]});
    decoded = true;
    if (llvm::Error error = build(jobs))
      return error;
    for (const Job &job : jobs)
      from[job.slot] = job.fromPsb;
    updateEnds();
    return llvm::Error::success();
  }

  llvm::Error sample() {
    std::vector<size_t> starts;
    for (size_t slot = 0; slot < models.size(); ++slot)
      starts.push_back(sampleStart(times(slot), kSampleBytes));
    return decodeFrom(starts);
  }

  /// Each thread's end (its model's last time, else its last PSB's), the
  /// window's end, and where its trace starts.
  void updateEnds() {
    uint64_t latest = 0;
    std::vector<uint64_t> own(models.size(), 0);
    for (size_t slot = 0; slot < models.size(); ++slot) {
      const ThreadModel &model = models[slot];
      const PsbTimes &psbs = times(slot);
      for (uint64_t ns : psbs.ns)
        own[slot] = std::max(own[slot], ns);
      if (!model.segments.empty())
        own[slot] = std::max(own[slot], model.segments.back().end);
      latest = std::max(latest, own[slot]);
      firsts[slot] = own[slot];
      for (uint64_t ns : psbs.ns)
        if (ns) {
          firsts[slot] = ns;
          break;
        }
      if (from[slot] == 0 && !model.segments.empty())
        firsts[slot] = std::min(firsts[slot], model.segments.front().begin);
    }
    for (size_t slot = 0; slot < models.size(); ++slot) {
      threadEnds.resize(models.size());
      threadEnds[slot] = own[slot];
      ends[slot] = perThread ? own[slot] : latest;
    }
  }

  Density density(size_t slot) const {
    Density found;
    uint64_t bytes = decodedBytes(slot);
    uint64_t slices = windowSlices(models[slot], 0);
    if (bytes)
      found.slicesPerByte = double(slices) / double(bytes);
    if (slices)
      found.bytesPerSlice = double(threadModelBytes(models[slot])) / slices;
    return found;
  }

  /// The PSB each thread should be decoded from for the longest window
  /// the budget allows, by the densities decoded so far.
  std::vector<size_t> plan() {
    std::vector<ThreadPlan> plans(models.size());
    for (size_t slot = 0; slot < models.size(); ++slot) {
      plans[slot].psbs = &times(slot);
      plans[slot].end = threadEnds[slot];
      plans[slot].windowEnd = ends[slot];
      plans[slot].slicesPerByte = density(slot).slicesPerByte;
    }
    uint64_t limit = options.maxLengthNs ? options.maxLengthNs : UINT64_MAX;
    uint64_t length = plannedWindow(plans, limit, options.maxSlices);
    std::vector<size_t> wanted = from;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      const PsbTimes &psbs = times(slot);
      if (needsItsStart(slot)) {
        // The frames open at the window's start that never return come
        // from the debugger's stack at the stop (anchoring); without one,
        // from their calls. A ring that did not wrap holds the thread's
        // whole life, so those calls are in it: decoded from its start.
        wanted[slot] = 0;
        continue;
      }
      if (!hasTimes(psbs)) {
        // Nothing says where its window starts but the decode itself.
        wanted[slot] = 0;
        if (window.note.empty() && from[slot] != 0)
          window.note = "thread " + std::to_string(models[slot].tid) +
                        "'s trace has no timing packets: all of it was "
                        "decoded to place the window";
        continue;
      }
      uint64_t at = ends[slot] > length ? ends[slot] - length : 0;
      wanted[slot] = std::min(from[slot], decodeStart(psbs, at));
    }
    return wanted;
  }

  /// Whether thread `slot`'s ring did not wrap and the debugger's stack at
  /// the stop cannot supply its outermost frames: there is none, or its
  /// model so far contradicted it (an unwinder's stray frame) (see plan()).
  bool needsItsStart(size_t slot) const {
    const ThreadTrace &trace = snapshot.threads[decoder.selected()[slot]];
    if (trace.wrapped)
      return false;
    if ((*stats)[slot].anchorConflicts)
      return true;
    for (const ThreadStop &stop : snapshot.stop)
      if (stop.tid == trace.tid && !stop.frames.empty())
        return false;
    return true;
  }

  /// The longest window the decoded models hold as the whole decode would.
  uint64_t coveredWindow() const {
    uint64_t covered = UINT64_MAX;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      if (from[slot] == 0)
        continue;
      uint64_t exact = exactFrom(times(slot), from[slot]);
      covered = std::min(covered, ends[slot] > exact ? ends[slot] - exact : 0);
    }
    return covered;
  }

  /// The longest window the budget and the user's limit allow, by the
  /// decoded models.
  uint64_t budgetWindow() const {
    std::vector<const ThreadModel *> threads;
    for (const ThreadModel &model : models)
      threads.push_back(&model);
    return longestWindow(threads, ends, options.maxLengthNs, options.maxSlices);
  }

  /// Threads decoded from a later PSB whose outermost frames the stop's
  /// stack did not supply (none, or contradicted): frames they entered
  /// before the window and never left are not shown.
  void noteMissingRoots() {
    unsigned unsure = 0;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      if (from[slot] == 0)
        continue;
      const ThreadTrace &trace = snapshot.threads[decoder.selected()[slot]];
      bool stack = false;
      for (const ThreadStop &stop : snapshot.stop)
        stack = stack || (stop.tid == trace.tid && !stop.frames.empty());
      unsure += !stack || (*stats)[slot].anchorConflicts;
    }
    if (!unsure)
      return;
    std::string text =
        std::to_string(unsure) +
        (unsure == 1 ? " thread has" : " threads have") +
        " no usable stack at the stop: frames entered before the window and "
        "never left are not shown ('--window all' shows those the ring holds)";
    window.note = window.note.empty() ? text : window.note + "; " + text;
  }

  void cut() {
    noteMissingRoots();
    uint64_t budget = budgetWindow();
    uint64_t length = std::min(budget, coveredWindow());
    summarizeTrace();
    std::vector<uint64_t> starts = cutTimes(length);
    for (size_t slot = 0; slot < models.size(); ++slot)
      if (starts[slot])
        cutThreadModel(models[slot], starts[slot]);
    window.whole = true;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      uint64_t start = models[slot].windowStart;
      if (start == 0)
        continue;
      // The shortest of the threads' windows (displaySafeCut moved them a
      // few nanoseconds each).
      length = std::min(length, ends[slot] - std::min(ends[slot], start));
      window.whole = false;
    }
    if (!window.whole) {
      window.lengthNs = length;
      window.cutByBudget =
          options.maxLengthNs == 0 || budget < options.maxLengthNs;
    }
    countSlices();
  }

  /// Where each thread is cut for a window of `length` (0: not at all),
  /// moved to where the writers display the rest as they display the whole
  /// trace (displaySafeCut): the thread's own, with its own clock; else the
  /// same for every thread, the first time that suits them all.
  std::vector<uint64_t> cutTimes(uint64_t length) const {
    std::vector<uint64_t> starts(models.size(), 0);
    auto cutsAt = [&](size_t slot) { return ends[slot] > length; };
    if (perThread) {
      for (size_t slot = 0; slot < models.size(); ++slot)
        if (cutsAt(slot))
          starts[slot] = displaySafeCut(models[slot], ends[slot] - length);
      return starts;
    }
    uint64_t common = 0;
    for (size_t slot = 0; slot < models.size(); ++slot)
      if (cutsAt(slot))
        common = std::max(common, ends[slot] - length);
    if (common == 0)
      return starts;
    // Each move can only go later, and each thread has a time that suits
    // it past any other's: a few rounds settle.
    for (unsigned round = 0; round < 64; ++round) {
      uint64_t later = common;
      for (const ThreadModel &model : models)
        later = std::max(later, displaySafeCut(model, common));
      if (later == common)
        break;
      common = later;
    }
    for (size_t slot = 0; slot < models.size(); ++slot)
      if (cutsAt(slot))
        starts[slot] = common;
    return starts;
  }

  void finishWhole() {
    summarizeTrace();
    countSlices();
  }

  /// traceNs (before any cut) and the bytes decoded.
  void summarizeTrace() {
    uint64_t span = 0, earliest = UINT64_MAX, latest = 0;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      window.decodedBytes += decodedBytes(slot);
      if (threadEnds[slot] > firsts[slot])
        span = std::max(span, threadEnds[slot] - firsts[slot]);
      earliest = std::min(earliest, firsts[slot]);
      latest = std::max(latest, threadEnds[slot]);
    }
    window.traceNs = perThread || latest < earliest ? span : latest - earliest;
    window.lengthNs = window.traceNs;
  }

  void countSlices() {
    for (const ThreadModel &model : models) {
      window.slices += windowSlices(model, 0) + (model.windowStart != 0) +
                       !clockNote(model).empty();
      window.threads += !model.segments.empty();
    }
  }

  /// `--window all` on a trace whose model would not fit in memory fails
  /// before it starts, with the estimate (from a sample of each thread).
  llvm::Error checkWholeFits() {
    uint64_t available = availableMemory();
    // Even the densest trace seen (about 4 slices a byte, 32 bytes a slice)
    // fits in half of what is free: no sample.
    if (!available || double(window.traceBytes) * 4 * 32 < available / 2)
      return llvm::Error::success();
    if (llvm::Error error = sample())
      return error;
    double estimate = 0;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      Density found = density(slot);
      estimate +=
          found.slicesPerByte * double(times(slot).bytes) * found.bytesPerSlice;
    }
    if (estimate <= double(available))
      return llvm::Error::success();
    return llvm::createStringError(llvm::formatv(
        "the whole trace's model would need about {0:f1} GB of memory and "
        "{1:f1} GB are available (leave out '--window all' to decode the "
        "window that fits, or give '--window DURATION')",
        estimate / 1e9, double(available) / 1e9));
  }

  const Snapshot &snapshot;
  const SnapshotDecoder &decoder;
  const WindowOptions &options;
  std::vector<ThreadModel> &models;
  const std::vector<ModelStats> *stats; ///< Per slot, of its model.
  BuildFn build;
  bool perThread = false;
  bool decoded = false;
  std::vector<size_t> from;         ///< Per slot: the PSB decoded from.
  std::vector<uint64_t> ends;       ///< Per slot: where its window ends.
  std::vector<uint64_t> threadEnds; ///< Per slot: its own last time.
  std::vector<uint64_t> firsts;     ///< Per slot: its trace's first time.
  WindowSummary window;
};

/// The note the writers put where a cut thread starts.
std::string windowNote(const WindowSummary &window,
                       const WindowOptions &options) {
  std::string note = "the last " + formatDuration(window.lengthNs) + " of " +
                     formatDuration(window.traceNs);
  if (window.cutByBudget)
    note += " (the " + withCommas(options.maxSlices) + "-slice budget)";
  return note + "; 'save --window all' writes all of it";
}

} // namespace

llvm::Error parseWindowOptions(llvm::StringRef window,
                               llvm::StringRef maxSlices,
                               WindowOptions &options) {
  window = window.trim();
  maxSlices = maxSlices.trim();
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
    symbolizer.emplace(modulesOverTime(snapshot.modules, snapshot.code),
                       *cache);
  else
    symbolizer.emplace(modulesOverTime(snapshot.modules, snapshot.code),
                       strings);
  symbolizer->setJitSymbols(snapshot.code.symbols);
  symbolizer->setJitCode(snapshot.code);
  size_t count = (*decoder)->selected().size();
  std::vector<ThreadModel> models(count);
  std::vector<ModelStats> stats(count);
  auto build = [&](llvm::ArrayRef<Job> jobs) {
    return buildModels(snapshot, **decoder, *symbolizer, strings,
                       options.decode.threads, options.model, jobs, models,
                       stats, progress ? &*progress : nullptr);
  };
  WindowedBuild windowed(snapshot, **decoder, options.window, models, stats,
                         build);
  if (llvm::Error error = windowed.run(onEmulatorClock(snapshot)))
    return std::move(error);
  if (cancel)
    return llvm::createStringError(
        "interrupted: the snapshot was not made (the session goes on)");
  result.window = windowed.summary();
  if (!result.window.whole)
    result.model.windowNote = windowNote(result.window, options.window);
  for (size_t slot = 0; slot < count; ++slot) {
    ThreadModel &thread = models[slot];
    addStats(result.modelStats, stats[slot]);
    result.threads.push_back(summarize(thread, findStop(snapshot, thread.tid),
                                       traceBytes(snapshot, thread.tid)));
    result.model.threads.push_back(std::move(thread));
  }
  if (cache)
    result.model.strings = cache->strings().clone();
  for (std::string &problem : symbolizer->moduleProblems())
    if (std::find(result.moduleProblems.begin(), result.moduleProblems.end(),
                  problem) == result.moduleProblems.end())
      result.moduleProblems.push_back(std::move(problem));
  return std::move(result);
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
