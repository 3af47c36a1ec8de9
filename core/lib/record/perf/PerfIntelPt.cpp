//===- PerfIntelPt.cpp - Intel PT through perf_event_open -----------------===//
#include "magic_trace/PerfIntelPt.h"

#include "magic_trace/MachineFacts.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>

namespace magic_trace {
namespace {

std::optional<std::string> readTrimmed(const llvm::Twine &path) {
  auto buffer = llvm::MemoryBuffer::getFileAsStream(path);
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().trim().str();
}

/// Every regular file in `dir` as name -> trimmed contents.
std::map<std::string, std::string> readFiles(const std::string &dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (std::optional<std::string> text = readTrimmed(it->path()))
      files[llvm::sys::path::filename(it->path()).str()] = *text;
  return files;
}

uint64_t *configWord(perf_event_attr &attr, unsigned word) {
  switch (word) {
  case 0:
    return reinterpret_cast<uint64_t *>(&attr.config);
  case 1:
    return reinterpret_cast<uint64_t *>(&attr.config1);
  default:
    return reinterpret_cast<uint64_t *>(&attr.config2);
  }
}

/// The supported value nearest to `wish` in a capability bitmap (bit n set:
/// value n allowed), the smaller on a tie; `wish` when the bitmap is empty.
/// perf refuses a value the bitmap lacks (intel_pt_val_config_term in
/// tools/perf/arch/x86/util/intel-pt.c) and the kernel would return EINVAL
/// (pt_event_valid); taking the nearest one keeps the user's intent.
uint64_t supportedValue(uint64_t bitmap, uint64_t wish) {
  if (!bitmap)
    return wish;
  uint64_t best = wish;
  uint64_t bestDistance = UINT64_MAX;
  for (uint64_t value = 0; value < 64; ++value) {
    if (!(bitmap & (uint64_t(1) << value)))
      continue;
    uint64_t distance = value > wish ? value - wish : wish - value;
    if (distance < bestDistance)
      best = value, bestDistance = distance;
  }
  return best;
}

/// supportedValue with a note when the wish had to change.
uint64_t supportedValueNoting(const IntelPtPmuDescription &pmu,
                              llvm::StringRef term, llvm::StringRef cap,
                              uint64_t wish, std::vector<std::string> &notes) {
  uint64_t bitmap = pmu.capability(cap);
  uint64_t value = supportedValue(bitmap, wish);
  if (value != wish)
    notes.push_back((term + "=" + llvm::Twine(wish) +
                     " is not supported by this CPU (caps/" + cap + " = 0x" +
                     llvm::Twine::utohexstr(bitmap) + "): using " + term + "=" +
                     llvm::Twine(value))
                        .str());
  return value;
}

struct TermSetter {
  const IntelPtPmuDescription &pmu;
  IntelPtAttr &result;

  llvm::Error set(llvm::StringRef name, uint64_t value) {
    auto it = pmu.format.find(name.str());
    if (it == pmu.format.end())
      return llvm::createStringError(
          "the intel_pt PMU has no '%s' format term (kernel too old for this "
          "timer resolution; try --timer-resolution low)",
          name.str().c_str());
    return setFormatField(result.attr, it->second, value, name);
  }
  bool has(llvm::StringRef name) const { return pmu.format.count(name.str()); }
};

} // namespace

unsigned PmuFormatField::width() const {
  unsigned bits = 0;
  for (auto [low, high] : bitRanges)
    bits += high - low + 1;
  return bits;
}

/// The low `bits` bits set (1 to 64).
static uint64_t lowMask(unsigned bits) {
  return bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
}

uint64_t PmuFormatField::read(uint64_t config) const {
  uint64_t value = 0;
  unsigned shift = 0;
  for (auto [low, high] : bitRanges) {
    unsigned bits = high - low + 1;
    if (shift < 64)
      value |= ((config >> low) & lowMask(bits)) << shift;
    shift += bits;
  }
  return value;
}

uint64_t PmuFormatField::write(uint64_t config, uint64_t value) const {
  for (auto [low, high] : bitRanges) {
    unsigned bits = high - low + 1;
    uint64_t mask = lowMask(bits);
    config = (config & ~(mask << low)) | ((value & mask) << low);
    value = bits >= 64 ? 0 : value >> bits;
  }
  return config;
}

llvm::Expected<PmuFormatField> parseFormatField(llvm::StringRef text) {
  auto [wordName, ranges] = text.trim().split(':');
  PmuFormatField field;
  if (wordName == "config")
    field.word = 0;
  else if (wordName == "config1")
    field.word = 1;
  else if (wordName == "config2")
    field.word = 2;
  else
    return llvm::createStringError("unknown config word in format '%s'",
                                   text.str().c_str());
  llvm::SmallVector<llvm::StringRef, 4> parts;
  ranges.split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [lowText, highText] = part.split('-');
    unsigned low = 0, high = 0;
    if (lowText.getAsInteger(10, low))
      return llvm::createStringError("bad bit range in format '%s'",
                                     text.str().c_str());
    high = low;
    if (!highText.empty() && highText.getAsInteger(10, high))
      return llvm::createStringError("bad bit range in format '%s'",
                                     text.str().c_str());
    if (high < low || high > 63)
      return llvm::createStringError("bad bit range in format '%s'",
                                     text.str().c_str());
    field.bitRanges.emplace_back(low, high);
  }
  return field;
}

