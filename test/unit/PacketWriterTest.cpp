// Unit tests for the emulator's PT packet writer and ring buffer. Every check
// decodes the written bytes with libipt's packet decoder, so the
// expectations come from the decoder and the Intel SDM, not from our output
// (whole executions on a synthetic image: BlockDecoderSteppedTest.cpp).
#include "PacketTestSupport.h"

#include "magic_trace/PacketWriter.h"
#include "magic_trace/VirtualClock.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <map>
#include <random>

using namespace magic_trace;
using namespace magic_trace::packet_test;

namespace {

TEST(RingBufferTest, KeepsTheLastBytesOldestFirst) {
  EXPECT_FALSE(bool(RingBuffer::create(1000)));
  llvm::consumeError(RingBuffer::create(1000).takeError());
  llvm::consumeError(RingBuffer::create(2048).takeError());
  auto ring = RingBuffer::create(4096);
  ASSERT_TRUE(bool(ring));
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 7);
  ring->write(data.data(), 3000);
  EXPECT_FALSE(ring->wrapped());
  EXPECT_EQ(ring->snapshot(),
            std::vector<uint8_t>(data.begin(), data.begin() + 3000));
  ring->write(data.data() + 3000, 2000);
  EXPECT_TRUE(ring->wrapped());
  EXPECT_EQ(ring->written(), 5000u);
  EXPECT_EQ(ring->snapshot(),
            std::vector<uint8_t>(data.begin() + 904, data.end()));
  // A write longer than the ring keeps only its tail.
  ring->write(data.data(), 5000);
  EXPECT_EQ(ring->snapshot(),
            std::vector<uint8_t>(data.begin() + 904, data.end()));
}

TEST(PacketWriterTest, StartsWithPsbPlusThenTipPge) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  auto packets = decodePackets(*writer);
  std::vector<pt_packet_type> expected = {
      ppt_psb, ppt_tsc, ppt_tma, ppt_cbr, ppt_mode, ppt_psbend, ppt_tip_pge};
  EXPECT_EQ(types(packets, /*withTiming=*/true), expected);
  EXPECT_EQ(packets[0].offset, 0u);
  EXPECT_EQ(packets[1].packet.payload.tsc.tsc, VirtualClock::startTsc);
  EXPECT_EQ(pt_get_exec_mode(&packets[4].packet.payload.mode.bits.exec),
            ptem_64bit);
  // libipt forgets its last IP at PSB: the first IP stands alone.
  EXPECT_EQ(packets[6].packet.payload.ip.ipc, pt_ipc_sext_48);
  EXPECT_EQ(packets[6].packet.payload.ip.ip, codeBase);
  llvm::Error twice = writer->enable(codeBase);
  EXPECT_TRUE(bool(twice));
  llvm::consumeError(std::move(twice));
}

TEST(PacketWriterTest, RefusesGapsInTheInstructionStream) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  ASSERT_OK(writer->step(insn(codeBase, 2, BranchClass::Other)));
  llvm::Error gap = writer->step(insn(codeBase + 8, 2, BranchClass::Other));
  ASSERT_TRUE(bool(gap));
  std::string message = llvm::toString(std::move(gap));
  EXPECT_NE(message.find("7f0000001008"), std::string::npos) << message;
  EXPECT_NE(message.find("7f0000001002"), std::string::npos) << message;
}

TEST(PacketWriterTest, StepBeforeEnableFails) {
  auto writer = makeWriter(lowTimer());
  llvm::Error error = writer->step(insn(codeBase, 1, BranchClass::Other));
  ASSERT_TRUE(bool(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("7f0000001000"),
            std::string::npos);
}

TEST(PacketWriterTest, TntBitsFlushBeforeTipOldestFirst) {
  auto writer = makeWriter(lowTimer());
  uint64_t ip = codeBase;
  ASSERT_OK(writer->enable(ip));
  // taken, not taken, taken; then an indirect jump.
  ASSERT_OK(writer->step(insn(ip, 2, BranchClass::CondBranch, ip + 0x10)));
  ip += 0x10;
  ASSERT_OK(writer->step(insn(ip, 2, BranchClass::CondBranch)));
  ip += 2;
  ASSERT_OK(writer->step(insn(ip, 2, BranchClass::CondBranch, ip + 0x20)));
  ip += 0x20;
  ASSERT_OK(
      writer->step(insn(ip, 2, BranchClass::IndirectJump, codeBase + 0x500)));
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(types(packets), (std::vector<pt_packet_type>{ppt_tnt_8, ppt_tip}));
  EXPECT_EQ(packets[0].packet.payload.tnt.bit_size, 3);
  EXPECT_EQ(packets[0].packet.payload.tnt.payload, 0b101u);
  EXPECT_EQ(packets[1].ip, codeBase + 0x500);
}

TEST(PacketWriterTest, ShortTntHoldsSixBits) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  for (int i = 0; i < 7; ++i)
    ASSERT_OK(
        writer->step(insn(codeBase, 2, BranchClass::CondBranch, codeBase)));
  ASSERT_OK(writer->disable(codeBase));
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(types(packets), (std::vector<pt_packet_type>{
                                ppt_tnt_8, ppt_tnt_8, ppt_fup, ppt_tip_pgd}));
  EXPECT_EQ(packets[0].packet.payload.tnt.bit_size, 6);
  EXPECT_EQ(packets[0].packet.payload.tnt.payload, 0b111111u);
  EXPECT_EQ(packets[1].packet.payload.tnt.bit_size, 1);
}

