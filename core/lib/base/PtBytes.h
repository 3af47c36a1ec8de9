//===- PtBytes.h - The PT packets written or searched byte by byte -*- C++
//-*-===//
//
// Private to the core: the bytes of the few Intel PT packets that code
// outside libipt writes into a trace or looks for in one (Intel SDM vol.
// 3C, "Packet Descriptions"): the perf recorder finding the PSBs of a ring,
// the perf.data reader joining snapshot copies and marking losses, the
// per-CPU splitter starting each thread's stream. No libipt header: the
// recorder uses it too.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_BASE_PTBYTES_H
#define MAGIC_TRACE_LIB_BASE_PTBYTES_H

#include <cstdint>

namespace magic_trace::pt_bytes {

/// PSB (Packet Stream Boundary): 02 82 repeated 8 times, where a decoder
/// can start.
inline constexpr uint8_t kPsb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                     0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                     0x02, 0x82, 0x02, 0x82};
/// PSBEND: the end of a PSB+ (the status packets after a PSB).
inline constexpr uint8_t kPsbEnd[2] = {0x02, 0x23};
/// OVF: the CPU lost trace here.
inline constexpr uint8_t kOvf[2] = {0x02, 0xf3};
/// MODE.Exec for 64-bit code (CS.L set, CS.D clear).
inline constexpr uint8_t kModeExec64[2] = {0x99, 0x01};

/// The TSC value (bits 55:0) in the PSB+ at `offset` of `bytes` (`size` of
/// them), or 0 when there is no PSB there or its PSB+ has no TSC packet
/// before PSBEND. Walks the packets a PSB+ may hold (PAD, TSC, TMA, CBR,
/// MODE, FUP, PIP, VMCS) and gives up at any other.
inline uint64_t psbTsc(const uint8_t *bytes, uint64_t size, uint64_t offset) {
  if (offset > size || size - offset < sizeof(kPsb))
    return 0;
  for (unsigned i = 0; i < sizeof(kPsb); ++i)
    if (bytes[offset + i] != kPsb[i])
      return 0;
  static constexpr uint8_t FupIpBytes[8] = {0, 2, 4, 6, 6, 0, 8, 0};
  uint64_t at = offset + sizeof(kPsb);
  while (at < size) {
    uint8_t first = bytes[at];
    uint8_t second = at + 1 < size ? bytes[at + 1] : 0;
    uint64_t length = 0;
    if (first == 0x00)
      length = 1; // PAD
    else if (first == 0x19) {
      if (size - at < 8)
        return 0;
      uint64_t tsc = 0;
      for (unsigned i = 7; i >= 1; --i)
        tsc = tsc << 8 | bytes[at + i];
      return tsc;
    } else if (first == 0x99)
      length = 2; // MODE
    else if ((first & 0x1f) == 0x1d)
      length = 1 + FupIpBytes[first >> 5]; // FUP
    else if (first == 0x02 && second == 0x73)
      length = 7; // TMA
    else if (first == 0x02 && second == 0x03)
      length = 4; // CBR
    else if (first == 0x02 && second == 0x43)
      length = 8; // PIP
    else if (first == 0x02 && second == 0xc8)
      length = 7; // VMCS
    else
      return 0; // PSBEND or a packet a PSB+ does not hold
    at += length;
  }
  return 0;
}

} // namespace magic_trace::pt_bytes

#endif
