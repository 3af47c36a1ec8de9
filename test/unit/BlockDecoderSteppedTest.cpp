// The block decoder against the packet writer on whole executions: a
// synthetic program (hand-assembled, its branches taken at random) stepped
// by an interpreter that writes PT, in every mode the writer has (wrapped
// rings, overflows, compressed returns, timing), decoded by our block
// decoder and checked against the instructions the interpreter ran.
#include "PacketTestSupport.h"

#include "magic_trace/Decoder.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/VirtualClock.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <map>
#include <random>

using namespace magic_trace;
using namespace magic_trace::packet_test;

namespace {

/// A tiny program at codeBase, assembled by hand (encodings from the SDM),
/// and an interpreter that picks branch outcomes at random:
///   main:  call f; jnz main; syscall; jmp main
///   f:     endbr64; jz .skip; call f; .skip: call rax (-> g0..g3); ret
///   g0,2,3: nop; jmp rax (-> +0x10); ret (sometimes to the caller's caller)
///   g1:    call next; pop rcx; jmp rax (-> +0x10); ret
class SyntheticProgram {
public:
  static constexpr uint64_t mainIp = codeBase;
  static constexpr uint64_t fIp = codeBase + 0x100;
  static uint64_t g(unsigned j) { return codeBase + 0x200 + j * 0x20; }

  SyntheticProgram() : memory(0x400, 0xcc) {
    put(mainIp, {0xe8}, BranchClass::DirectCall);
    put32(mainIp + 1, fIp - (mainIp + 5));
    put(mainIp + 5, {0x75, 0xf9}, BranchClass::CondBranch); // jnz main
    put(mainIp + 7, {0x0f, 0x05}, BranchClass::Syscall);
    put(mainIp + 9, {0xeb, 0xf5}, BranchClass::DirectJump); // jmp main
    put(fIp, {0xf3, 0x0f, 0x1e, 0xfa}, BranchClass::Other);
    put(fIp + 4, {0x74, 0x05}, BranchClass::CondBranch); // jz f+0xb
    put(fIp + 6, {0xe8}, BranchClass::DirectCall);
    put32(fIp + 7, fIp - (fIp + 0xb));
    put(fIp + 0xb, {0xff, 0xd0}, BranchClass::IndirectCall);
    put(fIp + 0xd, {0xc3}, BranchClass::Return);
    for (unsigned j = 0; j < 4; ++j) {
      if (j == 1) {
        put(g(j), {0xe8, 0, 0, 0, 0}, BranchClass::DirectCall);
        put(g(j) + 5, {0x59}, BranchClass::Other);
        put(g(j) + 6, {0xff, 0xe0}, BranchClass::IndirectJump);
      } else {
        put(g(j), {0x90}, BranchClass::Other);
        put(g(j) + 1, {0xff, 0xe0}, BranchClass::IndirectJump);
      }
      put(g(j) + 0x10, {0xc3}, BranchClass::Return);
    }
  }

  /// Runs `count` instructions into `writer`; returns their addresses.
  /// `byRuns`: as the QEMU recorder does, straight runs of Other
  /// instructions go to stepRun together with the instruction after them
  /// (its inline quiet path and its packet paths), the rest to step().
  std::vector<uint64_t> run(PacketWriter &writer, size_t count, unsigned seed,
                            bool byRuns = false) {
    std::mt19937 random(seed);
    std::vector<uint64_t> stack, executed;
    std::vector<ExecutedInsn> straight; // Of the run not yet written.
    uint64_t ip = mainIp;
    unsigned depth = 0, wantedDepth = 1;
    EXPECT_FALSE(bool(writer.enable(ip)));
    while (executed.size() < count) {
      auto found = insns.find(ip);
      if (found == insns.end()) {
        ADD_FAILURE() << "the interpreter went astray at " << std::hex << ip;
        return executed;
      }
      const Insn &at = found->second;
      uint64_t next = ip + at.size;
      if (ip == mainIp) {
        wantedDepth = 1 + random() % 80;
        depth = 0;
      }
      if (ip == mainIp + 5) // loop again most of the time
        next = random() % 8 ? mainIp : next;
      if (ip == fIp + 4) // recurse until the wanted depth
        next = ++depth >= wantedDepth ? fIp + 0xb : next;
      if (at.branch == BranchClass::DirectCall)
        next = ip + 5 + static_cast<int32_t>(read32(ip + 1));
      if (ip == mainIp + 9)
        next = mainIp;
      if (ip == fIp + 0xb)
        next = g(random() % 4);
      if (at.branch == BranchClass::IndirectJump)
        next = (ip & ~uint64_t(0x1f)) + 0x10;
      if (at.branch == BranchClass::DirectCall && next != ip + 5)
        stack.push_back(ip + 5);
      if (at.branch == BranchClass::Return) {
        next = stack.back();
        stack.pop_back();
        // Now and then g returns past its caller, to the caller's caller.
        if (ip != fIp + 0xd && !stack.empty() && random() % 16 == 0) {
          next = stack.back();
          stack.pop_back();
        }
      }
      if (ip == fIp + 0xb)
        stack.push_back(ip + 2);
      executed.push_back(ip);
      ExecutedInsn step = insn(ip, at.size, at.branch, next);
      if (!byRuns) {
        EXPECT_FALSE(bool(writer.step(step)));
      } else if (at.branch == BranchClass::Other && next == ip + at.size) {
        straight.push_back(step);
      } else {
        uint64_t start = straight.empty() ? ip : straight.front().ip;
        EXPECT_FALSE(bool(writer.stepRun(start, straight.size(), step)));
        straight.clear();
      }
      if (at.branch == BranchClass::Syscall)
        EXPECT_FALSE(bool(writer.enable(next)));
      ip = next;
    }
    for (const ExecutedInsn &step : straight)
      EXPECT_FALSE(bool(writer.step(step)));
    EXPECT_FALSE(bool(writer.disable(ip)));
    return executed;
  }

