//===- PerfSidebandTest.cpp - The perf backend's sideband keeps up -------===//
//
// Issue 42: the kernel writes a 56-byte PERF_RECORD_AUX into a CPU ring's
// data pages at every switch-out of a traced thread and drops the newest
// records when they are full. The recorder sizes them as perf does and reads
// them as the target runs (core/lib/record/perf/Sideband.h), on FakeKernel,
// whose data pages overflow as the kernel's do (FakeKernel.h). The PT is the
// emulator's, and expected instructions its ground truth.
//
//===----------------------------------------------------------------------===//
#include "PerfFakeKernelSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <tuple>

namespace {

using namespace perf_fake;

/// attach's sizes for `options`, each ring's mapping within the budget.
BufferPlan attachedPlan(const FakeKernel::Options &options) {
  auto kernel = std::make_shared<FakeKernel>(options);
  kernel->addThread(kPid, kPid);
  auto recorder = makeRecorder(kernel, 4 << 20);
  if (!recorder)
    return {};
  llvm::Error error = recorder->attach(kPid, {kPid});
  EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
  uint64_t budget =
      options.mlockKb * 1024 * options.cpus + options.memlockLimit.value_or(0);
  EXPECT_LE(kernel->lockedBytes(), budget);
  BufferPlan plan = recorder->plan();
  plan.note = recorder->notes().empty() ? "" : recorder->notes().back();
  return plan;
}

TEST(PerfFakeKernel, SidebandSizedAsPerfWithinTheBudget) {
  // The kernel's default perf_event_mlock_kb (516): perf's 512 KiB.
  FakeKernel::Options options = skylake();
  FakeKernel kernel(options);
  EXPECT_EQ(perfDataBytes(kernel), uint64_t(512) << 10);
  BufferPlan plan = attachedPlan(options);
  EXPECT_EQ(plan.dataBytes, uint64_t(512) << 10);
  EXPECT_EQ(plan.auxBytes, uint64_t(4) << 20);
  std::string doctor;
  for (const std::string &line :
       describePerfRecording(kernel, TimerResolution::Normal, 4 << 20))
    doctor += line + "\n";
  EXPECT_NE(doctor.find("sideband 512 KiB + AUX 4096 KiB"), std::string::npos)
      << doctor;

  // 644 KiB per CPU: 512 KiB of data pages would leave 128 KiB of AUX, so
  // they go down to perf's unprivileged snapshot size, for 256 KiB.
  options.cpus = 8;
  options.memlockLimit = uint64_t(1) << 20;
  plan = attachedPlan(options);
  EXPECT_EQ(plan.dataBytes, uint64_t(256) << 10);
  EXPECT_EQ(plan.auxBytes, uint64_t(256) << 10);

  // 290 KiB per CPU: 256 KiB of data pages leave no two PSB periods (32
  // KiB): 128 KiB, with a note.
  options.cpus = 2;
  options.mlockKb = 290;
  options.memlockLimit = 0;
  plan = attachedPlan(options);
  EXPECT_EQ(plan.dataBytes, uint64_t(128) << 10);
  EXPECT_EQ(plan.auxBytes, uint64_t(128) << 10);
  EXPECT_NE(plan.note.find("fits 128 KiB of sideband per CPU, not 256 KiB"),
            std::string::npos)
      << plan.note;
}

/// What a run of many switch-outs between two stops did, for the checks.
struct SwitchStorm {
  uint32_t mainTid = 0, worker = 0;
  /// The real threads' stretches that ran after the records were dropped
  /// (all of them when none were), each thread's in order.
  std::vector<std::vector<uint8_t>> mainAfterLoss, workerAfterLoss;
  /// The real threads that had run before the records were dropped.
  std::set<uint32_t> ranBeforeLoss;
};

/// emu_thread's two threads and eight others that switch `perCpu` times on
/// each of two CPUs between a first stop and the next, as a busy process
/// does: the real stretches spread evenly over the switches, the last one
/// the very last switch before the stop; the others write a PSB+PSBEND
/// each. (emu_thread's PT has few stretches: 20,000 switches hold them.)
/// With `dropAt`, the `dropCount` records that follow switch `dropAt` on
/// CPU 0 find the data pages full (a reader that did not run in time).
SwitchStorm switchStorm(const EmulateResult &run, FakeKernel &kernel,
                        PerfRecorder &recorder, unsigned perCpu,
                        std::optional<unsigned> dropAt = std::nullopt,
                        unsigned dropCount = 0) {
  SwitchStorm storm;
  storm.mainTid = uint32_t(run.truth[0].tid);
  auto mainParts = stretches(run.snapshot.threads[0].bytes);
  auto workerParts = stretches(run.snapshot.threads[1].bytes);
  // The first stop: main has run its first stretch and made its threads.
  kernel.run(storm.mainTid, 0, mainParts[0]);
  if (dropAt)
    storm.ranBeforeLoss.insert(storm.mainTid);
  storm.worker = kernel.clone(storm.mainTid);
  std::vector<uint32_t> others;
  for (int i = 0; i < 8; ++i)
    others.push_back(kernel.clone(storm.mainTid));
  auto first = recorder.snapshot();
  EXPECT_TRUE(bool(first)) << llvm::toString(first.takeError());

  // (tid, stretch) in the order they run; the real ones at even spacing.
  std::vector<std::pair<uint32_t, const std::vector<uint8_t> *>> real;
  for (size_t i = 1; i < mainParts.size(); ++i)
    real.push_back({storm.mainTid, &mainParts[i]});
  for (const auto &part : workerParts)
    real.push_back({storm.worker, &part});
  // Interleave main's and the worker's so both end near the stop.
  std::vector<std::pair<uint32_t, const std::vector<uint8_t> *>> order;
  size_t mainCount = mainParts.size() - 1, workerCount = workerParts.size();
  for (size_t m = 0, w = 0; m < mainCount || w < workerCount;) {
    if (w >= workerCount || (m < mainCount && m * workerCount <= w * mainCount))
      order.push_back(real[m++]);
    else
      order.push_back(real[mainCount + w++]);
  }
  std::vector<uint8_t> sync(16);
  for (int i = 0; i < 16; i += 2)
    sync[i] = 0x02, sync[i + 1] = 0x82;
  sync.push_back(0x02), sync.push_back(0x23);
  uint64_t total = uint64_t(perCpu) * 2;
  size_t next = 0;
  bool lossSeen = !dropAt;
  for (uint64_t step = 0; step < total; ++step) {
    unsigned cpu = unsigned(step % 2);
    if (dropAt && step == uint64_t(*dropAt) * 2) {
      kernel.dropRecords(0, dropCount);
    }
    if (dropAt && step == (uint64_t(*dropAt) + dropCount) * 2)
      lossSeen = true;
    // Real stretch k runs at switch (k + 1) * total / count - 1.
    if (next < order.size() && step + 1 >= (next + 1) * total / order.size()) {
      auto [tid, part] = order[next++];
      kernel.run(tid, cpu, *part);
      if (dropAt && step < uint64_t(*dropAt) * 2)
        storm.ranBeforeLoss.insert(tid);
      if (lossSeen)
        (tid == storm.mainTid ? storm.mainAfterLoss : storm.workerAfterLoss)
            .push_back(*part);
      continue;
    }
    kernel.run(others[(step / 2) % others.size()], cpu, sync);
  }
  EXPECT_EQ(next, order.size());
  return storm;
}

/// Instructions in `decode`'s blocks after its last Overflow item (all of
/// them when it has none).
uint64_t instructionsAfterLastOverflow(const ThreadDecode &decode) {
  uint64_t count = 0;
  for (const TraceItem &item : decode.items) {
    if (item.kind == ItemKind::Overflow)
      count = 0;
    else if (item.kind == ItemKind::Block)
      count += item.detail;
  }
  return count;
}

FakeKernel::Options withReader() {
  FakeKernel::Options options = skylake();
  options.wokenReaderRuns = std::chrono::milliseconds(2000);
  return options;
}

TEST(PerfFakeKernel, RecordsLostRightBeforeTheStopEndTheTraceWithAGap) {
  // The last record finds the data pages full (a reader that was too late
  // before the stop): the bytes after the last record have no known owner.
  // They are skipped, and every thread with trace ends with an OVF.
  auto kernel = std::make_shared<FakeKernel>(skylake());
  kernel->addThread(kPid, kPid);
  auto recorder = makeRecorder(kernel);
  ASSERT_FALSE(bool(recorder->attach(kPid, {kPid})));
  std::vector<uint8_t> psb = psbPacket();
  uint32_t other = kernel->clone(kPid);
  kernel->run(kPid, 0, psb);
  kernel->run(other, 1, psb);
  kernel->dropRecords(0, 1);
  kernel->run(kPid, 0, psb);
  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces));
  ASSERT_EQ(traces->size(), 2u);
  std::vector<uint8_t> want = psb;
  want.push_back(0x02), want.push_back(0xf3);
  EXPECT_EQ(traceOf(*traces, kPid)->bytes, want);
  EXPECT_EQ(traceOf(*traces, other)->bytes, want);
  EXPECT_EQ(recorder->lostPieces(), 1u);
}

