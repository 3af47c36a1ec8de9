//===- BoundaryPackets.cpp - PT packets at per-CPU piece boundaries -------===//
#include "BoundaryPackets.h"

#include "llvm/Support/ErrorHandling.h"

namespace magic_trace::perfdata {

void encodePacket(const pt_packet &packet, std::vector<uint8_t> &out) {
  uint8_t buffer[32];
  pt_config config;
  pt_config_init(&config);
  config.begin = buffer;
  config.end = buffer + sizeof(buffer);
  pt_encoder *encoder = pt_alloc_encoder(&config);
  int size = encoder ? pt_enc_next(encoder, &packet) : -pte_nomem;
  pt_free_encoder(encoder);
  if (size <= 0)
    llvm::report_fatal_error("libipt cannot encode a per-CPU boundary packet");
  out.insert(out.end(), buffer, buffer + size);
}

void encodeIpPacket(pt_packet_type type, uint64_t ip,
                    std::vector<uint8_t> &out) {
  pt_packet packet = {};
  packet.type = type;
  packet.payload.ip.ipc =
      type == ppt_tip_pgd ? pt_ipc_suppressed : pt_ipc_sext_48;
  packet.payload.ip.ip = ip;
  encodePacket(packet, out);
}

std::optional<uint64_t> psbFupIp(llvm::ArrayRef<uint8_t> bytes) {
  if (bytes.empty())
    return std::nullopt;
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t *>(bytes.data());
  config.end = config.begin + bytes.size();
  PacketDecoderPtr decoder(pt_pkt_alloc_decoder(&config));
  if (!decoder || pt_pkt_sync_set(decoder.get(), 0) < 0)
    return std::nullopt;
  std::optional<uint64_t> fup;
  uint64_t lastIp = 0;
  for (bool first = true;; first = false) {
    pt_packet packet;
    if (pt_pkt_next(decoder.get(), &packet, sizeof(packet)) < 0)
      return std::nullopt;
    if (first != (packet.type == ppt_psb))
      return std::nullopt; // Not a PSB first, or a second PSB.
    if (packet.type == ppt_psbend)
      return fup;
    uint64_t ip = 0;
    if (packet.type == ppt_fup &&
        resolvePacketIp(packet.payload.ip, lastIp, &ip))
      fup = ip;
  }
}

} // namespace magic_trace::perfdata
