//===- ModelBuilderFixture.h - Item streams and trees by hand ---*- C++ -*-===//
//
// What the model builder's tests share (ModelBuilderTest.cpp,
// ModelAnchoringTest.cpp): fake symbol ranges for made-up code, items as
// the decoder would emit them, the model rendered as an indented tree
// ("name begin-end [flags]", the invariants checked on the way), and the
// fixture that builds one thread from them.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_UNIT_MODELBUILDERFIXTURE_H
#define MAGIC_TRACE_TEST_UNIT_MODELBUILDERFIXTURE_H

#include "magic_trace/ModelBuilder.h"
#include "magic_trace/Symbolizer.h"

#include "llvm/ADT/StringExtras.h"

#include "gtest/gtest.h"

#include <deque>
#include <initializer_list>
#include <map>
#include <string>

namespace magic_trace::model_test {

/// Symbol ranges for made-up code. Every function is one or more ranges;
/// a chain lists the physical function first, then inlined callees.
class FakeSymbols {
public:
  explicit FakeSymbols(StringTable &strings) : strings(strings) {}

  /// A whole function [begin, end) with no inlining.
  void function(const char *name, uint64_t begin, uint64_t end) {
    range(begin, end, begin, {name});
  }

  /// One range of the function entered at `entry`; `lines` (optional) gives
  /// each chain frame's line, i.e. the call site of the next frame.
  void range(uint64_t begin, uint64_t end, uint64_t entry,
             std::initializer_list<const char *> chain,
             std::initializer_list<uint32_t> lines = {}) {
    SymbolRange range;
    range.begin = begin;
    range.end = end;
    range.functionEntry = entry;
    range.fromDebugInfo = true;
    auto line = lines.begin();
    for (const char *name : chain) {
      SymbolFrame frame;
      frame.function = strings.intern(name);
      frame.file = strings.intern("fake.c");
      frame.line = line != lines.end() ? *line++ : 1;
      frame.inlined = !range.frames.empty();
      range.frames.push_back(frame);
    }
    ranges[begin] = std::move(range);
  }

  const SymbolRange &lookup(uint64_t address) {
    auto it = ranges.upper_bound(address);
    if (it != ranges.begin() && address < std::prev(it)->second.end)
      return std::prev(it)->second;
    SymbolRange &range = unknowns.emplace_back();
    range.begin = address;
    range.end = address + 1;
    SymbolFrame frame;
    frame.function = strings.intern("[unknown]");
    range.frames.push_back(frame);
    range.unknown = true;
    return range;
  }

private:
  StringTable &strings;
  std::map<uint64_t, SymbolRange> ranges;
  std::deque<SymbolRange> unknowns;
};

inline TraceItem block(uint64_t ip, uint64_t lastIp, uint64_t time,
                       BranchClass last, uint32_t count = 4) {
  TraceItem item;
  item.kind = ItemKind::Block;
  item.ip = ip;
  item.lastIp = lastIp;
  item.timeNs = time;
  item.detail = count;
  item.lastClass = last;
  return item;
}

inline TraceItem event(ItemKind kind, uint64_t time, uint64_t ip = 0,
                       uint32_t detail = 0) {
  TraceItem item;
  item.kind = kind;
  item.ip = ip;
  item.timeNs = time;
  item.detail = detail;
  return item;
}

/// A block ending in a call instruction of `size` bytes (the decoder's
/// lastSize), so the call's return address is lastIp + size.
inline TraceItem callBlock(uint64_t ip, uint64_t lastIp, uint64_t time,
                           uint8_t size = 5) {
  TraceItem item = block(ip, lastIp, time, BranchClass::DirectCall);
  item.lastSize = size;
  return item;
}

/// The model as an indented tree; checks the TraceModel.h invariants too.
inline std::string render(const ThreadModel &model,
                          const StringTable &strings) {
  std::string out;
  uint64_t previousEnd = 0;
  for (size_t s = 0; s < model.segments.size(); ++s) {
    const Segment &segment = model.segments[s];
    EXPECT_LE(segment.begin, segment.end) << "segment " << s;
    EXPECT_LE(previousEnd, segment.begin) << "segment " << s << " overlaps";
    previousEnd = segment.end;
    out += "segment " + std::to_string(segment.begin) + "-" +
           std::to_string(segment.end);
    if (segment.stitchedToPrevious)
      out += " stitched";
    if (!segment.gapReason.empty())
      out += " after " + segment.gapReason;
    out += "\n";
    std::vector<unsigned> depth(segment.frames.size(), 0);
    std::vector<uint64_t> lastChildEnd(segment.frames.size(), 0);
    uint64_t lastRootEnd = 0;
    for (size_t i = 0; i < segment.frames.size(); ++i) {
      const Frame &frame = segment.frames[i];
      EXPECT_LE(frame.begin, frame.end) << "frame " << i;
      EXPECT_LE(segment.begin, frame.begin) << "frame " << i;
      EXPECT_LE(frame.end, segment.end) << "frame " << i;
      if (frame.parent != Frame::NoParent) {
        EXPECT_LT(frame.parent, i) << "frame " << i << " not in pre-order";
        if (frame.parent >= i)
          continue;
        const Frame &parent = segment.frames[frame.parent];
        EXPECT_LE(parent.begin, frame.begin) << "frame " << i;
        EXPECT_LE(frame.end, parent.end) << "frame " << i;
        EXPECT_LE(lastChildEnd[frame.parent], frame.begin)
            << "frame " << i << " overlaps its sibling";
        lastChildEnd[frame.parent] = frame.end;
        depth[i] = depth[frame.parent] + 1;
      } else {
        EXPECT_LE(lastRootEnd, frame.begin) << "root " << i << " overlaps";
        lastRootEnd = frame.end;
      }
      out += std::string(2 * depth[i], ' ') +
             strings.get(model.sites[frame.site].name).str() + " " +
             std::to_string(frame.begin) + "-" + std::to_string(frame.end);
      if (frame.inferred)
        out += " inferred";
      if (frame.anchored)
        out += " anchored";
      out += "\n";
    }
  }
  return out;
}

class ModelBuilderTest : public ::testing::Test {
protected:
  ModelBuilderTest() : symbols(strings) {
    symbols.function("_start", 0x1000, 0x1100);
    symbols.function("main", 0x2000, 0x2100);
    symbols.function("a", 0x3000, 0x3100);
    symbols.function("b", 0x4000, 0x4100);
    symbols.function("c", 0x5000, 0x5100);
  }

  ThreadModel build(ModelOptions options = {},
                    const ThreadStop *stop = nullptr) {
    stats = {};
    auto lookup = [this](uint64_t address) -> const SymbolRange & {
      return symbols.lookup(address);
    };
    return buildThreadModel(decode, lookup, stop, strings, options, &stats);
  }

  std::string tree(ModelOptions options = {},
                   const ThreadStop *stop = nullptr) {
    ThreadModel model = build(options, stop);
    std::string out = render(model, strings);
    // The invariants every writer relies on (TraceModel.h).
    trace.threads.push_back(std::move(model));
    if (llvm::Error err = validateModel(trace))
      ADD_FAILURE() << llvm::toString(std::move(err));
    trace.threads.clear();
    return out;
  }

  void add(TraceItem item) { decode.items.push_back(item); }

  TraceModel trace; ///< Owns the strings; validateModel checks the ids.
  StringTable &strings = trace.strings;
  FakeSymbols symbols;
  ThreadDecode decode;
  ModelStats stats;
};

} // namespace magic_trace::model_test

#endif
