// Unit tests for the Fuchsia trace writer. Expected bytes are built word by
// word from the spec (fuchsia.dev/fuchsia-src/reference/tracing/trace-format),
// one comment per word; whole files are validated by the test reader
// (test/support/FxtReader), which shares no code with the writer.
#include "magic_trace/FxtWriter.h"
#include "FxtReader.h"
#include "SyntheticModel.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <random>

using namespace magic_trace;
using namespace magic_trace::fxt_test;
using magic_trace::test::ModelBuilder;

namespace {

using Words = std::vector<uint64_t>;

/// Text as the spec stores it: little-endian bytes, zero-padded to words.
void appendText(Words &words, llvm::StringRef text) {
  for (size_t i = 0; i < text.size(); i += 8) {
    uint64_t word = 0;
    for (size_t j = 0; j < 8 && i + j < text.size(); ++j)
      word |= uint64_t(uint8_t(text[i + j])) << (8 * j);
    words.push_back(word);
  }
}

/// A string record binding `index` (record type 2).
void appendStringRecord(Words &words, uint64_t index, llvm::StringRef text) {
  uint64_t size = 1 + (text.size() + 7) / 8;
  words.push_back(2 | size << 4 | index << 16 | uint64_t(text.size()) << 32);
  appendText(words, text);
}

Words toWords(const std::string &bytes) {
  EXPECT_EQ(bytes.size() % 8, 0u);
  Words words;
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8)
    words.push_back(llvm::support::endian::read64le(bytes.data() + i));
  return words;
}

std::string writeToString(const TraceModel &model, FxtOptions options = {}) {
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::Error err = writeFxt(model, os, options);
  EXPECT_FALSE(err) << toString(std::move(err));
  return out;
}

