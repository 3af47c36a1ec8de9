//===- SyntheticModel.cpp - Random valid trace models for tests -----------===//
#include "SyntheticModel.h"

#include <random>
#include <string>
#include <vector>

namespace magic_trace::test {

TraceModel makeSyntheticModel(const SyntheticOptions &options) {
  TraceModel model;
  model.pid = 4000;
  model.processName = "synthetic";
  std::mt19937_64 random(options.seed);
  std::vector<StringId> names;
  for (unsigned i = 0; i < options.names; ++i)
    names.push_back(model.strings.intern("function_" + std::to_string(i)));
  StringId file = model.strings.intern("synthetic.cpp");
  uint64_t time = 1000;
  for (unsigned t = 0; t < options.threads; ++t) {
    ThreadModel &thread = model.threads.emplace_back();
    thread.tid = 4001 + t;
    thread.name = "worker-" + std::to_string(t);
    size_t made = 0;
    while (made < options.framesPerThread) {
      Segment &segment = thread.segments.emplace_back();
      if (thread.segments.size() > 1) {
        time += 500; // Lost time.
        segment.gapReason = "overflow";
        ++thread.errors;
      }
      segment.begin = time;
      std::vector<uint32_t> open;
      size_t inSegment = 0;
      while (made < options.framesPerThread &&
             inSegment < options.framesPerSegment) {
        time += 1 + random() % 40;
        bool call = open.empty() ||
                    (open.size() < options.maxDepth && random() % 2 == 0);
        if (!call) {
          segment.frames.setEnd(open.back(), time);
          open.pop_back();
          continue;
        }
        Frame frame;
        frame.begin = time;
        unsigned n = random() % names.size();
        FrameSite site;
        site.name = names[n];
        site.address = 0x400000 + 0x40 * n;
        site.file = file;
        site.line = 10 + n;
        site.kind = made % 5 == 4 && !open.empty() ? FrameKind::Inlined
                                                   : FrameKind::Physical;
        frame.site = thread.sites.intern(site);
        frame.parent = open.empty() ? Frame::NoParent : open.back();
        open.push_back(uint32_t(segment.frames.size()));
        segment.frames.push_back(frame);
        ++made;
        ++inSegment;
        ++thread.calls;
      }
      time += 1;
      while (!open.empty()) {
        segment.frames.setEnd(open.back(), time);
        open.pop_back();
        time += 1;
      }
      segment.end = time;
      thread.instructions += 10 * inSegment;
    }
  }
  return model;
}

} // namespace magic_trace::test
