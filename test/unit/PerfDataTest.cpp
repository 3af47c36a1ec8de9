// Unit tests for perf.data in and out: a per-thread Intel PT file built word
// by word from perf.data-file-format.txt (the reader's view of it), snapshot
// mode's several buffers per thread, the writer's output read back, and
// every truncation of a valid file refused with an error.
#include "magic_trace/PerfData.h"

#include <gtest/gtest.h>

#include <string>

using namespace magic_trace;

namespace {

/// Little-endian words appended to a file image.
struct Bytes {
  std::vector<uint8_t> data;

  Bytes &u16(uint16_t v) { return put(v, 2); }
  Bytes &u32(uint32_t v) { return put(v, 4); }
  Bytes &u64(uint64_t v) { return put(v, 8); }
  Bytes &text(const std::string &s, size_t padded) {
    data.insert(data.end(), s.begin(), s.end());
    data.insert(data.end(), padded - s.size(), 0);
    return *this;
  }
  Bytes &put(uint64_t v, unsigned width) {
    for (unsigned i = 0; i < width; ++i)
      data.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  void patch64(size_t at, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i)
      data[at + i] = uint8_t(v >> (8 * i));
  }
};

/// A per-thread recording of thread 101 of process 100: one intel_pt attr
/// (type 9), AUXTRACE_INFO, COMM, MMAP2 of /bin/app, and `buffers`
/// AUXTRACE records of 8 bytes each (bytes 0x10*k + 0..7).
std::vector<uint8_t> handBuiltFile(unsigned buffers, uint64_t perCpu = 0) {
  Bytes b;
  b.u64(0x32454c4946524550ULL);  // magic "PERFILE2"
  b.u64(104);                    // size of this header
  b.u64(64 + 16);                // attr_size: a VER0 attr and its ids section
  b.u64(104).u64(80);            // attrs section: one perf_file_attr
  b.u64(184).u64(0);             // data section (size patched below)
  b.u64(0).u64(0);               // event_types: unused
  b.u64(0).u64(0).u64(0).u64(0); // no feature bits
  // perf_file_attr at 104: the attr (64 bytes) and its ids section.
  b.u32(9).u32(64);         // type 9, size 64
  b.u64(0x400 | (3 << 14)); // config: tsc, mtc_period 3
  b.u64(1);                 // sample_period
  b.u64(0x10007);           // sample_type IP|TID|TIME|IDENTIFIER
  b.u64(0);                 // read_format
  b.u64(1 << 18);           // flags: sample_id_all
  b.u32(0).u32(0).u64(0);   // wakeup_events, bp_type, config1
  b.u64(0).u64(0);          // ids section: none
  // Data at 184. AUXTRACE_INFO: header, type 1 (intel_pt), reserved, and
  // the private words up to MAX_NONTURBO_RATIO.
  b.u32(70).u16(0).u16(8 + 8 + 16 * 8);
  b.u32(1).u32(0);
  b.u64(9);           // PMU type
  b.u64(10);          // time_shift
  b.u64(500);         // time_mult
  b.u64(7000);        // time_zero
  b.u64(1);           // cap_user_time_zero
  b.u64(0x400);       // TSC bit
  b.u64(0x800);       // noretcomp bit
  b.u64(0);           // have_sched_switch
  b.u64(buffers > 1); // snapshot mode
  b.u64(perCpu);      // per-CPU mmaps
  b.u64(0x200);       // MTC bit
  b.u64(0xf << 14);   // MTC frequency bits
  b.u64(84);          // TSC:CTC numerator (CPUID.15H:EBX)
  b.u64(2);           // TSC:CTC denominator (CPUID.15H:EAX)
  b.u64(0x2);         // CYC bit
  b.u64(24);          // max non-turbo ratio
  // COMM: pid, tid, "app" padded to 8, sample_id (pid, tid, time, id).
  b.u32(3).u16(0).u16(8 + 8 + 8 + 24);
  b.u32(100).u32(101).text("app", 8);
  b.u32(100).u32(101).u64(0).u64(0);
  // MMAP2 of /bin/app: addr, len, pgoff, maj/min/ino/gen, prot r-x, flags.
  b.u32(10).u16(2).u16(8 + 8 + 24 + 24 + 8 + 16 + 24);
  b.u32(100).u32(100);
  b.u64(0x401000).u64(0x2000).u64(0x1000);
  b.u64(0).u64(0).u64(0);
  b.u32(5).u32(2);
  b.text("/bin/app", 16);
  b.u32(100).u32(100).u64(0).u64(0);
  for (unsigned k = 0; k < buffers; ++k) {
    // AUXTRACE: size 8, offset, reference, idx 0, tid 101, cpu -1.
    b.u32(71).u16(0).u16(48);
    b.u64(8).u64(8 * k).u64(k + 1).u32(0).u32(101).u32(UINT32_MAX).u32(0);
    for (unsigned i = 0; i < 8; ++i)
      b.put(0x10 * k + i, 1);
  }
  b.patch64(48, b.data.size() - 184);
  return b.data;
}

TEST(PerfData, ReadsAHandBuiltPerThreadFile) {
  auto snapshot = parsePerfData(handBuiltFile(1));
  ASSERT_TRUE(bool(snapshot)) << toString(snapshot.takeError());
  EXPECT_EQ(snapshot->pid, 100u);
  EXPECT_EQ(snapshot->processName, "app");
  EXPECT_EQ(snapshot->time.timeShift, 10);
  EXPECT_EQ(snapshot->time.timeMult, 500u);
  EXPECT_EQ(snapshot->time.timeZero, 7000u);
  EXPECT_EQ(snapshot->timing.mtcFreq, 3);
  EXPECT_EQ(snapshot->timing.nomFreq, 24);
  EXPECT_EQ(snapshot->timing.cpuid15Ebx, 84u);
  EXPECT_EQ(snapshot->timing.cpuid15Eax, 2u);
  ASSERT_EQ(snapshot->threads.size(), 1u);
  EXPECT_EQ(snapshot->threads[0].tid, 101u);
  EXPECT_EQ(snapshot->threads[0].bytes,
            (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(snapshot->threads[0].wrapped);
  ASSERT_EQ(snapshot->modules.size(), 1u);
  const Module &app = snapshot->modules[0];
  EXPECT_EQ(app.path, "/bin/app");
  EXPECT_EQ(app.loadAddress, 0x400000u);
  ASSERT_EQ(app.segments.size(), 1u);
  EXPECT_EQ(app.segments[0].address, 0x401000u);
  EXPECT_EQ(app.segments[0].size, 0x2000u);
  EXPECT_EQ(app.segments[0].fileOffset, 0x1000u);
  EXPECT_TRUE(app.segments[0].executable);
}

TEST(PerfData, SnapshotModeBuffersWithoutOverlapAreMarkedAsGaps) {
  // Three snapshots of 8 bytes with nothing in common and no PSB: what lay
  // between them is lost, and each gap is an OVF (the buffers after the
  // first hold no PSB to resume at).
  auto snapshot = parsePerfData(handBuiltFile(3));
  ASSERT_TRUE(bool(snapshot)) << toString(snapshot.takeError());
  ASSERT_EQ(snapshot->threads.size(), 1u);
  const std::vector<uint8_t> &bytes = snapshot->threads[0].bytes;
  ASSERT_EQ(bytes.size(), 12u);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[8], 0x02);
  EXPECT_EQ(bytes[9], 0xf3);
  EXPECT_EQ(bytes[10], 0x02);
  EXPECT_EQ(bytes[11], 0xf3);
  EXPECT_TRUE(snapshot->threads[0].wrapped);
}

TEST(PerfData, OverlappingSnapshotBuffersReadBackAsOneTrace) {
  // A stream of PSBs and distinct bytes, written as 3 snapshot-mode buffers
  // that overlap by 20 bytes (each ends before a PSB): read back, the
  // overlaps are gone and the stream is whole, at most padded with zeros.
  // (An overlap under 16 bytes, the reader's anchor, reads as a gap.)
  Snapshot in;
  in.pid = 7;
  std::vector<uint8_t> stream;
  for (int block = 0; block < 6; ++block) {
    for (int i = 0; i < 8; ++i)
      stream.insert(stream.end(), {0x02, 0x82});
    for (int i = 0; i < 16; ++i)
      stream.push_back(uint8_t(0x10 + block * 16 + i));
  }
  in.threads.push_back({7, stream, false});
  PerfDataWriteOptions options;
  options.snapshotPieces = 3;
  options.snapshotOverlap = 20;
  auto out = parsePerfData(buildPerfData(in, options));
  ASSERT_TRUE(bool(out)) << toString(out.takeError());
  ASSERT_EQ(out->threads.size(), 1u);
  std::vector<uint8_t> bytes = out->threads[0].bytes;
  while (bytes.size() > stream.size() && bytes.back() == 0)
    bytes.pop_back();
  EXPECT_EQ(bytes, stream);
  EXPECT_TRUE(out->threads[0].wrapped);
}

// AUXTRACE_INFO says per-CPU: the buffers are CPU streams. With no AUX
// records and one thread traced, the stream is that thread's: the same bytes
// as read per thread.
TEST(PerfData, PerCpuStreamOfOneThreadIsItsTrace) {
  auto perThread = parsePerfData(handBuiltFile(1));
  auto perCpu = parsePerfData(handBuiltFile(1, /*perCpu=*/1));
  ASSERT_TRUE(bool(perThread)) << toString(perThread.takeError());
  ASSERT_TRUE(bool(perCpu)) << toString(perCpu.takeError());
  ASSERT_EQ(perCpu->threads.size(), 1u);
  EXPECT_EQ(perCpu->threads[0].tid, perThread->threads[0].tid);
  EXPECT_EQ(perCpu->threads[0].bytes, perThread->threads[0].bytes);
}

TEST(PerfData, WriterOutputReadsBackTheSameSnapshot) {
  Snapshot in;
  in.pid = 42;
  in.processName = "worker";
  in.cpu = CpuIdentity{"GenuineIntel", 6, 85, 4};
  in.time = TimeConversion{123, 456, 7};
  in.timing = PtTimingConfig{2, 30, 1, 120};
  Module module;
  module.path = "/nonexistent/lib.so";
  module.buildId = "00112233445566778899aabbccddeeff00112233";
  module.loadAddress = 0x7f0000000000;
  module.segments.push_back({0x7f0000001000, 0x3000, 0x1000, true});
  in.modules.push_back(module);
  in.threads.push_back({42, {2, 0x82, 2, 0x82, 0, 0, 0, 0}, false});
  in.threads.push_back({43, {0x99, 0x01, 0, 0, 0, 0, 0, 0}, false});

  auto out = parsePerfData(buildPerfData(in));
  ASSERT_TRUE(bool(out)) << toString(out.takeError());
  EXPECT_EQ(out->pid, 42u);
  EXPECT_EQ(out->processName, "worker");
  EXPECT_EQ(out->cpu.vendor, "GenuineIntel");
  EXPECT_EQ(out->cpu.family, 6u);
  EXPECT_EQ(out->cpu.model, 85u);
  EXPECT_EQ(out->cpu.stepping, 4u);
  EXPECT_EQ(out->time.timeZero, 123u);
  EXPECT_EQ(out->time.timeMult, 456u);
  EXPECT_EQ(out->time.timeShift, 7);
  EXPECT_EQ(out->timing.mtcFreq, 2);
  EXPECT_EQ(out->timing.nomFreq, 30);
  EXPECT_EQ(out->timing.cpuid15Eax, 1u);
  EXPECT_EQ(out->timing.cpuid15Ebx, 120u);
  ASSERT_EQ(out->threads.size(), 2u);
  EXPECT_EQ(out->threads[0].bytes, in.threads[0].bytes);
  EXPECT_EQ(out->threads[1].tid, 43u);
  ASSERT_EQ(out->modules.size(), 1u);
  EXPECT_EQ(out->modules[0].path, module.path);
  EXPECT_EQ(out->modules[0].buildId, module.buildId);
  EXPECT_EQ(out->modules[0].loadAddress, module.loadAddress);
  ASSERT_EQ(out->modules[0].segments.size(), 1u);
  EXPECT_EQ(out->modules[0].segments[0].address, 0x7f0000001000u);
  // The file is not on this machine: the decoder reports the path missing.
  EXPECT_EQ(out->modules[0].fileToRead(), module.path);
}

TEST(PerfData, EveryTruncationIsAnErrorNeverACrash) {
  std::vector<uint8_t> file = handBuiltFile(2);
  for (size_t length = 0; length < file.size(); ++length) {
    llvm::ArrayRef<uint8_t> prefix(file.data(), length);
    auto snapshot = parsePerfData(prefix);
    ASSERT_FALSE(bool(snapshot)) << "length " << length;
    std::string message = toString(snapshot.takeError());
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

} // namespace

// Per-CPU recordings: each CPU's AUX stream is cut into its threads' pieces
// by the AUX records (PerCpuTrace.h). Two threads alternate on two CPUs;
// each thread's trace is its pieces in time order, with a sync point (PSB,
// PSBEND) where a piece does not continue the last one in the same CPU
// stream, and an OVF after a piece the kernel truncated.
#include "../../core/lib/formats/perfdata/PerCpuTrace.h"

namespace {

using magic_trace::perfdata::AuxPiece;
using magic_trace::perfdata::CpuStream;

const std::vector<uint8_t> kSync = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                    0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                                    0x02, 0x82, 0x02, 0x82, 0x02, 0x23};

std::vector<uint8_t> join(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const std::vector<uint8_t> &part : parts)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

TEST(PerCpuTrace, AuxRecordsCutEachCpuStreamIntoThreads) {
  std::map<uint32_t, CpuStream> cpus;
  // CPU 0: thread 10 wrote bytes 1-3, thread 20 bytes 4-5, thread 10 6.
  cpus[0].bytes = {1, 2, 3, 4, 5, 6};
  cpus[0].haveBase = true;
  cpus[0].base = 0x100;
  // CPU 1: thread 20 wrote 7-8 (truncated), then thread 10 wrote 9.
  cpus[1].bytes = {7, 8, 9};
  cpus[1].haveBase = true;
  cpus[1].base = 0;
  std::vector<AuxPiece> pieces = {
      {0, 10, 0x100, 3, 0, 100},
      {0, 20, 0x103, 2, 0, 200},
      {1, 20, 0, 2, magic_trace::perfdata::kAuxFlagTruncated, 300},
      {0, 10, 0x105, 1, 0, 400},
      {1, 10, 2, 1, 0, 500}};
  auto threads = magic_trace::perfdata::splitPerCpu(cpus, pieces, false);
  ASSERT_TRUE(bool(threads)) << llvm::toString(threads.takeError());
  ASSERT_EQ(threads->size(), 2u);
  EXPECT_EQ((*threads)[0].tid, 10u);
  // 1-3, then 6 (CPU 0 again, but thread 20's bytes came between), then 9
  // on CPU 1.
  EXPECT_EQ((*threads)[0].bytes, join({{1, 2, 3}, kSync, {6}, kSync, {9}}));
  EXPECT_EQ((*threads)[1].tid, 20u);
  // 4-5, then 7-8 on CPU 1, cut short by the kernel: an OVF follows.
  EXPECT_EQ((*threads)[1].bytes, join({{4, 5}, kSync, {7, 8}, {0x02, 0xf3}}));
}

TEST(PerCpuTrace, ASharedStreamWithoutAuxRecordsIsAnError) {
  std::map<uint32_t, CpuStream> cpus;
  cpus[2].bytes = {1, 2};
  cpus[2].tids = {10, 20};
  auto threads = magic_trace::perfdata::splitPerCpu(cpus, {}, false);
  ASSERT_FALSE(bool(threads));
  EXPECT_NE(llvm::toString(threads.takeError())
                .find("CPU 2's trace was written by 2 threads"),
            std::string::npos);
  // One thread: the stream is its own (a snapshot recording's way).
  cpus[2].tids = {10};
  auto whole = magic_trace::perfdata::splitPerCpu(cpus, {}, true);
  ASSERT_TRUE(bool(whole)) << llvm::toString(whole.takeError());
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_EQ((*whole)[0].bytes, (std::vector<uint8_t>{1, 2}));
  EXPECT_TRUE((*whole)[0].wrapped);
}

} // namespace

// The per-CPU writer (magic-trace-perfdata --per-cpu) cuts threads at their
// PSBs and moves their TSCs: what it cannot do that to is refused in one
// line, naming the thread and what to record instead.
TEST(PerfData, PerCpuWriterRefusesTracesItCannotCut) {
  // PSB, TSC 3,000,000, PSBEND: the smallest trace it can lay out.
  std::vector<uint8_t> psb;
  for (int i = 0; i < 8; ++i)
    psb.insert(psb.end(), {0x02, 0x82});
  std::vector<uint8_t> good = psb;
  good.insert(good.end(), {0x19, 0xc0, 0xc6, 0x2d, 0, 0, 0, 0, 0x02, 0x23});
  Snapshot in;
  in.pid = 5;
  in.timing = PtTimingConfig{3, 30, 1, 120};
  in.time = TimeConversion{0, 1, 0};
  PerfDataWriteOptions options;
  options.cpus = 2;
  auto refused = [&](const Snapshot &snapshot) {
    auto built = buildPerCpuPerfData(snapshot, options);
    EXPECT_FALSE(bool(built));
    return built ? std::string() : toString(built.takeError());
  };

  in.threads = {{5, good, false}, {6, good, false}};
  auto built = buildPerCpuPerfData(in, options);
  ASSERT_TRUE(bool(built)) << toString(built.takeError());
  auto back = parsePerfData(*built);
  ASSERT_TRUE(bool(back)) << toString(back.takeError());
  EXPECT_EQ(back->threads.size(), 2u);

  in.threads = {{5, good, true}};
  EXPECT_EQ(refused(in), "thread 5: its ring wrapped; --per-cpu needs a whole "
                         "trace (record with a bigger --buffer-size)");
  std::vector<uint8_t> late = {0, 0};
  late.insert(late.end(), good.begin(), good.end());
  in.threads = {{6, late, false}};
  EXPECT_EQ(refused(in), "thread 6: its trace does not start with a PSB");
  std::vector<uint8_t> untimed = psb;
  untimed.insert(untimed.end(), {0x02, 0x23});
  in.threads = {{7, untimed, false}};
  EXPECT_NE(refused(in).find("thread 7: the PSB+ at offset 0 has no PSBEND or "
                             "no TSC"),
            std::string::npos);
  in.threads = {{5, good, false}};
  in.timing.cpuid15Ebx = 0;
  EXPECT_NE(refused(in).find("needs the recording's TSC:CTC ratio"),
            std::string::npos);
  in.timing.cpuid15Ebx = 120;
  options.cpus = 0;
  EXPECT_EQ(refused(in), "--per-cpu takes 1 to 1024 CPUs");
}