llvm::ArrayRef<uint8_t> asBytes(const std::string &text) {
  return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

/// Words every trace starts with: magic, initialization, the pinned strings
/// (slots 1-17) and the process object named `processName` (<= 8 bytes).
void appendPreamble(Words &w, uint64_t pid, llvm::StringRef processName) {
  // Magic number record: metadata (0), 1 word, trace info (4), magic (0),
  // 0x16547846 in bits 24-55.
  w.push_back(0x0016547846040010);
  // Initialization record: type 1, 2 words.
  w.push_back(1 | 2 << 4);
  w.push_back(1000000000); // Ticks per second: model times are ns.
  appendStringRecord(w, 1, "magic-trace"); // Category.
  appendStringRecord(w, 2, "address");
  appendStringRecord(w, 3, "file");
  appendStringRecord(w, 4, "line");
  appendStringRecord(w, 5, "inlined");
  appendStringRecord(w, 6, "process");
  appendStringRecord(w, 7, "reason");
  appendStringRecord(w, 8, "[gap]");
  appendStringRecord(w, 9, "[gap, stitched]");
  appendStringRecord(w, 10, "site");
  appendStringRecord(w, 11, "clock");
  appendStringRecord(w, 12, "[times estimated from instruction counts]");
  // The kind categories of compact slices (physical frames use slot 1).
  appendStringRecord(w, 13, "magic-trace,inlined");
  appendStringRecord(w, 14, "magic-trace,untraced");
  appendStringRecord(w, 15, "magic-trace,syscall");
  appendStringRecord(w, 16, "magic-trace,decode-error");
  appendStringRecord(w, 17, "magic-trace,unknown");
  // Kernel object record (7), 3 words, process (1), inline name, 0 args.
  uint64_t nameRef = 0x8000 | processName.size();
  w.push_back(7 | 3 << 4 | 1 << 16 | nameRef << 24);
  w.push_back(pid);           // Process koid.
  appendText(w, processName); // Inline name, one word.
}

/// Thread record binding `slot`, then the thread's kernel object (no name).
void appendThread(Words &w, uint64_t slot, uint64_t pid, uint64_t tid) {
  w.push_back(3 | 3 << 4 | slot << 16); // Thread record, 3 words.
  w.push_back(pid);                     // Process koid.
  w.push_back(tid);                     // Thread koid.
  // Kernel object (7), 4 words, thread (2), empty name, 1 argument.
  w.push_back(7 | 4 << 4 | 2 << 16 | uint64_t(1) << 40);
  w.push_back(tid); // Thread koid.
  // Koid argument (8), 2 words, name "process" (slot 6).
  w.push_back(8 | 2 << 4 | 6 << 16);
  w.push_back(pid); // The process koid.
}

TEST(FxtWriter, OneFrameWordByWord) {
  ModelBuilder b;
  b.model.pid = 100;
  b.model.processName = "app";
  Segment &seg = ModelBuilder::segment(b.thread(101), 10, 50);
  auto main = b.frame(seg, "main", 10, 50);
  b.place(main, 0x401000, "a.c", 7);

  // The default, compact slice: 4 words.
  Words w;
  appendPreamble(w, 100, "app");
  appendThread(w, 1, 100, 101);
  appendStringRecord(w, 18, "main"); // First dynamic slot.
  appendStringRecord(w, 19, "a.c:7 0x401000");
  // Event (4), 4 words, duration complete (4), 1 arg, thread 1,
  // category slot 1 (a physical frame), name slot 18.
  w.push_back(4 | 4 << 4 | 4 << 16 | 1 << 20 | 1 << 24 | uint64_t(1) << 32 |
              uint64_t(18) << 48);
  w.push_back(10); // Begin timestamp.
  // String argument (6), 1 word, name "site" (10), value slot 19.
  w.push_back(6 | 1 << 4 | 10 << 16 | uint64_t(19) << 32);
  w.push_back(50); // End timestamp.
  EXPECT_EQ(toWords(writeToString(b.model)), w);

  // --slice-args full: 8 words.
  w.clear();
  appendPreamble(w, 100, "app");
  appendThread(w, 1, 100, 101);
  appendStringRecord(w, 18, "main"); // First dynamic slot.
  appendStringRecord(w, 19, "a.c");
  // Event (4), 8 words, duration complete (4), 4 args, thread 1,
  // category slot 1, name slot 18.
  w.push_back(4 | 8 << 4 | 4 << 16 | 4 << 20 | 1 << 24 | uint64_t(1) << 32 |
              uint64_t(18) << 48);
  w.push_back(10); // Begin timestamp.
  // Pointer argument (7), 2 words, name "address" (slot 2).
  w.push_back(7 | 2 << 4 | 2 << 16);
  w.push_back(0x401000); // The address.
  // String argument (6), 1 word, name "file" (3), value slot 19.
  w.push_back(6 | 1 << 4 | 3 << 16 | uint64_t(19) << 32);
  // Uint32 argument (2), 1 word, name "line" (4), value 7 in bits 32-63.
  w.push_back(2 | 1 << 4 | 4 << 16 | uint64_t(7) << 32);
  // Bool argument (9), 1 word, name "inlined" (5), false in bit 32.
  w.push_back(9 | 1 << 4 | 5 << 16);
  w.push_back(50); // End timestamp.
  FxtOptions full;
  full.sliceArgs = FxtSliceArgs::Full;
  EXPECT_EQ(toWords(writeToString(b.model, full)), w);
}

TEST(FxtWriter, GapInstantAndDecodeErrorWordByWord) {
  ModelBuilder b;
  b.model.pid = 7;
  b.model.processName = "p";
  ThreadModel &thread = b.thread(8);
  b.frame(ModelBuilder::segment(thread, 0, 5), "[untraced]", 0, 5,
          Frame::NoParent, FrameKind::Untraced);
  Segment &second = ModelBuilder::segment(thread, 9, 20);
  second.gapReason = "overflow";
  b.frame(second, "[decode error: x]", 9, 20, Frame::NoParent,
          FrameKind::DecodeError);

  Words w;
  appendPreamble(w, 7, "p");
  appendThread(w, 1, 7, 8);
  appendStringRecord(w, 18, "[untraced]");
  // Complete event, 3 words, no args (no address), category
  // "magic-trace,untraced" (14), name slot 18.
  w.push_back(4 | 3 << 4 | 4 << 16 | 1 << 24 | uint64_t(14) << 32 |
              uint64_t(18) << 48);
  w.push_back(0); // Begin.
  w.push_back(5); // End.
  // Instant event (0), 4 words, 1 arg, thread 1, category 1, name "[gap]" (8).
  w.push_back(4 | 4 << 4 | 0 << 16 | 1 << 20 | 1 << 24 | uint64_t(1) << 32 |
              uint64_t(8) << 48);
  w.push_back(9); // At the start of the segment after the gap.
  // String argument, 2 words, name "reason" (7), inline value of 8 bytes.
  w.push_back(6 | 2 << 4 | 7 << 16 | uint64_t(0x8000 | 8) << 32);
  appendText(w, "overflow");
  appendStringRecord(w, 19, "[decode error: x]");
  // Category "magic-trace,decode-error" (16).
  w.push_back(4 | 3 << 4 | 4 << 16 | 1 << 24 | uint64_t(16) << 32 |
              uint64_t(19) << 48);
  w.push_back(9);  // Begin.
  w.push_back(20); // End.
  // The error again as an instant event (0), 2 words, no args, category 1.
  w.push_back(4 | 2 << 4 | 0 << 16 | 1 << 24 | uint64_t(1) << 32 |
              uint64_t(19) << 48);
  w.push_back(9);

  EXPECT_EQ(toWords(writeToString(b.model)), w);
}

/// A model with nesting, inlined frames and several segments; the reader's
/// events must match the frames one for one.
TEST(FxtWriter, ReaderSeesEveryFrameWithItsNesting) {
  ModelBuilder b;
  b.model.pid = 1;
  ThreadModel &thread = b.thread(2);
  thread.name = "worker";
  Segment &seg = ModelBuilder::segment(thread, 0, 100);
  b.frame(seg, "main", 0, 100);
  b.frame(seg, "f", 10, 40, 0);
  b.frame(seg, "g", 12, 30, 1, FrameKind::Inlined);
  b.frame(seg, "f", 40, 40, 0); // Zero length sibling.
  b.frame(seg, "h", 50, 100, 0);
  Segment &next = ModelBuilder::segment(thread, 100, 120);
  next.stitchedToPrevious = true;
  next.frames.setInferred(b.frame(next, "main", 100, 120).index, true);

  FxtOptions full;
  full.sliceArgs = FxtSliceArgs::Full;
  std::string bytes = writeToString(b.model, full);
  auto trace = readFxt(asBytes(bytes));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  std::vector<const FxtEvent *> complete;
  for (const FxtEvent &e : trace->events)
    if (e.type == EventType::DurationComplete)
      complete.push_back(&e);
  ASSERT_EQ(complete.size(), 6u);
  const unsigned depths[] = {0, 1, 2, 1, 1, 0};
  // The model's times, but the zero-length f: it lasts 1 ns in the file,
  // so that Perfetto does not stack it (DisplayClock.h).
  const uint64_t ends[] = {100, 40, 30, 41, 100, 120};
  size_t i = 0;
  for (const Segment &s : thread.segments)
    for (const Frame &f : s.frames) {
      const FxtEvent &e = *complete[i];
      const FrameSite &site = thread.sites[f.site];
      EXPECT_EQ(e.name, b.model.strings.get(site.name));
      EXPECT_EQ(e.timestamp, f.begin);
      EXPECT_EQ(e.endTimestamp, ends[i]);
      EXPECT_EQ(e.depth, depths[i]);
      EXPECT_EQ(e.perfettoDepth, int(depths[i]));
      EXPECT_EQ(e.tid, 2u);
      EXPECT_EQ(e.category, "magic-trace");
      ASSERT_NE(e.arg("inlined"), nullptr);
      EXPECT_EQ(e.arg("inlined")->value, site.kind == FrameKind::Inlined);
      ++i;
    }
  ASSERT_EQ(trace->events.size(), 7u); // Plus the stitched-gap instant.
  EXPECT_EQ(trace->events[5].name, "[gap, stitched]");
  ASSERT_EQ(trace->objects.size(), 2u);
  EXPECT_EQ(trace->objects[1].name, "worker");
  EXPECT_EQ(trace->ticksPerSecond, 1000000000u);
}

/// Depth of every frame of `segment`, from its parent chain.
std::vector<int> modelDepths(const Segment &segment) {
  std::vector<int> depths;
  for (const Frame &frame : segment.frames)
    depths.push_back(
        frame.parent == Frame::NoParent ? 0 : depths[frame.parent] + 1);
  return depths;
}

/// What Perfetto draws is the model: random models where most frames begin
/// and end at a handful of timestamps (coarse or frozen clocks), written in
/// both slice modes and read with Perfetto's nesting rule. Every slice keeps
/// the model's depth, none is dropped, none is zero-length, and no displayed
/// time is before the model's.
TEST(FxtWriter, PerfettoNestsTheFileAsTheModel) {
  for (uint64_t seed : {1, 2, 3}) {
    for (uint64_t tick : {1, 1000, 1000000}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " tick " +
                   std::to_string(tick));
      test::SyntheticOptions options;
      options.seed = seed;
      options.threads = 2;
      options.framesPerThread = 3000;
      TraceModel model = test::makeSyntheticModel(options);
      // Coarsen the clock: times round down to `tick`, so that many frames
      // share a timestamp and many last zero time.
      for (ThreadModel &thread : model.threads)
        for (Segment &segment : thread.segments) {
          segment.begin = segment.begin / tick * tick;
          segment.end = segment.end / tick * tick;
          for (size_t i = 0; i < segment.frames.size(); ++i) {
            Frame frame = segment.frames[i];
            frame.begin = frame.begin / tick * tick;
            frame.end = frame.end / tick * tick;
            segment.frames.set(i, frame);
          }
        }
      ASSERT_FALSE(bool(validateModel(model)));
      for (FxtSliceArgs mode : {FxtSliceArgs::Compact, FxtSliceArgs::Full}) {
        FxtOptions fxt;
        fxt.sliceArgs = mode;
        auto trace = readFxt(asBytes(writeToString(model, fxt)));
        ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
        EXPECT_EQ(trace->perfettoDropped, 0u);
        EXPECT_EQ(trace->perfettoMisnested, 0u);
        size_t next = 0;
        for (const ThreadModel &thread : model.threads)
          for (const Segment &segment : thread.segments) {
            std::vector<int> depths = modelDepths(segment);
            for (size_t i = 0; i < segment.frames.size(); ++i) {
              while (next < trace->events.size() &&
                     trace->events[next].type != EventType::DurationComplete)
                ++next;
              ASSERT_LT(next, trace->events.size());
              const FxtEvent &event = trace->events[next++];
              const Frame &frame = segment.frames[i];
              ASSERT_EQ(event.tid, thread.tid);
              ASSERT_EQ(event.perfettoDepth, depths[i]) << "frame " << i;
              ASSERT_GE(event.timestamp, frame.begin);
              ASSERT_GE(event.endTimestamp, frame.end);
              ASSERT_GE(event.endTimestamp, event.timestamp + 1);
            }
          }
      }
    }
  }
}

