//===- DecoderTest.cpp - Block decoder on synthetic PT --------------------===//
//
// A tiny loop lives in memory served by the read callback (no file):
//
//   0x1000: nop
//   0x1001: call 0x1010
//   0x1006: nop
//   0x1007: jnz 0x1000      (taken except on the last iteration)
//   0x1009: ret             (leaves the traced code: TIP.PGD 0x2000)
//   0x1010: nop
//   0x1011: ret             (compressed unless a PSB came since the call)
//
// The test simulates it, writing PT with libipt's encoder the way a CPU
// would (TNT bits, PSB+ with TSC/MODE.Exec/FUP every few iterations, at the
// loop head or inside the callee) and recording every executed address:
// that list is the ground truth the decode must reproduce.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Decoder.h"
#include "magic_trace/InsnClassifier.h"
#include "magic_trace/Libipt.h"

#include <intel-pt.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

using namespace magic_trace;

namespace {

const uint8_t kCode[] = {
    0x90,                         // 0x1000 nop
    0xe8, 0x0a, 0x00, 0x00, 0x00, // 0x1001 call 0x1010
    0x90,                         // 0x1006 nop
    0x75, 0xf7,                   // 0x1007 jnz 0x1000
    0xc3,                         // 0x1009 ret
    0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
    0x90, // 0x1010 nop
    0xc3, // 0x1011 ret
};
constexpr uint64_t kBase = 0x1000;

size_t readCode(uint64_t address, uint8_t *buffer, size_t size) {
  if (address < kBase || address >= kBase + sizeof(kCode))
    return 0;
  size_t n = std::min<size_t>(size, kBase + sizeof(kCode) - address);
  std::memcpy(buffer, kCode + (address - kBase), n);
  return n;
}

/// Writes packets with libipt's encoder into a growing buffer.
class Writer {
public:
  Writer() : bytes(1 << 20) {
    pt_config config;
    pt_config_init(&config);
    config.begin = bytes.data();
    config.end = bytes.data() + bytes.size();
    encoder = pt_alloc_encoder(&config);
  }
  ~Writer() { pt_free_encoder(encoder); }

  void packet(pt_packet packet) { ASSERT_GE(pt_enc_next(encoder, &packet), 0); }

  void ip(pt_packet_type type, uint64_t ip) {
    pt_packet p{};
    p.type = type;
    p.payload.ip.ipc = pt_ipc_sext_48;
    p.payload.ip.ip = ip;
    packet(p);
  }

  void tnt(bool taken) {
    tntBits = (tntBits << 1) | (taken ? 1 : 0);
    if (++tntCount == 6)
      flushTnt();
  }

  void flushTnt() {
    if (!tntCount)
      return;
    pt_packet p{};
    p.type = ppt_tnt_8;
    p.payload.tnt.bit_size = static_cast<uint8_t>(tntCount);
    p.payload.tnt.payload = tntBits;
    packet(p);
    tntBits = 0;
    tntCount = 0;
  }

  /// PSB+ (TSC, CBR, MODE.Exec, FUP) at `ip` (the next instruction), TNT
  /// flushed first as the CPU does.
  void psb(uint64_t ip, uint64_t tsc) {
    flushTnt();
    pt_packet p{};
    p.type = ppt_psb;
    packet(p);
    p = {};
    p.type = ppt_tsc;
    p.payload.tsc.tsc = tsc;
    packet(p);
    // CBR before MODE.Exec, as the CPU writes PSB+: its status update comes
    // before the one that binds to the FUP address.
    p = {};
    p.type = ppt_cbr;
    p.payload.cbr.ratio = 30;
    packet(p);
    p = {};
    p.type = ppt_mode;
    p.payload.mode.leaf = pt_mol_exec;
    p.payload.mode.bits.exec.csl = 1;
    packet(p);
    this->ip(ppt_fup, ip);
    p = {};
    p.type = ppt_psbend;
    packet(p);
  }

