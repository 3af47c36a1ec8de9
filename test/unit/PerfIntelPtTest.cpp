// Unit tests of the perf backend's kernel interface against fake sysfs trees
// (test/unit/fixtures) and fake AUX mappings.
#include "magic_trace/PerfIntelPt.h"
#include "magic_trace/PerfRecorder.h"

#include <gtest/gtest.h>
#include <intel-pt.h>

#include <numeric>

using namespace magic_trace;

namespace {

std::string fixture(const char *name) {
  return std::string(MT_TEST_SOURCE_DIR) + "/unit/fixtures/" + name;
}

/// RTIT_CTL bit numbers from the Intel SDM (vol. 3C, 33.2.7.2), independent
/// of the format files, to check we set what the hardware reads.
constexpr uint64_t bit(unsigned n) { return uint64_t(1) << n; }
constexpr uint64_t CycEn = bit(1), MtcEn = bit(9), TscEn = bit(10),
                   DisRetc = bit(11), BranchEn = bit(13);
uint64_t field(uint64_t config, unsigned low, unsigned high) {
  return (config >> low) & ((uint64_t(1) << (high - low + 1)) - 1);
}

TEST(PerfIntelPtTest, ParsesSingleBitAndRangeFormats) {
  llvm::Expected<PmuFormatField> single = parseFormatField("config:13\n");
  ASSERT_TRUE(bool(single)) << llvm::toString(single.takeError());
  EXPECT_EQ(single->word, 0u);
  EXPECT_EQ(single->width(), 1u);
  llvm::Expected<PmuFormatField> range = parseFormatField("config:14-17");
  ASSERT_TRUE(bool(range));
  EXPECT_EQ(range->width(), 4u);
  llvm::Expected<PmuFormatField> split = parseFormatField("config1:0-3,8-11");
  ASSERT_TRUE(bool(split));
  EXPECT_EQ(split->word, 1u);
  EXPECT_EQ(split->width(), 8u);
}

TEST(PerfIntelPtTest, RejectsMalformedFormats) {
  for (const char *bad :
       {"conf:1", "config:x", "config:9-3", "config:64", ""}) {
    llvm::Expected<PmuFormatField> parsed = parseFormatField(bad);
    EXPECT_FALSE(bool(parsed)) << bad;
    llvm::consumeError(parsed.takeError());
  }
}

TEST(PerfIntelPtTest, SplitFieldFillsRangesInOrder) {
  perf_event_attr attr{};
  llvm::Expected<PmuFormatField> split = parseFormatField("config:0-3,8-11");
  ASSERT_TRUE(bool(split));
  ASSERT_FALSE(bool(setFormatField(attr, *split, 0xAB, "split")));
  EXPECT_EQ(attr.config, 0xA0Bu);
  llvm::Error tooWide = setFormatField(attr, *split, 0x100, "split");
  EXPECT_TRUE(bool(tooWide));
  llvm::consumeError(std::move(tooWide));
  // Read back from the same bits, whatever the others hold.
  EXPECT_EQ(split->read(0xA0Bu), 0xABu);
  EXPECT_EQ(split->read(0xFFFF50F7u), 0x07u | (0x0u << 4));
  EXPECT_EQ(split->write(0xF0F0u, 0x5C), 0xF5FCu);
  // A whole 64-bit word, and a range at its top.
  llvm::Expected<PmuFormatField> whole = parseFormatField("config1:0-63");
  ASSERT_TRUE(bool(whole));
  EXPECT_EQ(whole->read(0x8000000000000001u), 0x8000000000000001u);
  EXPECT_EQ(whole->write(0, ~uint64_t(0)), ~uint64_t(0));
  llvm::Expected<PmuFormatField> top = parseFormatField("config:60-63");
  ASSERT_TRUE(bool(top));
  EXPECT_EQ(top->read(0xB000000000000000u), 0xBu);
}

TEST(PerfIntelPtTest, LoadsSkylakePmu) {
  llvm::Expected<IntelPtPmuDescription> pmu =
      loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu)) << llvm::toString(pmu.takeError());
  EXPECT_EQ(pmu->type, 8);
  EXPECT_EQ(pmu->capability("psb_cyc"), 1u);
  EXPECT_EQ(pmu->capability("mtc_periods"), 0x249u);
  EXPECT_EQ(pmu->capability("cycle_thresholds"), 0x3fffu);
  EXPECT_EQ(pmu->format.size(), 14u);
}