uint64_t IntelPtPmuDescription::capability(llvm::StringRef name) const {
  auto it = caps.find(name.str());
  if (it == caps.end())
    return 0;
  llvm::StringRef text(it->second);
  uint64_t value = 0;
  // The bitmaps (mtc_periods, cycle_thresholds, psb_periods) are hex.
  unsigned radix =
      name.ends_with("periods") || name.ends_with("thresholds") ? 16 : 10;
  if (text.consume_front("0x"))
    radix = 16;
  if (text.getAsInteger(radix, value))
    return 0;
  return value;
}

llvm::Expected<IntelPtPmuDescription> loadIntelPtPmu(llvm::StringRef sysRoot) {
  std::string dir = (sysRoot + "/bus/event_source/devices/intel_pt").str();
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError(
        "this machine has no intel_pt PMU (no Intel PT hardware, or a VM "
        "hides it; " +
        withoutIntelPtAdvice() + ")");
  IntelPtPmuDescription pmu;
  std::optional<std::string> type = readTrimmed(dir + "/type");
  if (!type || llvm::StringRef(*type).getAsInteger(10, pmu.type))
    return llvm::createStringError("cannot read %s/type (check sysfs is "
                                   "mounted and readable)",
                                   dir.c_str());
  for (const auto &[name, text] : readFiles(dir + "/format")) {
    llvm::Expected<PmuFormatField> field = parseFormatField(text);
    if (!field)
      return llvm::createStringError("%s/format/%s: %s", dir.c_str(),
                                     name.c_str(),
                                     llvm::toString(field.takeError()).c_str());
    pmu.format[name] = *field;
  }
  pmu.caps = readFiles(dir + "/caps");
  // max_nonturbo_ratio and tsc_art_ratio are the "timing" attributes, a
  // group without a name: at the top of the PMU's directory, not in caps/.
  if (std::optional<std::string> ratio =
          readTrimmed(dir + "/max_nonturbo_ratio"))
    llvm::StringRef(*ratio).getAsInteger(10, pmu.maxNonturboRatio);
  if (std::optional<std::string> ratio = readTrimmed(dir + "/tsc_art_ratio"))
    pmu.tscArtRatio = *ratio;
  return pmu;
}

llvm::Error setFormatField(perf_event_attr &attr, const PmuFormatField &field,
                           uint64_t value, llvm::StringRef name) {
  unsigned width = field.width();
  if (width < 64 && (value >> width) != 0)
    return llvm::createStringError("value %llu does not fit the %u-bit '%s' "
                                   "term",
                                   (unsigned long long)value, width,
                                   name.str().c_str());
  uint64_t *word = configWord(attr, field.word);
  *word = field.write(*word, value);
  return llvm::Error::success();
}

