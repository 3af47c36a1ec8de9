//===- PerfDataFormat.h - perf.data layout constants ------------*- C++ -*-===//
//
// The parts of perf.data that the writer and the reader share, from
// tools/perf/Documentation/perf.data-file-format.txt, <linux/perf_event.h>
// and tools/perf/util/intel-pt.h (the AUXTRACE_INFO private words). Every
// offset is in bytes; every integer is little-endian.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RECORD_PERF_PERFDATAFORMAT_H
#define MAGIC_TRACE_RECORD_PERF_PERFDATAFORMAT_H

#include <cstdint>

namespace magic_trace {
namespace perfdata {

/// "PERFILE2" read as a little-endian u64.
constexpr uint64_t kMagic = 0x32454c4946524550ULL;
/// magic, size, attr_size, attrs, data, event_types (16 each), 256 bits.
constexpr uint64_t kFileHeaderSize = 104;
constexpr uint64_t kPipeHeaderSize = 16; ///< `perf record -o -`.
constexpr unsigned kFeatureBits = 256;

/// perf_event_attr as of PERF_ATTR_SIZE_VER7 (sig_data is the last field).
constexpr uint32_t kAttrSize = 128;
constexpr uint64_t kAttrSizeVer0 = 64; ///< The smallest attr perf accepts.
constexpr uint64_t kAttrTypeOffset = 0;
constexpr uint64_t kAttrSizeOffset = 4;
constexpr uint64_t kAttrConfigOffset = 8;
constexpr uint64_t kAttrSamplePeriodOffset = 16;
constexpr uint64_t kAttrSampleTypeOffset = 24;
constexpr uint64_t kAttrFlagsOffset = 40;

// attr.sample_type bits.
constexpr uint64_t kSampleIp = 1 << 0;
constexpr uint64_t kSampleTid = 1 << 1;
constexpr uint64_t kSampleTime = 1 << 2;
constexpr uint64_t kSampleAddr = 1 << 3;
constexpr uint64_t kSampleId = 1 << 6;
constexpr uint64_t kSampleCpu = 1 << 7;
constexpr uint64_t kSampleStreamId = 1 << 9;
constexpr uint64_t kSampleIdentifier = 1 << 16;

// attr flag bits (the bitfield word after read_format).
constexpr uint64_t kFlagDisabled = 1ULL << 0;
constexpr uint64_t kFlagExcludeKernel = 1ULL << 5;
constexpr uint64_t kFlagExcludeHv = 1ULL << 6;
constexpr uint64_t kFlagMmap = 1ULL << 8;
constexpr uint64_t kFlagComm = 1ULL << 9;
constexpr uint64_t kFlagEnableOnExec = 1ULL << 12;
constexpr uint64_t kFlagSampleIdAll = 1ULL << 18;
constexpr uint64_t kFlagMmap2 = 1ULL << 23;
constexpr uint64_t kFlagContextSwitch = 1ULL << 26;

// Record types (perf_event_header.type).
constexpr uint32_t kRecordMmap = 1;
constexpr uint32_t kRecordLost = 2;
constexpr uint32_t kRecordComm = 3;
constexpr uint32_t kRecordSample = 9;
constexpr uint32_t kRecordMmap2 = 10;
constexpr uint32_t kRecordAux = 11;
constexpr uint32_t kRecordItraceStart = 12;
constexpr uint32_t kRecordSwitch = 14;
constexpr uint32_t kRecordSwitchCpuWide = 15;
constexpr uint32_t kRecordUserTypeStart = 64; ///< perf's own records.
constexpr uint32_t kRecordFinishedRound = 68;
constexpr uint32_t kRecordAuxtraceInfo = 70;
constexpr uint32_t kRecordAuxtrace = 71;

constexpr uint64_t kEventHeaderSize = 8; ///< type u32, misc u16, size u16.
constexpr uint16_t kMiscUser = 2;
/// A PERF_RECORD_SWITCH* record of a task leaving the CPU.
constexpr uint16_t kMiscSwitchOut = 1 << 13;
/// MMAP2 carries a build-id (size byte, 3 reserved, 20 bytes) in place of
/// maj/min/ino/ino_generation.
constexpr uint16_t kMiscMmapBuildId = 1 << 14;
/// A HEADER_BUILD_ID entry says its build-id size in the byte after it.
constexpr uint16_t kMiscBuildIdSize = 1 << 15;

/// PERF_RECORD_AUXTRACE: header, size, offset, reference, idx, tid, cpu,
/// reserved; the `size` bytes of trace follow the record.
constexpr uint64_t kAuxtraceRecordSize = 48;
/// auxtrace_info.type for Intel PT (enum auxtrace_type).
constexpr uint32_t kAuxtraceIntelPt = 1;

// Feature bits (HEADER_*) and their sections after the data section.
constexpr unsigned kFeatBuildId = 2;
constexpr unsigned kFeatArch = 6;
constexpr unsigned kFeatCpuId = 9;
constexpr unsigned kFeatAuxtrace = 18;

/// HEADER_BUILD_ID entry: header, pid, 24 bytes of build-id (20 used plus
/// the size byte), then the file name padded to kNameAlign.
constexpr uint64_t kBuildIdEntryFixed = 8 + 4 + 24;
constexpr uint64_t kBuildIdMax = 20;
constexpr uint64_t kNameAlign = 64;

/// The u64 words of AUXTRACE_INFO's private area for intel_pt, in order.
enum IntelPtPriv : unsigned {
  kPtPmuType,
  kPtTimeShift,
  kPtTimeMult,
  kPtTimeZero,
  kPtCapUserTimeZero,
  kPtTscBit,
  kPtNoRetCompBit,
  kPtHaveSchedSwitch,
  kPtSnapshotMode,
  kPtPerCpuMmaps,
  kPtMtcBit,
  kPtMtcFreqBits,
  kPtTscCtcN,
  kPtTscCtcD,
  kPtCycBit,
  kPtMaxNonTurboRatio,
  kPtFilterStrLen,
  kPtPrivCount,
};
/// perf's decoder rejects an intel_pt AUXTRACE_INFO shorter than this.
constexpr unsigned kPtPrivMin = kPtPerCpuMmaps + 1;

// intel_pt config bits (/sys/bus/event_source/devices/intel_pt/format/).
constexpr uint64_t kPtConfigCyc = 1ULL << 1;
constexpr uint64_t kPtConfigMtc = 1ULL << 9;
constexpr uint64_t kPtConfigTsc = 1ULL << 10;
constexpr uint64_t kPtConfigNoRetComp = 1ULL << 11;
constexpr uint64_t kPtConfigBranch = 1ULL << 13;
constexpr unsigned kPtConfigMtcPeriodShift = 14;
constexpr uint64_t kPtConfigMtcPeriod = 0xfULL << kPtConfigMtcPeriodShift;

} // namespace perfdata
} // namespace magic_trace

#endif