TEST(PerfIntelPtTest, MissingPmuSuggestsEmulate) {
  llvm::Expected<IntelPtPmuDescription> pmu = loadIntelPtPmu("/nonexistent");
  ASSERT_FALSE(bool(pmu));
  EXPECT_NE(llvm::toString(pmu.takeError()).find("--backend emulate"),
            std::string::npos);
}

TEST(PerfIntelPtTest, LowResolutionIsPerfDefault) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu));
  llvm::Expected<IntelPtAttr> attr =
      buildIntelPtAttr(*pmu, TimerResolution::Low);
  ASSERT_TRUE(bool(attr)) << llvm::toString(attr.takeError());
  uint64_t config = attr->attr.config;
  EXPECT_EQ(attr->attr.type, 8u);
  EXPECT_TRUE(attr->attr.exclude_kernel);
  EXPECT_TRUE(attr->attr.disabled);
  EXPECT_TRUE(config & TscEn);
  EXPECT_TRUE(config & BranchEn);
  EXPECT_TRUE(config & MtcEn);
  EXPECT_FALSE(config & CycEn);
  EXPECT_FALSE(config & DisRetc);
  EXPECT_EQ(field(config, 14, 17), 3u); // MTCFreq
  EXPECT_EQ(field(config, 24, 27), 3u); // PSBFreq
  EXPECT_TRUE(attr->notes.empty());
}

TEST(PerfIntelPtTest, NormalResolutionAddsCycleAccurateMode) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu));
  auto attr = buildIntelPtAttr(*pmu, TimerResolution::Normal);
  ASSERT_TRUE(bool(attr));
  uint64_t config = attr->attr.config;
  EXPECT_TRUE(config & CycEn);
  EXPECT_EQ(field(config, 19, 22), 1u); // CycThresh
  EXPECT_EQ(field(config, 14, 17), 0u); // MTCFreq (mtc_period=0)
  EXPECT_FALSE(config & DisRetc);
}

TEST(PerfIntelPtTest, HighResolutionAlsoDisablesReturnCompression) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu));
  auto attr = buildIntelPtAttr(*pmu, TimerResolution::High);
  ASSERT_TRUE(bool(attr));
  EXPECT_TRUE(attr->attr.config & CycEn);
  EXPECT_TRUE(attr->attr.config & DisRetc);
}

TEST(PerfIntelPtTest, OldCpuDegradesWithNotes) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-broadwell"));
  ASSERT_TRUE(bool(pmu));
  auto attr = buildIntelPtAttr(*pmu, TimerResolution::High);
  ASSERT_TRUE(bool(attr));
  uint64_t config = attr->attr.config;
  EXPECT_FALSE(config & CycEn);
  EXPECT_FALSE(config & MtcEn);
  EXPECT_TRUE(config & TscEn);
  ASSERT_EQ(attr->notes.size(), 2u);
  EXPECT_NE(attr->notes[0].find("psb_cyc"), std::string::npos);
  EXPECT_NE(attr->notes[1].find("caps/mtc"), std::string::npos);
}

TEST(PerfIntelPtTest, RecorderWithoutPmuFailsClearly) {
  PerfRecorder::Options options;
  options.kernel = makeLinuxKernel("/nonexistent");
  auto recorder = PerfRecorder::create(options);
  ASSERT_FALSE(bool(recorder));
  EXPECT_NE(llvm::toString(recorder.takeError()).find("no intel_pt PMU"),
            std::string::npos);
}