TEST(PacketWriterTest, ReturnToCallSiteIsCompressed) {
  for (bool noRetComp : {false, true}) {
    auto options = lowTimer();
    options.noRetComp = noRetComp;
    auto writer = makeWriter(options);
    uint64_t callee = codeBase + 0x100;
    ASSERT_OK(writer->enable(codeBase));
    ASSERT_OK(writer->step(insn(codeBase, 5, BranchClass::DirectCall, callee)));
    ASSERT_OK(writer->step(insn(callee, 1, BranchClass::Return, codeBase + 5)));
    ASSERT_OK(writer->disable(codeBase + 5));
    auto packets = afterEnable(decodePackets(*writer));
    if (noRetComp) {
      EXPECT_EQ(types(packets),
                (std::vector<pt_packet_type>{ppt_tip, ppt_fup, ppt_tip_pgd}));
      continue;
    }
    ASSERT_EQ(types(packets),
              (std::vector<pt_packet_type>{ppt_tnt_8, ppt_fup, ppt_tip_pgd}));
    EXPECT_EQ(packets[0].packet.payload.tnt.bit_size, 1);
    EXPECT_EQ(packets[0].packet.payload.tnt.payload, 1u);
  }
}

TEST(PacketWriterTest, HighTimerResolutionNeverCompressesReturns) {
  auto options = lowTimer();
  options.timer = TimerResolution::High;
  auto writer = makeWriter(options);
  ASSERT_OK(writer->enable(codeBase));
  ASSERT_OK(writer->step(
      insn(codeBase, 5, BranchClass::DirectCall, codeBase + 0x100)));
  ASSERT_OK(writer->step(
      insn(codeBase + 0x100, 1, BranchClass::Return, codeBase + 5)));
  auto packets = types(afterEnable(decodePackets(*writer)));
  EXPECT_EQ(std::count(packets.begin(), packets.end(), ppt_tip), 1);
  EXPECT_EQ(std::count(packets.begin(), packets.end(), ppt_tnt_8), 0);
}

TEST(PacketWriterTest, ReturnElsewhereOrToCallNextGetsTip) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  // A return to somewhere other than the call site (longjmp-like).
  ASSERT_OK(writer->step(
      insn(codeBase, 5, BranchClass::DirectCall, codeBase + 0x100)));
  ASSERT_OK(writer->step(
      insn(codeBase + 0x100, 1, BranchClass::Return, codeBase + 0x300)));
  // `call next` (the PIC idiom) is not pushed: libipt does not push it.
  ASSERT_OK(writer->step(insn(codeBase + 0x300, 5, BranchClass::DirectCall)));
  ASSERT_OK(writer->step(
      insn(codeBase + 0x305, 1, BranchClass::Return, codeBase + 0x305)));
  auto packets = types(afterEnable(decodePackets(*writer)));
  EXPECT_EQ(packets, (std::vector<pt_packet_type>{ppt_tip, ppt_tip}));
}

