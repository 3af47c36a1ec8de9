//===- RingBuffer.h - Power-of-two PT ring buffer ---------------*- C++ -*-===//
//
// The emulator's stand-in for the hardware AUX area in overwrite (snapshot)
// mode: writes go round a buffer of 2^k bytes; a snapshot is the last
// min(written, size) bytes oldest first, which after a wrap starts
// mid-packet (a decoder must sync forward to the first PSB).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RINGBUFFER_H
#define MAGIC_TRACE_RINGBUFFER_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace magic_trace {

class RingBuffer {
public:
  /// Fails unless `size` is a power of two of at least 4 KiB.
  static llvm::Expected<RingBuffer> create(uint64_t size);

  void write(const uint8_t *data, size_t length);
  /// The retained bytes, oldest first.
  std::vector<uint8_t> snapshot() const;
  bool wrapped() const { return totalWritten > storage.size(); }
  uint64_t written() const { return totalWritten; }
  uint64_t capacity() const { return storage.size(); }

private:
  explicit RingBuffer(uint64_t size) : storage(size) {}
  std::vector<uint8_t> storage;
  uint64_t totalWritten = 0;
};

} // namespace magic_trace

#endif