  std::vector<uint8_t> finish() {
    flushTnt();
    uint64_t offset = 0;
    pt_enc_get_offset(encoder, &offset);
    bytes.resize(offset);
    return bytes;
  }

private:
  std::vector<uint8_t> bytes;
  pt_encoder *encoder = nullptr;
  uint64_t tntBits = 0;
  unsigned tntCount = 0;
};

struct Synthetic {
  Snapshot snapshot;
  std::vector<uint64_t> truth;
};

/// `iterations` loop iterations; a PSB+ every `psbEvery` iterations, at the
/// loop head or (every other one) inside the callee.
Synthetic makeTrace(unsigned iterations, unsigned psbEvery) {
  Synthetic result;
  Writer writer;
  uint64_t tsc = 1000;
  writer.psb(0x1000, tsc);
  for (unsigned i = 0; i < iterations; ++i) {
    bool psbHere = i && i % psbEvery == 0;
    bool inCallee = (i / psbEvery) % 2 == 1;
    tsc += 50;
    if (psbHere && !inCallee)
      writer.psb(0x1000, tsc);
    result.truth.insert(result.truth.end(), {0x1000, 0x1001});
    if (psbHere && inCallee)
      writer.psb(0x1010, tsc);
    result.truth.insert(result.truth.end(), {0x1010, 0x1011});
    // A return whose call precedes a PSB is not compressed.
    if (psbHere && inCallee)
      writer.ip(ppt_tip, 0x1006);
    else
      writer.tnt(true);
    result.truth.insert(result.truth.end(), {0x1006, 0x1007});
    writer.tnt(i + 1 < iterations);
  }
  result.truth.push_back(0x1009);
  writer.flushTnt();
  writer.ip(ppt_tip_pgd, 0x2000);

  ThreadTrace thread;
  thread.tid = 7;
  thread.bytes = writer.finish();
  result.snapshot.threads.push_back(std::move(thread));
  result.snapshot.cpu.vendor = "GenuineIntel";
  result.snapshot.cpu.family = 6;
  result.snapshot.cpu.model = 85;
  return result;
}

DecodeOptions options(unsigned threads) {
  DecodeOptions opts;
  opts.threads = threads;
  opts.readMemory = readCode;
  opts.minChunkBytes = 1; // Every PSB starts a piece: every boundary tested.
  return opts;
}

void expectSameItems(const ThreadDecode &a, const ThreadDecode &b) {
  ASSERT_EQ(a.items.size(), b.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) {
    SCOPED_TRACE("item " + std::to_string(i));
    EXPECT_EQ(a.items[i].kind, b.items[i].kind);
    EXPECT_EQ(a.items[i].ip, b.items[i].ip);
    EXPECT_EQ(a.items[i].lastIp, b.items[i].lastIp);
    EXPECT_EQ(a.items[i].detail, b.items[i].detail);
    EXPECT_EQ(a.items[i].lastClass, b.items[i].lastClass);
    EXPECT_EQ(a.items[i].timeNs, b.items[i].timeNs);
  }
  ASSERT_EQ(a.errors.size(), b.errors.size());
  for (size_t i = 0; i < a.errors.size(); ++i) {
    EXPECT_EQ(a.errors[i].offset, b.errors[i].offset);
    EXPECT_EQ(a.errors[i].code, b.errors[i].code);
  }
  EXPECT_EQ(a.instructions, b.instructions);
}

TEST(Decoder, SerialDecodeEqualsGroundTruth) {
  Synthetic trace = makeTrace(200, 7);
  auto result = decodeSnapshot(trace.snapshot, options(1));
  ASSERT_TRUE(bool(result)) << toString(result.takeError());
  ASSERT_EQ(result->threads.size(), 1u);
  const ThreadDecode &decode = result->threads[0];
  EXPECT_TRUE(decode.errors.empty())
      << decode.errors[0].message << " at " << decode.errors[0].offset;
  EXPECT_EQ(decode.instructions, trace.truth.size());
  auto addresses = expandInstructions(trace.snapshot, decode, options(1));
  ASSERT_TRUE(bool(addresses)) << toString(addresses.takeError());
  EXPECT_EQ(*addresses, trace.truth);
}

TEST(Decoder, BlocksEndAtEachBranchWithItsClass) {
  Synthetic trace = makeTrace(3, 100);
  auto result = decodeSnapshot(trace.snapshot, options(1));
  ASSERT_TRUE(bool(result)) << toString(result.takeError());
  const auto &items = result->threads[0].items;
  ASSERT_GE(items.size(), 4u);
  EXPECT_EQ(items[0].ip, 0x1000u);
  EXPECT_EQ(items[0].lastIp, 0x1001u);
  EXPECT_EQ(items[0].lastClass, BranchClass::DirectCall);
  EXPECT_EQ(items[1].ip, 0x1010u);
  EXPECT_EQ(items[1].lastClass, BranchClass::Return);
  EXPECT_EQ(items[2].ip, 0x1006u);
  EXPECT_EQ(items[2].lastClass, BranchClass::CondBranch);
  // The last ret leaves the traced code: a Disable resuming at 0x2000.
  EXPECT_EQ(items.back().kind, ItemKind::Disable);
  EXPECT_EQ(items.back().ip, 0x2000u);
}

TEST(Decoder, ParallelDecodeIsIdenticalToSerial) {
  for (unsigned psbEvery : {1u, 2u, 3u, 7u, 50u}) {
    SCOPED_TRACE("psbEvery " + std::to_string(psbEvery));
    Synthetic trace = makeTrace(300, psbEvery);
    auto serial = decodeSnapshot(trace.snapshot, options(1));
    auto parallel = decodeSnapshot(trace.snapshot, options(3));
    ASSERT_TRUE(bool(serial) && bool(parallel));
    EXPECT_GT(parallel->stats.handoffs, 0u);
    expectSameItems(serial->threads[0], parallel->threads[0]);
    auto addresses =
        expandInstructions(trace.snapshot, parallel->threads[0], options(1));
    ASSERT_TRUE(bool(addresses));
    EXPECT_EQ(*addresses, trace.truth);
  }
}

/// Collects what decodeThreadOverlapped hands over, checking that it is
/// called on the thread that called it (the model builder is not shared).
class CollectOnCaller : public ItemSink {
public:
  void consume(llvm::ArrayRef<TraceItem> items,
               llvm::ArrayRef<DecodeError> errors) override {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    out.items.insert(out.items.end(), items.begin(), items.end());
    out.errors.insert(out.errors.end(), errors.begin(), errors.end());
  }
  std::thread::id caller = std::this_thread::get_id();
  ThreadDecode out;
};

TEST(Decoder, StreamedBatchesAreIdenticalToOneBatch) {
  // Batch boundaries fall between every pair of items (and inside the
  // join and time stages' hold-back); decode errors renumber across them.
  // Overlapped, the decode runs on its own thread, batches cross to the
  // caller and their storage comes back.
  for (unsigned psbEvery : {1u, 5u, 50u}) {
    for (bool corrupt : {false, true}) {
      SCOPED_TRACE("psbEvery " + std::to_string(psbEvery) +
                   (corrupt ? ", corrupt" : ""));
      Synthetic trace = makeTrace(300, psbEvery);
      trace.snapshot.time = {0, 1, 0};
      std::vector<uint8_t> &bytes = trace.snapshot.threads[0].bytes;
      if (corrupt)
        for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 40; ++i)
          bytes[i] = static_cast<uint8_t>(i * 37);
      DecodeOptions whole = options(1);
      whole.batchItems = 1 << 20;
      auto expected = decodeSnapshot(trace.snapshot, whole);
      ASSERT_TRUE(bool(expected));
      for (unsigned threads : {1u, 3u}) {
        for (size_t batch : {size_t(1), size_t(3)}) {
          DecodeOptions small = options(threads);
          small.batchItems = batch;
          auto streamed = decodeSnapshot(trace.snapshot, small);
          ASSERT_TRUE(bool(streamed));
          expectSameItems(expected->threads[0], streamed->threads[0]);
        }
      }
      for (size_t batch : {size_t(1), size_t(3), size_t(1) << 16}) {
        SCOPED_TRACE("overlapped, batch " + std::to_string(batch));
        DecodeOptions streamed = options(1);
        streamed.batchItems = batch;
        auto decoder = SnapshotDecoder::create(trace.snapshot, streamed);
        ASSERT_TRUE(bool(decoder));
        CollectOnCaller sink;
        DecodeStats stats;
        auto instructions = (*decoder)->decodeThreadOverlapped(0, sink, stats);
        ASSERT_TRUE(bool(instructions));
        sink.out.instructions = *instructions;
        expectSameItems(expected->threads[0], sink.out);
        if (corrupt)
          continue;
        // And against what the trace's maker executed.
        auto addresses =
            expandInstructions(trace.snapshot, sink.out, options(1));
        ASSERT_TRUE(bool(addresses));
        EXPECT_EQ(*addresses, trace.truth);
      }
    }
  }
}

