//===- ViewSupportTest.cpp - What the views count per function ------------===//
//
// The model's frames summed per function as report --top and diff count
// them (calls are the call tree's frames, a recursive call's time is in its
// caller's total already, a frame continued across a stitched gap is one
// call), how a user's FUNCTION names a function, and what --annotate says
// when it names none, or several.
//
//===----------------------------------------------------------------------===//
#include "../../core/lib/views/ViewSupport.h"
#include "../../core/lib/views/ExecutedCode.h"

#include "magic_trace/Annotate.h"
#include "magic_trace/Decoder.h"

#include <gtest/gtest.h>

using namespace magic_trace;
using namespace magic_trace::views;

namespace {

/// main [0,100] { rec [10,60] { rec [20,50] { leaf [30,40] } },
///                rec [60,70] }
/// then a stitched segment whose first frame continues main: [100,120].
TraceModel recursiveModel() {
  TraceModel model;
  ThreadModel &thread = model.threads.emplace_back();
  thread.tid = 7;
  auto add = [&](Segment &segment, llvm::StringRef name, uint64_t begin,
                 uint64_t end, uint32_t parent) {
    FrameSite site;
    site.name = model.strings.intern(name);
    Frame frame;
    frame.site = thread.sites.intern(site);
    frame.begin = begin;
    frame.end = end;
    frame.parent = parent;
    segment.frames.push_back(frame);
  };
  Segment &first = thread.segments.emplace_back();
  first.end = 100;
  add(first, "main", 0, 100, Frame::NoParent);
  add(first, "rec", 10, 60, 0);
  add(first, "rec", 20, 50, 1);
  add(first, "leaf", 30, 40, 2);
  add(first, "rec", 60, 70, 0);
  Segment &second = thread.segments.emplace_back();
  second.begin = 100;
  second.end = 120;
  second.stitchedToPrevious = true;
  second.continuedFrames = 1;
  add(second, "main", 100, 120, Frame::NoParent);
  return model;
}

TEST(ViewSupport, FramesSumPerFunction) {
  std::map<std::string, FrameTotals> totals = frameTotals(recursiveModel(), 0);
  ASSERT_EQ(totals.size(), 3u);
  // main: one activation in two pieces; self is what its callees left.
  EXPECT_EQ(totals["main"].calls, 1u);
  EXPECT_EQ(totals["main"].selfNs, (100u - 50 - 10) + 20);
  EXPECT_EQ(totals["main"].totalNs, 100u + 20);
  // rec: three frames; the inner one's time is in the outer one's total.
  EXPECT_EQ(totals["rec"].calls, 3u);
  EXPECT_EQ(totals["rec"].selfNs, (50u - 30) + (30 - 10) + 10);
  EXPECT_EQ(totals["rec"].totalNs, 50u + 10);
  EXPECT_EQ(totals["leaf"].calls, 1u);
  EXPECT_EQ(totals["leaf"].selfNs, 10u);
  EXPECT_EQ(totals["leaf"].totalNs, 10u);
  // One thread by its tid; another tid has nothing.
  EXPECT_EQ(frameTotals(recursiveModel(), 7).size(), 3u);
  EXPECT_TRUE(frameTotals(recursiveModel(), 8).empty());
}

TEST(ViewSupport, AFunctionIsNamedWithOrWithoutItsParameters) {
  EXPECT_EQ(withoutParameters("fib(int)"), "fib");
  EXPECT_EQ(withoutParameters("ns::twice<long>(long) const"),
            "ns::twice<long>");
  EXPECT_EQ(withoutParameters("Functor::operator()(int)"),
            "Functor::operator()");
  EXPECT_EQ(withoutParameters("(anonymous namespace)::step(int)"),
            "(anonymous namespace)::step");
  EXPECT_EQ(withoutParameters("main"), "main");
  EXPECT_EQ(withoutParameters("[jit 0x4000]"), "[jit 0x4000]");
  EXPECT_TRUE(namesFunction("fib", "fib(int)"));
  EXPECT_TRUE(namesFunction("fib(int)", "fib(int)"));
  EXPECT_FALSE(namesFunction("fi", "fib(int)"));
  EXPECT_FALSE(namesFunction("twice", "ns::twice<long>(long)"));
}

TEST(ViewSupport, ThreadsAreChecked) {
  TraceModel model = recursiveModel();
  EXPECT_FALSE(bool(checkThread(model, 0)));
  EXPECT_FALSE(bool(checkThread(model, 7)));
  llvm::Error missing = checkThread(model, 9);
  EXPECT_EQ(llvm::toString(std::move(missing)),
            "the snapshot has no thread 9 in its window (see 'magic-trace "
            "report' for its threads)");
}

/// A snapshot with no trace and no module, and a model whose one thread
/// ran f(int) and f(long): FUNCTION is resolved against the model before
/// anything is decoded.
TEST(ViewSupport, AnnotateNamesWhatRanOrSaysWhy) {
  Snapshot snapshot;
  snapshot.cpu.vendor = kNoErrataVendor;
  TraceModel model;
  ThreadModel &thread = model.threads.emplace_back();
  thread.tid = 3;
  Segment &segment = thread.segments.emplace_back();
  for (const char *name : {"f(int)", "f(long)"}) {
    FrameSite site;
    site.name = model.strings.intern(name);
    Frame frame;
    frame.site = thread.sites.intern(site);
    frame.parent = Frame::NoParent;
    segment.frames.push_back(frame);
  }
  auto errorOf = [&](const char *function, uint64_t tid = 0) {
    AnnotateOptions options;
    options.function = function;
    options.tid = tid;
    llvm::Expected<Annotation> annotation =
        annotateFunction(snapshot, model, nullptr, options);
    EXPECT_FALSE(bool(annotation));
    return annotation ? std::string() : llvm::toString(annotation.takeError());
  };
  EXPECT_EQ(errorOf("f"), "'f' names 2 functions that ran: f(int), f(long) "
                          "(give one in full, in quotes)");
  EXPECT_EQ(errorOf("g"), "no function 'g' in the snapshot's modules (check "
                          "the name; 'magic-trace report --top' lists the "
                          "functions that ran)");
  EXPECT_EQ(errorOf("f(int)", 4),
            "the snapshot has no thread 4 in its window (see 'magic-trace "
            "report' for its threads)");
  // Named in full, it is one function; it ran no instruction here.
  EXPECT_EQ(errorOf("f(int)"),
            "'f(int)' ran no instruction in the snapshot's window (its frame "
            "there is where the snapshot stopped, at its entry; annotate it "
            "in a later snapshot)");
}

} // namespace