/// The compact mode's 32 bytes a slice: on a model whose sites repeat, the
/// file is 4 words a frame plus each string once.
TEST(FxtWriter, CompactSlicesAreFourWords) {
  test::SyntheticOptions options;
  options.framesPerThread = 20000;
  TraceModel model = test::makeSyntheticModel(options);
  size_t frames = 0;
  for (const ThreadModel &thread : model.threads)
    for (const Segment &segment : thread.segments)
      frames += segment.frames.size();
  std::string bytes = writeToString(model);
  auto trace = readFxt(asBytes(bytes));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  size_t others = 0;
  for (const FxtEvent &event : trace->events)
    if (event.type == EventType::DurationComplete) {
      EXPECT_EQ(event.args.size(), 1u);
      EXPECT_EQ(event.args[0].name, "site");
    } else {
      ++others;
    }
  // What is not a string record or a slice: the preamble (7 words: magic,
  // initialization, the process), 8 words a thread (its record and object)
  // and 2-4 an instant (gaps
  // with their inline reasons).
  size_t rest = trace->words - trace->stringWords - 4 * frames;
  EXPECT_LE(rest, 7 + 8 * model.threads.size() + 4 * others);
}

TEST(FxtWriter, EmptyModelsAreValidTraces) {
  ModelBuilder b;
  auto noThreads = readFxt(asBytes(writeToString(b.model)));
  ASSERT_TRUE(bool(noThreads)) << toString(noThreads.takeError());
  EXPECT_EQ(noThreads->events.size(), 0u);
  ThreadModel &thread = b.thread(5);
  ModelBuilder::segment(thread, 0, 0);
  ModelBuilder::segment(thread, 3, 3);
  auto noFrames = readFxt(asBytes(writeToString(b.model)));
  ASSERT_TRUE(bool(noFrames)) << toString(noFrames.takeError());
  ASSERT_EQ(noFrames->events.size(), 1u); // The gap.
  EXPECT_EQ(noFrames->events[0].name, "[gap]");
}