TEST(Decoder, TimesAreMonotonicAndWithinTheTscRange) {
  Synthetic trace = makeTrace(300, 5);
  trace.snapshot.time = {0, 1, 0}; // ns == TSC.
  auto result = decodeSnapshot(trace.snapshot, options(1));
  ASSERT_TRUE(bool(result));
  uint64_t previous = 0;
  for (const TraceItem &item : result->threads[0].items) {
    EXPECT_GE(item.timeNs, previous);
    EXPECT_GE(item.timeNs, 1000u);
    // The last iteration begins at TSC 1000 + 300 * 50 (the writer adds 50
    // before each), and its instructions run on after it on the measured
    // clock: at most one iteration more.
    EXPECT_LE(item.timeNs, 1000u + 301 * 50 + 50);
    previous = item.timeNs;
  }
  EXPECT_GT(previous, 1000u);
}

TEST(Decoder, TimesAfterTheLastTscRunOnTheMeasuredRate) {
  // A TSC every 50 iterations (6 instructions, 50 TSC ticks each); the last
  // comes at iteration 250, and 50 iterations (about 300 instructions, 2,500
  // ticks) run after it with no timing packet. They must not freeze at that
  // TSC: the trace's own rate (50 ticks a 6-instruction iteration) carries
  // the clock on to about where the writer's ended: the last iteration
  // begins at 1000 + 300 * 50 (the writer adds 50 before each), and the last
  // block (the final ret) is its 7th instruction, at about 16,050.
  Synthetic trace = makeTrace(300, 50);
  trace.snapshot.time = {0, 1, 0}; // ns == TSC.
  auto result = decodeSnapshot(trace.snapshot, options(1));
  ASSERT_TRUE(bool(result));
  const ThreadDecode &thread = result->threads[0];
  uint64_t last = 0;
  for (const TraceItem &item : thread.items)
    if (item.kind == ItemKind::Block)
      last = item.timeNs;
  // Within one iteration (50 ns) of the writer's clock at the last block.
  EXPECT_GE(last, 16050u - 50);
  EXPECT_LE(last, 16050u + 50);
  // The stretch after the last TSC is said to be estimated, and only it.
  EXPECT_GE(thread.estimatedInstructions, 49u * 6);
  EXPECT_LE(thread.estimatedInstructions, 51u * 6);
}

