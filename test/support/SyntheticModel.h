//===- SyntheticModel.h - Random valid trace models for tests ---*- C++ -*-===//
#ifndef MAGIC_TRACE_TEST_SYNTHETICMODEL_H
#define MAGIC_TRACE_TEST_SYNTHETICMODEL_H

#include "magic_trace/TraceModel.h"

#include <cstdint>

namespace magic_trace::test {

struct SyntheticOptions {
  unsigned threads = 2;
  size_t framesPerThread = 1000;
  /// A segment ends (with a gap and a reason) after this many frames.
  size_t framesPerSegment = 400;
  unsigned maxDepth = 12;
  /// Distinct function names.
  unsigned names = 200;
  uint64_t seed = 1;
};

/// A model that satisfies validateModel: per thread, segments of frames from
/// a random walk of calls and returns (every 5th frame inlined, file/line and
/// addresses filled in).
TraceModel makeSyntheticModel(const SyntheticOptions &options);

} // namespace magic_trace::test

#endif