TEST(FxtWriter, ThousandsOfThreadsRebindThreadSlots) {
  // Thousands of threads: far more than the 255-entry thread table.
  const uint64_t Threads = 5000;
  ModelBuilder b;
  b.model.pid = 10;
  for (uint64_t t = 0; t < Threads; ++t)
    b.frame(ModelBuilder::segment(b.thread(1000 + t), t, t + 1), "run", t,
            t + 1);
  std::string bytes = writeToString(b.model);
  auto trace = readFxt(asBytes(bytes));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  EXPECT_EQ(trace->threadsWithEvents, Threads);
  EXPECT_EQ(trace->threadRecords, Threads);
  ASSERT_EQ(trace->events.size(), Threads);
  for (uint64_t t = 0; t < Threads; ++t) {
    EXPECT_EQ(trace->events[t].tid, 1000 + t);
    EXPECT_EQ(trace->events[t].pid, 10u);
    EXPECT_EQ(trace->events[t].timestamp, t);
  }
}

TEST(FxtWriter, MoreStringsThanTheTableHoldsRebindSlots) {
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 100000);
  const size_t count = 40000; // More than the 32767 table slots.
  for (size_t i = 0; i < count; ++i) {
    auto f = b.frame(seg, "fn" + std::to_string(i), 2 * i, 2 * i + 1);
    b.place(f, 0, "file" + std::to_string(i % 50000), 0);
  }
  // Names used again after their slot was re-bound.
  b.frame(seg, "fn0", 2 * count, 2 * count + 1);
  for (FxtSliceArgs mode : {FxtSliceArgs::Compact, FxtSliceArgs::Full}) {
    FxtOptions fxt;
    fxt.sliceArgs = mode;
    // The file is the whole site string (no line, no address).
    const char *arg = mode == FxtSliceArgs::Full ? "file" : "site";
    std::string bytes = writeToString(b.model, fxt);
    auto trace = readFxt(asBytes(bytes));
    ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
    ASSERT_EQ(trace->events.size(), count + 1);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(trace->events[i].name, "fn" + std::to_string(i));
      ASSERT_EQ(trace->events[i].arg(arg)->text,
                "file" + std::to_string(i % 50000));
    }
    EXPECT_EQ(trace->events[count].name, "fn0");
  }
}

