//===- Interpolation.h - Times between two known times ----------*- C++ -*-===//
//
// PT gives a time per timing packet, not per instruction: the decoder
// spreads a TSC interval over the items between two samples by instruction
// count, and the model spreads a block's time over its ranges by address.
// Both need span * part / whole exactly, for every item and range.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_INTERPOLATION_H
#define MAGIC_TRACE_INTERPOLATION_H

#include <cstdint>

namespace magic_trace {

/// floor(span * part / whole) for `whole` > 0, exact for any 64-bit inputs.
/// The product is taken in 128 bits only when it does not fit in 64: the
/// common case (short spans, small counts) then needs no 128-bit division,
/// a library call that cost ~1.6 % of the pipeline's CPU time.
inline uint64_t shareOf(uint64_t span, uint64_t part, uint64_t whole) {
  uint64_t product = 0;
  if (!__builtin_mul_overflow(span, part, &product))
    return product / whole;
  return uint64_t((unsigned __int128)span * part / whole);
}

} // namespace magic_trace

#endif
