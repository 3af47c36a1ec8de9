//===- FuzzSupport.h - Shared helpers of the libFuzzer targets --*- C++ -*-===//
//
// A cursor that reads structured values off the fuzzer input (zeros once the
// bytes run out, so every input, however short, describes a complete value),
// and the allocator tuning every target does at start-up.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_FUZZ_FUZZSUPPORT_H
#define MAGIC_TRACE_TEST_FUZZ_FUZZSUPPORT_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace magic_trace {

/// Reads bytes off the fuzzer input; zeros once it runs out.
struct InputStream {
  const uint8_t *data;
  size_t size;

  uint8_t byte() {
    if (!size)
      return 0;
    --size;
    return *data++;
  }

  uint16_t u16() { return uint16_t(byte() | (byte() << 8)); }

  /// A length byte, then that many bytes of text (padded with 'x' once the
  /// input runs out). Length 255 means 32000 + u16(): past FXT's 32 KiB
  /// string limit.
  std::string text() {
    size_t length = byte();
    if (length == 255)
      length = 32000 + u16();
    size_t taken = std::min(length, size);
    std::string value(reinterpret_cast<const char *>(data), taken);
    data += taken;
    size -= taken;
    value.resize(length, 'x');
    return value;
  }
};

/// Keeps freed heap memory in the process (glibc): without this, an input
/// that allocates and frees a few hundred KiB makes malloc give the top of
/// the heap back with brk and fault it in again on the next input, and the
/// TLB shootdowns of that cost more than the code under test. The ASan
/// build's allocator ignores it.
inline void keepFreedMemory() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
#endif
}

} // namespace magic_trace

#endif