TEST(FxtWriter, RepeatedSitesStayCorrectWhenTheirStringsAreEvicted) {
  // The writer replays a site's last record while its name and file are
  // still bound; here the sites come back after 40,000 other strings evicted
  // them, and again right after (replayed).
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 1000000);
  uint64_t time = 0;
  auto repeated = [&](int round) {
    for (int k = 0; k < 3; ++k) {
      auto f = b.frame(seg, "hot" + std::to_string(k), time, time + 1);
      b.place(f, 0x1000 + k, "hot.c", 10 + k);
      time += 2;
    }
  };
  for (int round = 0; round < 3; ++round) {
    repeated(round);
    repeated(round);
    for (int i = 0; i < 20000; ++i) {
      auto f =
          b.frame(seg, "cold" + std::to_string(round) + "_" + std::to_string(i),
                  time, time + 1);
      b.place(f, 0, "cold" + std::to_string(i) + ".c", 1);
      time += 2;
    }
  }
  seg.end = time;
  const ThreadModel &thread = b.model.threads[0];
  for (FxtSliceArgs mode : {FxtSliceArgs::Compact, FxtSliceArgs::Full}) {
    FxtOptions fxt;
    fxt.sliceArgs = mode;
    std::string bytes = writeToString(b.model, fxt);
    auto trace = readFxt(asBytes(bytes));
    ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
    ASSERT_EQ(trace->events.size(), seg.frames.size());
    for (size_t i = 0; i < seg.frames.size(); ++i) {
      const FrameSite &site = thread.sites[seg.frames[i].site];
      const FxtEvent &e = trace->events[i];
      ASSERT_EQ(e.name, b.model.strings.get(site.name)) << "event " << i;
      ASSERT_EQ(e.timestamp, seg.frames[i].begin) << "event " << i;
      ASSERT_EQ(e.endTimestamp, seg.frames[i].end) << "event " << i;
      std::string file = b.model.strings.get(site.file).str();
      if (mode == FxtSliceArgs::Compact) {
        std::string want = file + ":" + std::to_string(site.line);
        if (site.address)
          want += " 0x" + llvm::utohexstr(site.address, true);
        ASSERT_NE(e.arg("site"), nullptr) << "event " << i;
        ASSERT_EQ(e.arg("site")->text, want) << "event " << i;
        continue;
      }
      ASSERT_NE(e.arg("file"), nullptr) << "event " << i;
      ASSERT_EQ(e.arg("file")->text, file) << "event " << i;
      ASSERT_NE(e.arg("line"), nullptr) << "event " << i;
      ASSERT_EQ(e.arg("line")->value, site.line) << "event " << i;
    }
  }
}

