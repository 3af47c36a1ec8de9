// Unit tests for the Chrome JSON, folded-stack and text-tree writers, and for
// whole-file writing by suffix. Expected values are derived from the model
// (its frames and their definition of self time), not from earlier output.
#include "magic_trace/TraceWriters.h"
#include "FxtReader.h"
#include "SyntheticModel.h"
#include "magic_trace/FxtWriter.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace magic_trace;

namespace {

/// main [0,100] { f [10,40] { g (inlined) [12,30] }, f [40,40], h [50,100] }
/// then a stitched segment: main [100,120] (inferred), after a gap "overflow".
TraceModel smallModel() {
  TraceModel model;
  model.pid = 1;
  model.processName = "app";
  ThreadModel &thread = model.threads.emplace_back();
  thread.tid = 2;
  thread.name = "main";
  auto add = [&](Segment &segment, llvm::StringRef name, uint64_t begin,
                 uint64_t end, uint32_t parent,
                 FrameKind kind = FrameKind::Physical, uint64_t address = 0,
                 llvm::StringRef file = "", uint32_t line = 0) -> Frame {
    FrameSite site;
    site.name = model.strings.intern(name);
    site.kind = kind;
    site.address = address;
    site.file = model.strings.intern(file);
    site.line = line;
    Frame frame;
    frame.site = thread.sites.intern(site);
    frame.begin = begin;
    frame.end = end;
    frame.parent = parent;
    segment.frames.push_back(frame);
    return segment.frames.back();
  };
  Segment &first = thread.segments.emplace_back();
  first.begin = 0;
  first.end = 100;
  add(first, "main", 0, 100, Frame::NoParent, FrameKind::Physical, 0x1000,
      "main.c", 3);
  add(first, "f", 10, 40, 0);
  add(first, "g", 12, 30, 1, FrameKind::Inlined);
  add(first, "f", 40, 40, 0);
  add(first, "h", 50, 100, 0);
  Segment &second = thread.segments.emplace_back();
  second.begin = 100;
  second.end = 120;
  second.stitchedToPrevious = true;
  second.gapReason = "overflow";
  add(second, "main", 100, 120, Frame::NoParent);
  second.frames.setInferred(0, true);
  return model;
}

/// A µs value back to ns. The parser reads numbers as doubles, whose
/// precision at these magnitudes is well under half a nanosecond.
uint64_t parseMicros(const llvm::json::Value *value) {
  EXPECT_NE(value, nullptr);
  if (!value || !value->getAsNumber())
    return 0;
  return uint64_t(std::llround(*value->getAsNumber() * 1000));
}

/// Every "ts" and "dur" in the raw text carries exactly three decimals, so
/// no nanosecond digit is lost to a float conversion.
void expectNanosecondDigits(llvm::StringRef text) {
  size_t count = 0;
  for (llvm::StringRef key : {"\"ts\":", "\"dur\":"}) {
    for (size_t at = text.find(key); at != llvm::StringRef::npos;
         at = text.find(key, at + 1)) {
      llvm::StringRef number =
          text.drop_front(at + key.size()).take_while([](char c) {
            return llvm::isDigit(c) || c == '.';
          });
      auto [whole, fraction] = number.split('.');
      EXPECT_FALSE(whole.empty()) << number.str();
      EXPECT_EQ(fraction.size(), 3u) << number.str();
      ++count;
    }
  }
  EXPECT_GT(count, 0u);
}

struct JsonSpan {
  std::string name;
  uint64_t tid, begin, end;
};

std::vector<JsonSpan> completeEvents(const llvm::json::Value &root) {
  std::vector<JsonSpan> spans;
  const llvm::json::Object *object = root.getAsObject();
  EXPECT_NE(object, nullptr);
  const llvm::json::Array *events = object->getArray("traceEvents");
  EXPECT_NE(events, nullptr);
  for (const llvm::json::Value &event : *events) {
    const llvm::json::Object *e = event.getAsObject();
    if (e->getString("ph") != "X")
      continue;
    uint64_t begin = parseMicros(e->get("ts"));
    spans.push_back({e->getString("name")->str(),
                     uint64_t(*e->getInteger("tid")), begin,
                     begin + parseMicros(e->get("dur"))});
  }
  return spans;
}

TEST(ChromeJson, ParsesAndMatchesTheModelsFramesAndNesting) {
  test::SyntheticOptions options;
  options.threads = 3;
  options.framesPerThread = 700;
  TraceModel model = test::makeSyntheticModel(options);
  // Large timestamps must keep their nanosecond digits.
  for (ThreadModel &thread : model.threads)
    for (Segment &segment : thread.segments) {
      segment.begin += 1234567890123456;
      segment.end += 1234567890123456;
      for (size_t i = 0; i < segment.frames.size(); ++i) {
        Frame frame = segment.frames[i];
        frame.begin += 1234567890123456;
        frame.end += 1234567890123456;
        segment.frames.set(i, frame);
      }
    }
  std::string text;
  llvm::raw_string_ostream os(text);
  ASSERT_FALSE(bool(writeChromeJson(model, os)));
  expectNanosecondDigits(text);
  auto parsed = llvm::json::parse(text);
  ASSERT_TRUE(bool(parsed)) << toString(parsed.takeError());
  std::vector<JsonSpan> spans = completeEvents(*parsed);
  size_t i = 0;
  for (const ThreadModel &thread : model.threads)
    for (const Segment &segment : thread.segments) {
      // Nesting: each span's enclosing span (by containment, innermost
      // first) must be the frame's parent.
      std::vector<size_t> stack;
      size_t first = i;
      for (const Frame &frame : segment.frames) {
        ASSERT_LT(i, spans.size());
        const JsonSpan &span = spans[i];
        EXPECT_EQ(span.name, model.strings.get(thread.sites[frame.site].name));
        EXPECT_EQ(span.tid, thread.tid);
        EXPECT_EQ(span.begin, frame.begin);
        EXPECT_EQ(span.end, frame.end);
        // Synthetic frames have positive lengths, so containment is exact.
        while (!stack.empty() && spans[stack.back()].end <= span.begin)
          stack.pop_back();
        size_t expectedParent =
            frame.parent == Frame::NoParent ? SIZE_MAX : first + frame.parent;
        EXPECT_EQ(stack.empty() ? SIZE_MAX : stack.back(), expectedParent)
            << "frame " << i - first;
        stack.push_back(i);
        ++i;
      }
    }
  EXPECT_EQ(i, spans.size());
}

TEST(ChromeJson, HasMetadataArgsAndGapInstants) {
  TraceModel model = smallModel();
  std::string text;
  llvm::raw_string_ostream os(text);
  ASSERT_FALSE(bool(writeChromeJson(model, os)));
  auto parsed = llvm::json::parse(text);
  ASSERT_TRUE(bool(parsed)) << toString(parsed.takeError());
  const llvm::json::Array &events =
      *parsed->getAsObject()->getArray("traceEvents");
  std::map<std::string, const llvm::json::Object *> byName;
  size_t instants = 0;
  for (const llvm::json::Value &event : events) {
    const llvm::json::Object *e = event.getAsObject();
    if (e->getString("ph") == "i") {
      ++instants;
      EXPECT_EQ(*e->getString("name"), "[gap, stitched]");
      EXPECT_EQ(*e->getObject("args")->getString("reason"), "overflow");
    }
    byName.try_emplace(e->getString("name")->str(), e);
  }
  EXPECT_EQ(instants, 1u);
  EXPECT_EQ(*byName["process_name"]->getObject("args")->getString("name"),
            "app");
  EXPECT_EQ(*byName["thread_name"]->getObject("args")->getString("name"),
            "main");
  const llvm::json::Object &mainArgs = *byName["main"]->getObject("args");
  EXPECT_EQ(*mainArgs.getString("address"), "0x1000");
  EXPECT_EQ(*mainArgs.getString("file"), "main.c");
  EXPECT_EQ(*mainArgs.getInteger("line"), 3);
  EXPECT_EQ(*mainArgs.getBoolean("inlined"), false);
  EXPECT_EQ(*byName["g"]->getObject("args")->getBoolean("inlined"), true);
}

std::map<std::string, uint64_t> foldedLines(const TraceModel &model,
                                            FoldedOptions options = {}) {
  std::string text;
  llvm::raw_string_ostream os(text);
  EXPECT_FALSE(bool(writeFolded(model, os, options)));
  std::map<std::string, uint64_t> lines;
  llvm::SmallVector<llvm::StringRef, 0> rows;
  llvm::StringRef(text).split(rows, '\n', -1, false);
  for (llvm::StringRef row : rows) {
    auto [stack, count] = row.rsplit(' ');
    uint64_t ns = 0;
    EXPECT_FALSE(count.getAsInteger(10, ns)) << row.str();
    EXPECT_TRUE(lines.emplace(stack.str(), ns).second)
        << "duplicate " << row.str();
  }
  return lines;
}

TEST(Folded, SelfTimesOfASmallModel) {
  // main: 100 - f 30 - f 0 - h 50 = 20, plus the stitched main's 20.
  std::map<std::string, uint64_t> expected = {
      {"main", 40}, {"main;f", 12}, {"main;f;g_[i]", 18}, {"main;h", 50}};
  EXPECT_EQ(foldedLines(smallModel()), expected);
  FoldedOptions options;
  options.threadPrefix = true;
  EXPECT_EQ(foldedLines(smallModel(), options).count("main-2;main;h"), 1u);
}

TEST(Folded, TotalsEqualRootFrameDurations) {
  test::SyntheticOptions options;
  options.threads = 4;
  options.framesPerThread = 3000;
  TraceModel model = test::makeSyntheticModel(options);
  uint64_t rootTotal = 0;
  for (const ThreadModel &thread : model.threads)
    for (const Segment &segment : thread.segments)
      for (const Frame &frame : segment.frames)
        if (frame.parent == Frame::NoParent)
          rootTotal += frame.end - frame.begin;
  uint64_t foldedTotal = 0;
  for (const auto &[stack, ns] : foldedLines(model))
    foldedTotal += ns;
  EXPECT_EQ(foldedTotal, rootTotal);
}

TEST(Tree, ShowsEveryFrameWithTimesAndMarkers) {
  std::string tree = renderTree(smallModel());
  EXPECT_NE(tree.find("thread 2 \"main\": 2 segments, 120ns"),
            std::string::npos)
      << tree;
  EXPECT_NE(tree.find("       100ns         20ns  main  (main.c:3)\n"),
            std::string::npos)
      << tree;
  EXPECT_NE(tree.find("        18ns         18ns      g [inlined]\n"),
            std::string::npos)
      << tree;
  EXPECT_NE(tree.find("-- stitched gap of 0ns: overflow --"), std::string::npos)
      << tree;
  EXPECT_NE(tree.find("main [inferred]"), std::string::npos) << tree;
}

TEST(Tree, DepthLimitHidesDeeperFrames) {
  TreeOptions options;
  options.maxDepth = 1;
  std::string tree = renderTree(smallModel(), options);
  // f, g, f, h are hidden under the first main.
  EXPECT_NE(tree.find("main  (main.c:3) [+4 deeper]\n"), std::string::npos)
      << tree;
  EXPECT_EQ(tree.find(" f\n"), std::string::npos) << tree;
  EXPECT_EQ(tree.find(" h\n"), std::string::npos) << tree;
  options.maxDepth = 2;
  tree = renderTree(smallModel(), options);
  EXPECT_NE(tree.find("    f [+1 deeper]\n"), std::string::npos) << tree;
  EXPECT_EQ(tree.find(" g [inlined]"), std::string::npos) << tree;
}

TEST(Tree, LastWindowClipsAndDropsEarlierFrames) {
  TreeOptions options;
  options.lastNs = 30; // Window [90, 120].
  std::string tree = renderTree(smallModel(), options);
  // main [0,100] and h [50,100] cross into the window: 10ns each.
  EXPECT_NE(tree.find("        10ns          0ns  main  (main.c:3) [clipped]"),
            std::string::npos)
      << tree;
  EXPECT_NE(tree.find("        10ns         10ns    h [clipped]"),
            std::string::npos)
      << tree;
  EXPECT_EQ(tree.find(" f\n"), std::string::npos) << tree;
  EXPECT_EQ(tree.find(" g "), std::string::npos) << tree;
  EXPECT_NE(tree.find("main [inferred]"), std::string::npos) << tree;
}

TEST(Duration, ParsesUnitsAndRejectsGarbage) {
  EXPECT_EQ(*parseDuration("20us"), 20000u);
  EXPECT_EQ(*parseDuration("1.5ms"), 1500000u);
  EXPECT_EQ(*parseDuration("300ns"), 300u);
  EXPECT_EQ(*parseDuration("2s"), 2000000000u);
  EXPECT_EQ(*parseDuration("0.25 us"), 250u);
  EXPECT_EQ(*parseDuration("3\xc2\xb5s"), 3000u);
  for (const char *bad :
       {"", "us", "20", "20m", "1.2.3us", "abc", "99999999999999999999s"}) {
    auto parsed = parseDuration(bad);
    ASSERT_FALSE(bool(parsed)) << bad;
    EXPECT_NE(toString(parsed.takeError()).find("invalid duration"),
              std::string::npos);
  }
}

TEST(Duration, Formats) {
  EXPECT_EQ(formatDuration(0), "0ns");
  EXPECT_EQ(formatDuration(999), "999ns");
  EXPECT_EQ(formatDuration(12345), "12.345us");
  EXPECT_EQ(formatDuration(1234567), "1.234ms");
  EXPECT_EQ(formatDuration(2000000000), "2.000s");
}

class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("mt-writers", dir));
    path = dir.str().str();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string path;
};

