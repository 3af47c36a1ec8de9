//===- Pipeline.h - Snapshot -> decoded, symbolized trace model -*- C++ -*-===//
//
// The glue every front end (the LLDB plugin, the CLI tools) runs on one
// Snapshot: decode every thread (Decoder.h), symbolize with the snapshot's
// module list (Symbolizer.h), build one ThreadModel per thread with the stop
// context (ModelBuilder.h), and summarize. Writers then read the model.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PIPELINE_H
#define MAGIC_TRACE_PIPELINE_H

#include "magic_trace/Decoder.h"
#include "magic_trace/FxtWriter.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace magic_trace {

/// Slices an output holds by default: Perfetto's UI ("Visualising large
/// traces") opens about 2 GB of trace in the browser, at 2-4 times the
/// file's size, so about 10 M slices of ours (32 bytes each).
constexpr uint64_t kDefaultMaxSlices = 10000000;

/// Trace the default window decodes at most, every thread's together. A
/// decode costs about the same per byte of trace whatever the program (its
/// branches make the bytes): about 0.2 us a byte on 2 cores of the machine
/// in docs/performance.md, so this is about 1.3 s. Without it, a program
/// with fewer calls per byte than the slice budget assumes (a loop in each
/// call) was decoded whole, 7 s a snapshot (docs/performance.md, "Windows").
constexpr uint64_t kDefaultMaxTraceBytes = uint64_t(5) << 20;

/// Which stretch of a snapshot is decoded and written (docs/architecture.md,
/// "Window"): a time window ending at the stop, the same for every thread, the
/// longest that fits the budget and the user's limit.
struct WindowOptions {
  /// Everything: every PSB decoded, nothing cut (`--window all`).
  bool all = false;
  /// The longest window (`--window DURATION`); 0: as long as the budget
  /// allows.
  uint64_t maxLengthNs = 0;
  /// The output budget (`--max-slices`), in Perfetto's slices (complete and
  /// instant events).
  uint64_t maxSlices = kDefaultMaxSlices;
  /// The decode's budget in bytes of trace, every thread's together, for
  /// the default window only: `--window DURATION` asks for its length, and
  /// `--window all` for everything. 0: none.
  uint64_t maxTraceBytes = kDefaultMaxTraceBytes;
};

/// Parses the `--window DURATION|all`, `--max-slices N` and `--max-trace
/// SIZE` options into `options` (empty text: the option was not given).
/// Errors (one line, what to do): a window of 0, a negative one, one
/// without a known unit, a budget of 0 or not a number, a budget with
/// `all`, or `--max-trace` with any `--window` (which sets the length
/// itself).
llvm::Error parseWindowOptions(llvm::StringRef window,
                               llvm::StringRef maxSlices,
                               llvm::StringRef maxTrace,
                               WindowOptions &options);

/// What a snapshot's output holds of its trace.
struct WindowSummary {
  /// The window's length; the trace's span when it is whole.
  uint64_t lengthNs = 0;
  /// The trace's span: the longest thread's, from its first time (its first
  /// PSB's, when it was not decoded from there) to its end.
  uint64_t traceNs = 0;
  /// Nothing was cut: the output is the whole trace.
  bool whole = true;
  /// The budget, not `--window`, set the length.
  bool cutByBudget = false;
  /// The decode's budget (WindowOptions::maxTraceBytes) set the length:
  /// more of the trace would fit the slice budget.
  bool cutByTrace = false;
  /// Slices in the output (an upper bound: ModelWindow.h's count).
  uint64_t slices = 0;
  /// Threads with something in the window.
  unsigned threads = 0;
  /// PT bytes decoded, and in the snapshot.
  uint64_t decodedBytes = 0, traceBytes = 0;
  /// How the window was placed when the trace did not say it alone (a
  /// thread without timing decoded whole), else empty.
  std::string note;
};