  /// Decodes `bytes` with libipt's block decoder over this program's image;
  /// returns every instruction address, and counts decode errors.
  std::vector<uint64_t> decode(std::vector<uint8_t> bytes, bool retComp,
                               unsigned &errors) {
    pt_config config;
    pt_config_init(&config);
    setTiming(config);
    config.begin = bytes.data();
    config.end = bytes.data() + bytes.size();
    (void)retComp; // libipt detects compressed returns by itself
    std::unique_ptr<pt_image, void (*)(pt_image *)> image(
        pt_image_alloc("synthetic"), pt_image_free);
    pt_image_set_callback(image.get(), readMemory, this);
    std::unique_ptr<pt_block_decoder, void (*)(pt_block_decoder *)> decoder(
        pt_blk_alloc_decoder(&config), pt_blk_free_decoder);
    pt_blk_set_image(decoder.get(), image.get());
    std::vector<uint64_t> ips;
    errors = 0;
    for (;;) {
      int status = pt_blk_sync_forward(decoder.get());
      if (status < 0)
        break;
      for (;;) {
        while (status >= 0 && (status & pts_event_pending)) {
          pt_event event;
          status = pt_blk_event(decoder.get(), &event, sizeof(event));
        }
        if (status < 0)
          break;
        pt_block block;
        status = pt_blk_next(decoder.get(), &block, sizeof(block));
        uint64_t ip = block.ip;
        for (unsigned i = 0; status >= 0 && i < block.ninsn; ++i) {
          ips.push_back(ip);
          auto found = insns.find(ip);
          if (found == insns.end()) {
            ADD_FAILURE() << "decoded an address that is no instruction: "
                          << std::hex << ip;
            return ips;
          }
          // A block may run on through direct jumps and calls.
          ip = followDirect(ip, found->second);
        }
        if (status < 0)
          break;
      }
      if (status == -pte_eos)
        break;
      ADD_FAILURE() << "decode error: " << pt_errstr(pt_errcode(status));
      ++errors;
    }
    return ips;
  }

private:
  struct Insn {
    uint8_t size;
    BranchClass branch;
  };

  /// The next instruction after `at` when no trace is needed for it.
  uint64_t followDirect(uint64_t ip, const Insn &at) const {
    if (at.branch == BranchClass::DirectCall)
      return ip + 5 + static_cast<int32_t>(read32(ip + 1));
    if (at.branch == BranchClass::DirectJump)
      return ip + 2 + static_cast<int8_t>(memory[ip - codeBase + 1]);
    return ip + at.size;
  }

  void put(uint64_t ip, std::vector<uint8_t> bytes, BranchClass branch) {
    std::copy(bytes.begin(), bytes.end(), memory.begin() + (ip - codeBase));
    uint8_t size = branch == BranchClass::DirectCall ? 5 : bytes.size();
    insns[ip] = Insn{size, branch};
  }
  void put32(uint64_t ip, uint64_t value) {
    for (int i = 0; i < 4; ++i)
      memory[ip - codeBase + i] = static_cast<uint8_t>(value >> (8 * i));
  }
  uint32_t read32(uint64_t ip) const {
    uint32_t value = 0;
    for (int i = 3; i >= 0; --i)
      value = (value << 8) | memory[ip - codeBase + i];
    return value;
  }
  static int readMemory(uint8_t *buffer, size_t size, const pt_asid *,
                        uint64_t ip, void *context) {
    auto *self = static_cast<SyntheticProgram *>(context);
    if (ip < codeBase || ip >= codeBase + self->memory.size())
      return -pte_nomap;
    size = std::min<size_t>(size, codeBase + self->memory.size() - ip);
    std::copy_n(self->memory.begin() + (ip - codeBase), size, buffer);
    return static_cast<int>(size);
  }

