//===- PtTiming.h - Clock facts a PT decoder needs --------------*- C++ -*-===//
//
// The values a libipt decoder must put in its pt_config to turn MTC and CYC
// packets into time (mtc_freq, nom_freq, cpuid_0x15_eax/ebx). Kept free of
// intel-pt.h so any layer can see it; core/lib/decode/ copies it into
// pt_config.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PTTIMING_H
#define MAGIC_TRACE_PTTIMING_H

#include <cstdint>

namespace magic_trace {

/// What a PT decoder needs to know about the clocks that produced a trace
/// (Intel SDM vol. 3, "Timing Packets"): pt_config.mtc_freq, nom_freq,
/// cpuid_0x15_eax and cpuid_0x15_ebx. Zero means "unknown" (libipt then
/// times only from TSC packets).
struct PtTimingConfig {
  uint8_t mtcFreq = 0; ///< MTC every 2^mtcFreq crystal-clock (CTC) ticks.
  uint8_t nomFreq = 0; ///< Nominal core:bus ratio (TSC = nomFreq x 100 MHz).
  uint32_t cpuid15Eax = 0; ///< TSC/CTC ratio denominator (CPUID.15H:EAX).
  uint32_t cpuid15Ebx = 0; ///< TSC/CTC ratio numerator (CPUID.15H:EBX).
};

} // namespace magic_trace

#endif