TEST(Decoder, CorruptBytesBecomeErrorsAndDecodingResyncs) {
  Synthetic trace = makeTrace(400, 5);
  std::vector<uint8_t> &bytes = trace.snapshot.threads[0].bytes;
  std::mt19937 random(42);
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 40; ++i)
    bytes[i] = static_cast<uint8_t>(random());
  auto serial = decodeSnapshot(trace.snapshot, options(1));
  auto parallel = decodeSnapshot(trace.snapshot, options(2));
  ASSERT_TRUE(bool(serial) && bool(parallel));
  const ThreadDecode &decode = serial->threads[0];
  EXPECT_FALSE(decode.errors.empty());
  // Decoding went on after the damage.
  EXPECT_GT(decode.instructions, trace.truth.size() / 2);
  EXPECT_LT(decode.instructions, trace.truth.size() + 64);
  expectSameItems(decode, parallel->threads[0]);
}

TEST(Decoder, TruncatedBufferDecodesWhatItHas) {
  Synthetic trace = makeTrace(400, 5);
  std::vector<uint8_t> &bytes = trace.snapshot.threads[0].bytes;
  bytes.resize(bytes.size() / 2 + 3);
  auto serial = decodeSnapshot(trace.snapshot, options(1));
  auto parallel = decodeSnapshot(trace.snapshot, options(2));
  ASSERT_TRUE(bool(serial) && bool(parallel));
  EXPECT_GT(serial->threads[0].instructions, 0u);
  expectSameItems(serial->threads[0], parallel->threads[0]);
}

