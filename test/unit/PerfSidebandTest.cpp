//===- PerfSidebandTest.cpp - The perf backend's sideband keeps up -------===//
//
// Issue 42: the kernel writes a 56-byte PERF_RECORD_AUX into a CPU ring's
// data pages at every switch-out of a traced thread and drops the newest
// records when they are full. The recorder sizes them as perf does, on
// FakeKernel, whose data pages overflow as the kernel's do (FakeKernel.h).
//
//===----------------------------------------------------------------------===//
#include "PerfFakeKernelSupport.h"

#include <gtest/gtest.h>

#include <string>

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

} // namespace