TEST(PerfIntelPtTest, RecorderRejectsOddSizes) {
  PerfRecorder::Options options;
  options.kernel = makeLinuxKernel(fixture("sysfs-skylake"));
  options.auxSize = 3 << 20;
  auto recorder = PerfRecorder::create(options);
  ASSERT_FALSE(bool(recorder));
  EXPECT_NE(llvm::toString(recorder.takeError()).find("power of two"),
            std::string::npos);
}

TEST(PerfIntelPtTest, PermissionErrorNamesParanoidAndCapability) {
  std::string message =
      llvm::toString(perfOpenError(EACCES, 42, fixture("no-such-proc")));
  EXPECT_NE(message.find("perf_event_paranoid is unreadable"),
            std::string::npos);
  EXPECT_NE(message.find("CAP_PERFMON"), std::string::npos);
  EXPECT_NE(llvm::toString(perfOpenError(ESRCH, 42, "/proc")).find("exited"),
            std::string::npos);
}

/// A fake AUX ring: `written` bytes numbered 0, 1, 2, ... went through a ring
/// of `size` bytes, as the kernel writes them.
std::vector<uint8_t> fakeRing(uint64_t size, uint64_t written) {
  std::vector<uint8_t> ring(size, 0);
  for (uint64_t i = 0; i < written; ++i)
    ring[i % size] = static_cast<uint8_t>(i * 7 + 1);
  return ring;
}

std::vector<uint8_t> lastBytes(uint64_t size, uint64_t written) {
  std::vector<uint8_t> expected;
  for (uint64_t i = written > size ? written - size : 0; i < written; ++i)
    expected.push_back(static_cast<uint8_t>(i * 7 + 1));
  return expected;
}

TEST(PerfIntelPtTest, AuxReadCases) {
  const uint64_t size = 4096;
  struct Case {
    const char *name;
    uint64_t head;
    bool wrapped;
  } cases[] = {{"empty", 0, false},
               {"no wrap", 1000, false},
               {"exactly full", size, false},
               {"wrapped", size + 123, true},
               {"head far past the size", 37 * size + 4000, true},
               {"wrapped to a boundary", 5 * size, true}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<uint8_t> ring = fakeRing(size, c.head);
    bool wrapped = !c.wrapped;
    std::vector<uint8_t> bytes =
        copyAuxRing(ring.data(), size, c.head, wrapped);
    EXPECT_EQ(bytes, lastBytes(size, c.head)) << c.name;
    EXPECT_EQ(wrapped, c.wrapped) << c.name;
    // Intel PT's snapshot mode reports the head as an offset in the ring.
    if (c.head > size) {
      bytes = copyAuxRing(ring.data(), size, c.head % size, wrapped);
      EXPECT_EQ(bytes, lastBytes(size, c.head)) << c.name << " (offset head)";
      EXPECT_TRUE(wrapped);
    }
  }
}

TEST(PerfIntelPtTest, TimeConversionFromPage) {
  perf_event_mmap_page page{};
  auto missing = timeConversionFromPage(page);
  ASSERT_FALSE(bool(missing));
  llvm::consumeError(missing.takeError());
  page.cap_user_time_zero = 1;
  page.time_zero = 1000;
  page.time_mult = 1 << 20; // 0.5 ns per tick with shift 21
  page.time_shift = 21;
  auto time = timeConversionFromPage(page);
  ASSERT_TRUE(bool(time));
  EXPECT_EQ(time->tscToNs(4000), 1000u + 2000u);
}

} // namespace

