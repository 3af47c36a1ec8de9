//===- RingGateTest.cpp - A reader's pause stops the ring's writer --------===//
//
// The QEMU recorder's writers and a reader in another process share each
// ring through a gate (RingGate): while the reader's pause holds, no writer
// may touch the ring, so the reader copies a ring that does not move. Here a
// writer thread writes numbered 8-byte words as fast as it can while the
// main thread pauses it again and again, copies the ring and checks that
// the copy is exactly the words the head says were written and that nothing
// changed while the pause held.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/RingBuffer.h"

#include "llvm/ADT/ScopeExit.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace magic_trace;

namespace {

constexpr uint64_t kRingSize = 4096;
constexpr size_t kPauses = 2000;

struct Shared {
  std::vector<uint8_t> memory = std::vector<uint8_t>(kRingSize);
  uint64_t head = 0;
  uint32_t busy = 0;
  uint32_t paused = 0;
  uint64_t timeouts = 0;
};

/// Writes word n = n for n = 0, 1, ... in batches of 1 to 7 words (one gate
/// entry and one head update a batch) until `stop`.
void writeWords(RingBuffer &ring, const std::atomic<bool> &stop) {
  uint64_t next = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    ring.beginBatch();
    for (uint64_t i = 0, n = 1 + next % 7; i < n; ++i, ++next)
      ring.write(reinterpret_cast<const uint8_t *>(&next), sizeof(next));
    ring.endBatch();
  }
}

/// The words a copy of the ring must hold when the head is `head`: the
/// last min(head, size) bytes, each word its own number.
::testing::AssertionResult holdsWordsUpTo(const std::vector<uint8_t> &copy,
                                          uint64_t head) {
  uint64_t words = head / 8;
  uint64_t first = words > kRingSize / 8 ? words - kRingSize / 8 : 0;
  for (uint64_t n = first; n < words; ++n) {
    uint64_t value = 0;
    std::memcpy(&value, copy.data() + (n * 8) % kRingSize, 8);
    if (value != n)
      return ::testing::AssertionFailure()
             << "word " << n << " reads " << value << " (head " << head << ")";
  }
  return ::testing::AssertionSuccess();
}

} // namespace

TEST(RingGateTest, WriterStaysOutWhilePaused) {
  Shared shared;
  RingGate gate{&shared.busy, &shared.paused, &shared.timeouts};
  auto ring =
      RingBuffer::attach(shared.memory.data(), kRingSize, &shared.head, gate);
  ASSERT_TRUE(bool(ring)) << llvm::toString(ring.takeError());
  std::atomic<bool> stop{false};
  std::thread writer([&] { writeWords(*ring, stop); });
  // Ends the writer on every way out, a failed ASSERT too.
  llvm::scope_exit endWriter([&] {
    stop = true;
    __atomic_store_n(&shared.paused, 0u, __ATOMIC_SEQ_CST);
    writer.join();
  });

  auto waitForWords = [&](uint64_t from) {
    while (__atomic_load_n(&shared.head, __ATOMIC_ACQUIRE) < from + 64)
      std::this_thread::yield();
  };
  waitForWords(0);
  size_t sawProgress = 0;
  uint64_t lastHead = 0;
  for (size_t i = 0; i < kPauses; ++i) {
    llvm::Error error = pauseRingWriters(
        &shared.paused, 1, [&](size_t) { return &shared.busy; },
        std::chrono::steady_clock::now() + std::chrono::seconds(5));
    ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));
    uint64_t head = __atomic_load_n(&shared.head, __ATOMIC_ACQUIRE);
    std::vector<uint8_t> copy = shared.memory;
    ASSERT_TRUE(holdsWordsUpTo(copy, head));
    // Still paused a moment later: nothing moved.
    std::this_thread::yield();
    ASSERT_EQ(__atomic_load_n(&shared.head, __ATOMIC_ACQUIRE), head);
    ASSERT_EQ(shared.memory, copy);
    sawProgress += head != lastHead;
    lastHead = head;
    __atomic_store_n(&shared.paused, 0u, __ATOMIC_SEQ_CST);
    waitForWords(head); // Some more before the next pause.
  }
  endWriter.release();
  stop = true;
  writer.join();
  EXPECT_EQ(sawProgress, kPauses) << "the writer stopped writing";
  EXPECT_EQ(shared.timeouts, 0u);
}
