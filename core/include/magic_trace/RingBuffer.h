//===- RingBuffer.h - Power-of-two PT ring buffer ---------------*- C++ -*-===//
//
// The emulator's stand-in for the hardware AUX area in overwrite (snapshot)
// mode: writes go round a buffer of 2^k bytes; a snapshot is the last
// min(written, size) bytes oldest first, which after a wrap starts
// mid-packet (a decoder must sync forward to the first PSB).
//
// The bytes live in the ring's own storage, or in memory someone else owns
// (attach(): the QEMU recorder's shared-memory rings, which a reader in
// another process copies), where each write also publishes the total byte
// count to a head word, like perf's aux_head: it only grows.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RINGBUFFER_H
#define MAGIC_TRACE_RINGBUFFER_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <cstdint>
#include <vector>

namespace magic_trace {

/// Shared words that keep a writer out of a reader's copy: the writer sets
/// `busy` around each write and, when `paused` is set, first waits (up to a
/// second, then counts a timeout in `timeouts` and writes anyway). A reader
/// sets `paused`, waits for `busy` to clear, copies, clears `paused`.
struct RingGate {
  uint32_t *busy = nullptr;
  const uint32_t *paused = nullptr;
  uint64_t *timeouts = nullptr;
};

/// A reader's pause: sets `*paused` and waits until none of the `count`
/// words busy(i) is set, until `deadline`. Clear `*paused` after the copy,
/// whatever this returns. Errors: a writer stayed busy past the deadline
/// (the copy may end in a torn packet).
llvm::Error pauseRingWriters(uint32_t *paused, size_t count,
                             llvm::function_ref<const uint32_t *(size_t)> busy,
                             std::chrono::steady_clock::time_point deadline);

class RingBuffer {
public:
  /// Fails unless `size` is a power of two of at least 4 KiB.
  static llvm::Expected<RingBuffer> create(uint64_t size);
  /// A ring over `size` bytes at `memory` (not owned; it must outlive the
  /// ring) whose head, the total bytes written, is stored to `*head` with
  /// release order after every write. Same size rule as create().
  static llvm::Expected<RingBuffer> attach(uint8_t *memory, uint64_t size,
                                           uint64_t *head,
                                           RingGate gate = RingGate());

  /// Moves keep `memory` valid (a vector's move keeps its buffer); copies
  /// would not, so there are none.
  RingBuffer(RingBuffer &&) = default;
  RingBuffer &operator=(RingBuffer &&) = default;
  RingBuffer(const RingBuffer &) = delete;
  RingBuffer &operator=(const RingBuffer &) = delete;

  void write(const uint8_t *data, size_t length);
  /// Writing in place: where `length` bytes fit at the write position
  /// without reaching the end (the gate entered), or nullptr (then write()
  /// them). commit() the bytes put there.
  /// Bytes from the write position to the end of the buffer.
  uint64_t roomBeforeEnd() const { return size - (totalWritten & (size - 1)); }
  uint8_t *reserve(size_t length) {
    uint64_t position = totalWritten & (size - 1);
    if (size - position < length)
      return nullptr;
    enter();
    return memory + position;
  }
  void commit(size_t length) {
    totalWritten += length;
    if (!batching)
      publish();
  }
  /// From beginBatch() to endBatch(), writes enter the gate once, at the
  /// first, and publish the head once, at endBatch(): a writer's packets of
  /// one step.
  void beginBatch() { batching = true; }
  void endBatch() {
    batching = false;
    publish();
  }
  bool inBatch() const { return batching; }
  uint8_t *data() { return memory; }
  /// The retained bytes, oldest first.
  std::vector<uint8_t> snapshot() const;
  bool wrapped() const { return totalWritten > size; }
  uint64_t written() const { return totalWritten; }
  uint64_t capacity() const { return size; }

private:
  RingBuffer(uint8_t *memory, uint64_t size, uint64_t *head, RingGate gate)
      : memory(memory), size(size), head(head), gate(gate) {}
  /// enter() when `paused` was set: waits until it is clear (or the
  /// deadline passes) and enters.
  void enterPausedGate();
  void enter() {
    if (!gate.busy || inGate)
      return;
    inGate = true;
    __atomic_store_n(gate.busy, 1u, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(gate.paused, __ATOMIC_SEQ_CST))
      enterPausedGate();
  }
  /// The head to its word, and out of the gate.
  void publish() {
    if (head)
      __atomic_store_n(head, totalWritten, __ATOMIC_RELEASE);
    if (inGate)
      __atomic_store_n(gate.busy, 0u, __ATOMIC_RELEASE);
    inGate = false;
  }
  explicit RingBuffer(uint64_t size)
      : storage(size), memory(storage.data()), size(size) {}
  std::vector<uint8_t> storage; ///< Empty when attached.
  uint8_t *memory = nullptr;    ///< storage.data() or the attached bytes.
  uint64_t size = 0;
  uint64_t *head = nullptr; ///< Published head when attached.
  RingGate gate;
  uint64_t totalWritten = 0;
  bool batching = false;
  bool inGate = false;
};

} // namespace magic_trace

#endif
