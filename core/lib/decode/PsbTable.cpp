//===- PsbTable.cpp - A buffer's PSBs and libipt's configuration ----------===//
#include "PsbTable.h"

#include "../base/PacketIp.h"

#include <memory>
#include <utility>

using namespace llvm;

namespace magic_trace::decode_detail {
namespace {

struct PsbPlus {
  bool fup = false;
  bool execMode = false;
  uint64_t tsc = 0; ///< Its TSC packet's payload, 0 without one.
};

/// Reads the PSB+ at the packet decoder's position (a PSB) up to its
/// PSBEND.
PsbPlus readPsbPlus(pt_packet_decoder *packets) {
  PsbPlus found;
  pt_packet packet;
  // The PSB itself, then the header packets; anything else ends the PSB+
  // (a damaged one: libipt resyncs past it).
  for (int count = 0; count < 64; ++count) {
    if (pt_pkt_next(packets, &packet, sizeof(packet)) < 0)
      break;
    if (packet.type == ppt_psbend || (count > 0 && packet.type == ppt_psb))
      break;
    if (packet.type == ppt_fup)
      found.fup = true;
    else if (packet.type == ppt_mode && packet.payload.mode.leaf == pt_mol_exec)
      found.execMode = true;
    else if (packet.type == ppt_tsc)
      found.tsc = packet.payload.tsc.tsc;
  }
  return found;
}

/// Whether the packet before `offset` is an OVF (02 f3), PADs (00) aside.
/// Read from the bytes: a payload that ends the same way only makes a PSB
/// not joinable, which costs parallelism and never correctness.
bool followsOverflow(const pt_config &config, uint64_t offset) {
  const uint8_t *at = config.begin + offset;
  while (at > config.begin && at[-1] == 0x00)
    --at;
  return at - config.begin >= 2 && at[-2] == 0x02 && at[-1] == 0xf3;
}

} // namespace

pt_config makeConfig(ArrayRef<uint8_t> bytes, const CpuIdentity &cpu,
                     const PtTimingConfig &timing) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t *>(bytes.data());
  config.end = const_cast<uint8_t *>(bytes.data() + bytes.size());
  // checkCpu() has accepted `cpu`: an Intel CPU, or "none" (no errata, on
  // the user's word).
  if (cpu.vendor == "GenuineIntel") {
    config.cpu.vendor = pcv_intel;
    config.cpu.family = static_cast<uint16_t>(cpu.family);
    config.cpu.model = static_cast<uint8_t>(cpu.model);
    config.cpu.stepping = static_cast<uint8_t>(cpu.stepping);
    if (pt_cpu_errata(&config.errata, &config.cpu) < 0)
      config.errata = pt_errata();
  }
  config.mtc_freq = timing.mtcFreq;
  config.nom_freq = timing.nomFreq;
  config.cpuid_0x15_eax = timing.cpuid15Eax;
  config.cpuid_0x15_ebx = timing.cpuid15Ebx;
  config.flags.variant.block.end_on_call = 1;
  config.flags.variant.block.end_on_jump = 1;
  return config;
}

PsbTable findPsbs(const pt_config &config) {
  PsbTable table;
  PacketDecoderPtr packets(pt_pkt_alloc_decoder(&config));
  if (!packets)
    return table;
  while (pt_pkt_sync_forward(packets.get()) >= 0) {
    uint64_t offset = 0;
    if (pt_pkt_get_sync_offset(packets.get(), &offset) < 0)
      break;
    if (!table.offsets.empty() && offset <= table.offsets.back())
      break;
    PsbPlus psb = readPsbPlus(packets.get());
    table.offsets.push_back(offset);
    table.tracing.push_back(psb.fup);
    table.joinable.push_back((!psb.fup || psb.execMode) &&
                             !followsOverflow(config, offset));
    table.tsc.push_back(psb.tsc);
    // Search on from right after this PSB, whatever the PSB+ held.
    if (pt_pkt_sync_set(packets.get(), offset) < 0)
      break;
  }
  return table;
}

bool hasTscPacket(const pt_config &config) {
  PacketDecoderPtr packets(pt_pkt_alloc_decoder(&config));
  if (!packets)
    return true;
  // After a bad packet, search on from the next PSB.
  while (pt_pkt_sync_forward(packets.get()) >= 0) {
    pt_packet packet;
    while (pt_pkt_next(packets.get(), &packet, sizeof(packet)) >= 0)
      if (packet.type == ppt_tsc)
        return true;
  }
  return false;
}

} // namespace magic_trace::decode_detail
