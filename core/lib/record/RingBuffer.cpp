//===- RingBuffer.cpp - Power-of-two PT ring buffer -----------------------===//
#include "magic_trace/RingBuffer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cstring>

namespace magic_trace {

llvm::Expected<RingBuffer> RingBuffer::create(uint64_t size) {
  if (size < 4096 || !llvm::isPowerOf2_64(size))
    return llvm::createStringError(
        llvm::formatv("ring buffer size {0} is not a power of two of at least "
                      "4096 bytes (use e.g. 4096, 65536 or 4194304)",
                      size)
            .str());
  return RingBuffer(size);
}

void RingBuffer::write(const uint8_t *data, size_t length) {
  uint64_t size = storage.size();
  // Only the last `size` bytes of a long write survive.
  if (length > size) {
    totalWritten += length - size;
    data += length - size;
    length = size;
  }
  uint64_t position = totalWritten & (size - 1);
  size_t first = std::min<uint64_t>(length, size - position);
  std::memcpy(storage.data() + position, data, first);
  std::memcpy(storage.data(), data + first, length - first);
  totalWritten += length;
}

std::vector<uint8_t> RingBuffer::snapshot() const {
  if (!wrapped())
    return std::vector<uint8_t>(storage.begin(),
                                storage.begin() + totalWritten);
  // The oldest byte is the one the next write would overwrite.
  uint64_t position = totalWritten & (storage.size() - 1);
  std::vector<uint8_t> bytes;
  bytes.reserve(storage.size());
  bytes.insert(bytes.end(), storage.begin() + position, storage.end());
  bytes.insert(bytes.end(), storage.begin(), storage.begin() + position);
  return bytes;
}

} // namespace magic_trace
