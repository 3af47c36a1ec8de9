// The decoder's index of which change holds an address at a seq
// (core/lib/decode/VersionIndex.h) gives what the rule itself gives:
// codeChangeWins over every change whose range covers the address and can
// hold code then (codeChangeCanHold), checked by brute force on random
// histories of overlapping versions, some with times. And a million
// versions of one page answer in microseconds (issue 50: over 20 s).
#include "../../core/lib/decode/VersionIndex.h"

#include "Sanitizers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>

using namespace magic_trace;
using namespace magic_trace::decode_detail;

namespace {

/// codeChangeWins over every covering change that can hold code then
/// (codeChangeCanHold): the rule, one by one.
const CodeChange *naiveHolder(const std::vector<CodeChange> &changes,
                              uint64_t address, uint64_t seq) {
  const CodeChange *best = nullptr;
  for (const CodeChange &change : changes)
    if (change.size && change.address <= address && address < change.end() &&
        codeChangeCanHold(change, seq) &&
        (!best || codeChangeWins(change, *best, seq)))
      best = &change;
  return best;
}

TEST(VersionIndex, AgreesWithTheRuleOnRandomHistories) {
  std::mt19937_64 random(50);
  for (int round = 0; round < 200; ++round) {
    std::vector<CodeChange> changes(1 + random() % 40);
    std::vector<VersionIndex::Range> ranges;
    for (size_t i = 0; i < changes.size(); ++i) {
      changes[i].seq = i + 1;
      // A third have a time (a jitdump's load, code made executable): they
      // hold nothing before their seq.
      changes[i].timeNs = random() % 3 == 0 ? 100 * (i + 1) : 0;
      changes[i].address = 0x1000 + random() % 64;
      changes[i].size = random() % 24;
      ranges.push_back({changes[i].address, changes[i].end(), uint32_t(i)});
    }
    VersionIndex index;
    index.build(changes, ranges);
    constexpr uint64_t low = 0xff0, high = 0x1060;
    for (uint64_t seq = 0; seq <= changes.size() + 1; ++seq) {
      std::vector<const CodeChange *> rule;
      for (uint64_t address = low; address < high; ++address)
        rule.push_back(naiveHolder(changes, address, seq));
      for (uint64_t address = low; address < high; ++address) {
        ASSERT_EQ(index.holder(address, seq), rule[address - low])
            << "round " << round << " address " << address << " seq " << seq;
        // The span its answer holds over (a reader's cache): every address
        // in it has the same holder by the rule.
        VersionIndex::Span span;
        const CodeChange *found = index.holder(address, seq, &span);
        ASSERT_LE(span.begin, address);
        ASSERT_LT(address, span.end);
        for (uint64_t other = std::max(span.begin, low);
             other < std::min(span.end, high); ++other)
          ASSERT_EQ(rule[other - low], found)
              << "round " << round << " address " << address << " seq " << seq
              << " span [" << span.begin << ", " << span.end << ") at "
              << other;
      }
    }
  }
}

TEST(VersionIndex, AMillionVersionsOfOnePageAnswerQuickly) {
  std::vector<CodeChange> changes(1000000);
  std::vector<VersionIndex::Range> ranges;
  for (size_t i = 0; i < changes.size(); ++i) {
    changes[i].seq = i + 1;
    changes[i].address = 0x4002a2e000;
    changes[i].size = 0x1000;
    ranges.push_back({changes[i].address, changes[i].end(), uint32_t(i)});
  }
  VersionIndex index;
  auto start = std::chrono::steady_clock::now();
  index.build(changes, ranges);
  for (uint64_t seq = 1; seq <= 1000000; seq += 7)
    ASSERT_EQ(index.holder(0x4002a2e123, seq), &changes[seq - 1]);
  if (!kSanitized)
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(5));
}

} // namespace
