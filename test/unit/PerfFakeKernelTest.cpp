//===- PerfFakeKernelTest.cpp - The perf backend on a fake kernel ---------===//
//
// The recorder against FakeKernel (the kernel's rules, see FakeKernel.h) with
// the PMU of test/unit/fixtures/sysfs-skylake. The PT is real: what the
// emulator recorded of test programs, cut at its PSBs into the stretches a
// thread runs on a CPU, written into the AUX pages as the hardware would.
// Expected instructions come from the emulator's ground truth.
//
//===----------------------------------------------------------------------===//
#include "PerfFakeKernelSupport.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace magic_trace;
using magic_trace::testing::FakeKernel;

namespace {

using namespace perf_fake;

TEST(PerfFakeKernel, KernelRules) {
  auto kernel = std::make_shared<FakeKernel>(skylake());
  kernel->addThread(kPid, kPid);
  perf_event_attr attr{};
  attr.inherit = 1;
  // perf_mmap: EINVAL for an inherited per-thread (cpu = -1) event.
  auto perThread = kernel->perfEventOpen(attr, kPid, -1);
  ASSERT_TRUE(bool(perThread));
  EXPECT_EQ(kernel->mmap(*perThread, 2 * 4096, true, 0).getError(),
            std::errc::invalid_argument);
  // Exclusive PMU: the thread already has a PT event covering every CPU.
  EXPECT_EQ(kernel->perfEventOpen(attr, kPid, 0).getError(),
            std::errc::device_or_resource_busy);
  kernel->close(*perThread);
  EXPECT_EQ(kernel->perfEventOpen(attr, kPid + 1, 0).getError(),
            std::errc::no_such_process);
  // Above perf_event_paranoid 2, without CAP_PERFMON.
  FakeKernel::Options strict = skylake();
  strict.paranoid = 3;
  FakeKernel locked(strict);
  locked.addThread(kPid, kPid);
  EXPECT_EQ(locked.perfEventOpen(attr, kPid, 0).getError(),
            std::errc::permission_denied);
}

TEST(PerfFakeKernel, BudgetIsPerUserThenRlimit) {
  FakeKernel::Options options = skylake();
  options.memlockLimit = 0;
  FakeKernel kernel(options);
  kernel.addThread(kPid, kPid);
  perf_event_attr attr{};
  auto fd = kernel.perfEventOpen(attr, kPid, 0);
  ASSERT_TRUE(bool(fd));
  auto base = kernel.mmap(*fd, 17 * 4096, true, 0);
  ASSERT_TRUE(bool(base));
  auto &page = *static_cast<perf_event_mmap_page *>(*base);
  page.aux_offset = 17 * 4096;
  page.aux_size = 1 << 20; // 1 MiB + 68 KiB > 2 x 516 KiB.
  EXPECT_EQ(kernel.mmap(*fd, 1 << 20, false, 17 * 4096).getError(),
            std::errc::operation_not_permitted);
  page.aux_size = 512 << 10;
  EXPECT_TRUE(bool(kernel.mmap(*fd, 512 << 10, false, 17 * 4096)));
  EXPECT_EQ(kernel.lockedBytes(), (17 * 4096) + (512 << 10));
}

TEST(PerfFakeKernel, ThreadStartedAfterAttachHasTraceAtFirstStop) {
  const EmulateResult &run = threadRecording();
  ASSERT_EQ(run.truth.size(), 2u);
  auto kernel = std::make_shared<FakeKernel>(skylake());
  uint32_t mainTid = uint32_t(run.truth[0].tid);
  kernel->addThread(kPid, mainTid);
  auto recorder = makeRecorder(kernel);
  ASSERT_TRUE(recorder);
  ASSERT_FALSE(bool(recorder->attach(kPid, {mainTid})));

  // main runs, creates the worker (clone copies the events), and the two
  // take turns on both CPUs.
  auto mainParts = stretches(run.snapshot.threads[0].bytes);
  auto workerParts = stretches(run.snapshot.threads[1].bytes);
  ASSERT_GE(mainParts.size(), 1u);
  ASSERT_GE(workerParts.size(), 1u);
  kernel->run(mainTid, 0, mainParts[0]);
  uint32_t worker = kernel->clone(mainTid);
  for (size_t i = 0; i < workerParts.size(); ++i)
    kernel->run(worker, unsigned(i % 2), workerParts[i]);
  for (size_t i = 1; i < mainParts.size(); ++i)
    kernel->run(mainTid, unsigned((i + 1) % 2), mainParts[i]);

  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces)) << llvm::toString(traces.takeError());
  EXPECT_TRUE(recorder->isTracing(worker));
  // The TSC read at the snapshot is the reference for 56-bit TSC packets.
  auto time = recorder->timeConversion();
  ASSERT_TRUE(bool(time)) << llvm::toString(time.takeError());
  EXPECT_EQ(time->tscReference, kernel->readTsc());
  EXPECT_NE(time->tscReference, 0u);
  const ThreadTrace *workerTrace = traceOf(*traces, worker);
  const ThreadTrace *mainTrace = traceOf(*traces, mainTid);
  ASSERT_TRUE(workerTrace);
  ASSERT_TRUE(mainTrace);
  for (auto [trace, index] :
       {std::pair{workerTrace, size_t(1)}, std::pair{mainTrace, size_t(0)}}) {
    std::vector<uint64_t> insns;
    ThreadDecode decode = decodeAs(run, *trace, index, &insns);
    EXPECT_TRUE(decode.errors.empty()) << decode.errors.front().message;
    EXPECT_EQ(countKind(decode, ItemKind::Overflow), 0u);
    EXPECT_EQ(insns, run.truth[index].insns) << "thread " << index;
  }
}