// The return rule (docs/decoder.md, "Return compression"): libipt pops its
// return stack only on a compressed RET, Linux perf's decoder on every RET.
// They part after an uncompressed RET that misses its CALL's next IP. The
// writer then empties its stack, so every RET it compresses is the top of
// both decoders' stacks: modelled here step by step under both rules.
TEST(PacketWriterTest, CompressedReturnsDecodeTheSameUnderBothReturnRules) {
  uint64_t a = codeBase + 0x100, b = codeBase + 0x200, c = codeBase + 0x300;
  uint64_t d = codeBase + 0x400, e = codeBase + 0x500;
  struct Step {
    uint64_t ip;
    uint8_t size;
    BranchClass kind;
    uint64_t target;
  };
  // main -> A -> B; B returns elsewhere in A (the miss); then, in the first
  // case, a RET to the entry only libipt kept (push; ret) and A's RET to
  // main; in the second, A's RET to main at once (the entry only perf
  // kept). Then C and D -> E return normally.
  const Step before[] = {
      {codeBase, 5, BranchClass::DirectCall, a},
      {a, 5, BranchClass::DirectCall, b},
      {b, 1, BranchClass::Return, a + 0x40},
  };
  const Step toLibiptTop[] = {
      {a + 0x40, 1, BranchClass::Return, a + 5},
      {a + 5, 1, BranchClass::Return, codeBase + 5},
  };
  const Step toPerfTop[] = {
      {a + 0x40, 1, BranchClass::Return, codeBase + 5},
  };
  const Step after[] = {
      {codeBase + 5, 5, BranchClass::DirectCall, c},
      {c, 1, BranchClass::Return, codeBase + 10},
      {codeBase + 10, 5, BranchClass::DirectCall, d},
      {d, 5, BranchClass::DirectCall, e},
      {e, 1, BranchClass::Return, d + 5},
      {d + 5, 1, BranchClass::Return, codeBase + 15},
  };
  for (llvm::ArrayRef<Step> middle :
       {llvm::ArrayRef<Step>(toLibiptTop), llvm::ArrayRef<Step>(toPerfTop)}) {
    std::vector<Step> steps(std::begin(before), std::end(before));
    steps.insert(steps.end(), middle.begin(), middle.end());
    steps.insert(steps.end(), std::begin(after), std::end(after));
    auto writer = makeWriter(lowTimer());
    ASSERT_OK(writer->enable(codeBase));
    for (const Step &step : steps)
      ASSERT_OK(writer->step(insn(step.ip, step.size, step.kind, step.target)));
    ASSERT_OK(writer->disable(codeBase + 15));
    // Only RETs make packets here: a taken TNT bit is a compressed RET, a
    // TIP an uncompressed one, in program order (TNT flushes before a TIP).
    std::vector<bool> compressed;
    for (const Decoded &item : afterEnable(decodePackets(*writer))) {
      if (item.packet.type == ppt_tnt_8 || item.packet.type == ppt_tnt_64) {
        for (int bit = item.packet.payload.tnt.bit_size - 1; bit >= 0; --bit) {
          ASSERT_TRUE((item.packet.payload.tnt.payload >> bit) & 1);
          compressed.push_back(true);
        }
      } else if (item.packet.type == ppt_tip) {
        compressed.push_back(false);
      }
    }
    // The miss and every RET after it until new CALLs: TIPs.
    std::vector<bool> expected(1 + middle.size(), false);
    expected.insert(expected.end(), 3, true);
    EXPECT_EQ(compressed, expected);
    std::vector<uint64_t> libipt, perf; // Each rule's return stack.
    size_t ret = 0;
    for (const Step &step : steps) {
      if (step.kind == BranchClass::DirectCall) {
        libipt.push_back(step.ip + step.size);
        perf.push_back(step.ip + step.size);
        continue;
      }
      ASSERT_LT(ret, compressed.size());
      if (compressed[ret++]) {
        ASSERT_FALSE(libipt.empty() || perf.empty());
        EXPECT_EQ(libipt.back(), step.target);
        EXPECT_EQ(perf.back(), step.target);
        libipt.pop_back();
        perf.pop_back();
      } else if (!perf.empty()) {
        perf.pop_back(); // perf pops on every RET; libipt keeps its entry.
      }
    }
    // The rules did part (the stacks differ), which is why the RETs after
    // the miss had to be TIPs.
    EXPECT_NE(libipt, perf);
  }
}

TEST(PacketWriterTest, ReturnStackHoldsSixtyFourCalls) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  // f: jz f+7; call f; ret -- recursing 64 deep below the call from main.
  uint64_t f = codeBase + 0x100;
  ASSERT_OK(writer->step(insn(codeBase, 5, BranchClass::DirectCall, f)));
  for (int i = 0; i < 64; ++i) {
    ASSERT_OK(writer->step(insn(f, 2, BranchClass::CondBranch)));
    ASSERT_OK(writer->step(insn(f + 2, 5, BranchClass::DirectCall, f)));
  }
  ASSERT_OK(writer->step(insn(f, 2, BranchClass::CondBranch, f + 7)));
  for (int i = 0; i < 64; ++i)
    ASSERT_OK(writer->step(insn(f + 7, 1, BranchClass::Return, f + 7)));
  // 65 calls were pushed; the outermost fell out of libipt's 64 entries.
  ASSERT_OK(writer->step(insn(f + 7, 1, BranchClass::Return, codeBase + 5)));
  ASSERT_OK(writer->disable(codeBase + 5));
  auto packets = afterEnable(decodePackets(*writer));
  unsigned tntBits = 0, tips = 0;
  for (const Decoded &item : packets) {
    if (item.packet.type == ppt_tnt_8)
      tntBits += item.packet.payload.tnt.bit_size;
    tips += item.packet.type == ppt_tip;
  }
  EXPECT_EQ(tntBits, 65u + 64u); // every jz, and 64 compressed returns
  EXPECT_EQ(tips, 1u);
}

