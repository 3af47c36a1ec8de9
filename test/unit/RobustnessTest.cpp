// Robustness at sizes users reach: a 64 MiB ring buffer (16x the default)
// that wraps, and the packet writer recording into one.
#include "magic_trace/PacketWriter.h"
#include "magic_trace/RingBuffer.h"

#include <gtest/gtest.h>

using namespace magic_trace;

namespace {

TEST(RobustnessTest, SixtyFourMiBRingKeepsTheLastBytesInOrder) {
  const uint64_t size = 64ull << 20;
  llvm::Expected<RingBuffer> ring = RingBuffer::create(size);
  ASSERT_TRUE(bool(ring)) << llvm::toString(ring.takeError());
  // 80 MiB of a counting pattern in odd-sized chunks, so writes straddle the
  // wrap point.
  const uint64_t total = 80ull << 20;
  std::vector<uint8_t> chunk(1 << 20 | 4093);
  uint64_t written = 0;
  while (written < total) {
    size_t length = std::min<uint64_t>(chunk.size(), total - written);
    for (size_t i = 0; i < length; ++i)
      chunk[i] = static_cast<uint8_t>((written + i) * 131 >> 3);
    ring->write(chunk.data(), length);
    written += length;
  }
  EXPECT_TRUE(ring->wrapped());
  std::vector<uint8_t> bytes = ring->snapshot();
  ASSERT_EQ(bytes.size(), size);
  uint64_t first = total - size;
  for (uint64_t i = 0; i < size; i += 4099)
    ASSERT_EQ(bytes[i], static_cast<uint8_t>((first + i) * 131 >> 3)) << i;
  EXPECT_EQ(bytes.back(), static_cast<uint8_t>((total - 1) * 131 >> 3));
}

TEST(RobustnessTest, PacketWriterAcceptsSixtyFourMiB) {
  PacketWriter::Options options;
  options.bufferSize = 64ull << 20;
  auto writer = PacketWriter::create(options);
  ASSERT_TRUE(bool(writer)) << llvm::toString(writer.takeError());
  ASSERT_FALSE(bool((*writer)->enable(0x1000)));
  ExecutedInsn insn;
  insn.ip = 0x1000;
  insn.size = 2;
  insn.branch = BranchClass::DirectJump;
  insn.nextIp = 0x1000; // A tight loop: jmp to itself.
  for (int i = 0; i < 100000; ++i)
    ASSERT_FALSE(bool((*writer)->step(insn)));
  ASSERT_FALSE(bool((*writer)->disable(0x1000)));
  EXPECT_EQ((*writer)->buffer().capacity(), 64ull << 20);
  EXPECT_FALSE((*writer)->buffer().wrapped());
  EXPECT_EQ((*writer)->instructions(), 100000u);
}

} // namespace
