//===- Snapshot.h - What a recorder hands to the pipeline -------*- C++ -*-===//
//
// One snapshot: per-thread PT bytes (oldest first), CPU identity, TSC -> ns
// conversion, the module list with every loaded segment, the code history
// (CodeHistory.h: what changed while the trace was written), and the stop
// context (each thread's stack at the stop, from the debugger's unwinder).
// Every backend (perf, emulate, bundle) produces this; decode, symbolize and
// the model consume it. It holds no libipt or LLDB types.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SNAPSHOT_H
#define MAGIC_TRACE_SNAPSHOT_H

#include "magic_trace/CodeHistory.h"
#include "magic_trace/CpuIdentity.h"
#include "magic_trace/PtTiming.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// TSC -> nanoseconds, as perf_event_mmap_page defines it (time_zero,
/// time_mult, time_shift). The emulator fills it for its virtual clock.
struct TimeConversion {
  uint64_t timeZero = 0;
  uint32_t timeMult = 1;
  uint16_t timeShift = 0;
  /// A full 64-bit TSC read after the trace was written (the perf backend
  /// reads it at the snapshot), or 0. PT's TSC packet carries bits 55:0
  /// only (Intel SDM vol. 3C, "TSC Packet"); past 2^56 (a year at 2.3 GHz,
  /// or a VM's TSC offset) the top byte is restored from this, as perf
  /// restores it from a reference TSC.
  uint64_t tscReference = 0;

  /// `tsc` as a trace packet gave it, with bits 63:56 restored from
  /// tscReference: the latest value not after it (within 2^55) that has
  /// these low 56 bits.
  uint64_t fullTsc(uint64_t tsc) const {
    constexpr uint64_t Low56 = (uint64_t(1) << 56) - 1;
    if (tscReference <= Low56 || tsc > Low56)
      return tsc;
    uint64_t full = (tscReference & ~Low56) | tsc;
    if (full > tscReference + (uint64_t(1) << 55))
      full -= uint64_t(1) << 56;
    return full;
  }

  /// ns = time_zero + (tsc * time_mult) >> time_shift, computed without
  /// overflow the way perf_event_open(2) shows.
  uint64_t tscToNs(uint64_t tsc) const {
    uint64_t quot = tsc >> timeShift;
    uint64_t rem = tsc & ((uint64_t(1) << timeShift) - 1);
    return timeZero + quot * timeMult + ((rem * timeMult) >> timeShift);
  }
};

/// Raw PT of one thread, linearized oldest -> newest.
struct ThreadTrace {
  uint64_t tid = 0;
  std::vector<uint8_t> bytes;
  bool wrapped = false; ///< The ring buffer overwrote older data.
  /// Where the thread's code changed (CodeHistory.h), by PSB offset into
  /// `bytes`, ascending; the first may be at 0 for the code it started with.
  std::vector<ImageMark> imageMarks = {};
};

/// A thread's stack at the stop, innermost first: frames[0] is the PC, the
/// rest are return addresses (as the debugger's unwinder reports them).
struct ThreadStop {
  uint64_t tid = 0;
  std::vector<uint64_t> frames;
  std::vector<std::string> functionNames; ///< Parallel to frames; may be empty.
  bool triggered = false; ///< This thread hit the snapshot breakpoint.
};

/// Anonymous memory the process made executable while the perf backend
/// recorded: the kernel's MMAP2 record of it, written at each mmap and each
/// mprotect that leaves it executable. Code there is not known from before
/// `timeNs` (on the trace's clock): it may have been other code, or none.
struct ExecMapping {
  uint64_t timeNs = 0;
  uint64_t address = 0;
  uint64_t size = 0;
};

struct Snapshot {
  uint64_t pid = 0;
  std::string processName;
  CpuIdentity cpu;
  TimeConversion time;
  /// MTC/CYC clock facts for the decoder's pt_config; zero when unknown.
  PtTimingConfig timing;
  /// The modules at the stop (the debugger's list, a bundle's).
  std::vector<Module> modules;
  /// How the code changed while the trace was written; empty when the
  /// recorder logs no changes (then `modules` is all the decoder has).
  CodeHistory code;
  /// What the recorder skipped or could not read, one line each, for the
  /// user (a perf map planted by another user, a FIFO): not in bundles.
  std::vector<std::string> notes;
  /// The perf backend's ExecMappings, oldest first; not in bundles (the
  /// code history's times carry what they say).
  std::vector<ExecMapping> execMappings;
  std::vector<ThreadTrace> threads;
  std::vector<ThreadStop> stop;
};

} // namespace magic_trace

#endif
