//===- BoundaryPackets.h - PT packets at per-CPU piece boundaries -*- C++
//-*-===//
//
// Private to formats/perfdata: the packets the per-CPU code writes where it
// joins or cuts pieces of a thread's trace (PerCpuLayout.cpp writes a
// context switch's shape, PerCpuTrace.cpp a resync after a loss), through
// libipt's encoder, and the one thing it reads back: the IP a PSB+ names.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_FORMATS_PERFDATA_BOUNDARYPACKETS_H
#define MAGIC_TRACE_LIB_FORMATS_PERFDATA_BOUNDARYPACKETS_H

// libipt's types through the decoder's private header, as
// PerCpuLayout.cpp takes them (test/lit/layering.test).
#include "../../base/PacketIp.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace magic_trace::perfdata {

/// Appends `packet` as libipt encodes it. The packets written here are
/// fixed-size and valid: a failure is a bug (a fatal error).
void encodePacket(const pt_packet &packet, std::vector<uint8_t> &out);

/// Appends a TIP, TIP.PGE or FUP with `ip` (sign-extended 48 bits), or a
/// TIP.PGD with the IP suppressed.
void encodeIpPacket(pt_packet_type type, uint64_t ip,
                    std::vector<uint8_t> &out);

/// The IP of the FUP in the PSB+ that `bytes` begins with: where tracing
/// is at that PSB. nullopt when `bytes` does not begin with a whole PSB+ or
/// it has no FUP (tracing was off there).
std::optional<uint64_t> psbFupIp(llvm::ArrayRef<uint8_t> bytes);

} // namespace magic_trace::perfdata

#endif
