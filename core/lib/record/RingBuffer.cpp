//===- RingBuffer.cpp - Power-of-two PT ring buffer -----------------------===//
#include "magic_trace/RingBuffer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace magic_trace {

static llvm::Error checkSize(uint64_t size) {
  if (size < 4096 || !llvm::isPowerOf2_64(size))
    return llvm::createStringError(
        llvm::formatv("ring buffer size {0} is not a power of two of at least "
                      "4096 bytes (use e.g. 4096, 65536 or 4194304)",
                      size)
            .str());
  return llvm::Error::success();
}

llvm::Expected<RingBuffer> RingBuffer::create(uint64_t size) {
  if (llvm::Error error = checkSize(size))
    return std::move(error);
  return RingBuffer(size);
}

llvm::Expected<RingBuffer> RingBuffer::attach(uint8_t *memory, uint64_t size,
                                              uint64_t *head, RingGate gate) {
  if (llvm::Error error = checkSize(size))
    return std::move(error);
  return RingBuffer(memory, size, head, gate);
}

void RingBuffer::enterPausedGate() {
  // Out of the ring while a reader copies it, then in again, until `paused`
  // is clear after `busy` is set: a reader that paused again in between saw
  // `busy` clear and is copying.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    __atomic_store_n(gate.busy, 0u, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(gate.paused, __ATOMIC_SEQ_CST)) {
      if (std::chrono::steady_clock::now() > deadline) {
        if (gate.timeouts)
          __atomic_add_fetch(gate.timeouts, 1, __ATOMIC_RELAXED);
        __atomic_store_n(gate.busy, 1u, __ATOMIC_SEQ_CST);
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    __atomic_store_n(gate.busy, 1u, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(gate.paused, __ATOMIC_SEQ_CST))
      return;
  }
}

llvm::Error pauseRingWriters(uint32_t *paused, size_t count,
                             llvm::function_ref<const uint32_t *(size_t)> busy,
                             std::chrono::steady_clock::time_point deadline) {
  __atomic_store_n(paused, 1u, __ATOMIC_SEQ_CST);
  for (size_t i = 0; i < count; ++i)
    while (__atomic_load_n(busy(i), __ATOMIC_SEQ_CST)) {
      if (std::chrono::steady_clock::now() > deadline)
        return llvm::createStringError(
            "a writer stayed inside its ring past the reader's deadline");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  return llvm::Error::success();
}

void RingBuffer::write(const uint8_t *data, size_t length) {
  enter();
  // Only the last `size` bytes of a long write survive.
  if (length > size) {
    totalWritten += length - size;
    data += length - size;
    length = size;
  }
  uint64_t position = totalWritten & (size - 1);
  size_t first = std::min<uint64_t>(length, size - position);
  std::memcpy(memory + position, data, first);
  std::memcpy(memory, data + first, length - first);
  totalWritten += length;
  if (!batching)
    publish();
}

std::vector<uint8_t> RingBuffer::snapshot() const {
  if (!wrapped())
    return std::vector<uint8_t>(memory, memory + totalWritten);
  // The oldest byte is the one the next write would overwrite.
  uint64_t position = totalWritten & (size - 1);
  std::vector<uint8_t> bytes;
  bytes.reserve(size);
  bytes.insert(bytes.end(), memory + position, memory + size);
  bytes.insert(bytes.end(), memory, memory + position);
  return bytes;
}

} // namespace magic_trace
