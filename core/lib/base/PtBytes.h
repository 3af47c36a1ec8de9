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

} // namespace magic_trace::pt_bytes

#endif
