//===- KernelRecords.h - Sideband records the kernel writes -----*- C++ -*-===//
//
// Private to core/lib/formats/perfdata (and the perf recorder, which parses its
// data pages with it). The records a perf event's data pages carry
// (include/uapi/linux/perf_event.h) that the Intel PT backend needs, parsed by
// the same code whether they come from a perf.data file (PerfDataReader.cpp)
// or from a live ring (PerfRecorder.cpp): PERF_RECORD_AUX, ITRACE_START,
// LOST and MMAP2, each with the sample_id trailer that sample_id_all adds.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_RECORD_PERF_KERNELRECORDS_H
#define MAGIC_TRACE_LIB_RECORD_PERF_KERNELRECORDS_H

#include "PerCpuTrace.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace magic_trace::perfdata {

/// One kernel record, given meaning.
struct KernelRecord {
  uint32_t type = 0; ///< perf_event_header.type.
  /// kRecordAux: offset, size, flags, and the writer's tid, cpu, time.
  AuxPiece aux;
  /// kRecordItraceStart: the thread that starts tracing, and its process.
  uint32_t pid = 0, tid = 0;
  /// kRecordLost: how many records the kernel could not write.
  uint64_t lost = 0;
  /// kRecordMmap2: the mapping's range, protection and file name ("//anon"
  /// for anonymous memory); its time is aux.time. The kernel writes one
  /// for each executable mapping made, and again whenever mprotect changes
  /// one (mm/mprotect.c, mprotect_fixup: perf_event_mmap).
  uint64_t mmapAddress = 0, mmapSize = 0;
  uint32_t mmapProt = 0;
  std::string mmapPath;
};

/// Parses one record (its 8-byte header first) whose event has `sampleType`
/// (with sample_id_all). Records of other types only get `type`. Errors: a
/// record shorter than its header says or than its fields.
llvm::Error parseKernelRecord(llvm::ArrayRef<uint8_t> record,
                              uint64_t sampleType, KernelRecord *out);

} // namespace magic_trace::perfdata

#endif