TEST(PerfFakeKernel, AnonymousMemoryMadeExecutableIsReportedWithItsTime) {
  // The kernel writes PERF_RECORD_MMAP2 at each mprotect that leaves memory
  // executable (mm/mprotect.c, mprotect_fixup: perf_event_mmap); the
  // sideband reader keeps those of memory no file backs, with their times.
  const EmulateResult &run = threadRecording();
  auto kernel = std::make_shared<FakeKernel>(skylake());
  uint32_t tid = uint32_t(run.truth[0].tid);
  kernel->addThread(kPid, tid);
  auto recorder = makeRecorder(kernel);
  ASSERT_TRUE(recorder);
  ASSERT_FALSE(bool(recorder->attach(kPid, {tid})));
  auto parts = stretches(run.snapshot.threads[0].bytes);
  ASSERT_GE(parts.size(), 1u);
  kernel->mapExecutable(tid, 0, 5000, 0x50000000, 0x1000, "//anon");
  kernel->mapExecutable(tid, 1, 7000, 0x7f0000000000, 0x2000, "/usr/lib/x.so");
  kernel->mapExecutable(tid, 1, 9000, 0x50010000, 0x3000, "[anon:jit]");
  kernel->run(tid, 0, parts[0]);
  ASSERT_TRUE(bool(recorder->snapshot()));
  std::vector<ExecMapping> mappings = recorder->execMappings();
  ASSERT_EQ(mappings.size(), 2u);
  EXPECT_EQ(mappings[0].timeNs, 5000u);
  EXPECT_EQ(mappings[0].address, 0x50000000u);
  EXPECT_EQ(mappings[0].size, 0x1000u);
  EXPECT_EQ(mappings[1].timeNs, 9000u);
  EXPECT_EQ(mappings[1].address, 0x50010000u);
  EXPECT_EQ(mappings[1].size, 0x3000u);
}

TEST(PerfFakeKernel, ExitedAndReusedThreads) {
  auto kernel = std::make_shared<FakeKernel>(skylake());
  kernel->addThread(kPid, kPid);
  auto recorder = makeRecorder(kernel);
  ASSERT_FALSE(bool(recorder->attach(kPid, {kPid})));
  std::vector<uint8_t> psb(32, 0);
  for (int i = 0; i < 16; i += 2)
    psb[i] = 0x02, psb[i + 1] = 0x82;
  uint32_t first = kernel->clone(kPid);
  kernel->run(first, 0, psb);
  kernel->exitThread(first);
  // The exited thread's trace stays in its CPU's ring until overwritten;
  // it holds no buffer of its own.
  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces));
  ASSERT_TRUE(traceOf(*traces, first));
  EXPECT_EQ(traceOf(*traces, first)->bytes, psb);
  uint64_t locked = kernel->lockedBytes();

  // The tid is reused by a new thread: traced too (inherit), no new buffer.
  std::vector<uint8_t> again = psb;
  again.push_back(0x00); // A PAD, to tell the lives apart.
  ASSERT_EQ(kernel->clone(kPid, first), first);
  kernel->run(first, 1, again);
  traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces));
  ASSERT_TRUE(traceOf(*traces, first));
  std::vector<uint8_t> bytes = traceOf(*traces, first)->bytes;
  ASSERT_GE(bytes.size(), again.size());
  EXPECT_EQ(std::vector<uint8_t>(bytes.end() - again.size(), bytes.end()),
            again);
  EXPECT_EQ(kernel->lockedBytes(), locked);
}

