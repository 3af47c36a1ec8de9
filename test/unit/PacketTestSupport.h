//===- PacketTestSupport.h - Reading back what a PacketWriter wrote -*- C++
//-*-===//
//
// Test helpers shared by the packet writer's unit tests: every check decodes
// the written bytes with libipt's packet decoder, so expectations come from
// the decoder and the Intel SDM, not from our own output.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TEST_PACKETTESTSUPPORT_H
#define MAGIC_TRACE_TEST_PACKETTESTSUPPORT_H

#include "magic_trace/PacketWriter.h"
#include "magic_trace/VirtualClock.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <memory>
#include <vector>

namespace magic_trace::packet_test {

inline constexpr uint64_t codeBase = 0x7f0000001000;

inline std::unique_ptr<PacketWriter> makeWriter(PacketWriter::Options options) {
  auto writer = PacketWriter::create(options);
  EXPECT_TRUE(bool(writer)) << llvm::toString(writer.takeError());
  return writer ? std::move(*writer) : nullptr;
}

inline PacketWriter::Options lowTimer() {
  PacketWriter::Options options;
  options.bufferSize = 1 << 16;
  options.timer = TimerResolution::Low;
  return options;
}

inline void setTiming(pt_config &config) {
  config.mtc_freq = VirtualClock::timing.mtcFreq;
  config.nom_freq = VirtualClock::timing.nomFreq;
  config.cpuid_0x15_eax = VirtualClock::timing.cpuid15Eax;
  config.cpuid_0x15_ebx = VirtualClock::timing.cpuid15Ebx;
}

struct Decoded {
  pt_packet packet;
  uint64_t offset;
  uint64_t ip; ///< IP packets: the full IP, decompressed against last IP.
};

/// Applies IP compression the way a decoder does (SDM "IP Compression"):
/// last IP resets at PSB and OVF.
inline void decompressIps(std::vector<Decoded> &packets) {
  uint64_t lastIp = 0;
  for (Decoded &item : packets) {
    pt_packet_type type = item.packet.type;
    if (type == ppt_psb || type == ppt_ovf)
      lastIp = 0;
    if (type != ppt_tip && type != ppt_fup && type != ppt_tip_pge &&
        type != ppt_tip_pgd)
      continue;
    uint64_t payload = item.packet.payload.ip.ip;
    switch (item.packet.payload.ip.ipc) {
    case pt_ipc_suppressed:
      continue;
    case pt_ipc_update_16:
      lastIp = (lastIp & ~0xffffull) | (payload & 0xffff);
      break;
    case pt_ipc_update_32:
      lastIp = (lastIp & ~0xffffffffull) | (payload & 0xffffffff);
      break;
    case pt_ipc_update_48:
      lastIp = (lastIp & ~0xffffffffffffull) | (payload & 0xffffffffffff);
      break;
    case pt_ipc_sext_48:
      lastIp = static_cast<uint64_t>(static_cast<int64_t>(payload << 16) >> 16);
      break;
    case pt_ipc_full:
      lastIp = payload;
      break;
    }
    item.ip = lastIp;
  }
}

/// Every packet from the first PSB on, decoded by libipt's packet decoder.
inline std::vector<Decoded> decodePackets(std::vector<uint8_t> bytes) {
  pt_config config;
  pt_config_init(&config);
  setTiming(config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  std::unique_ptr<pt_packet_decoder, void (*)(pt_packet_decoder *)> decoder(
      pt_pkt_alloc_decoder(&config), pt_pkt_free_decoder);
  EXPECT_TRUE(decoder);
  std::vector<Decoded> packets;
  EXPECT_GE(pt_pkt_sync_forward(decoder.get()), 0);
  for (;;) {
    Decoded item{};
    pt_pkt_get_offset(decoder.get(), &item.offset);
    int status = pt_pkt_next(decoder.get(), &item.packet, sizeof(item.packet));
    if (status == -pte_eos)
      break;
    EXPECT_GE(status, 0) << pt_errstr(pt_errcode(status)) << " at offset "
                         << item.offset;
    if (status < 0)
      break;
    packets.push_back(item);
  }
  decompressIps(packets);
  return packets;
}

inline std::vector<Decoded> decodePackets(const PacketWriter &writer) {
  return decodePackets(writer.buffer().snapshot());
}

/// The packet types, without timing packets unless asked for.
inline std::vector<pt_packet_type> types(const std::vector<Decoded> &packets,
                                         bool withTiming = false) {
  std::vector<pt_packet_type> result;
  for (const Decoded &item : packets) {
    pt_packet_type type = item.packet.type;
    if (!withTiming && (type == ppt_cyc || type == ppt_mtc || type == ppt_tsc ||
                        type == ppt_tma || type == ppt_cbr))
      continue;
    result.push_back(type);
  }
  return result;
}

/// Packets after the first TIP.PGE.
inline std::vector<Decoded> afterEnable(const std::vector<Decoded> &packets) {
  for (size_t i = 0; i < packets.size(); ++i)
    if (packets[i].packet.type == ppt_tip_pge)
      return std::vector<Decoded>(packets.begin() + i + 1, packets.end());
  ADD_FAILURE() << "no TIP.PGE";
  return {};
}

inline ExecutedInsn insn(uint64_t ip, uint8_t size, BranchClass branch,
                         uint64_t nextIp = 0) {
  ExecutedInsn result;
  result.ip = ip;
  result.size = size;
  result.branch = branch;
  result.nextIp = nextIp ? nextIp : ip + size;
  return result;
}

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    llvm::Error error = (expr);                                                \
    ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));             \
  } while (0)

} // namespace magic_trace::packet_test

#endif
