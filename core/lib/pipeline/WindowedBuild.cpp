//===- WindowedBuild.cpp - A snapshot's models in its window --------------===//
#include "WindowedBuild.h"

#include "WindowPlan.h"

#include "magic_trace/ModelWindow.h"
#include "magic_trace/Parallel.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <fstream>

namespace magic_trace::pipeline {
namespace {

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

/// Where each thread is cut for a window of `length` ending at ends[i] (0:
/// not at all), moved to where the writers display the rest as they
/// display the whole trace (displaySafeCut): the thread's own, with its own
/// clock; else the same for every thread, the first time that suits all.
std::vector<uint64_t> cutTimes(const std::vector<ThreadModel> &models,
                               const std::vector<uint64_t> &ends,
                               uint64_t length, bool perThread) {
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
  // Each move can only go later, and each thread has a time that suits it
  // past any other's: a few rounds settle.
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

/// `models` as ModelWindow.h's functions take them.
std::vector<const ThreadModel *>
pointersTo(const std::vector<ThreadModel> &models) {
  std::vector<const ThreadModel *> threads;
  for (const ThreadModel &model : models)
    threads.push_back(&model);
  return threads;
}

/// The longest window the budget and the user's limit allow `models`, each
/// ending at ends[i].
uint64_t budgetWindowOf(const std::vector<ThreadModel> &models,
                        const std::vector<uint64_t> &ends,
                        const WindowOptions &options, unsigned workers) {
  return longestWindow(pointersTo(models), ends, options.maxLengthNs,
                       options.maxSlices, workers);
}

/// The error when the slice budget allows no window at all: the frames
/// still open at the end (the stacks at the stop) alone are over it, and
/// a cut would leave an empty file. Says what budget a window of 1 ns
/// needs.
llvm::Error noWindowFits(const std::vector<ThreadModel> &models,
                         const std::vector<uint64_t> &ends,
                         const WindowOptions &options) {
  uint64_t needed = slicesWithin(pointersTo(models), ends, 1);
  return llvm::createStringError(llvm::formatv(
      "--max-slices {0} leaves no window: the frames open at the end of the "
      "trace alone make {1} slices (give --max-slices {1} or more, or "
      "--window all)",
      options.maxSlices, std::max(needed, options.maxSlices + 1)));
}

/// The shortest of the windows `starts` leave the threads cut (ends[i] -
/// starts[i]); `length` when none is cut.
uint64_t shownLength(const std::vector<uint64_t> &starts,
                     const std::vector<uint64_t> &ends, uint64_t length) {
  for (size_t slot = 0; slot < starts.size(); ++slot)
    if (starts[slot])
      length =
          std::min(length, ends[slot] - std::min(ends[slot], starts[slot]));
  return length;
}

/// The error when the slice budget's window is empty once cut: the cut
/// moves to where the writers display the rest as the whole (cutTimes),
/// and for a short window at a trace whose last events are displayed
/// together that is the trace's end. Names the budget of the shortest
/// window, by doubling, that keeps a non-empty one (a longer window's cut
/// is never later: the move only goes forward from an earlier start).
llvm::Error emptyWindow(const std::vector<ThreadModel> &models,
                        const std::vector<uint64_t> &ends,
                        const WindowOptions &options, uint64_t length,
                        uint64_t covered, bool perThread) {
  uint64_t shown = std::max<uint64_t>(length, 1);
  while (shown < covered &&
         shownLength(cutTimes(models, ends, shown, perThread), ends, shown) ==
             0)
    shown = std::min(covered, shown * 2);
  uint64_t needed = slicesWithin(pointersTo(models), ends, shown);
  return llvm::createStringError(llvm::formatv(
      "--max-slices {0} leaves an empty window: its start moves to the "
      "trace's end, where the last events are shown, and a window that "
      "holds one makes {1} slices (give --max-slices {1} or more, or "
      "--window all)",
      options.maxSlices, std::max(needed, options.maxSlices + 1)));
}

/// Cuts `models` to `budget` (budgetWindowOf), at most `covered` long, each
/// ending at ends[i]; fills `window`'s whole, lengthNs (when cut) and
/// cutByBudget. Errors: the budget allows no window (noWindowFits) or an
/// empty one (emptyWindow).
llvm::Error cutToLongestWindow(std::vector<ThreadModel> &models,
                               const std::vector<uint64_t> &ends,
                               const WindowOptions &options, uint64_t budget,
                               uint64_t covered, bool perThread,
                               unsigned workers, WindowSummary &window) {
  bool anything = false;
  for (const ThreadModel &model : models)
    anything = anything || !model.segments.empty();
  if (budget == 0 && anything)
    return noWindowFits(models, ends, options);
  uint64_t length = std::min(budget, covered);
  std::vector<uint64_t> starts = cutTimes(models, ends, length, perThread);
  bool byBudget = options.maxLengthNs == 0 || budget < options.maxLengthNs;
  if (byBudget && budget < covered && anything &&
      shownLength(starts, ends, length) == 0)
    return emptyWindow(models, ends, options, length, covered, perThread);
  forEachParallel(models.size(), workers, [&](size_t slot) {
    if (starts[slot])
      cutThreadModel(models[slot], starts[slot]);
  });
  window.whole = true;
  std::vector<uint64_t> cuts(models.size(), 0);
  for (size_t slot = 0; slot < models.size(); ++slot) {
    cuts[slot] = models[slot].windowStart;
    window.whole = window.whole && cuts[slot] == 0;
  }
  // The shortest of the threads' windows (displaySafeCut moved them a few
  // nanoseconds each).
  length = shownLength(cuts, ends, length);
  if (window.whole)
    return llvm::Error::success();
  window.lengthNs = length;
  window.cutByBudget = byBudget;
  return llvm::Error::success();
}

/// Slices and threads of the models as they are now.
void countSlices(const std::vector<ThreadModel> &models,
                 WindowSummary &window) {
  for (const ThreadModel &model : models) {
    window.slices += windowSlices(model, 0) + (model.windowStart != 0) +
                     !clockNote(model).empty();
    window.threads += !model.segments.empty();
  }
}

/// Builds the models of a snapshot in the window its options ask for
/// (runPipeline, docs/architecture.md, "Window"): a sample of every thread's
/// newest trace, a window planned from it (WindowPlan.h), each thread decoded
/// from the PSB that window needs (once more when the decode fell short of what
/// the budget allows), and the cut (ModelWindow.h).
class WindowedBuild {
public:
  WindowedBuild(const Snapshot &snapshot, const SnapshotDecoder &decoder,
                const WindowOptions &options, std::vector<ThreadModel> &models,
                const std::vector<ModelStats> &stats, unsigned workers,
                BuildFn build)
      : snapshot(snapshot), decoder(decoder), options(options), models(models),
        stats(&stats), workers(workers), build(std::move(build)),
        from(models.size(), 0), ends(models.size(), 0),
        firsts(models.size(), 0) {}

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
    limitByTrace();
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
    return cut();
  }

  const WindowSummary &summary() const { return window; }

private:
  const PsbTimes &times(size_t slot) const {
    return decoder.psbTimes(decoder.selected()[slot]);
  }

  /// Thread `slot`'s trace bytes from its PSB `psb` to its end.
  uint64_t bytesFrom(size_t slot, size_t psb) const {
    const PsbTimes &psbs = times(slot);
    return psbs.offsets.empty() ? 0 : psbs.bytes - psbs.offsets[psb];
  }

  uint64_t decodedBytes(size_t slot) const {
    return bytesFrom(slot, from[slot]);
  }

  /// Each thread's PSBs, end and window end, for the planner (no density).
  std::vector<ThreadPlan> threadPlans() const {
    std::vector<ThreadPlan> plans(models.size());
    for (size_t slot = 0; slot < models.size(); ++slot) {
      plans[slot].psbs = &times(slot);
      plans[slot].end = threadEnds[slot];
      plans[slot].windowEnd = ends[slot];
    }
    return plans;
  }

  /// The default window is at most what maxTraceBytes of trace cover
  /// (WindowOptions::maxTraceBytes, traceBudgetWindow): it then stands as a
  /// `--window` the user gave. A trace whose newest PSB pieces alone are
  /// over the budget is left as it was.
  void limitByTrace() {
    if (options.maxLengthNs || !options.maxTraceBytes)
      return;
    uint64_t span = 0;
    for (size_t slot = 0; slot < models.size(); ++slot)
      if (ends[slot] > firsts[slot])
        span = std::max(span, ends[slot] - firsts[slot]);
    uint64_t length =
        traceBudgetWindow(threadPlans(), span, options.maxTraceBytes);
    if (length == 0 || length == span)
      return;
    options.maxLengthNs = length;
    traceLimited = true;
  }

  /// Decodes every slot whose `wanted` PSB is before the one it was
  /// decoded from (all of them the first time).
  llvm::Error decodeFrom(const std::vector<size_t> &wanted) {
    std::vector<Job> jobs;
    for (size_t slot = 0; slot < models.size(); ++slot)
      if (!decoded || wanted[slot] < from[slot])
        jobs.push_back({slot, wanted[slot]});
    // The longest first, so that the workers finish together: a thread
    // decoded from its start can take twice another's time, and taken
    // last it would leave a worker idle for the difference. A job's length
    // is its slices, by the density decoded so far (its bytes before
    // anything was): threads' traces differ in bytes a call (in one busy
    // snapshot a worker ran twice the others' calls in the same window,
    // from a ring with fewer bytes than theirs).
    // The densities are plan()'s (none before the sample). Mixing units
    // would misorder: slices only when every job has a density.
    bool counted = decoded;
    for (const Job &job : jobs)
      counted = counted && plannedDensity[job.slot] > 0;
    std::vector<double> cost(models.size(), 0);
    for (const Job &job : jobs)
      cost[job.slot] = double(bytesFrom(job.slot, job.fromPsb)) *
                       (counted ? plannedDensity[job.slot] : 1);
    std::sort(jobs.begin(), jobs.end(), [&](const Job &a, const Job &b) {
      double left = cost[a.slot], right = cost[b.slot];
      return left != right ? left > right : a.slot < b.slot;
    });
    decoded = true;
    if (llvm::Error error = build(jobs))
      return error;
    for (const Job &job : jobs)
      from[job.slot] = job.fromPsb;
    ++decodes;
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
    std::vector<ThreadPlan> plans = threadPlans();
    plannedDensity.assign(models.size(), 0);
    for (size_t slot = 0; slot < models.size(); ++slot)
      plans[slot].slicesPerByte = plannedDensity[slot] =
          density(slot).slicesPerByte;
    uint64_t limit = options.maxLengthNs ? options.maxLengthNs : UINT64_MAX;
    uint64_t length = plannedWindow(plans, limit, options.maxSlices);
    std::vector<size_t> wanted = from;
    // Threads that may be decoded from their start: (prefix, slot).
    std::vector<std::pair<uint64_t, size_t>> starts;
    uint64_t windowTotal = 0;
    for (size_t slot = 0; slot < models.size(); ++slot) {
      const PsbTimes &psbs = times(slot);
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
      // The frames open at the window's start that never return come from
      // the debugger's stack at the stop (anchoring); without one, from
      // their calls. A ring that did not wrap holds the thread's whole
      // life, so those calls are in it: decoded from its start when that
      // costs little, the cheapest starts first, while they come to at
      // most a sixteenth of the window's bytes of every thread, or
      // kCheapPrefixBytes in a small trace (a thread's start more than
      // twice its window never); otherwise the note says what may be
      // missing.
      uint64_t prefix = psbs.offsets.empty() ? 0 : psbs.offsets[wanted[slot]];
      uint64_t windowBytes = psbs.bytes - prefix;
      windowTotal += windowBytes;
      if (needsItsStart(slot) &&
          prefix <= std::max(kCheapPrefixBytes, 2 * windowBytes))
        starts.push_back({prefix, slot});
    }
    std::sort(starts.begin(), starts.end());
    uint64_t allowed = windowTotal / 16;
    if (window.traceBytes <= kSmallTraceBytes)
      allowed = std::max(allowed, kCheapPrefixBytes);
    uint64_t spent = 0;
    for (const auto &[prefix, slot] : starts) {
      if (spent + prefix > allowed)
        break;
      spent += prefix;
      wanted[slot] = 0;
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
  /// decoded models; counted once per decode (a pass over every frame).
  uint64_t budgetWindow() {
    if (budgetDecodes != decodes) {
      budget = budgetWindowOf(models, ends, options, workers);
      budgetDecodes = decodes;
    }
    return budget;
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

  llvm::Error cut() {
    noteMissingRoots();
    summarizeTrace();
    if (llvm::Error error =
            cutToLongestWindow(models, ends, options, budgetWindow(),
                               coveredWindow(), perThread, workers, window))
      return error;
    if (traceLimited && !window.whole && !window.cutByBudget)
      window.cutByTrace = true;
    countSlices(models, window);
    return llvm::Error::success();
  }

  void finishWhole() {
    summarizeTrace();
    countSlices(models, window);
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
  /// The user's, with the decode's budget as a length (limitByTrace).
  WindowOptions options;
  bool traceLimited = false;
  std::vector<ThreadModel> &models;
  const std::vector<ModelStats> *stats; ///< Per slot, of its model.
  unsigned workers;
  BuildFn build;
  bool perThread = false;
  bool decoded = false;
  unsigned decodes = 0;       ///< Decodes run so far.
  unsigned budgetDecodes = 0; ///< The decodes `budget` was counted after.
  uint64_t budget = 0;
  std::vector<size_t> from;         ///< Per slot: the PSB decoded from.
  std::vector<uint64_t> ends;       ///< Per slot: where its window ends.
  std::vector<uint64_t> threadEnds; ///< Per slot: its own last time.
  std::vector<uint64_t> firsts;     ///< Per slot: its trace's first time.
  /// Per slot: slices per byte decoded, when plan() last looked.
  std::vector<double> plannedDensity;
  WindowSummary window;
};

} // namespace

llvm::Expected<WindowSummary> cutModels(std::vector<ThreadModel> &models,
                                        const WindowOptions &options,
                                        bool ownClocks, unsigned workers) {
  WindowSummary window;
  std::vector<uint64_t> ends(models.size(), 0);
  uint64_t latest = 0, earliest = UINT64_MAX, span = 0;
  for (size_t i = 0; i < models.size(); ++i) {
    const ThreadModel &model = models[i];
    if (model.segments.empty())
      continue;
    uint64_t first = model.segments.front().begin;
    ends[i] = model.segments.back().end;
    latest = std::max(latest, ends[i]);
    earliest = std::min(earliest, first);
    span = std::max(span, ends[i] - first);
  }
  if (!ownClocks)
    std::fill(ends.begin(), ends.end(), latest);
  window.traceNs = ownClocks || latest < earliest ? span : latest - earliest;
  window.lengthNs = window.traceNs;
  if (!options.all)
    if (llvm::Error error =
            cutToLongestWindow(models, ends, options,
                               budgetWindowOf(models, ends, options, workers),
                               UINT64_MAX, ownClocks, workers, window))
      return std::move(error);
  countSlices(models, window);
  return window;
}

llvm::Expected<WindowSummary>
buildWindowed(const Snapshot &snapshot, const SnapshotDecoder &decoder,
              const WindowOptions &options, std::vector<ThreadModel> &models,
              const std::vector<ModelStats> &stats, bool ownClocks,
              unsigned workers, BuildFn build) {
  WindowedBuild windowed(snapshot, decoder, options, models, stats, workers,
                         std::move(build));
  if (llvm::Error error = windowed.run(ownClocks))
    return std::move(error);
  return windowed.summary();
}

/// The note the writers put where a cut thread starts.
std::string windowNote(const WindowSummary &window,
                       const WindowOptions &options) {
  std::string note = "the last " + formatDuration(window.lengthNs) + " of " +
                     formatDuration(window.traceNs);
  if (window.cutByBudget)
    note += " (the " + withCommas(options.maxSlices) + "-slice budget)";
  else if (window.cutByTrace)
    note += " (the " + formatSize(options.maxTraceBytes) + " decode budget)";
  return note + "; 'save --window all' writes all of it";
}

} // namespace magic_trace::pipeline
