//===- WindowPlanTest.cpp - The decode's budget against its definition ----===//
//
// The default window is at most what --max-trace bytes of trace cover
// (traceBudgetWindow). Checked on two hand-made PSB tables with the lengths
// worked out by hand below, and on random tables against the definition
// written out plainly: every candidate length tried, each thread's bytes
// counted from the PSB before the last timed PSB at or before the window's
// start (docs/architecture.md, "Window"), straight from the table.
//
//===----------------------------------------------------------------------===//
#include "../../core/lib/pipeline/WindowPlan.h"

#include "gtest/gtest.h"

#include <random>
#include <vector>

using namespace magic_trace;
using namespace magic_trace::pipeline;

namespace {

/// A thread's PSBs: `count` of them every `step` bytes, timed from `first`
/// every `tick` ns.
PsbTimes evenPsbs(size_t count, uint64_t step, uint64_t first, uint64_t tick,
                  uint64_t bytes) {
  PsbTimes psbs;
  for (size_t i = 0; i < count; ++i) {
    psbs.offsets.push_back(i * step);
    psbs.ns.push_back(first + i * tick);
  }
  psbs.bytes = bytes;
  return psbs;
}

/// The definition, plainly: a thread's bytes for a window of `length`.
uint64_t definedBytes(const PsbTimes &psbs, uint64_t windowEnd,
                      uint64_t length) {
  bool timed = false;
  for (uint64_t ns : psbs.ns)
    timed = timed || ns;
  if (!timed)
    return psbs.bytes;
  uint64_t at = windowEnd > length ? windowEnd - length : 0;
  // Timed PSBs at or before `at`, in order.
  std::vector<size_t> before;
  for (size_t i = 0; i < psbs.ns.size(); ++i)
    if (psbs.ns[i] && psbs.ns[i] <= at)
      before.push_back(i);
  size_t from = before.size() >= 2 ? before[before.size() - 2] : 0;
  return psbs.bytes - psbs.offsets[from];
}

uint64_t definedWindow(const std::vector<PsbTimes> &tables,
                       const std::vector<uint64_t> &ends, uint64_t span,
                       uint64_t budget) {
  auto bytes = [&](uint64_t length) {
    uint64_t total = 0;
    for (size_t i = 0; i < tables.size(); ++i)
      total += definedBytes(tables[i], ends[i], length);
    return total;
  };
  if (bytes(span) <= budget)
    return span;
  uint64_t longest = 0;
  for (uint64_t length = 1; length <= span; ++length)
    if (bytes(length) <= budget)
      longest = length;
  return longest;
}

std::vector<ThreadPlan> plansOf(const std::vector<PsbTimes> &tables,
                                const std::vector<uint64_t> &ends) {
  std::vector<ThreadPlan> plans(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    plans[i].psbs = &tables[i];
    plans[i].end = plans[i].windowEnd = ends[i];
  }
  return plans;
}

} // namespace

TEST(WindowPlan, TraceBudgetWindowOnTablesWorkedByHand) {
  // A: 10 PSBs every 1000 bytes at 100, 200, ..., 1000 ns; 10000 bytes.
  // B: 4 PSBs every 1000 bytes at 300, 600, 900, 1000 ns; 4000 bytes.
  // Both end at 1050 ns.
  std::vector<PsbTimes> tables = {
      evenPsbs(10, 1000, 100, 100, 10000),
      {{0, 1000, 2000, 3000}, {300, 600, 900, 1000}, 4000}};
  std::vector<uint64_t> ends = {1050, 1050};
  std::vector<ThreadPlan> plans = plansOf(tables, ends);
  // A window starting at 1000 or later: each decodes from the PSB before
  // its 1000 ns one, 2000 bytes each.
  EXPECT_EQ(bytesForWindow(plans, 50), 4000u);
  // From 900 to 999: A from its 800 ns PSB, B from its 600 ns one: 3000
  // bytes each.
  EXPECT_EQ(bytesForWindow(plans, 51), 6000u);
  EXPECT_EQ(bytesForWindow(plans, 150), 6000u);
  // Before 900: A 4000 bytes, B from its start, 4000.
  EXPECT_EQ(bytesForWindow(plans, 151), 8000u);
  EXPECT_EQ(traceBudgetWindow(plans, 950, 5000), 50u);
  EXPECT_EQ(traceBudgetWindow(plans, 950, 6000), 150u);
  EXPECT_EQ(traceBudgetWindow(plans, 950, 7999), 150u);
  // Everything fits: the whole span.
  EXPECT_EQ(traceBudgetWindow(plans, 950, 14000), 950u);
  // Not even the newest pieces fit: 0, left to the caller.
  EXPECT_EQ(traceBudgetWindow(plans, 950, 3999), 0u);
}

TEST(WindowPlan, AThreadWithoutTimingCountsWhole) {
  std::vector<PsbTimes> tables = {evenPsbs(10, 1000, 100, 100, 10000),
                                  {{0, 500}, {0, 0}, 3000}};
  std::vector<uint64_t> ends = {1050, 1050};
  std::vector<ThreadPlan> plans = plansOf(tables, ends);
  EXPECT_EQ(bytesForWindow(plans, 50), 2000u + 3000u);
  EXPECT_EQ(traceBudgetWindow(plans, 950, 6000), 150u);
}

TEST(WindowPlan, TraceBudgetWindowIsTheDefinitionOnRandomTables) {
  std::mt19937_64 random(49);
  for (int round = 0; round < 200; ++round) {
    size_t threads = 1 + random() % 4;
    std::vector<PsbTimes> tables(threads);
    std::vector<uint64_t> ends(threads);
    uint64_t latest = 0, earliest = UINT64_MAX;
    for (size_t t = 0; t < threads; ++t) {
      PsbTimes &psbs = tables[t];
      size_t count = 1 + random() % 12;
      uint64_t offset = 0, ns = 1 + random() % 50;
      for (size_t i = 0; i < count; ++i) {
        psbs.offsets.push_back(offset);
        // Some PSB+ carry no TSC.
        psbs.ns.push_back(random() % 5 == 0 ? 0 : ns);
        offset += 1 + random() % 700;
        ns += random() % 40;
      }
      psbs.bytes = offset;
      ends[t] = ns + random() % 20;
      latest = std::max(latest, ends[t]);
      earliest = std::min(earliest, psbs.ns.front() ? psbs.ns.front() : 1);
    }
    // The same end for every thread, as when threads share a clock, or
    // each its own.
    if (round % 2)
      std::fill(ends.begin(), ends.end(), latest);
    uint64_t span = latest - std::min(latest, earliest) + 1;
    std::vector<ThreadPlan> plans = plansOf(tables, ends);
    uint64_t total = 0;
    for (const PsbTimes &psbs : tables)
      total += psbs.bytes;
    auto defined = [&](uint64_t length) {
      uint64_t sum = 0;
      for (size_t t = 0; t < threads; ++t)
        sum += definedBytes(tables[t], ends[t], length);
      return sum;
    };
    // Half the budgets are exactly what some window reads (the edge).
    uint64_t budget =
        round % 4 < 2 ? random() % (total + 1) : defined(1 + random() % span);
    SCOPED_TRACE("round " + std::to_string(round));
    for (uint64_t length : {uint64_t(1), span / 2, span})
      EXPECT_EQ(bytesForWindow(plans, length), defined(length));
    EXPECT_EQ(traceBudgetWindow(plans, span, budget),
              definedWindow(tables, ends, span, budget));
  }
}
