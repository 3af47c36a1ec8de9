// A quiet run whose TNT fills writes the TNT itself (PacketWriter::
// QuietRuns), with its CYC in cycle-accurate timing, instead of leaving the
// block to stepRunWithPackets: the bytes must be libipt's. Checked against
// libipt's own encoder: the CYC bytes for values across every length, and
// whole rings written by random programs both ways (QuietRuns loops as the
// QEMU recorder's block log drives them, against stepRunWithPackets for
// every run, which encodes each packet with libipt), in each timer mode,
// with compressed returns on and off, PSB+ due often and the ring wrapping.
#include "PacketTestSupport.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <random>

using namespace magic_trace;
using namespace magic_trace::packet_test;

namespace {

TEST(QuietTnt, CycBytesAreLibiptsForEveryLength) {
  std::vector<uint64_t> values;
  for (uint64_t value = 1; value < 5000; ++value)
    values.push_back(value);
  std::mt19937_64 random(7);
  for (int shift = 12; shift < 63; ++shift)
    for (int i = 0; i < 20; ++i)
      values.push_back((uint64_t(1) << shift) | (random() >> (64 - shift)));
  values.push_back(UINT64_MAX);
  std::vector<uint8_t> buffer(64);
  pt_config config;
  pt_config_init(&config);
  config.begin = buffer.data();
  config.end = buffer.data() + buffer.size();
  std::unique_ptr<pt_encoder, void (*)(pt_encoder *)> encoder(
      pt_alloc_encoder(&config), pt_free_encoder);
  ASSERT_TRUE(encoder);
  for (uint64_t value : values) {
    ASSERT_GE(pt_enc_sync_set(encoder.get(), 0), 0);
    pt_packet packet{};
    packet.type = ppt_cyc;
    packet.payload.cyc.value = value;
    int size = pt_enc_next(encoder.get(), &packet);
    ASSERT_GT(size, 0) << value;
    uint8_t ours[16] = {};
    size_t length = PacketWriter::QuietRuns::encodeCyc(value, ours);
    ASSERT_EQ(length, size_t(size)) << "value " << value;
    for (size_t i = 0; i < length; ++i)
      ASSERT_EQ(ours[i], buffer[i]) << "value " << value << " byte " << i;
  }
}

/// One run of a random program: `count` straight instructions from `ip`,
/// then `last`.
struct BlockRun {
  uint64_t ip;
  uint64_t count;
  ExecutedInsn last;
};

/// Runs through code at codeBase: mostly conditional branches (the TNTs
/// that fill), with calls and the returns that match them (compressed),
/// direct jumps, an indirect jump now and then (a TIP), and returns that
/// do not match (a TIP).
std::vector<BlockRun> randomRuns(uint64_t seed, size_t length) {
  std::mt19937_64 random(seed);
  std::vector<BlockRun> runs;
  std::vector<uint64_t> stack;
  uint64_t ip = codeBase;
  for (size_t i = 0; i < length; ++i) {
    BlockRun run{ip, random() % 12, {}};
    uint64_t lastIp = ip + run.count * 4;
    run.last.ip = lastIp;
    run.last.size = 2 + random() % 4;
    uint64_t fallThrough = lastIp + run.last.size;
    uint64_t far = codeBase + (random() % 4096) * 16;
    unsigned pick = random() % 100;
    if (pick < 60) {
      run.last.branch = BranchClass::CondBranch;
      run.last.nextIp = random() % 2 ? far : fallThrough;
    } else if (pick < 72 && stack.size() < 40) {
      run.last.branch = BranchClass::DirectCall;
      run.last.nextIp = far;
      stack.push_back(fallThrough);
    } else if (pick < 86 && !stack.empty()) {
      run.last.branch = BranchClass::Return;
      run.last.nextIp = stack.back();
      stack.pop_back();
    } else if (pick < 92) {
      run.last.branch = BranchClass::DirectJump;
      run.last.nextIp = far;
    } else if (pick < 96) {
      run.last.branch = BranchClass::IndirectJump;
      run.last.nextIp = far;
    } else {
      // A return elsewhere: the return stack no longer matches.
      run.last.branch = BranchClass::Return;
      run.last.nextIp = far;
      stack.clear();
    }
    runs.push_back(run);
    ip = run.last.nextIp;
  }
  return runs;
}

/// The ring after `runs`: through QuietRuns loops (a new one after each
/// run it declines, as the QEMU recorder drains its log), or through
/// stepRunWithPackets alone.
std::vector<uint8_t> write(const PacketWriter::Options &options,
                           const std::vector<BlockRun> &runs, bool quiet) {
  std::unique_ptr<PacketWriter> writer = makeWriter(options);
  EXPECT_FALSE(bool(writer->enable(codeBase)));
  size_t i = 0;
  while (i < runs.size()) {
    if (quiet) {
      PacketWriter::QuietRuns loop(*writer);
      while (i < runs.size() &&
             loop.step(runs[i].ip, runs[i].count, runs[i].last))
        ++i;
      loop.commit();
      if (i == runs.size())
        break;
    }
    llvm::Error error =
        writer->stepRunWithPackets(runs[i].ip, runs[i].count, runs[i].last);
    EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
    ++i;
  }
  EXPECT_FALSE(bool(writer->disable(runs.back().last.nextIp)));
  return writer->buffer().snapshot();
}

TEST(QuietTnt, RingsAreThoseOfLibiptsEncoder) {
  for (TimerResolution timer :
       {TimerResolution::Low, TimerResolution::Normal, TimerResolution::High})
    for (bool noRetComp : {false, true})
      for (uint64_t seed : {1, 2, 3}) {
        PacketWriter::Options options;
        options.bufferSize = 4096; // Wraps many times: writes at its end.
        options.psbPeriod = 256;   // A PSB+ due often.
        options.timer = timer;
        options.noRetComp = noRetComp;
        std::vector<BlockRun> runs = randomRuns(seed, 20000);
        std::vector<uint8_t> quiet = write(options, runs, true);
        std::vector<uint8_t> encoded = write(options, runs, false);
        ASSERT_EQ(quiet.size(), encoded.size());
        EXPECT_TRUE(quiet == encoded) << "timer " << int(timer) << " noRetComp "
                                      << noRetComp << " seed " << seed;
      }
}

} // namespace