TEST(FxtWriter, DisplayedEndsFarPastTheModelsKeepTheirValue) {
  // 70,000 leaves that begin and end at 0 inside a frame that does too:
  // each leaf is shown 1 ns after the one before (docs/formats.md,
  // "Displayed times"), so the outer frame's displayed end is 70,000 ns
  // past its model end, more than the writer keeps in 16 bits.
  const uint64_t Leaves = 70000;
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 0);
  b.frame(seg, "outer", 0, 0);
  for (uint64_t i = 0; i < Leaves; ++i)
    b.frame(seg, "leaf", 0, 0, /*parent=*/0);
  ASSERT_FALSE(bool(validateModel(b.model)));
  auto trace = readFxt(asBytes(writeToString(b.model)));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  ASSERT_EQ(trace->events.size(), Leaves + 1);
  EXPECT_EQ(trace->events[0].name, "outer");
  EXPECT_EQ(trace->events[0].timestamp, 0u);
  EXPECT_EQ(trace->events[0].endTimestamp, Leaves);
  for (uint64_t i = 0; i < Leaves; ++i) {
    const FxtEvent &leaf = trace->events[1 + i];
    ASSERT_EQ(leaf.timestamp, i) << "leaf " << i;
    ASSERT_EQ(leaf.endTimestamp, i + 1) << "leaf " << i;
    ASSERT_EQ(leaf.perfettoDepth, 1) << "leaf " << i;
  }
  EXPECT_EQ(trace->perfettoDropped, 0u);
}

