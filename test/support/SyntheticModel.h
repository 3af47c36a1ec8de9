//===- SyntheticModel.h - Random valid trace models for tests ---*- C++ -*-===//
#ifndef MAGIC_TRACE_TEST_SYNTHETICMODEL_H
#define MAGIC_TRACE_TEST_SYNTHETICMODEL_H

#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringRef.h"

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

/// A model written by hand, frame by frame, for tests that need exact
/// frames (valid or not: validateModel's own tests build broken ones).
struct ModelBuilder {
  TraceModel model;

  ThreadModel &thread(uint64_t tid) {
    model.threads.emplace_back();
    current = model.threads.size() - 1;
    model.threads.back().tid = tid;
    return model.threads.back();
  }
  static Segment &segment(ThreadModel &thread, uint64_t begin, uint64_t end) {
    thread.segments.emplace_back();
    thread.segments.back().begin = begin;
    thread.segments.back().end = end;
    return thread.segments.back();
  }
  /// A frame frame() added: its segment and index.
  struct Added {
    Segment &segment;
    size_t index;
  };
  Added frame(Segment &segment, llvm::StringRef name, uint64_t begin,
              uint64_t end, uint32_t parent = Frame::NoParent,
              FrameKind kind = FrameKind::Physical) {
    FrameSite site;
    site.name = model.strings.intern(name);
    site.kind = kind;
    Frame frame;
    frame.site = model.threads[current].sites.intern(site);
    frame.begin = begin;
    frame.end = end;
    frame.parent = parent;
    segment.frames.push_back(frame);
    return {segment, segment.frames.size() - 1};
  }
  /// Gives `added` (of the last thread made) an address, file and line.
  void place(const Added &added, uint64_t address, llvm::StringRef file,
             uint32_t line) {
    SiteTable &sites = model.threads[current].sites;
    Frame frame = added.segment.frames[added.index];
    FrameSite site = sites[frame.site];
    site.address = address;
    site.file = model.strings.intern(file);
    site.line = line;
    frame.site = sites.intern(site);
    added.segment.frames.set(added.index, frame);
  }
  size_t current = 0;
};

} // namespace magic_trace::test

#endif
