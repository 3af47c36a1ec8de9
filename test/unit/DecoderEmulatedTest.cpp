//===- DecoderEmulatedTest.cpp - Decode what the emulator recorded --------===//
//
// Runs test programs under the ptrace emulator in-process, decodes the
// Snapshot it returns, and compares with its ground truth: every executed
// instruction, minus the ranges injected overflows lost (a wrapped ring must
// match a suffix). The parallel decode, cut at every PSB, must equal the
// serial one item for item, and times must follow the virtual clock. The
// lit tests in test/lit/decode/ cover the other programs and the wrapped and
// overflowing configurations through the CLI.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Decoder.h"
#include "magic_trace/PtraceStepper.h"
#include "magic_trace/VirtualClock.h"

#include <gtest/gtest.h>

using namespace magic_trace;

namespace {

std::string input(const char *name) {
  return std::string(MT_TEST_BINARY_DIR) + "/inputs/" + name;
}

struct Config {
  const char *name;
  PacketWriter::Options writer;
};

std::vector<uint64_t> expectedInsns(const ThreadTruth &truth) {
  std::vector<bool> keep(truth.insns.size(), true);
  for (auto [first, count] : truth.lost)
    for (uint64_t i = first; i < first + count && i < keep.size(); ++i)
      keep[i] = false;
  std::vector<uint64_t> result;
  for (size_t i = 0; i < truth.insns.size(); ++i)
    if (keep[i])
      result.push_back(truth.insns[i]);
  return result;
}

void checkProgram(const std::vector<std::string> &argv, const Config &config) {
  SCOPED_TRACE(std::string(config.name) + " " + argv[0]);
  EmulateOptions emulate;
  emulate.argv = argv;
  emulate.stop = "stop_here";
  emulate.maxInsns = 2'000'000;
  emulate.writer = config.writer;
  auto run = emulateProgram(emulate);
  ASSERT_TRUE(bool(run)) << toString(run.takeError());

  DecodeOptions serialOptions;
  serialOptions.threads = 1;
  DecodeOptions parallelOptions = serialOptions;
  parallelOptions.threads = 2;
  parallelOptions.minChunkBytes = 1;
  auto serial = decodeSnapshot(run->snapshot, serialOptions);
  auto parallel = decodeSnapshot(run->snapshot, parallelOptions);
  ASSERT_TRUE(bool(serial)) << toString(serial.takeError());
  ASSERT_TRUE(bool(parallel)) << toString(parallel.takeError());
  ASSERT_EQ(serial->threads.size(), run->truth.size());

  for (size_t t = 0; t < run->truth.size(); ++t) {
    const ThreadDecode &decode = serial->threads[t];
    SCOPED_TRACE("tid " + std::to_string(decode.tid));
    for (const DecodeError &error : decode.errors)
      ADD_FAILURE() << "decode error at " << error.offset << ": "
                    << error.message;
    auto got = expandInstructions(run->snapshot, decode, serialOptions);
    ASSERT_TRUE(bool(got)) << toString(got.takeError());
    std::vector<uint64_t> want = expectedInsns(run->truth[t]);
    if (run->snapshot.threads[t].wrapped) {
      ASSERT_LE(got->size(), want.size());
      want.erase(want.begin(), want.end() - got->size());
      EXPECT_GT(got->size(), 0u);
    }
    ASSERT_EQ(got->size(), want.size());
    size_t firstDifference = 0;
    while (firstDifference < want.size() &&
           (*got)[firstDifference] == want[firstDifference])
      ++firstDifference;
    EXPECT_EQ(firstDifference, want.size())
        << "first difference at instruction " << firstDifference;

    // Time: the virtual clock runs one TSC tick per traced instruction
    // (VirtualClock.h), so a Block's true time is known from its index.
    if (!run->snapshot.threads[t].wrapped && run->truth[t].lost.empty()) {
      uint64_t index = 0, worst = 0;
      for (const TraceItem &item : decode.items) {
        if (item.kind != ItemKind::Block)
          continue;
        uint64_t truthNs = run->snapshot.time.tscToNs(
            VirtualClock::startTsc +
            index * VirtualClock::cyclesPerInstruction);
        uint64_t error = item.timeNs > truthNs ? item.timeNs - truthNs
                                               : truthNs - item.timeNs;
        worst = std::max(worst, error);
        index += item.detail;
      }
      // One MTC period is 960 instructions (320 ns); interpolation by
      // instruction count must do far better than that.
      EXPECT_LE(worst, 100u) << "time error over " << index << " insns";
    }

    const ThreadDecode &other = parallel->threads[t];
    ASSERT_EQ(decode.items.size(), other.items.size());
    for (size_t i = 0; i < decode.items.size(); ++i) {
      const TraceItem &a = decode.items[i], &b = other.items[i];
      ASSERT_TRUE(a.kind == b.kind && a.ip == b.ip && a.lastIp == b.lastIp &&
                  a.detail == b.detail && a.lastClass == b.lastClass &&
                  a.timeNs == b.timeNs)
          << "serial and parallel differ at item " << i << ": kind "
          << int(a.kind) << "/" << int(b.kind) << " ip " << a.ip << "/" << b.ip
          << " n " << a.detail << "/" << b.detail << " time " << a.timeNs << "/"
          << b.timeNs;
    }
  }
}

PacketWriter::Options writer(uint64_t bufferSize = 4 << 20,
                             uint64_t psbPeriod = 4096,
                             TimerResolution timer = TimerResolution::Normal,
                             bool noRetComp = false,
                             uint64_t overflowEvery = 0) {
  PacketWriter::Options options;
  options.bufferSize = bufferSize;
  options.psbPeriod = psbPeriod;
  options.timer = timer;
  options.noRetComp = noRetComp;
  options.overflowEvery = overflowEvery;
  return options;
}

TEST(DecoderEmulated, CallsInEveryConfiguration) {
  const Config configs[] = {
      {"normal", writer()},
      {"noretcomp", writer(4 << 20, 4096, TimerResolution::Normal, true)},
      {"timer-low", writer(4 << 20, 4096, TimerResolution::Low)},
      {"timer-high", writer(4 << 20, 4096, TimerResolution::High)},
      {"psb-256", writer(4 << 20, 256)},
  };
  for (const Config &config : configs)
    checkProgram({input("emu_calls")}, config);
}

TEST(DecoderEmulated, OtherPrograms) {
  Config config{"psb-512", writer(4 << 20, 512)};
  checkProgram({input("emu_thread")}, config);
  checkProgram({input("emu_dlopen"), input("libemu_plugin.so")}, config);
}

} // namespace