// Issue 42: each switch-out writes a 56-byte AUX record into the data
// pages; at 64 KiB read only at a stop, the kernel dropped the newest after
// about 1,170 switches per CPU, and the recorder then dropped the trace
// right before the stop. Read as the target runs, nothing is lost.
TEST(PerfFakeKernel, TenThousandSwitchOutsPerCpuKeepTheTraceBeforeTheStop) {
  const EmulateResult &run = threadRecording();
  ASSERT_EQ(run.truth.size(), 2u);
  auto kernel = std::make_shared<FakeKernel>(withReader());
  kernel->addThread(kPid, uint32_t(run.truth[0].tid));
  auto recorder = makeRecorder(kernel);
  ASSERT_TRUE(recorder);
  ASSERT_FALSE(bool(recorder->attach(kPid, {run.truth[0].tid})));
  SwitchStorm storm = switchStorm(run, *kernel, *recorder, 10'000);

  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces)) << llvm::toString(traces.takeError());
  EXPECT_EQ(recorder->lostSidebandRecords(), 0u);
  EXPECT_EQ(recorder->lostPieces(), 0u);
  for (auto [tid, index] : {std::pair{storm.mainTid, size_t(0)},
                            std::pair{storm.worker, size_t(1)}}) {
    const ThreadTrace *trace = traceOf(*traces, tid);
    ASSERT_TRUE(trace) << "thread " << index;
    std::vector<uint64_t> insns;
    ThreadDecode decode = decodeAs(run, *trace, index, &insns);
    EXPECT_TRUE(decode.errors.empty()) << decode.errors.front().message;
    EXPECT_EQ(countKind(decode, ItemKind::Overflow), 0u) << "thread " << index;
    EXPECT_EQ(insns.size(), run.truth[index].insns.size())
        << "thread " << index;
    EXPECT_EQ(insns, run.truth[index].insns) << "thread " << index;
  }
}