struct PipelineOptions {
  DecodeOptions decode;
  ModelOptions model;
  WindowOptions window;
  /// Called about every 100 ms of a long decode (from a decode worker, one
  /// call at a time) with the instructions decoded so far; returning false
  /// stops it: runPipeline then fails with "interrupted". Empty: no calls.
  std::function<bool(uint64_t instructions)> progress;
};

/// What one thread's trace holds, for the one-line summary and `status`.
struct ThreadSummary {
  uint64_t tid = 0;
  uint64_t beginNs = 0; ///< First time in the model (0 when empty).
  uint64_t endNs = 0;   ///< Last time in the model.
  uint64_t instructions = 0;
  /// Of `instructions`, those timed by the instruction clock.
  uint64_t estimatedInstructions = 0;
  uint64_t calls = 0;
  uint64_t errors = 0;
  uint64_t traceBytes = 0; ///< PT bytes decoded.
  /// Of traceBytes, those decode errors kept from being decoded.
  uint64_t undecodedBytes = 0;
  std::string firstError; ///< The first decode error, empty without one.
  bool triggered = false; ///< The thread that hit the snapshot breakpoint.
};

struct PipelineResult {
  TraceModel model;
  std::vector<ThreadSummary> threads; ///< Parallel to model.threads.
  /// One line per module the decoder or the symbolizer could not use.
  std::vector<std::string> moduleProblems;
  /// libipt's errata workarounds the decode used (the snapshot's CPU).
  std::vector<std::string> errata;
  ModelStats modelStats;
  WindowSummary window;

  /// The triggered thread's summary, else the thread with the most
  /// instructions; null when there are no threads.
  const ThreadSummary *mainThread() const;
};

/// Decodes, symbolizes and models every thread of `snapshot`, in the window
/// options.window asks for: only the PSB pieces that reach into it are
/// decoded (a sample of each thread's newest trace first says how much
/// that is), and the models are cut at its start (ModelWindow.h). Fails
/// when the decoder cannot run at all (see decodeSnapshot), or when the
/// whole trace (`all`) would not fit in memory (said before decoding, with
/// the estimate); bad trace data and missing modules become marked gaps
/// and moduleProblems. With `cache`, the
/// object files it holds are reused and what this snapshot reads is added
/// (the model gets a copy of the cache's strings). Each thread's items stream
/// from its decoder into its model builder (no thread's item stream is ever
/// held); options.decode.threads workers (0: the cores no other task is
/// running on, see Pipeline.cpp) build traced
/// threads in parallel, and with twice as many workers as traced threads a
/// thread's decode and model run side by side.
llvm::Expected<PipelineResult> runPipeline(const Snapshot &snapshot,
                                           const PipelineOptions &options,
                                           SymbolCache *cache = nullptr);

/// Cuts models built without the pipeline (the perf dlfilter's, from perf's
/// own decode of everything) to the window `options` asks for, as
/// runPipeline cuts its own: the same time for every thread (or each
/// thread's own end, `ownClocks`), the longest the budget allows, where
/// the writers display the rest as the whole; sets model.windowNote when
/// it cut. Returns what the window holds. Errors: the slice budget allows
/// no window (the frames open at the end alone are over it; the error says
/// what budget would).
llvm::Expected<WindowSummary>
cutToWindow(TraceModel &model, const WindowOptions &options, bool ownClocks);

/// The PSB of a thread (its psbTimes) to decode from so that everything
/// from time `at` on is decoded as the whole buffer's decode has it: the
/// window planner's rule (one timed PSB of margin); 0 when no timed PSB is
/// at or before `at`. The views (report --annotate, --top) decode a kept
/// window again with it.
size_t windowDecodeStart(const PsbTimes &psbs, uint64_t at);

/// The summary as JSON: {"threads": [{tid, spanNs, instructions, calls,
/// errors, triggered}], "moduleProblems": [...]}.
llvm::json::Value summaryJson(const PipelineResult &result);

} // namespace magic_trace

#endif
