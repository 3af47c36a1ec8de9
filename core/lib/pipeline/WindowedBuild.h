//===- WindowedBuild.h - A snapshot's models in its window ------*- C++ -*-===//
//
// Private to core/lib/pipeline. How runPipeline builds the threads' models
// in the window WindowOptions asks for (docs/architecture.md, "Window"; docs/
// user-guide.md, "Big snapshots"): a sample of every thread's newest trace,
// the window planned from it (WindowPlan.h), each thread decoded from the
// PSB that window needs (once more when the decode fell short of what the
// budget allows), and the cut (ModelWindow.h) where the writers display
// the rest as they display the whole trace.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_PIPELINE_WINDOWEDBUILD_H
#define MAGIC_TRACE_LIB_PIPELINE_WINDOWEDBUILD_H

#include "magic_trace/Decoder.h"
#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Pipeline.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace magic_trace::pipeline {

/// One thread's decode and model: selected thread `slot` of the decoder,
/// from its PSB `fromPsb`.
struct Job {
  size_t slot = 0;
  size_t fromPsb = 0;
};

/// Decodes and models each job's thread into models[job.slot] (and its
/// ModelStats into the vector buildWindowed is given).
using BuildFn = std::function<llvm::Error(llvm::ArrayRef<Job>)>;

/// Builds `models` (one per decoder.selected() slot, stats parallel, both
/// filled by `build`) in the window `options` asks for, and returns what
/// the window holds. `ownClocks`: each thread keeps its own clock
/// (onEmulatorClock), so each window ends at its own thread's end; else at
/// the latest end of all. The window's search and cut take a thread per
/// worker, on up to `workers` threads. Errors: `build`'s, or a whole trace
/// (`all`) whose model would not fit in memory (with the estimate).
llvm::Expected<WindowSummary>
buildWindowed(const Snapshot &snapshot, const SnapshotDecoder &decoder,
              const WindowOptions &options, std::vector<ThreadModel> &models,
              const std::vector<ModelStats> &stats, bool ownClocks,
              unsigned workers, BuildFn build);

/// Cuts finished `models` to the window `options` asks for (cutToWindow),
/// on up to `workers` threads. Errors: the slice budget allows no window
/// (the frames open at the end alone are over it).
llvm::Expected<WindowSummary> cutModels(std::vector<ThreadModel> &models,
                                        const WindowOptions &options,
                                        bool ownClocks, unsigned workers);

/// The note the writers put where a cut thread starts.
std::string windowNote(const WindowSummary &window,
                       const WindowOptions &options);

} // namespace magic_trace::pipeline

#endif
