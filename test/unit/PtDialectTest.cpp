// Unit tests for the packet writer's hardware dialects (PtDialect): each
// writes the packet shape it names, read back with libipt's packet decoder
// and checked against the Intel SDM's rules for it. Whole executions in each
// dialect are checked against ground truth, LLDB's decoder and the reference
// decoder in test/lit/emulator/dialects.test.
#include "PacketTestSupport.h"

#include "magic_trace/PacketWriter.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

using namespace magic_trace;
using namespace magic_trace::packet_test;

namespace {

PacketWriter::Options withDialect(PtDialect dialect) {
  PacketWriter::Options options = lowTimer();
  options.dialect = dialect;
  return options;
}

/// The packet types from the first PSB to its PSBEND, timing included.
std::vector<pt_packet_type> firstPsbPlus(const std::vector<Decoded> &packets) {
  std::vector<pt_packet_type> result;
  for (const Decoded &item : packets) {
    result.push_back(item.packet.type);
    if (item.packet.type == ppt_psbend)
      break;
  }
  return result;
}

TEST(PtDialectTest, StatusPacketsAfterModeExecInPsbPlus) {
  PtDialect dialect;
  dialect.statusAfterModeExec = true;
  auto writer = makeWriter(withDialect(dialect));
  ASSERT_OK(writer->enable(codeBase));
  auto packets = decodePackets(*writer);
  // Tracing is off at the first PSB+: no FUP.
  EXPECT_EQ(
      firstPsbPlus(packets),
      (std::vector<pt_packet_type>{ppt_psb, ppt_tsc, ppt_tma, ppt_mode, ppt_cbr,
                                   ppt_pip, ppt_mode, ppt_psbend}));
  EXPECT_EQ(packets[3].packet.payload.mode.leaf, pt_mol_exec);
  EXPECT_EQ(packets[6].packet.payload.mode.leaf, pt_mol_tsx);
}

TEST(PtDialectTest, PsbPlusWhileOffHasTimingOnlyAndModeExecBindsToPge) {
  PtDialect dialect;
  dialect.psbOffTimingOnly = true;
  auto writer = makeWriter(withDialect(dialect));
  ASSERT_OK(writer->enable(codeBase));
  auto packets = decodePackets(*writer);
  EXPECT_EQ(types(packets, /*withTiming=*/true),
            (std::vector<pt_packet_type>{ppt_psb, ppt_tsc, ppt_tma, ppt_cbr,
                                         ppt_psbend, ppt_mode, ppt_tip_pge}));
}

TEST(PtDialectTest, Bdm70FupInPsbPlusWhileOffThenPge) {
  PtDialect dialect;
  dialect.fupInOffPsb = true;
  auto writer = makeWriter(withDialect(dialect));
  ASSERT_OK(writer->enable(codeBase));
  auto packets = decodePackets(*writer);
  EXPECT_EQ(types(packets),
            (std::vector<pt_packet_type>{ppt_psb, ppt_mode, ppt_fup, ppt_psbend,
                                         ppt_tip_pge}));
  // A decoder with the workaround drops the FUP whole, so the TIP.PGE must
  // stand alone, not be compressed against it.
  EXPECT_EQ(packets.back().packet.payload.ip.ipc, pt_ipc_sext_48);
  EXPECT_EQ(dialectCpu(dialect).model, 158u);
  EXPECT_EQ(dialectCpu(PtDialect()).model, emulatorCpu().model);
}

TEST(PtDialectTest, PadAfterEveryNthPacket) {
  PtDialect dialect;
  dialect.padEvery = 3;
  auto writer = makeWriter(withDialect(dialect));
  ASSERT_OK(writer->enable(codeBase));
  auto all = types(decodePackets(*writer), /*withTiming=*/true);
  // psb tsc tma PAD cbr mode psbend PAD tip.pge
  EXPECT_EQ(all, (std::vector<pt_packet_type>{
                     ppt_psb, ppt_tsc, ppt_tma, ppt_pad, ppt_cbr, ppt_mode,
                     ppt_psbend, ppt_pad, ppt_tip_pge}));
}

TEST(PtDialectTest, LongTntHoldsFortySevenBits) {
  PtDialect dialect;
  dialect.tnt64 = true;
  auto writer = makeWriter(withDialect(dialect));
  ASSERT_OK(writer->enable(codeBase));
  for (int i = 0; i < 48; ++i)
    ASSERT_OK(
        writer->step(insn(codeBase, 2, BranchClass::CondBranch, codeBase)));
  ASSERT_OK(writer->disable(codeBase));
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(types(packets), (std::vector<pt_packet_type>{
                                ppt_tnt_64, ppt_tnt_64, ppt_fup, ppt_tip_pgd}));
  EXPECT_EQ(packets[0].packet.payload.tnt.bit_size, 47);
  EXPECT_EQ(packets[1].packet.payload.tnt.bit_size, 1);
}

TEST(PtDialectTest, DeferredTipFollowsTheTntItWaitedBehind) {
  PtDialect dialect;
  dialect.deferTips = true;
  auto writer = makeWriter(withDialect(dialect));
  uint64_t ip = codeBase;
  ASSERT_OK(writer->enable(ip));
  // Jcc taken, indirect jump, Jcc not taken: the TIP waits behind the TNT.
  ASSERT_OK(writer->step(insn(ip, 2, BranchClass::CondBranch, ip + 0x10)));
  ip += 0x10;
  ASSERT_OK(writer->step(insn(ip, 2, BranchClass::IndirectJump, ip + 0x100)));
  ip += 0x100;
  ASSERT_OK(writer->step(insn(ip, 2, BranchClass::CondBranch)));
  ip += 2;
  // An uncompressed return is never deferred: it forces the TNT out (the
  // SDM's rule that lets a decoder tell it from a compressed one).
  ASSERT_OK(writer->step(insn(ip, 1, BranchClass::Return, codeBase + 0x900)));
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(types(packets),
            (std::vector<pt_packet_type>{ppt_tnt_8, ppt_tip, ppt_tip}));
  EXPECT_EQ(packets[0].packet.payload.tnt.bit_size, 2);
  EXPECT_EQ(packets[0].packet.payload.tnt.payload, 0b10u);
  EXPECT_EQ(packets[1].ip, codeBase + 0x110);
  EXPECT_EQ(packets[2].ip, codeBase + 0x900);
}

TEST(PtDialectTest, ParsesItsNames) {
  auto all = parseDialect("all");
  ASSERT_TRUE(bool(all));
  EXPECT_TRUE(all->statusAfterModeExec && all->psbOffTimingOnly &&
              all->padEvery && all->tnt64 && all->fupInOffPsb &&
              all->deferTips);
  auto two = parseDialect("tnt64,pad");
  ASSERT_TRUE(bool(two));
  EXPECT_TRUE(two->tnt64 && two->padEvery && !two->deferTips);
  auto none = parseDialect("");
  ASSERT_TRUE(bool(none));
  EXPECT_FALSE(none->any());
  auto bad = parseDialect("tnt64,nonsense");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("unknown dialect 'nonsense'"),
            std::string::npos);
}

} // namespace