TEST(Decoder, RandomBytesWithoutPsbAreOneMarkedError) {
  Synthetic trace = makeTrace(1, 1);
  std::vector<uint8_t> &bytes = trace.snapshot.threads[0].bytes;
  std::mt19937 random(7);
  bytes.assign(4096, 0);
  for (uint8_t &byte : bytes)
    byte = static_cast<uint8_t>(random());
  auto result = decodeSnapshot(trace.snapshot, options(2));
  ASSERT_TRUE(bool(result));
  const ThreadDecode &decode = result->threads[0];
  ASSERT_EQ(decode.errors.size(), 1u);
  EXPECT_NE(decode.errors[0].message.find("no PSB"), std::string::npos);
  ASSERT_EQ(decode.items.size(), 1u);
  EXPECT_EQ(decode.items[0].kind, ItemKind::Error);
}

TEST(Decoder, LibiptErrorKeepsStatusOffsetAndIpAndSaysWhatToDo) {
  llvm::Error error = llvm::make_error<LibiptError>(
      -pte_nomem, "libipt could not allocate a block decoder",
      "free some memory and try again", 0x40, 0x401000);
  std::string text;
  llvm::handleAllErrors(std::move(error), [&](const LibiptError &failure) {
    EXPECT_EQ(failure.status(), -pte_nomem);
    EXPECT_EQ(failure.offset(), 0x40u);
    EXPECT_EQ(failure.ip(), 0x401000u);
    text = failure.message();
  });
  EXPECT_EQ(text, "libipt could not allocate a block decoder: " +
                      libiptStatusText(-pte_nomem) + ", status " +
                      std::to_string(-pte_nomem) +
                      " at trace offset 0x40, ip 0x401000 (free some memory "
                      "and try again)");
}

TEST(Decoder, DecodeErrorItemsKeepTheLibiptStatus) {
  Synthetic trace = makeTrace(400, 5);
  std::vector<uint8_t> &bytes = trace.snapshot.threads[0].bytes;
  std::mt19937 random(42);
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 40; ++i)
    bytes[i] = static_cast<uint8_t>(random());
  auto result = decodeSnapshot(trace.snapshot, options(1));
  ASSERT_TRUE(bool(result));
  ASSERT_FALSE(result->threads[0].errors.empty());
  for (const DecodeError &error : result->threads[0].errors) {
    EXPECT_LT(error.code, 0);
    EXPECT_EQ(error.message, libiptStatusText(error.code));
    EXPECT_LT(error.offset, bytes.size());
  }
}

TEST(Decoder, MissingModuleIsReportedAndDecodingGoesOn) {
  Synthetic trace = makeTrace(20, 5);
  Module missing;
  missing.path = "/nonexistent/libgone.so";
  missing.loadAddress = 0x7000000;
  trace.snapshot.modules.push_back(missing);
  auto result = decodeSnapshot(trace.snapshot, options(1));
  ASSERT_TRUE(bool(result));
  ASSERT_EQ(result->modules.size(), 1u);
  EXPECT_NE(result->modules[0].problem.find("libgone.so"), std::string::npos);
  EXPECT_EQ(result->threads[0].instructions, trace.truth.size());
}

TEST(Decoder, UnknownTidIsAnError) {
  Synthetic trace = makeTrace(2, 5);
  DecodeOptions opts = options(1);
  opts.onlyTid = 99;
  auto result = decodeSnapshot(trace.snapshot, opts);
  ASSERT_FALSE(bool(result));
  EXPECT_NE(toString(result.takeError()).find("no thread 99"),
            std::string::npos);
}

} // namespace

namespace {
// Found by DecoderEmulated on glibc: LLVM decodes `lock` as an instruction
// of its own, which made expandInstructions step 1 byte into cmpxchg.
TEST(Decoder, LockPrefixedInstructionIsOneInstruction) {
  auto classifier = InsnClassifier::create();
  ASSERT_TRUE(bool(classifier));
  // lock cmpxchg %edx, 0x14f6d9(%rip)
  const uint8_t bytes[] = {0xf0, 0x0f, 0xb1, 0x15, 0xd9, 0xf6, 0x14, 0x00};
  auto insn = (*classifier)->classify(bytes, 0x1000);
  ASSERT_TRUE(bool(insn)) << toString(insn.takeError());
  EXPECT_EQ(insn->size, 8u);
  EXPECT_EQ(insn->branch, BranchClass::Other);
}
} // namespace
