//===- PacketIp.h - The IP an IP packet names --------------------*- C++
//-*-===//
//
// Private to the core: for code that walks PT packet by packet with libipt's
// packet decoder (decode/StartQuirk.cpp, formats/perfdata/PerCpuLayout.cpp)
// rather than through its block decoder, which tracks the last IP itself.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_DECODE_PACKETIP_H
#define MAGIC_TRACE_LIB_DECODE_PACKETIP_H

#include <intel-pt.h>

#include <cstdint>
#include <memory>

namespace magic_trace {

struct PacketDecoderDeleter {
  void operator()(pt_packet_decoder *decoder) const {
    pt_pkt_free_decoder(decoder);
  }
};
/// libipt's packet decoder, freed when it goes.
using PacketDecoderPtr =
    std::unique_ptr<pt_packet_decoder, PacketDecoderDeleter>;

/// The IP a TIP, TIP.PGE, TIP.PGD or FUP packet names, given the last IP
/// (Intel SDM vol. 3C, "IP Compression"), which it updates. False when the
/// packet carries none (IPBytes 0: suppressed; the last IP is kept). A PSB
/// resets the last IP to 0.
inline bool resolvePacketIp(const pt_packet_ip &packet, uint64_t &lastIp,
                            uint64_t *ip) {
  switch (packet.ipc) {
  case pt_ipc_suppressed:
    return false;
  case pt_ipc_update_16:
    lastIp = (lastIp & ~uint64_t(0xffff)) | (packet.ip & 0xffff);
    break;
  case pt_ipc_update_32:
    lastIp = (lastIp & ~uint64_t(0xffffffff)) | (packet.ip & 0xffffffff);
    break;
  case pt_ipc_update_48:
    lastIp =
        (lastIp & ~uint64_t(0xffffffffffff)) | (packet.ip & 0xffffffffffff);
    break;
  case pt_ipc_sext_48:
    lastIp = uint64_t(int64_t(packet.ip << 16) >> 16);
    break;
  case pt_ipc_full:
    lastIp = packet.ip;
    break;
  }
  *ip = lastIp;
  return true;
}

} // namespace magic_trace

#endif
