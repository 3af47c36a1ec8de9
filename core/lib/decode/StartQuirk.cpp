//===- StartQuirk.cpp - A PGE/PGD pair in which nothing ran ---------------===//
#include "StartQuirk.h"

#include "../base/PacketIp.h"

#include <intel-pt.h>

#include <memory>

namespace magic_trace::decode_detail {
namespace {

/// Packets that neither execute nor move the IP: between the pair and the
/// second PGE only these may come (Intel SDM vol. 3C, "Packet Definitions":
/// padding, status and timing packets).
bool isNeutral(pt_packet_type type) {
  switch (type) {
  case ppt_pad:
  case ppt_cbr:
  case ppt_mode:
  case ppt_tsc:
  case ppt_mtc:
  case ppt_cyc:
  case ppt_tma:
  case ppt_vmcs:
  case ppt_pip:
  case ppt_mnt:
    return true;
  default:
    return false;
  }
}

} // namespace

std::vector<uint8_t> padEmptyEnablePairs(llvm::ArrayRef<uint8_t> bytes,
                                         uint64_t from, unsigned *pairs) {
  if (pairs)
    *pairs = 0;
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t *>(bytes.data());
  config.end = const_cast<uint8_t *>(bytes.data() + bytes.size());
  PacketDecoderPtr decoder(pt_pkt_alloc_decoder(&config));
  if (!decoder)
    return {};
  std::vector<uint8_t> padded;
  // What was seen since the last PGE: 0 nothing, 1 the PGE, 2 then an
  // IP-less PGD.
  int state = 0;
  uint64_t lastIp = 0, pgeIp = 0;
  uint64_t pgeAt = 0, pgeEnd = 0, pgdAt = 0, pgdEnd = 0;
  // From the PSB at `from`, or the first one.
  int synced = from ? pt_pkt_sync_set(decoder.get(), from)
                    : pt_pkt_sync_forward(decoder.get());
  for (; synced >= 0; synced = pt_pkt_sync_forward(decoder.get())) {
    lastIp = 0;
    state = 0;
    pt_packet packet;
    uint64_t at = 0;
    while (pt_pkt_get_offset(decoder.get(), &at) >= 0 &&
           pt_pkt_next(decoder.get(), &packet, sizeof(packet)) >= 0) {
      if (packet.type == ppt_psb)
        lastIp = 0; // PSB resets IP compression.
      if (isNeutral(packet.type) || packet.type == ppt_psb ||
          packet.type == ppt_psbend)
        continue;
      uint64_t ip = 0;
      bool hasIp = false;
      if (packet.type == ppt_tip || packet.type == ppt_tip_pge ||
          packet.type == ppt_tip_pgd || packet.type == ppt_fup)
        hasIp = resolvePacketIp(packet.payload.ip, lastIp, &ip);
      if (packet.type == ppt_tip_pge && hasIp) {
        if (state == 2 && ip == pgeIp) {
          if (padded.empty())
            padded.assign(bytes.begin(), bytes.end());
          std::fill(padded.begin() + pgeAt, padded.begin() + pgeEnd, 0);
          std::fill(padded.begin() + pgdAt, padded.begin() + pgdEnd, 0);
          if (pairs)
            ++*pairs;
        }
        state = 1;
        pgeIp = ip;
        pgeAt = at;
        pgeEnd = at + packet.size;
        continue;
      }
      if (packet.type == ppt_tip_pgd && !hasIp && state == 1) {
        state = 2;
        pgdAt = at;
        pgdEnd = at + packet.size;
        continue;
      }
      state = 0;
    }
  }
  return padded;
}

} // namespace magic_trace::decode_detail
