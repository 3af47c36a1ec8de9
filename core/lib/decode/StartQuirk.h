//===- StartQuirk.h - A PGE/PGD pair in which nothing ran -------*- C++ -*-===//
//
// Private to core/lib/decode. Real CPUs with user-only tracing were seen to
// write, at a program's first instruction, TIP.PGE X, then a TIP.PGD with no
// IP and no FUP, then TIP.PGE X again, with only PAD and status packets
// (CBR, MODE, timing) between them: 30 of the 32 raw traces of the ARCUS
// project (../shared/realpt-arcus) have it at _start. No instruction can
// have run between the pair and the next PGE at the same IP, but a decoder
// must bind an IP-less TIP.PGD to some branch: libipt's block decoder runs on
// to the next indirect branch (11 instructions at _start, then listed again
// after the second PGE), its continuous decode stops with "trace stream does
// not match query". The pair is therefore padded out before decoding.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_DECODE_STARTQUIRK_H
#define MAGIC_TRACE_LIB_DECODE_STARTQUIRK_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace magic_trace::decode_detail {

/// A copy of `bytes` with every such PGE/PGD pair from the PSB at offset
/// `from` on (0: the whole buffer) turned into PAD bytes, or an empty vector
/// when there is none. `pairs` (if set) gets their number. Padding moves no
/// PSB and changes no PSB+, so a PSB table of `bytes` holds for the copy.
std::vector<uint8_t> padEmptyEnablePairs(llvm::ArrayRef<uint8_t> bytes,
                                         uint64_t from = 0,
                                         unsigned *pairs = nullptr);

} // namespace magic_trace::decode_detail

#endif
