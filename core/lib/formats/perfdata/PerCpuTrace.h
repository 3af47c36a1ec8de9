//===- PerCpuTrace.h - Per-CPU AUX streams -> per-thread traces -*- C++ -*-===//
//
// Private to core/lib/formats/perfdata (and the perf recorder, which reads its
// rings the same way). perf's default recording (`perf record -e intel_pt//u
// ./prog`, and --snapshot) maps one AUX area per CPU: each CPU's stream holds
// the PT of whichever traced thread ran there. The kernel ends a piece of it
// whenever the event stops (a context switch of a per-task event, a full
// buffer) with PERF_RECORD_AUX {offset, size, flags} and the sample_id of the
// thread that wrote it (kernel/events/ring_buffer.c, perf_aux_output_end). A
// thread's trace is its pieces in time order.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_RECORD_PERF_PERCPUTRACE_H
#define MAGIC_TRACE_LIB_RECORD_PERF_PERCPUTRACE_H

#include "magic_trace/Snapshot.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace magic_trace::perfdata {

/// PERF_RECORD_AUX flags (include/uapi/linux/perf_event.h).
constexpr uint64_t kAuxFlagTruncated = 0x01;
constexpr uint64_t kAuxFlagOverwrite = 0x02;
constexpr uint64_t kAuxFlagPartial = 0x04;
constexpr uint64_t kAuxFlagCollision = 0x08;

/// One PERF_RECORD_AUX: [offset, offset + size) of `cpu`'s AUX area was
/// written by `tid`, up to `time`.
struct AuxPiece {
  uint32_t cpu = 0;
  uint32_t tid = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t flags = 0;
  uint64_t time = 0;
};

/// One CPU's AUX bytes as the AUXTRACE records gave them.
struct CpuStream {
  std::vector<uint8_t> bytes;
  /// AUX-area offset of bytes[0] (AUXTRACE's offset), when known.
  uint64_t base = 0;
  bool haveBase = false;
  /// Threads the recording says traced here (ITRACE_START, AUXTRACE's tid).
  std::set<uint32_t> tids;
};

/// What the split found, for `magic-trace-perfdata` and the tests.
struct PerCpuStats {
  uint64_t pieces = 0;       ///< AUX records used.
  uint64_t lostPieces = 0;   ///< Truncated, or bytes the file lacks.
  uint64_t wholeStreams = 0; ///< CPU streams given whole to one thread.
};

/// The per-thread traces of a per-CPU recording. A CPU whose stream the AUX
/// records tile is split by them: each thread gets its pieces in time order,
/// with a PSB+PSBEND between pieces that do not continue one another in one
/// CPU's stream (the decoder must not carry IP compression or timing across
/// CPUs: the pair resets both, and says nothing was lost), and an OVF where
/// a piece was truncated or is missing (the PSB+ after an OVF also holds a
/// MODE.Exec, so that the decoder resyncs there). A CPU without usable AUX
/// records (a snapshot recording, whose AUX records overwrite) goes whole to
/// the one thread traced there. Errors: a CPU stream that several threads share
/// with no AUX records to split it.
llvm::Expected<std::vector<ThreadTrace>>
splitPerCpu(std::map<uint32_t, CpuStream> &cpus, std::vector<AuxPiece> pieces,
            bool snapshotMode, PerCpuStats *stats = nullptr);

} // namespace magic_trace::perfdata

#endif