namespace {

TEST(PerfIntelPtTest, HardwareTimingFromSysfsAndConfig) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu));
  EXPECT_EQ(pmu->maxNonturboRatio, 24u);
  auto low = buildIntelPtAttr(*pmu, TimerResolution::Low);
  ASSERT_TRUE(bool(low));
  PtTimingConfig timing = hardwareTiming(*pmu, low->attr);
  EXPECT_EQ(timing.nomFreq, 24u);
  // The fixture's top-level tsc_art_ratio is "168:2", as the kernel prints
  // numerator (CPUID.15H EBX) then denominator (EAX).
  EXPECT_EQ(timing.cpuid15Ebx, 168u);
  EXPECT_EQ(timing.cpuid15Eax, 2u);
  EXPECT_EQ(timing.mtcFreq, field(low->attr.config, 14, 17));
  EXPECT_EQ(timing.mtcFreq, 3u);
  auto normal = buildIntelPtAttr(*pmu, TimerResolution::Normal);
  ASSERT_TRUE(bool(normal));
  EXPECT_EQ(hardwareTiming(*pmu, normal->attr).mtcFreq, 0u);
}

TEST(PerfIntelPtTest, HardwareTimingUnknownWithoutCaps) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-broadwell"));
  ASSERT_TRUE(bool(pmu));
  auto attr = buildIntelPtAttr(*pmu, TimerResolution::Low);
  ASSERT_TRUE(bool(attr));
  PtTimingConfig timing = hardwareTiming(*pmu, attr->attr);
  EXPECT_EQ(timing.cpuid15Eax, 0u);
  EXPECT_EQ(timing.cpuid15Ebx, 0u);
  EXPECT_EQ(timing.nomFreq, 22u);
}

} // namespace

TEST(PerfIntelPtTest, UnsupportedPeriodsBecomeTheNearestSupportedWithANote) {
  auto pmu = loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu)) << llvm::toString(pmu.takeError());
  // Skylake: mtc_periods 0x249 (0, 3, 6, 9), cycle_thresholds 0x3fff
  // (0-13), psb_periods 0x3f (0-5).
  IntelPtTerms wishes;
  wishes.mtcPeriod = 5;
  wishes.cycThresh = 20;
  wishes.psbPeriod = 7;
  auto attr = buildIntelPtAttr(*pmu, TimerResolution::Normal, wishes);
  ASSERT_TRUE(bool(attr)) << llvm::toString(attr.takeError());
  // RTIT_CTL: MTCFreq bits 17:14, CycThresh 22:19, PSBFreq 27:24.
  EXPECT_EQ((attr->attr.config >> 14) & 0xf, 6u);
  EXPECT_EQ((attr->attr.config >> 19) & 0xf, 13u);
  EXPECT_EQ((attr->attr.config >> 24) & 0xf, 5u);
  ASSERT_EQ(attr->notes.size(), 3u);
  EXPECT_EQ(attr->notes[0], "psb_period=7 is not supported by this CPU "
                            "(caps/psb_periods = 0x3f): using psb_period=5");
  EXPECT_NE(attr->notes[1].find("mtc_period=5"), std::string::npos);
  EXPECT_NE(attr->notes[2].find("using cyc_thresh=13"), std::string::npos);
  // A supported wish is kept without a note.
  wishes = {};
  wishes.mtcPeriod = 3;
  attr = buildIntelPtAttr(*pmu, TimerResolution::Normal, wishes);
  ASSERT_TRUE(bool(attr));
  EXPECT_EQ((attr->attr.config >> 14) & 0xf, 3u);
  EXPECT_TRUE(attr->notes.empty());
}

namespace {

/// The times libipt's query decoder gives after each conditional branch of
/// `bytes`, decoded with `timing`.
std::vector<uint64_t> timesAtBranches(std::vector<uint8_t> &bytes,
                                      const PtTimingConfig &timing) {
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  config.mtc_freq = timing.mtcFreq;
  config.nom_freq = timing.nomFreq;
  config.cpuid_0x15_eax = timing.cpuid15Eax;
  config.cpuid_0x15_ebx = timing.cpuid15Ebx;
  std::unique_ptr<pt_query_decoder, void (*)(pt_query_decoder *)> decoder(
      pt_qry_alloc_decoder(&config), pt_qry_free_decoder);
  std::vector<uint64_t> times;
  int status = pt_qry_sync_forward(decoder.get(), nullptr);
  EXPECT_GE(status, 0) << pt_errstr(pt_errcode(status));
  for (;;) {
    while (status >= 0 && (status & pts_event_pending)) {
      pt_event event;
      status = pt_qry_event(decoder.get(), &event, sizeof(event));
    }
    int taken = 0;
    status = pt_qry_cond_branch(decoder.get(), &taken);
    if (status < 0)
      break;
    uint64_t time = 0;
    uint32_t lostMtc = 0, lostCyc = 0;
    pt_qry_time(decoder.get(), &time, &lostMtc, &lostCyc);
    times.push_back(time);
  }
  return times;
}

} // namespace

