//===- PerCpuLayout.h - Per-thread traces -> per-CPU AUX streams -*- C++
//-*-===//
//
// Private to core/lib/formats/perfdata: the writer's side of PerCpuTrace.h. To
// test a per-CPU reader (ours, and perf's as the oracle) on recordings as big
// and as threaded as we like, `magic-trace-perfdata --per-cpu N` lays the
// threads of an emulated recording onto N virtual CPUs, as the kernel would
// have written them had the threads been scheduled there:
//
// - A thread is cut at its own PSBs: the writer clears its return stack at
//   every PSB (docs/emulator.md), so no compressed RET in a piece refers to a
//   CALL in another, and a piece may run on any CPU (the SDM: only RETs to
//   CALLs seen since the last PSB on that logical processor are compressed).
// - A piece that ends with tracing on ends as an interrupt ends user-mode
//   tracing: FUP(the next instruction), TIP.PGD without IP. A piece that
//   starts with tracing on starts as a return to user mode does after the
//   kernel enabled tracing on that CPU: a PSB+ with timing only, MODE.Exec,
//   TIP.PGE(the instruction). The IPs are the cut PSB+'s FUP, so no
//   instruction is added or lost.
// - Times: each thread's clock is its own, so pieces are moved later by a
//   whole number of periods Q of the TMA packet's 16-bit CTC (and of MTC's
//   8-bit payload), which changes only the TSC packets' values; every piece
//   on a CPU starts after the one before it ends.
// - Sideband as perf records it with a CPU-wide switch event
//   (have_sched_switch 3): SWITCH_CPU_WIDE out/in through the idle task
//   around each piece, PERF_RECORD_AUX for each piece with the writer's
//   sample_id (kernel/events/ring_buffer.c, perf_aux_output_end), and
//   ITRACE_START the first time a thread runs on a CPU.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_RECORD_PERF_PERCPULAYOUT_H
#define MAGIC_TRACE_LIB_RECORD_PERF_PERCPULAYOUT_H

#include "magic_trace/Snapshot.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace magic_trace::perfdata {

/// One sideband record of a per-CPU layout.
struct LaneRecord {
  enum Kind { SwitchOut, SwitchIn, ItraceStart, Aux };
  Kind kind = Aux;
  uint64_t time = 0; ///< perf time (ns).
  uint32_t cpu = 0;
  uint32_t tid = 0;      ///< The record's task; 0 is the idle task.
  uint32_t otherTid = 0; ///< SWITCH: the next (out) or previous (in) task.
  uint64_t offset = 0;   ///< AUX: the piece in the CPU's AUX area.
  uint64_t size = 0;
};

struct PerCpuLayout {
  /// Each CPU's AUX area, from offset 0.
  std::vector<std::vector<uint8_t>> cpus;
  /// In time order (ties: CPU, then the order written).
  std::vector<LaneRecord> records;
  uint64_t pieces = 0;     ///< Pieces laid out.
  uint64_t migrations = 0; ///< Pieces on another CPU than the thread's last.
};

/// Lays `snapshot`'s threads onto `cpus` virtual CPUs. Errors: no CPUs, a
/// wrapped thread (its trace must start at its first PSB), a thread whose
/// trace libipt cannot walk packet by packet.
llvm::Expected<PerCpuLayout> layOutPerCpu(const Snapshot &snapshot,
                                          unsigned cpus);

} // namespace magic_trace::perfdata

#endif