TEST(PacketWriterTest, IpCompressionIsTheSmallestThatFits) {
  auto writer = makeWriter(lowTimer());
  std::vector<std::pair<uint64_t, pt_ip_compression>> targets = {
      {0x00007fff12345678, pt_ipc_update_16}, // same upper 48 bits
      {0x00007fff99990000, pt_ipc_update_32}, // same upper 32 bits
      {0x0000555500001000, pt_ipc_sext_48},   // canonical, upper differ
      {0x0001000000000000, pt_ipc_full},      // not canonical
      {0x0001800000000000, pt_ipc_update_48}, // same upper 16 bits
      {0x0001800000001234, pt_ipc_update_16}};
  ASSERT_OK(writer->enable(0x00007fff12340000));
  uint64_t ip = 0x00007fff12340000;
  for (auto [target, ipc] : targets) {
    ASSERT_OK(writer->step(insn(ip, 2, BranchClass::IndirectJump, target)));
    ip = target;
  }
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(packets.size(), targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    EXPECT_EQ(packets[i].packet.payload.ip.ipc, targets[i].second) << i;
  }
}

TEST(PacketWriterTest, PsbEveryPeriodWithFupAtTheNextInstruction) {
  auto options = lowTimer();
  options.psbPeriod = 256;
  auto writer = makeWriter(options);
  uint64_t ip = codeBase;
  ASSERT_OK(writer->enable(ip));
  std::mt19937 random(1);
  for (int i = 0; i < 2000; ++i) {
    // Targets far apart, so most TIPs need 4 or 6 bytes.
    uint64_t target = codeBase + (random() & 0xffffff0);
    ASSERT_OK(writer->step(insn(ip, 2, BranchClass::IndirectJump, target)));
    ip = target;
  }
  auto packets = decodePackets(*writer);
  std::vector<uint64_t> psbOffsets;
  for (size_t i = 0; i < packets.size(); ++i) {
    if (packets[i].packet.type != ppt_psb)
      continue;
    psbOffsets.push_back(packets[i].offset);
    if (psbOffsets.size() == 1)
      continue;
    // PSB+ of a running trace: the FUP names the IP where execution goes on
    // (the last TIP's target), with a stand-alone compression.
    size_t j = i;
    while (packets[j].packet.type != ppt_fup &&
           packets[j].packet.type != ppt_psbend)
      ++j;
    ASSERT_EQ(packets[j].packet.type, ppt_fup);
    EXPECT_EQ(packets[j].packet.payload.ip.ipc, pt_ipc_sext_48);
    ASSERT_GT(i, 0u);
    EXPECT_EQ(packets[i - 1].packet.type, ppt_tip);
    EXPECT_EQ(packets[j].ip, packets[i - 1].ip);
  }
  ASSERT_GT(psbOffsets.size(), 10u);
  for (size_t i = 1; i < psbOffsets.size(); ++i) {
    uint64_t gap = psbOffsets[i] - psbOffsets[i - 1];
    EXPECT_GE(gap, 256u);
    EXPECT_LT(gap, 256u + 16u); // at most one instruction's packets late
  }
}

TEST(PacketWriterTest, SyscallDisablesWithSuppressedIpAndEnableResumes) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  ASSERT_OK(writer->step(insn(codeBase, 2, BranchClass::CondBranch)));
  ASSERT_OK(writer->step(insn(codeBase + 2, 2, BranchClass::Syscall)));
  llvm::Error stepped = writer->step(insn(codeBase + 4, 1, BranchClass::Other));
  EXPECT_TRUE(bool(stepped)); // tracing is off until enable()
  llvm::consumeError(std::move(stepped));
  ASSERT_OK(writer->enable(codeBase + 4));
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(types(packets),
            (std::vector<pt_packet_type>{ppt_tnt_8, ppt_tip_pgd, ppt_tip_pge}));
  EXPECT_EQ(packets[1].packet.payload.ip.ipc, pt_ipc_suppressed);
  EXPECT_EQ(packets[2].ip, codeBase + 4);
}