TEST(FxtWriter, DisplayedEndsKeepTheirValueWhereTheClockHasDrifted) {
  // 70,000 zero-length leaves push the displayed clock 70,000 ns past the
  // model's; frames after them begin that far past. "mid" lasts 0 ns (shown
  // 1 ns: its end is as far past as its begin, plus 1), "late" ends where
  // the model's clock has caught up (its end is shown at the model's: 70,001
  // ns less far past than its begin), and "outer" ends later still.
  const uint64_t Leaves = 70000;
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 200000);
  b.frame(seg, "outer", 0, 200000);
  for (uint64_t i = 0; i < Leaves; ++i)
    b.frame(seg, "leaf", 0, 0, /*parent=*/0);
  b.frame(seg, "mid", 0, 0, /*parent=*/0);
  b.frame(seg, "late", 0, 150000, /*parent=*/0);
  ASSERT_FALSE(bool(validateModel(b.model)));
  auto trace = readFxt(asBytes(writeToString(b.model)));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  ASSERT_EQ(trace->events.size(), Leaves + 3);
  EXPECT_EQ(trace->events[0].timestamp, 0u);
  EXPECT_EQ(trace->events[0].endTimestamp, 200000u);
  EXPECT_EQ(trace->events[Leaves].endTimestamp, Leaves);
  const FxtEvent &mid = trace->events[Leaves + 1];
  EXPECT_EQ(mid.name, "mid");
  EXPECT_EQ(mid.timestamp, Leaves);
  EXPECT_EQ(mid.endTimestamp, Leaves + 1);
  const FxtEvent &late = trace->events[Leaves + 2];
  EXPECT_EQ(late.name, "late");
  EXPECT_EQ(late.timestamp, Leaves + 1);
  EXPECT_EQ(late.endTimestamp, 150000u);
  EXPECT_EQ(late.perfettoDepth, 1);
  EXPECT_EQ(trace->perfettoDropped, 0u);
}

/// docs/formats.md, "Displayed times", walked here on its own: each event
/// in pre-order (a segment's begin, then each frame's begin and end) is
/// shown at the model's time, or at the previous event's if that is later,
/// plus 1 ns when it ends a frame without children; the clock goes on from
/// segment to segment of a thread. Per frame: {displayed begin, end}.
namespace {

std::vector<std::pair<uint64_t, uint64_t>>
displayedByTheRule(const ThreadModel &thread) {
  std::vector<std::pair<uint64_t, uint64_t>> shown;
  uint64_t last = 0;
  auto show = [&](uint64_t ns, uint64_t gap) {
    last = std::max(ns, last + gap);
    return last;
  };
  for (const Segment &segment : thread.segments) {
    size_t base = shown.size();
    show(segment.begin, 0);
    std::vector<uint32_t> stack;
    uint32_t justBegun = UINT32_MAX;
    auto close = [&] {
      uint32_t top = stack.back();
      stack.pop_back();
      shown[base + top].second =
          show(segment.frames[top].end, justBegun == top ? 1 : 0);
      justBegun = UINT32_MAX;
    };
    for (uint32_t i = 0; i < segment.frames.size(); ++i) {
      while (!stack.empty() && stack.back() != segment.frames[i].parent)
        close();
      shown.push_back({show(segment.frames[i].begin, 0), 0});
      stack.push_back(i);
      justBegun = i;
    }
    while (!stack.empty())
      close();
  }
  return shown;
}

} // namespace