std::vector<uint8_t> readAll(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false);
  EXPECT_TRUE(bool(buffer)) << path;
  if (!buffer)
    return {};
  return {(*buffer)->getBufferStart(), (*buffer)->getBufferEnd()};
}

TEST(WriteTraceFile, PicksTheFormatBySuffix) {
  TempDir dir;
  TraceModel model = smallModel();
  for (const char *name :
       {"t.fxt", "t.fxt.gz", "t.json", "t.json.gz", "t.folded", "t.txt"}) {
    if (llvm::StringRef(name).ends_with(".gz") && !fxtGzipAvailable())
      continue;
    std::string path = dir.path + "/" + name;
    llvm::Error err = writeTraceFile(model, path);
    ASSERT_FALSE(bool(err)) << toString(std::move(err));
    std::vector<uint8_t> bytes = readAll(path);
    ASSERT_FALSE(bytes.empty()) << name;
    llvm::StringRef text(reinterpret_cast<const char *>(bytes.data()),
                         bytes.size());
    if (llvm::StringRef(name).ends_with(".fxt")) {
      EXPECT_TRUE(bool(fxt_test::readFxt(bytes))) << name;
    } else if (llvm::StringRef(name).ends_with(".json.gz")) {
      auto plain = fxt_test::gunzip(bytes);
      ASSERT_TRUE(bool(plain)) << toString(plain.takeError());
      EXPECT_TRUE(bool(llvm::json::parse(llvm::StringRef(
          reinterpret_cast<const char *>(plain->data()), plain->size()))));
    } else if (llvm::StringRef(name).ends_with(".gz")) {
      auto plain = fxt_test::gunzip(bytes);
      ASSERT_TRUE(bool(plain)) << toString(plain.takeError());
      auto trace = fxt_test::readFxt(*plain);
      ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
      EXPECT_EQ(trace->events.size(), 7u);
    } else if (llvm::StringRef(name).ends_with(".json")) {
      EXPECT_TRUE(bool(llvm::json::parse(text)));
    } else if (llvm::StringRef(name).ends_with(".folded")) {
      EXPECT_TRUE(text.starts_with("main 40\n")) << text.str();
    } else {
      EXPECT_TRUE(text.starts_with("process 1 \"app\"\n")) << text.str();
    }
  }
  llvm::Error unknown = writeTraceFile(model, dir.path + "/t.pdf");
  ASSERT_TRUE(bool(unknown));
  EXPECT_NE(toString(std::move(unknown)).find("unknown output format"),
            std::string::npos);
  llvm::Error missing = writeTraceFile(model, dir.path + "/no/such/t.fxt");
  ASSERT_TRUE(bool(missing));
  EXPECT_NE(toString(std::move(missing)).find("cannot write"),
            std::string::npos);
}

TEST(FxtWriter, SyntheticModelsPassTheReader) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    test::SyntheticOptions options;
    options.seed = seed;
    options.threads = 1 + seed % 3;
    options.framesPerThread = 2000;
    options.framesPerSegment = 300 + 100 * seed;
    TraceModel model = test::makeSyntheticModel(options);
    std::string bytes;
    llvm::raw_string_ostream os(bytes);
    ASSERT_FALSE(bool(writeFxt(model, os)));
    auto trace = fxt_test::readFxt(
        {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()});
    ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
    size_t frames = 0, gaps = 0;
    for (const ThreadModel &thread : model.threads) {
      gaps += thread.segments.size() - 1;
      for (const Segment &segment : thread.segments)
        frames += segment.frames.size();
    }
    size_t complete = 0, instants = 0;
    for (const fxt_test::FxtEvent &event : trace->events) {
      complete += event.type == fxt_test::EventType::DurationComplete;
      instants += event.type == fxt_test::EventType::Instant;
    }
    EXPECT_EQ(complete, frames);
    EXPECT_EQ(instants, gaps);
    EXPECT_EQ(trace->threadsWithEvents, options.threads);
  }
}

} // namespace
