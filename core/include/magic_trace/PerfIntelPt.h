//===- PerfIntelPt.h - Intel PT through perf_event_open ---------*- C++ -*-===//
//
// The kernel interface of the perf backend, kept free of LLDB:
// - discovery: the intel_pt PMU's type, config bit layout (format/*) and
//   capabilities (caps/*) from sysfs, and perf_event_paranoid;
// - configuration: --timer-resolution mapped onto the PMU's config bits the
//   way magic-trace does, degraded with a note where a capability is missing;
// - reading: the last N bytes of an AUX ring in overwrite (snapshot) mode,
//   oldest first, from a mapping page and buffer (real or fake).
// The recorder (perf_event_open per thread, mmap, ioctl) is PerfRecorder.h.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PERFINTELPT_H
#define MAGIC_TRACE_PERFINTELPT_H

#include "magic_trace/PacketWriter.h"
#include "magic_trace/PtTiming.h"
#include "magic_trace/Snapshot.h"

#include "llvm/Support/Error.h"

#include <linux/perf_event.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

/// One format/<name> file: which config word and which bits a term sets.
/// The kernel writes e.g. "config:14-17" or "config:13"; a term may list
/// several bit ranges ("config:0-3,8-11") whose bits are filled in order.
struct PmuFormatField {
  unsigned word = 0; ///< 0: config, 1: config1, 2: config2.
  std::vector<std::pair<unsigned, unsigned>> bitRanges; ///< [low, high].

  /// Total width in bits.
  unsigned width() const;
  /// The term's value in `config` (its word of perf_event_attr): the bits
  /// of each range in order, lowest first, as perf fills them.
  uint64_t read(uint64_t config) const;
  /// `config` with the term set to `value`'s low width() bits.
  uint64_t write(uint64_t config, uint64_t value) const;
};

/// Parses the text of a format/<name> file.
llvm::Expected<PmuFormatField> parseFormatField(llvm::StringRef text);

struct IntelPtPmuDescription {
  int type = -1;
  std::map<std::string, PmuFormatField> format;
  std::map<std::string, std::string> caps; ///< caps/<name> -> text.
  /// The nominal core:bus ratio (max_nonturbo_ratio); 0 when absent.
  uint32_t maxNonturboRatio = 0;
  /// The PMU's top-level tsc_art_ratio, "NUM:DEN" = CPUID.15H EBX:EAX; empty
  /// when absent.
  std::string tscArtRatio;

  /// A capability read as an integer (caps files are decimal or, for the
  /// *_periods/thresholds bitmaps, hexadecimal); 0 when absent.
  uint64_t capability(llvm::StringRef name) const;
};

/// Reads <sysRoot>/bus/event_source/devices/intel_pt. Fails with a one-line
/// error suggesting --backend emulate when the PMU is absent.
llvm::Expected<IntelPtPmuDescription>
loadIntelPtPmu(llvm::StringRef sysRoot = "/sys");

/// The perf_event_attr for per-thread, user-space-only Intel PT, plus notes
/// for every degradation (e.g. "cyc not supported: timing falls back to MTC").
struct IntelPtAttr {
  perf_event_attr attr{};
  std::vector<std::string> notes;
};

/// Values a user may ask for instead of the mapping's.
struct IntelPtTerms {
  std::optional<uint64_t> mtcPeriod, cycThresh, psbPeriod;
};

/// magic-trace's mapping: low = the perf defaults (tsc, mtc with period 3,
/// psb_period 3, branch); normal = also cyc with cyc_thresh 1 and
/// mtc_period 0; high = normal plus noretcomp. A period or threshold the
/// CPU does not support (caps/mtc_periods, cycle_thresholds, psb_periods)
/// becomes the nearest one it does, with a note. Fails when a term the
/// mapping needs has no format file (a kernel too old to know it).
llvm::Expected<IntelPtAttr> buildIntelPtAttr(const IntelPtPmuDescription &pmu,
                                             TimerResolution resolution,
                                             const IntelPtTerms &terms = {});

/// Sets the bits of `field` to `value` in the attr's config words. Fails when
/// the value does not fit.
llvm::Error setFormatField(perf_event_attr &attr, const PmuFormatField &field,
                           uint64_t value, llvm::StringRef name);

/// What libipt needs to turn MTC/CYC into time on this CPU: the MTC period
/// the attr asks for, the nominal ratio (max_nonturbo_ratio), and CPUID
/// 0x15's TSC:ART ratio (tsc_art_ratio, "ebx:eax"). Unknown fields stay 0,
/// which makes libipt fall back to TSC-only timing.
PtTimingConfig hardwareTiming(const IntelPtPmuDescription &pmu,
                              const perf_event_attr &attr);

/// Copies the retained bytes of an AUX ring in overwrite mode, oldest first.
/// `auxHead` is the kernel's aux_head: for Intel PT in snapshot mode an
/// offset inside the ring, on other kernels a monotonic count; both work.
/// Whether the ring wrapped is read from the count, or from written (non-zero)
/// bytes past the offset, since AUX pages start zeroed. `size` must be a power
/// of two.
std::vector<uint8_t> copyAuxRing(const uint8_t *aux, uint64_t size,
                                 uint64_t auxHead, bool &wrapped);

/// TSC -> ns conversion from the perf mapping page (cap_user_time_zero).
/// Fails when the kernel does not provide time_zero.
llvm::Expected<TimeConversion>
timeConversionFromPage(const perf_event_mmap_page &page);

} // namespace magic_trace

#endif
