// Unit tests for the perf dlfilter's parts that need no perf: how one
// thread's branch samples become the core's items (a block from each
// branch's target to the next branch, trace begin and end as enable and
// disable, a begin without an end as a loss), and the dlargs. The flags are
// perf_dlfilter.h's; each case is a short sample stream as perf script
// --itrace=be hands it over.
#ifdef MT_HAVE_PERF_DLFILTER
#include "FilterOptions.h"
#include "SampleItems.h"

extern "C" {
#include <perf/perf_dlfilter.h>
}

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace magic_trace;

namespace {

constexpr uint32_t Branch = PERF_DLFILTER_FLAG_BRANCH;
constexpr uint32_t Call = Branch | PERF_DLFILTER_FLAG_CALL;
constexpr uint32_t Return = Branch | PERF_DLFILTER_FLAG_RETURN;
constexpr uint32_t Begin = Branch | PERF_DLFILTER_FLAG_TRACE_BEGIN;
constexpr uint32_t SyscallEnd = Branch | PERF_DLFILTER_FLAG_CALL |
                                PERF_DLFILTER_FLAG_SYSCALLRET |
                                PERF_DLFILTER_FLAG_TRACE_END;
constexpr uint32_t AsyncEnd =
    Branch | PERF_DLFILTER_FLAG_ASYNC | PERF_DLFILTER_FLAG_TRACE_END;

struct Collect : ItemSink {
  std::vector<TraceItem> items;
  void consume(llvm::ArrayRef<TraceItem> batch,
               llvm::ArrayRef<DecodeError>) override {
    items.insert(items.end(), batch.begin(), batch.end());
  }
};

std::vector<TraceItem> itemsOf(SampleItems &thread) {
  Collect collect;
  thread.feed(collect);
  return collect.items;
}

ClassifiedInsn insn(BranchClass branch, uint8_t size) {
  ClassifiedInsn result;
  result.branch = branch;
  result.size = size;
  return result;
}

const ClassifiedInsn None;

TEST(PerfSampleItems, BlocksRunFromEachTargetToTheNextBranch) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None); // tr strt => 0x1000
  thread.add({0x1010, 0x2000, 110, Call},    // call 0x1010 => 0x2000
             insn(BranchClass::DirectCall, 5));
  thread.add({0x2008, 0x1015, 120, Return}, // ret 0x2008 => 0x1015
             insn(BranchClass::Return, 1));
  thread.add({0x1020, 0, 130, SyscallEnd}, // syscall, tr end
             insn(BranchClass::Syscall, 2));
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[0].kind, ItemKind::Enable);
  EXPECT_EQ(items[0].ip, 0x1000u);
  EXPECT_EQ(items[1].kind, ItemKind::Block);
  EXPECT_EQ(items[1].ip, 0x1000u);
  EXPECT_EQ(items[1].lastIp, 0x1010u);
  EXPECT_EQ(items[1].lastClass, BranchClass::DirectCall);
  EXPECT_EQ(items[1].lastSize, 5); // The call returns to 0x1015.
  EXPECT_EQ(items[1].timeNs, 100u);
  EXPECT_EQ(items[2].ip, 0x2000u);
  EXPECT_EQ(items[2].lastIp, 0x2008u);
  EXPECT_EQ(items[2].timeNs, 110u);
  EXPECT_EQ(items[3].ip, 0x1015u);
  EXPECT_EQ(items[3].lastClass, BranchClass::Syscall);
  // A syscall's TIP.PGD has no user IP.
  EXPECT_EQ(items[4].kind, ItemKind::Disable);
  EXPECT_EQ(items[4].ip, 0u);
  EXPECT_EQ(thread.blocks(), 3u);
  EXPECT_EQ(thread.losses(), 0u);
}

TEST(PerfSampleItems, BeginWithoutEndIsALoss) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.add({0x1010, 0x1100, 110, Branch}, insn(BranchClass::DirectJump, 2));
  // perf resynchronized after an overflow: a new begin, no end before it.
  thread.add({0, 0x3000, 200, Begin}, None);
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[2].kind, ItemKind::Overflow);
  EXPECT_EQ(items[2].ip, 0x3000u);
  EXPECT_EQ(items[3].kind, ItemKind::Enable);
  EXPECT_EQ(thread.losses(), 1u);
}

TEST(PerfSampleItems, BeginAfterEndIsNoLoss) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.add({0x1020, 0, 130, SyscallEnd}, insn(BranchClass::Syscall, 2));
  thread.add({0, 0x1022, 140, Begin}, None);
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[3].kind, ItemKind::Enable);
  EXPECT_EQ(thread.losses(), 0u);
}

TEST(PerfSampleItems, AsyncEndStopsBeforeTheInterruptedInstruction) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.add({0x1008, 0, 110, AsyncEnd}, None);
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[1].kind, ItemKind::Block);
  EXPECT_EQ(items[1].lastIp, 0x1007u); // 0x1008 did not run.
  EXPECT_EQ(items[2].kind, ItemKind::Disable);
  EXPECT_EQ(items[2].ip, 0x1008u); // As libipt's async disable.
}

TEST(PerfSampleItems, AsyncEndAtTheBlockStartRanNothing) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.add({0x1000, 0, 100, AsyncEnd}, None);
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].kind, ItemKind::Disable);
  EXPECT_EQ(thread.blocks(), 0u);
}