llvm::Expected<IntelPtAttr> buildIntelPtAttr(const IntelPtPmuDescription &pmu,
                                             TimerResolution resolution,
                                             const IntelPtTerms &wishes) {
  IntelPtAttr result;
  perf_event_attr &attr = result.attr;
  attr.size = sizeof(attr);
  attr.type = static_cast<uint32_t>(pmu.type);
  // User space only, started disabled: the recorder enables it once the AUX
  // area is mapped, so no packet is lost before the reader exists.
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  TermSetter terms{pmu, result};

  // The perf tool's default intel_pt config, which magic-trace's "low" keeps.
  if (llvm::Error error = terms.set("tsc", 1))
    return std::move(error);
  if (terms.has("branch"))
    if (llvm::Error error = terms.set("branch", 1))
      return std::move(error);
  if (terms.has("pt"))
    if (llvm::Error error = terms.set("pt", 1))
      return std::move(error);
  bool hasMtc = pmu.capability("mtc") != 0 && terms.has("mtc");
  bool hasCyc = pmu.capability("psb_cyc") != 0 && terms.has("cyc");
  if (terms.has("psb_period") && pmu.capability("psb_periods"))
    if (llvm::Error error = terms.set(
            "psb_period",
            supportedValueNoting(pmu, "psb_period", "psb_periods",
                                 wishes.psbPeriod.value_or(3), result.notes)))
      return std::move(error);

  if (resolution != TimerResolution::Low && !hasCyc) {
    // Older processors have no CYC: timing stays at MTC granularity (~1 us),
    // which is what magic-trace warns about too.
    result.notes.push_back("this CPU has no cycle-accurate mode (caps/psb_cyc "
                           "is 0): timing granularity is about 1 us instead "
                           "of about 10 ns");
    resolution = TimerResolution::Low;
  }
  if (hasMtc) {
    if (llvm::Error error = terms.set("mtc", 1))
      return std::move(error);
    uint64_t wish =
        wishes.mtcPeriod.value_or(resolution == TimerResolution::Low ? 3 : 0);
    uint64_t period = supportedValueNoting(pmu, "mtc_period", "mtc_periods",
                                           wish, result.notes);
    if (terms.has("mtc_period"))
      if (llvm::Error error = terms.set("mtc_period", period))
        return std::move(error);
  } else {
    result.notes.push_back("this CPU has no MTC packets (caps/mtc is 0): "
                           "times come from TSC packets only");
  }
  if (resolution == TimerResolution::Low)
    return result;

  if (llvm::Error error = terms.set("cyc", 1))
    return std::move(error);
  uint64_t threshold =
      supportedValueNoting(pmu, "cyc_thresh", "cycle_thresholds",
                           wishes.cycThresh.value_or(1), result.notes);
  if (terms.has("cyc_thresh"))
    if (llvm::Error error = terms.set("cyc_thresh", threshold))
      return std::move(error);
  if (resolution == TimerResolution::High)
    if (llvm::Error error = terms.set("noretcomp", 1))
      return std::move(error);
  return result;
}

PtTimingConfig hardwareTiming(const IntelPtPmuDescription &pmu,
                              const perf_event_attr &attr) {
  PtTimingConfig timing;
  timing.nomFreq = static_cast<uint8_t>(pmu.maxNonturboRatio);
  // The kernel prints "%u:%u" of tsc_art_num, tsc_art_den, which it sets
  // to CPUID.15H EBX and EAX (arch/x86/events/intel/pt.c,
  // pt_timing_attr_show and pt_pmu_hw_init); perf reads the same leaf as
  // n = ebx, d = eax. 0:0 means the CPU does not enumerate it.
  auto [numText, denText] = llvm::StringRef(pmu.tscArtRatio).split(':');
  uint32_t num = 0, den = 0;
  if (!numText.getAsInteger(10, num) && !denText.getAsInteger(10, den) && num &&
      den) {
    timing.cpuid15Ebx = num;
    timing.cpuid15Eax = den;
  }
  // The MTC period actually configured: read back the mtc_period term.
  auto field = pmu.format.find("mtc_period");
  if (field != pmu.format.end() && !field->second.bitRanges.empty())
    timing.mtcFreq = static_cast<uint8_t>(field->second.read(attr.config));
  return timing;
}

std::vector<uint8_t> copyAuxRing(const uint8_t *aux, uint64_t size,
                                 uint64_t auxHead, bool &wrapped) {
  // Intel PT in snapshot mode reports aux_head as an offset inside the ring
  // (the perf tool's intel_pt_find_snapshot works around the same thing);
  // other kernels report a monotonic count. Both reduce to the offset of the
  // next write. AUX pages start zeroed, so written bytes past that offset
  // mean the ring has wrapped; a count beyond the size says so directly.
  uint64_t start = auxHead & (size - 1);
  bool exactlyFull = auxHead == size;
  wrapped = auxHead > size ||
            (!exactlyFull && std::any_of(aux + start, aux + size,
                                         [](uint8_t byte) { return byte; }));
  if (exactlyFull)
    return std::vector<uint8_t>(aux, aux + size);
  if (!wrapped)
    return std::vector<uint8_t>(aux, aux + start);
  // The oldest retained byte is the one the next write will overwrite.
  std::vector<uint8_t> bytes;
  bytes.reserve(size);
  bytes.insert(bytes.end(), aux + start, aux + size);
  bytes.insert(bytes.end(), aux, aux + start);
  return bytes;
}

llvm::Expected<TimeConversion>
timeConversionFromPage(const perf_event_mmap_page &page) {
  if (!page.cap_user_time_zero)
    return llvm::createStringError(
        "the kernel does not expose time_zero in the perf mapping page: "
        "it sets cap_user_time_zero only while sched_clock is stable, which "
        "VMs and TSCs marked unstable often are not (check dmesg for "
        "'clocksource' and 'tsc unstable'; kernels before 4.5 lack it); "
        "times cannot be converted to ns");
  TimeConversion time;
  time.timeZero = page.time_zero;
  time.timeMult = page.time_mult;
  time.timeShift = page.time_shift;
  return time;
}

} // namespace magic_trace