  std::vector<uint8_t> memory;
  std::map<uint64_t, Insn> insns;
};

/// The executed addresses without the ones an overflow hid.
std::vector<uint64_t> visible(const std::vector<uint64_t> &executed,
                              const PacketWriter &writer) {
  std::vector<bool> hidden(executed.size());
  for (auto [first, count] : writer.lostInstructions())
    for (uint64_t i = first; i < first + count; ++i)
      hidden[i] = true;
  std::vector<uint64_t> result;
  for (size_t i = 0; i < executed.size(); ++i)
    if (!hidden[i])
      result.push_back(executed[i]);
  return result;
}

struct BlockCase {
  const char *name;
  TimerResolution timer;
  bool noRetComp;
  uint64_t bufferSize;
  uint64_t overflowEvery;
  bool byRuns = false; ///< stepRun per straight run (SyntheticProgram::run).
};

void PrintTo(const BlockCase &param, std::ostream *os) { *os << param.name; }

class BlockDecoderTest : public ::testing::TestWithParam<BlockCase> {};

TEST_P(BlockDecoderTest, DecodesExactlyWhatWasStepped) {
  const BlockCase &param = GetParam();
  PacketWriter::Options options;
  options.timer = param.timer;
  options.noRetComp = param.noRetComp;
  options.bufferSize = param.bufferSize;
  options.overflowEvery = param.overflowEvery;
  options.psbPeriod = 1024;
  auto writer = makeWriter(options);
  SyntheticProgram program;
  std::vector<uint64_t> executed =
      program.run(*writer, 60000, 42, param.byRuns);
  std::vector<uint64_t> expected = visible(executed, *writer);
  if (param.overflowEvery)
    EXPECT_GE(writer->lostInstructions().size(),
              60000 / param.overflowEvery / 2);
  unsigned errors = 0;
  std::vector<uint64_t> decoded =
      program.decode(writer->buffer().snapshot(), !param.noRetComp, errors);
  EXPECT_EQ(errors, 0u);
  bool wrapped = writer->buffer().wrapped();
  EXPECT_EQ(wrapped, param.bufferSize < (1u << 20));
  if (!wrapped) {
    EXPECT_EQ(decoded.size(), expected.size());
    size_t common = std::min(decoded.size(), expected.size());
    for (size_t i = 0; i < common; ++i)
      ASSERT_EQ(decoded[i], expected[i])
          << "first divergence at instruction " << i;
  } else {
    // From the first PSB in the ring to the end.
    EXPECT_GT(decoded.size(), 1000u);
    EXPECT_LT(decoded.size(), expected.size());
  }
  ASSERT_LE(decoded.size(), expected.size());
  std::vector<uint64_t> tail(expected.end() - decoded.size(), expected.end());
  for (size_t i = 0; i < decoded.size(); ++i)
    ASSERT_EQ(decoded[i], tail[i]) << "first divergence at decoded index " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BlockDecoderTest,
    ::testing::Values(
        BlockCase{"RetComp", TimerResolution::Normal, false, 1 << 20, 0},
        BlockCase{"NoRetComp", TimerResolution::Normal, true, 1 << 20, 0},
        BlockCase{"LowTimer", TimerResolution::Low, false, 1 << 20, 0},
        BlockCase{"HighTimer", TimerResolution::High, false, 1 << 20, 0},
        BlockCase{"Wrapped", TimerResolution::Normal, false, 1 << 13, 0},
        BlockCase{"WrappedNoRetComp", TimerResolution::Normal, true, 1 << 13,
                  0},
        BlockCase{"Overflow", TimerResolution::Normal, false, 1 << 20, 997},
        BlockCase{"Runs", TimerResolution::Normal, false, 1 << 20, 0, true},
        BlockCase{"RunsNoRetComp", TimerResolution::Normal, true, 1 << 20, 0,
                  true},
        BlockCase{"RunsLowTimer", TimerResolution::Low, false, 1 << 20, 0,
                  true},
        BlockCase{"RunsHighTimer", TimerResolution::High, false, 1 << 20, 0,
                  true},
        BlockCase{"RunsWrapped", TimerResolution::Normal, false, 1 << 13, 0,
                  true}),
    [](const ::testing::TestParamInfo<BlockCase> &info) {
      return std::string(info.param.name);
    });

} // namespace