TEST(PerfIntelPtTest, MtcRatioFromRealLayoutSysfsAdvancesTimeBetweenTscs) {
  // The live path's timing: the Skylake fixture (top-level tsc_art_ratio
  // "168:2", max_nonturbo_ratio 24) and the normal resolution's attr.
  auto pmu = loadIntelPtPmu(fixture("sysfs-skylake"));
  ASSERT_TRUE(bool(pmu)) << llvm::toString(pmu.takeError());
  auto attr = buildIntelPtAttr(*pmu, TimerResolution::Normal);
  ASSERT_TRUE(bool(attr)) << llvm::toString(attr.takeError());
  PtTimingConfig timing = hardwareTiming(*pmu, attr->attr);
  ASSERT_EQ(timing.mtcFreq, 0u);

  // PSB+ with TSC and TMA, then eight rounds of MTC (the crystal clock
  // ticks once: 2^mtc_period) and a one-bit TNT, written by libipt's
  // encoder. No TSC follows: only MTC can move time.
  std::vector<uint8_t> bytes(4096);
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  std::unique_ptr<pt_encoder, void (*)(pt_encoder *)> encoder(
      pt_alloc_encoder(&config), pt_free_encoder);
  constexpr uint64_t tsc0 = 0x100000;
  constexpr uint16_t ctc0 = 0x40;
  auto put = [&](pt_packet packet) {
    ASSERT_GE(pt_enc_next(encoder.get(), &packet), 0);
  };
  pt_packet packet{};
  packet.type = ppt_psb;
  put(packet);
  packet = {};
  packet.type = ppt_tsc;
  packet.payload.tsc.tsc = tsc0;
  put(packet);
  packet = {};
  packet.type = ppt_tma;
  packet.payload.tma.ctc = ctc0;
  packet.payload.tma.fc = 0;
  put(packet);
  packet = {};
  packet.type = ppt_psbend;
  put(packet);
  for (uint16_t tick = 1; tick <= 8; ++tick) {
    packet = {};
    packet.type = ppt_mtc;
    packet.payload.mtc.ctc = uint8_t(ctc0 + tick);
    put(packet);
    packet = {};
    packet.type = ppt_tnt_8;
    packet.payload.tnt.bit_size = 1;
    packet.payload.tnt.payload = 1;
    put(packet);
  }
  uint64_t offset = 0;
  pt_enc_get_offset(encoder.get(), &offset);
  bytes.resize(offset);

  std::vector<uint64_t> times = timesAtBranches(bytes, timing);
  ASSERT_EQ(times.size(), 8u);
  // One CTC tick is tsc_art_ratio = 168 / 2 = 84 TSC ticks (Intel SDM vol.
  // 3C, "MTC packet"): time moves on by 84 at every MTC.
  for (size_t i = 0; i < times.size(); ++i)
    EXPECT_EQ(times[i], tsc0 + 84 * (i + 1)) << "after MTC " << i + 1;

  // Without the ratio (the old caps/tsc_art_ratio read), time is stuck.
  PtTimingConfig noRatio = timing;
  noRatio.cpuid15Eax = noRatio.cpuid15Ebx = 0;
  std::vector<uint64_t> stuck = timesAtBranches(bytes, noRatio);
  ASSERT_EQ(stuck.size(), 8u);
  EXPECT_EQ(stuck.front(), stuck.back());
}
