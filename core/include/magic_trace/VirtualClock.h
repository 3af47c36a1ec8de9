//===- VirtualClock.h - The emulator's virtual clock ------------*- C++ -*-===//
//
// The clock behind the emulator's timing packets (documented in
// docs/emulator.md): what PacketWriter writes into TSC, TMA, CBR, MTC and CYC
// packets, the PtTimingConfig a decoder needs to read them, and the TSC -> ns
// conversion.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_VIRTUALCLOCK_H
#define MAGIC_TRACE_VIRTUALCLOCK_H

#include "magic_trace/CpuIdentity.h"
#include "magic_trace/PtTiming.h"
#include "magic_trace/Snapshot.h"

#include <cstdint>

namespace magic_trace {

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

/// The CPU an emulated trace claims to come from. LLDB 22 refuses vendor
/// "unknown" ("error: unknown cpu": libipt's pt_cpu_errata rejects it), and
/// libipt knows no Intel model without errata, so we name Gemini Lake
/// (family 6, model 0x7a), whose only erratum, APL11 (a TIP.PGD after OVF),
/// is worked around only when an OVF is not followed by FUP -- and the
/// emulator always writes OVF + FUP.
inline CpuIdentity emulatorCpu() {
  CpuIdentity cpu;
  cpu.vendor = "GenuineIntel";
  cpu.family = 6;
  cpu.model = 0x7a;
  cpu.stepping = 1;
  return cpu;
}

/// Whether `snapshot`'s times are the emulators' virtual clock (the QEMU
/// recorder's, the stepper's, or a replay of theirs): each thread keeps its
/// own, counting its own instructions from 1 ms, so the threads' times do
/// not line up. Read from the CPU and the clock they name (emulatorCpu,
/// VirtualClock::conversion), which a bundle or perf.data keeps too; a real
/// CPU's clock has a time_zero of its own.
inline bool onEmulatorClock(const Snapshot &snapshot) {
  CpuIdentity cpu = emulatorCpu();
  TimeConversion clock = VirtualClock::conversion();
  return snapshot.cpu.vendor == cpu.vendor &&
         snapshot.cpu.family == cpu.family && snapshot.cpu.model == cpu.model &&
         snapshot.cpu.stepping == cpu.stepping &&
         snapshot.time.timeZero == clock.timeZero &&
         snapshot.time.timeMult == clock.timeMult &&
         snapshot.time.timeShift == clock.timeShift;
}

} // namespace magic_trace

#endif