TEST(PerfSampleItems, SkippedSamplesStartTheNextStretchAtItsTarget) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.skip(); // Outside the time window.
  thread.add({0x2010, 0x3000, 300, Call}, insn(BranchClass::DirectCall, 5));
  thread.add({0x3004, 0x2015, 310, Return}, insn(BranchClass::Return, 1));
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[1].kind, ItemKind::Enable);
  EXPECT_EQ(items[1].ip, 0x3000u);
  EXPECT_EQ(items[2].ip, 0x3000u);
  EXPECT_EQ(items[2].lastIp, 0x3004u);
  EXPECT_EQ(thread.losses(), 0u);
}

TEST(PerfSampleItems, ABranchTheBlockCannotReachIsAloneInItsBlock) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.add({0x800, 0x5000, 110, Branch}, insn(BranchClass::DirectJump, 2));
  thread.add({0x5000 + (1 << 20), 0x6000, 120, Branch},
             insn(BranchClass::DirectJump, 2));
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[1].ip, 0x800u); // Before the start.
  EXPECT_EQ(items[1].lastIp, 0x800u);
  EXPECT_EQ(items[2].ip, 0x5000u + (1 << 20)); // A megabyte on.
}

TEST(PerfSampleItems, TimesNeverGoBack) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  thread.add({0x1010, 0x1100, 90, Branch}, insn(BranchClass::DirectJump, 2));
  thread.add({0x1110, 0x1200, 95, Branch}, insn(BranchClass::DirectJump, 2));
  std::vector<TraceItem> items = itemsOf(thread);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[2].timeNs, 100u);
}

TEST(PerfSampleItems, FeedEmptiesTheBuilder) {
  SampleItems thread(7);
  thread.add({0, 0x1000, 100, Begin}, None);
  EXPECT_EQ(itemsOf(thread).size(), 1u);
  EXPECT_TRUE(itemsOf(thread).empty());
}

llvm::Expected<FilterOptions> parse(std::vector<const char *> args) {
  return parseFilterOptions(args);
}

std::string errorOf(std::vector<const char *> args) {
  llvm::Expected<FilterOptions> options = parse(args);
  if (options)
    return "(no error)";
  return llvm::toString(options.takeError());
}

TEST(PerfFilterOptions, OutputAndFormatBySuffixOrName) {
  llvm::Expected<FilterOptions> options = parse({"out=t.json"});
  ASSERT_TRUE(bool(options)) << llvm::toString(options.takeError());
  EXPECT_EQ(options->format->name, "json");
  options = parse({"out=t.data", "format=folded"});
  ASSERT_TRUE(bool(options)) << llvm::toString(options.takeError());
  EXPECT_EQ(options->format->name, "folded");
}

TEST(PerfFilterOptions, TimesAsPerfPrintsThem) {
  llvm::Expected<FilterOptions> options =
      parse({"out=t.fxt", "time=969349.987563929,969350.5"});
  ASSERT_TRUE(bool(options)) << llvm::toString(options.takeError());
  EXPECT_EQ(options->beginNs, 969349987563929u);
  EXPECT_EQ(options->endNs, 969350500000000u);
  options = parse({"out=t.fxt", "time=,42ns"});
  ASSERT_TRUE(bool(options)) << llvm::toString(options.takeError());
  EXPECT_EQ(options->beginNs, 0u);
  EXPECT_EQ(options->endNs, 42u);
}

TEST(PerfFilterOptions, ThreadsAndProcess) {
  llvm::Expected<FilterOptions> options =
      parse({"out=t.fxt", "tid=4242,4243", "pid=4242", "stitch=0"});
  ASSERT_TRUE(bool(options)) << llvm::toString(options.takeError());
  EXPECT_EQ(options->tids.size(), 2u);
  EXPECT_EQ(options->pid, 4242u);
  EXPECT_FALSE(options->stitch);
}

TEST(PerfFilterOptions, NonsenseIsOneLineSayingWhatToPass) {
  EXPECT_EQ(errorOf({"out=t.fxt", "time=1.0000000001,"}),
            "bad time '1.0000000001' (use seconds as perf script prints them, "
            "like 969349.987563929)");
  EXPECT_EQ(errorOf({"out=t.fxt", "time=3"}),
            "time= wants BEGIN,END (either may be empty), not '3'");
  EXPECT_EQ(errorOf({"out=t.fxt", "pid=0"}),
            "pid= wants a process id, not '0'");
  EXPECT_EQ(errorOf({"out=t.fxt", "stitch=yes"}),
            "stitch= wants 0 or 1, not 'yes'");
  EXPECT_EQ(errorOf({"out="}).substr(0, 30), "dlarg 'out=' is not KEY=VALUE ");
  EXPECT_EQ(errorOf({}).substr(0, 10), "no output:");
}

TEST(PerfFilterOptions, DropModeNeedsNoOutput) {
  llvm::Expected<FilterOptions> options = parse({"drop=same-symbol"});
  ASSERT_TRUE(bool(options)) << llvm::toString(options.takeError());
  EXPECT_TRUE(options->dropSameSymbol);
  EXPECT_TRUE(options->output.empty());
}

TEST(PerfFilterOptions, SymfsAndItraceFromPerfsCommandLine) {
  std::string cmdline("perf\0script\0--symfs\0/s\0--itrace=be\0", 35);
  EXPECT_EQ(symfsFromCommandLine(cmdline), "/s");
  EXPECT_EQ(symfsFromCommandLine(std::string("perf\0--symfs=/t\0", 16)), "/t");
  EXPECT_FALSE(bool(checkItrace(cmdline)));
  llvm::Error error = checkItrace(std::string("perf\0--itrace=cr\0", 17));
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)).substr(0, 40),
            "--itrace=cr leaves out some branches, an");
  // Digits are periods (i100us), not letters.
  EXPECT_FALSE(bool(checkItrace(std::string("--itrace=i100usb", 16))));
}

} // namespace
#endif