TEST(PerfFakeKernel, PidOutsideOurNamespaceIsRefused) {
  llvm::SmallString<64> root;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fake-proc", root));
  ASSERT_FALSE(llvm::sys::fs::create_directories(root + "/4000/task/4001"));
  EXPECT_FALSE(bool(checkSameNamespace(4000, root, {4001})));
  // The debugger's tids name no task of that pid here (another namespace).
  std::string message =
      llvm::toString(checkSameNamespace(4000, root, {4001, 17}));
  EXPECT_NE(message.find("not in this PID namespace"), std::string::npos)
      << message;
  message = llvm::toString(checkSameNamespace(12, root, {12}));
  EXPECT_NE(message.find("remote or containerised"), std::string::npos);
  llvm::sys::fs::remove_directories(root);
}

TEST(PerfFakeKernel, ThreadKFailingDoesNotBlockThreadKPlusOne) {
  auto kernel = std::make_shared<FakeKernel>(skylake());
  for (uint32_t tid : {kPid, kPid + 1, kPid + 3})
    kernel->addThread(kPid, tid);
  auto recorder = makeRecorder(kernel);
  // kPid + 2 exited between the debugger's listing and the attach.
  llvm::Error error =
      recorder->attach(kPid, {kPid, kPid + 1, kPid + 2, kPid + 3});
  ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
  EXPECT_TRUE(recorder->isTracing(kPid + 1));
  EXPECT_FALSE(recorder->isTracing(kPid + 2));
  EXPECT_TRUE(recorder->isTracing(kPid + 3));
  ASSERT_EQ(recorder->notes().size(), 1u);
  EXPECT_NE(recorder->notes()[0].find("thread 4002 is not traced: thread 4002 "
                                      "exited"),
            std::string::npos)
      << recorder->notes()[0];
}

TEST(PerfFakeKernel, NoThreadTraceableSaysWhy) {
  FakeKernel::Options options = skylake();
  options.systemWidePt = true;
  auto kernel = std::make_shared<FakeKernel>(options);
  kernel->addThread(kPid, kPid);
  auto recorder = makeRecorder(kernel);
  std::string message = llvm::toString(recorder->attach(kPid, {kPid}));
  EXPECT_NE(message.find("in use by another tracer"), std::string::npos)
      << message;
  options.systemWidePt = false;
  options.paranoid = 3;
  kernel = std::make_shared<FakeKernel>(options);
  kernel->addThread(kPid, kPid);
  recorder = makeRecorder(kernel);
  message = llvm::toString(recorder->attach(kPid, {kPid}));
  EXPECT_NE(message.find("CAP_PERFMON"), std::string::npos) << message;
}

TEST(PerfFakeKernel, SixtyFourThreadsUnderTwoMiBBudget) {
  // 8 CPUs x 256 KiB = 2 MiB for the user, nothing beyond (RLIMIT_MEMLOCK 0).
  FakeKernel::Options options = skylake();
  options.cpus = 8;
  options.mlockKb = 256;
  options.memlockLimit = 0;
  auto kernel = std::make_shared<FakeKernel>(options);
  std::vector<uint64_t> tids;
  for (uint32_t i = 0; i < 64; ++i) {
    kernel->addThread(kPid, kPid + i);
    tids.push_back(kPid + i);
  }
  auto recorder = makeRecorder(kernel, 4 << 20);
  llvm::Error error = recorder->attach(kPid, tids);
  ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
  EXPECT_EQ(recorder->threadIds().size(), 64u);
  EXPECT_LE(kernel->lockedBytes(), uint64_t(2) << 20);
  // psb_period=3: a PSB every 16 KiB; every ring holds at least two.
  auto sizes = kernel->auxSizes();
  ASSERT_EQ(sizes.size(), 8u);
  for (auto [cpu, size] : sizes)
    EXPECT_GE(size, uint64_t(32) << 10) << "CPU " << cpu;
  // The data pages are perf's for perf_event_mlock_kb 256 (252 KiB, as a
  // power of two of pages: 128 KiB); the AUX gets the rest.
  EXPECT_EQ(recorder->plan().dataBytes, uint64_t(128) << 10);
  EXPECT_EQ(recorder->plan().auxBytes, uint64_t(64) << 10);
  ASSERT_FALSE(recorder->notes().empty());
  EXPECT_NE(recorder->notes().back().find("fits 64 KiB of AUX"),
            std::string::npos)
      << recorder->notes().back();
}

