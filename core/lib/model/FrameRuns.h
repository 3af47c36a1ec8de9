//===- FrameRuns.h - A model's frames in runs for the workers ---*- C++ -*-===//
//
// Private to core/lib/model: the stages that walk every frame of a model
// (the window's search, the model's check) take runs of at most a million
// frames as their work items, so that one big thread keeps every worker
// busy.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_MODEL_FRAMERUNS_H
#define MAGIC_TRACE_LIB_MODEL_FRAMERUNS_H

#include "magic_trace/TraceModel.h"

#include <cstddef>
#include <vector>

namespace magic_trace {
namespace model {

/// The most frames of a run.
constexpr size_t RunFrames = size_t(1) << 20;

/// Frames [from, to) of segment `segment` of thread `thread`.
struct FrameRun {
  size_t thread, segment;
  size_t from, to;
};

/// The runs of at most `most` (> 0) frames that cover every segment of
/// `count` threads (`threadAt(t)` gives each), in order: an empty segment
/// is one empty run, and so is a thread without segments (its run's
/// `segment` then names none).
template <typename ThreadAt>
std::vector<FrameRun> frameRuns(size_t count, ThreadAt threadAt, size_t most) {
  std::vector<FrameRun> runs;
  for (size_t t = 0; t < count; ++t) {
    const ThreadModel &thread = threadAt(t);
    if (thread.segments.empty())
      runs.push_back({t, 0, 0, 0});
    for (size_t s = 0; s < thread.segments.size(); ++s) {
      size_t frames = thread.segments[s].frames.size(), from = 0;
      do {
        size_t to = frames - from <= most ? frames : from + most;
        runs.push_back({t, s, from, to});
        from = to;
      } while (from < frames);
    }
  }
  return runs;
}

} // namespace model
} // namespace magic_trace

#endif