TEST(FxtWriter, BigModelsPlaceEachThreadAheadAsTheRuleSays) {
  // Over 1 M frames, each thread's displayed times are placed on another
  // core while the thread before is written, a clock per segment going on
  // from the segment before. On a coarse clock (most frames share a
  // timestamp, so the displayed clock runs ahead of the model's across
  // segments), every slice is where the rule, walked on its own, puts it.
  test::SyntheticOptions options;
  options.threads = 3;
  options.framesPerThread = 360000;
  options.framesPerSegment = 50000;
  TraceModel model = test::makeSyntheticModel(options);
  for (ThreadModel &thread : model.threads)
    for (Segment &segment : thread.segments) {
      segment.begin = segment.begin / 100000 * 100000;
      segment.end = segment.end / 100000 * 100000;
      for (size_t i = 0; i < segment.frames.size(); ++i) {
        Frame frame = segment.frames[i];
        frame.begin = frame.begin / 100000 * 100000;
        frame.end = frame.end / 100000 * 100000;
        segment.frames.set(i, frame);
      }
    }
  ASSERT_FALSE(bool(validateModel(model)));
  auto trace = readFxt(asBytes(writeToString(model)));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  EXPECT_EQ(trace->perfettoDropped, 0u);
  size_t next = 0, ahead = 0;
  for (const ThreadModel &thread : model.threads) {
    ASSERT_GT(thread.segments.size(), 2u);
    std::vector<std::pair<uint64_t, uint64_t>> shown =
        displayedByTheRule(thread);
    size_t frame = 0;
    for (const Segment &segment : thread.segments)
      for (size_t i = 0; i < segment.frames.size(); ++i, ++frame) {
        while (next < trace->events.size() &&
               trace->events[next].type != EventType::DurationComplete)
          ++next;
        ASSERT_LT(next, trace->events.size());
        const FxtEvent &event = trace->events[next++];
        ASSERT_EQ(event.tid, thread.tid);
        ASSERT_EQ(event.timestamp, shown[frame].first) << "frame " << frame;
        ASSERT_EQ(event.endTimestamp, shown[frame].second) << "frame " << frame;
        ahead += event.timestamp > segment.frames[i].begin;
      }
  }
  // The coarse clock did move displayed times past the model's.
  EXPECT_GT(ahead, 1000u);
}

TEST(FxtWriter, HugeNameIsTruncatedToTheStringLimit) {
  // magic-trace issue #286: an 805 KB symbol name crashed its writer. Put a
  // 3-byte UTF-8 character across the cut point to check it is not split.
  std::string name(805 * 1024, 'x');
  name.replace(31996, 3, "\xe2\x82\xac"); // U+20AC at bytes 31996-31998.
  ModelBuilder b;
  b.frame(ModelBuilder::segment(b.thread(1), 0, 10), name, 0, 10);
  std::string bytes = writeToString(b.model);
  auto trace = readFxt(asBytes(bytes));
  ASSERT_TRUE(bool(trace)) << toString(trace.takeError());
  ASSERT_EQ(trace->events.size(), 1u);
  const std::string &read = trace->events[0].name;
  EXPECT_LE(read.size(), 32000u);
  EXPECT_EQ(read, name.substr(0, 31996) + "...");
}

TEST(FxtWriter, TruncateUtf8KeepsShortTextAndWholeCharacters) {
  EXPECT_EQ(truncateUtf8("abc", 3), "abc");
  EXPECT_EQ(truncateUtf8("abcdefgh", 6), "abc...");
  EXPECT_EQ(truncateUtf8("ab\xc3\xa9xyz", 6), "ab...");
}

TEST(FxtWriter, GzipOutputInflatesToThePlainTrace) {
  if (!fxtGzipAvailable())
    GTEST_SKIP() << "libLLVM has no zlib";
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 1000);
  for (int i = 0; i < 100; ++i)
    b.frame(seg, "f" + std::to_string(i % 7), 10 * i, 10 * i + 5);
  std::string plain = writeToString(b.model);
  FxtOptions options;
  options.gzip = true;
  std::string gz = writeToString(b.model, options);
  EXPECT_LT(gz.size(), plain.size());
  auto inflated = gunzip(asBytes(gz));
  ASSERT_TRUE(bool(inflated)) << toString(inflated.takeError());
  EXPECT_EQ(std::string(inflated->begin(), inflated->end()), plain);
}

TEST(FxtWriter, InvalidModelIsAnErrorNotAFile) {
  ModelBuilder b;
  Segment &seg = ModelBuilder::segment(b.thread(1), 0, 100);
  b.frame(seg, "parent", 10, 20);
  b.frame(seg, "child", 15, 30, 0); // Ends after its parent.
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::Error err = writeFxt(b.model, os);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(toString(std::move(err)).find("not inside parent"),
            std::string::npos);
  EXPECT_TRUE(out.empty());
}

} // namespace