TEST(PerfFakeKernel, BudgetBelowTwoPsbPeriodsFailsClearly) {
  FakeKernel::Options options = skylake();
  options.mlockKb = 64;
  options.memlockLimit = 0;
  auto kernel = std::make_shared<FakeKernel>(options);
  kernel->addThread(kPid, kPid);
  auto recorder = makeRecorder(kernel);
  std::string message = llvm::toString(recorder->attach(kPid, {kPid}));
  EXPECT_NE(message.find("two PSB periods"), std::string::npos) << message;
  EXPECT_NE(message.find("perf_event_mlock_kb"), std::string::npos);
}

/// emu_thread's main thread, run stretch by stretch on CPU 0, with the
/// kernel's record of stretch `lost` flagged TRUNCATED; `onlyPsbPlus`: the
/// hardware wrote that stretch's PSB+ and nothing after it. The recorder's
/// trace of it decoded, and what the stretches after the lost one decode to
/// on their own.
struct TruncatedRun {
  ThreadDecode decode;
  std::vector<uint64_t> insns, restInsns;
  uint64_t lostPieces = 0;
};
void runWithTruncated(size_t lost, bool onlyPsbPlus, TruncatedRun &result) {
  const EmulateResult &run = threadRecording();
  ASSERT_EQ(run.truth.size(), 2u);
  auto kernel = std::make_shared<FakeKernel>(skylake());
  uint32_t mainTid = uint32_t(run.truth[0].tid);
  kernel->addThread(kPid, mainTid);
  auto recorder = makeRecorder(kernel);
  ASSERT_FALSE(bool(recorder->attach(kPid, {mainTid})));
  auto parts = stretches(run.snapshot.threads[0].bytes);
  ASSERT_GE(parts.size(), lost + 2);
  static const uint8_t psbEnd[2] = {0x02, 0x23};
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<uint8_t> bytes = parts[i];
    if (i == lost && onlyPsbPlus)
      bytes.erase(std::search(bytes.begin(), bytes.end(), std::begin(psbEnd),
                              std::end(psbEnd)) +
                      2,
                  bytes.end());
    kernel->run(mainTid, 0, bytes, i == lost ? kAuxTruncated : 0);
  }
  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces)) << llvm::toString(traces.takeError());
  ASSERT_EQ(traces->size(), 1u);
  result.decode = decodeAs(run, traces->front(), 0, &result.insns);
  result.lostPieces = recorder->lostPieces();
  ThreadTrace rest;
  for (size_t i = lost + 1; i < parts.size(); ++i)
    rest.bytes.insert(rest.bytes.end(), parts[i].begin(), parts[i].end());
  decodeAs(run, rest, 0, &result.restInsns);
}

TEST(PerfFakeKernel, TruncatedAuxRecordShowsAsMarkedGap) {
  // The kernel says the first stretch was cut short (TRUNCATED): the trace
  // must say that something is missing after it.
  TruncatedRun result;
  runWithTruncated(0, false, result);
  if (HasFatalFailure())
    return;
  EXPECT_EQ(countKind(result.decode, ItemKind::Overflow), 1u);
  EXPECT_GT(result.lostPieces, 0u);
  // After the gap the trace is whole again: the stretches after the first,
  // on their own, are what the trace ends with, with no decode error.
  const auto &[insns, restInsns] = std::tie(result.insns, result.restInsns);
  EXPECT_TRUE(result.decode.errors.empty())
      << result.decode.errors.front().message;
  ASSERT_GE(insns.size(), restInsns.size());
  EXPECT_TRUE(std::equal(restInsns.begin(), restInsns.end(),
                         insns.end() - restInsns.size()));
}