// A reader that did not run in time: 800 records of CPU 0 find the data
// pages full in the middle of the run. Which threads ran there is unknown,
// so each thread with trace from before has a gap there (one without has
// no known beginning to cut), and everything after it is whole.
TEST(PerfFakeKernel, ReaderTooLateLosesOnlyOlderStretches) {
  const EmulateResult &run = threadRecording();
  ASSERT_EQ(run.truth.size(), 2u);
  auto kernel = std::make_shared<FakeKernel>(withReader());
  kernel->addThread(kPid, uint32_t(run.truth[0].tid));
  auto recorder = makeRecorder(kernel);
  ASSERT_TRUE(recorder);
  ASSERT_FALSE(bool(recorder->attach(kPid, {run.truth[0].tid})));
  SwitchStorm storm =
      switchStorm(run, *kernel, *recorder, 10'000, /*dropAt=*/3'000, 800);

  auto traces = recorder->snapshot();
  ASSERT_TRUE(bool(traces)) << llvm::toString(traces.takeError());
  // The kernel's LOST record counts every dropped record.
  EXPECT_EQ(recorder->lostSidebandRecords(), 800u);
  EXPECT_EQ(recorder->lostPieces(), 1u);
  for (auto [tid, index, after] :
       {std::tuple{storm.mainTid, size_t(0), &storm.mainAfterLoss},
        std::tuple{storm.worker, size_t(1), &storm.workerAfterLoss}}) {
    ASSERT_FALSE(after->empty()) << "thread " << index;
    const ThreadTrace *trace = traceOf(*traces, tid);
    ASSERT_TRUE(trace) << "thread " << index;
    std::vector<uint64_t> insns;
    ThreadDecode decode = decodeAs(run, *trace, index, &insns);
    EXPECT_EQ(countKind(decode, ItemKind::Overflow),
              storm.ranBeforeLoss.count(tid))
        << "thread " << index;
    EXPECT_TRUE(decode.errors.empty()) << decode.errors.front().message;
    // What ran after the loss, on its own: the trace must end with all of
    // it, after the last gap.
    ThreadTrace tail;
    tail.tid = tid;
    for (const auto &part : *after)
      tail.bytes.insert(tail.bytes.end(), part.begin(), part.end());
    std::vector<uint64_t> tailInsns;
    decodeAs(run, tail, index, &tailInsns);
    ASSERT_FALSE(tailInsns.empty());
    uint64_t kept = instructionsAfterLastOverflow(decode);
    EXPECT_EQ(kept, tailInsns.size()) << "thread " << index;
    const std::vector<uint64_t> &truth = run.truth[index].insns;
    ASSERT_GE(insns.size(), tailInsns.size());
    ASSERT_GE(truth.size(), tailInsns.size());
    EXPECT_TRUE(std::equal(tailInsns.begin(), tailInsns.end(),
                           truth.end() - tailInsns.size()))
        << "thread " << index;
    EXPECT_TRUE(std::equal(tailInsns.begin(), tailInsns.end(),
                           insns.end() - tailInsns.size()))
        << "thread " << index;
  }
}

} // namespace