TEST(PacketWriterTest, InterruptAndDisableWriteFupThenPgd) {
  auto writer = makeWriter(lowTimer());
  ASSERT_OK(writer->enable(codeBase));
  ASSERT_OK(writer->step(insn(codeBase, 2, BranchClass::CondBranch)));
  ASSERT_OK(writer->interrupt(codeBase + 2));
  ASSERT_OK(writer->enable(codeBase + 0x800));
  ASSERT_OK(writer->step(insn(codeBase + 0x800, 1, BranchClass::Other)));
  ASSERT_OK(writer->disable(codeBase + 0x801));
  ASSERT_OK(writer->disable(codeBase + 0x801)); // already off: nothing
  auto packets = afterEnable(decodePackets(*writer));
  ASSERT_EQ(types(packets),
            (std::vector<pt_packet_type>{ppt_tnt_8, ppt_fup, ppt_tip_pgd,
                                         ppt_tip_pge, ppt_fup, ppt_tip_pgd}));
  EXPECT_EQ(packets[1].ip, codeBase + 2);
  EXPECT_EQ(packets[2].packet.payload.ip.ipc, pt_ipc_suppressed);
  EXPECT_EQ(packets[4].ip, codeBase + 0x801);
}

TEST(PacketWriterTest, OverflowDropsInstructionsThenOvfAndFup) {
  auto options = lowTimer();
  options.overflowEvery = 100;
  auto writer = makeWriter(options);
  ASSERT_OK(writer->enable(codeBase));
  std::vector<uint64_t> ips;
  uint64_t ip = codeBase;
  for (int i = 0; i < 250; ++i) {
    uint64_t target = codeBase + 0x100 * ((i % 7) + 1);
    ips.push_back(ip);
    ASSERT_OK(writer->step(insn(ip, 2, BranchClass::IndirectJump, target)));
    ip = target;
  }
  using Range = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(writer->lostInstructions(),
            (std::vector<Range>{{100, 8}, {200, 8}}));
  EXPECT_EQ(writer->instructions(), 250u);
  auto packets = afterEnable(decodePackets(*writer));
  std::vector<uint64_t> fupAfterOvf;
  unsigned tips = 0;
  for (size_t i = 0; i < packets.size(); ++i) {
    tips += packets[i].packet.type == ppt_tip;
    if (packets[i].packet.type != ppt_ovf)
      continue;
    ASSERT_LT(i + 1, packets.size());
    ASSERT_EQ(packets[i + 1].packet.type, ppt_fup);
    EXPECT_NE(packets[i + 1].packet.payload.ip.ipc, pt_ipc_update_16);
    fupAfterOvf.push_back(packets[i + 1].ip);
  }
  EXPECT_EQ(fupAfterOvf, (std::vector<uint64_t>{ips[108], ips[208]}));
  EXPECT_EQ(tips, 250u - 16u);
}

TEST(PacketWriterTest, TimingPacketsFollowTheVirtualClock) {
  for (TimerResolution timer :
       {TimerResolution::Low, TimerResolution::Normal}) {
    auto options = lowTimer();
    options.timer = timer;
    auto writer = makeWriter(options);
    ASSERT_OK(writer->enable(codeBase));
    // Two taken branches jumping at each other.
    uint64_t ip = codeBase, other = codeBase + 0x40;
    for (int i = 0; i < 5000; ++i) {
      ASSERT_OK(writer->step(insn(ip, 2, BranchClass::CondBranch, other)));
      std::swap(ip, other);
    }
    auto packets = decodePackets(*writer);
    unsigned mtcs = 0, cycs = 0;
    uint64_t cycSum = 0;
    bool tntPending = false;
    for (const Decoded &item : packets) {
      mtcs += item.packet.type == ppt_mtc;
      if (item.packet.type == ppt_cyc) {
        ++cycs;
        cycSum += item.packet.payload.cyc.value;
      }
      tntPending = item.packet.type == ppt_tnt_8;
    }
    // MTC every 2^3 CTC ticks of 120 TSC ticks = 960 instructions.
    EXPECT_GE(mtcs, 5000u / 960u - 1);
    EXPECT_LE(mtcs, 5000u / 960u + 1);
    if (timer == TimerResolution::Low) {
      EXPECT_EQ(cycs, 0u);
    } else {
      EXPECT_GT(cycs, 5000u / 6 - 10);
      EXPECT_LE(cycSum, 5000u);
      EXPECT_GT(cycSum, 5000u - 6);
    }
    (void)tntPending;
    EXPECT_EQ(writer->timeConversion().tscToNs(3000), 1000u);
  }
}

// Whole executions through the block decoder: BlockDecoderSteppedTest.cpp.

} // namespace
