//===- PtTiming.h - The emulator's virtual clock ----------------*- C++ -*-===//
//
// The clock behind the emulator's timing packets, and the values a libipt
// decoder must put in its pt_config to read them (mtc_freq, nom_freq,
// cpuid_0x15_eax/ebx). Documented in docs/emulator.md. Kept free of
// intel-pt.h so any layer can see it; core/lib/pt/ copies it into pt_config.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PTTIMING_H
#define MAGIC_TRACE_PTTIMING_H

#include "magic_trace/Snapshot.h"

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

/// The emulator's virtual clock: every traced instruction takes one core
/// cycle; the core runs at its nominal 3 GHz (CBR = nomFreq = 30), and the
/// TSC ticks once per core cycle. The crystal clock (CTC/ART) runs at
/// 25 MHz, so one CTC tick is 120 TSC ticks; MTC packets come every 2^3 CTC
/// ticks (960 instructions). Time stands still while tracing is disabled.
struct VirtualClock {
  static constexpr uint64_t tscHz = 3000000000ull;
  static constexpr uint64_t cyclesPerInstruction = 1;
  /// TSC of the first traced instruction (1 ms, so no packet carries 0).
  static constexpr uint64_t startTsc = 3000000ull;
  static constexpr uint32_t tscPerCtc = 120;
  static constexpr PtTimingConfig timing{/*mtcFreq=*/3, /*nomFreq=*/30,
                                         /*cpuid15Eax=*/1,
                                         /*cpuid15Ebx=*/tscPerCtc};
  /// ns = tsc / 3: time_mult = round(2^31 / 3), time_shift = 31.
  static constexpr TimeConversion conversion() {
    TimeConversion conversion;
    conversion.timeZero = 0;
    conversion.timeMult = 715827883u;
    conversion.timeShift = 31;
    return conversion;
  }
};

} // namespace magic_trace

#endif