// The hardware wrote a stretch's PSB+ and nothing after it (the kernel
// flags the record TRUNCATED): the OVF the recorder appends comes right
// before the next piece's PSB. libipt reports that overflow only after the
// next PSB+'s status updates; a decode that stopped at that PSB dropped it,
// joining the stretches around the loss into one (test/lit/perf/
// replay.test found it, with LLDB's decoder as the oracle).
TEST(PerfFakeKernel, StretchTruncatedToItsPsbPlusShowsAsMarkedGap) {
  TruncatedRun result;
  runWithTruncated(1, true, result);
  if (HasFatalFailure())
    return;
  EXPECT_EQ(countKind(result.decode, ItemKind::Overflow), 1u);
  EXPECT_TRUE(result.decode.errors.empty())
      << result.decode.errors.front().message;
  // The truth's first instructions, a hole, then the stretches after the
  // lost one.
  const auto &[insns, restInsns] = std::tie(result.insns, result.restInsns);
  const std::vector<uint64_t> &truth = threadRecording().truth[0].insns;
  ASSERT_GT(insns.size(), restInsns.size());
  ASSERT_LT(insns.size(), truth.size());
  size_t before = insns.size() - restInsns.size();
  EXPECT_TRUE(std::equal(insns.begin(), insns.begin() + before, truth.begin()));
  EXPECT_TRUE(
      std::equal(restInsns.begin(), restInsns.end(), insns.begin() + before));
  EXPECT_TRUE(std::equal(restInsns.begin(), restInsns.end(),
                         truth.end() - restInsns.size()));
}

TEST(PerfFakeKernel, LostAndPartialRecordsShowAsGaps) {
  auto kernel = std::make_shared<FakeKernel>(skylake());
  kernel->addThread(kPid, kPid);
  auto recorder = makeRecorder(kernel);
  ASSERT_FALSE(bool(recorder->attach(kPid, {kPid})));
  std::vector<uint8_t> psb = psbPacket();
  std::vector<uint8_t> ovf = {0x02, 0xf3};
  kernel->run(kPid, 0, psb, kAuxPartial);
  kernel->run(kPid, 0, psb);
  kernel->dropRecords(0, 1); // This stretch's AUX record is lost.
  kernel->run(kPid, 0, psb);
  kernel->run(kPid, 0, psb);
  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces));
  ASSERT_EQ(traces->size(), 1u);
  // PARTIAL: an OVF after the first stretch. The lost AUX record: whose
  // the third stretch was is unknown, so the fourth record's thread gets
  // only its own stretch (from the last PSB) after an OVF. A PSB, a
  // MODE.Exec and a PSBEND (splitPerCpu's sync point after an OVF) start
  // each stretch after a gap.
  std::vector<uint8_t> sync = psb;
  for (uint8_t byte : {0x99, 0x01, 0x02, 0x23})
    sync.push_back(byte);
  std::vector<uint8_t> want;
  for (const auto *part : {&psb, &ovf, &sync, &psb, &ovf, &sync, &psb})
    want.insert(want.end(), part->begin(), part->end());
  EXPECT_EQ(traces->front().bytes, want);
}

TEST(PerfFakeKernel, WrappedRingKeepsTheNewestFromAPsb) {
  const EmulateResult &run = longRecording();
  ASSERT_EQ(run.truth.size(), 1u);
  // Broadwell has no psb_period: the hardware's 2 KiB, so 8 KiB rings.
  FakeKernel::Options options = skylake();
  options.sysRoot = fixture("sysfs-broadwell");
  auto kernel = std::make_shared<FakeKernel>(options);
  uint32_t mainTid = uint32_t(run.truth[0].tid);
  kernel->addThread(kPid, mainTid);
  auto recorder = makeRecorder(kernel, 8 << 10);
  ASSERT_FALSE(bool(recorder->attach(kPid, {mainTid})));
  const std::vector<uint8_t> &bytes = run.snapshot.threads[0].bytes;
  ASSERT_GT(bytes.size(), size_t(8 << 10)) << "the recording is too short";
  for (const auto &part : stretches(bytes))
    kernel->run(mainTid, 0, part);
  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces));
  ASSERT_EQ(traces->size(), 1u);
  EXPECT_TRUE(traces->front().wrapped);
  std::vector<uint64_t> insns;
  ThreadDecode decode = decodeAs(run, traces->front(), 0, &insns);
  EXPECT_TRUE(decode.errors.empty());
  const std::vector<uint64_t> &all = run.truth[0].insns;
  ASSERT_LE(insns.size(), all.size());
  ASSERT_GT(insns.size(), 0u);
  EXPECT_TRUE(std::equal(insns.begin(), insns.end(), all.end() - insns.size()));
}

} // namespace
