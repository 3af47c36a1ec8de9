//===- PerfData.cpp - Write a per-thread Intel PT perf.data ---------------===//
//
// The file is laid out as perf record lays out a per-thread recording:
//
//   file header | one perf_file_attr | its id | data records | feature
//   section table | feature payloads
//
// Data records, in time order: AUXTRACE_INFO, a COMM per thread, an MMAP2
// per executable segment, one AUXTRACE record (plus its PT bytes) per thread,
// FINISHED_ROUND. Non-perf records end in the sample_id_all trailer that
// sample_type IP|TID|TIME|IDENTIFIER implies: pid, tid, time, identifier.
//
// A per-CPU file (buildPerCpuPerfData) is laid out as `perf record` without
// --per-thread lays it out: sample_type adds CPU (the trailer: pid, tid,
// time, cpu, reserved, identifier), the COMM and MMAP2 records, then
// PerCpuLayout's SWITCH_CPU_WIDE, ITRACE_START and AUX records in time order,
// and one AUXTRACE record per CPU.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PerfData.h"
#include "magic_trace/PrivateFiles.h"
#include "magic_trace/ProcessModules.h"

#include "PerCpuLayout.h"
#include "PerfDataFormat.h"

#include "../../base/PtBytes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace magic_trace {
namespace {

using namespace perfdata;

/// The one event id, in the attr's id list and every record's identifier.
constexpr uint64_t kEventId = 1;
constexpr uint32_t kProtReadExec = 0x1 | 0x4; // PROT_READ | PROT_EXEC
constexpr uint32_t kMapPrivate = 0x2;

/// Little-endian appends to a growing file image.
class ByteWriter {
public:
  std::vector<uint8_t> bytes;

  void u8(uint8_t value) { bytes.push_back(value); }
  void u16(uint16_t value) { put(value, 2); }
  void u32(uint32_t value) { put(value, 4); }
  void u64(uint64_t value) { put(value, 8); }
  void zeros(size_t count) { bytes.insert(bytes.end(), count, 0); }
  void raw(ArrayRef<uint8_t> data) {
    bytes.insert(bytes.end(), data.begin(), data.end());
  }
  /// `text` and a NUL, zero-padded to a multiple of `align` bytes.
  void paddedString(StringRef text, size_t align) {
    raw(arrayRefFromStringRef(text));
    zeros(alignTo(text.size() + 1, align) - text.size());
  }
  size_t size() const { return bytes.size(); }
  void patch32(size_t at, uint32_t value) { patch(at, value, 4); }
  void patch16(size_t at, uint16_t value) { patch(at, value, 2); }
  void patch64(size_t at, uint64_t value) { patch(at, value, 8); }

private:
  void put(uint64_t value, unsigned width) {
    for (unsigned i = 0; i < width; ++i)
      bytes.push_back(uint8_t(value >> (8 * i)));
  }
  void patch(size_t at, uint64_t value, unsigned width) {
    for (unsigned i = 0; i < width; ++i)
      bytes[at + i] = uint8_t(value >> (8 * i));
  }
};

/// Starts a record; finishRecord fills in its size.
size_t beginRecord(ByteWriter &out, uint32_t type, uint16_t misc) {
  size_t start = out.size();
  out.u32(type);
  out.u16(misc);
  out.u16(0);
  return start;
}

void finishRecord(ByteWriter &out, size_t start) {
  out.patch16(start + 6, uint16_t(out.size() - start));
}

/// No CPU in the sample_id trailer: a per-thread file.
constexpr uint32_t kNoCpu = UINT32_MAX;

/// The sample_id_all trailer for sample_type IP|TID|TIME|IDENTIFIER, plus
/// CPU in a per-CPU file.
void sampleId(ByteWriter &out, uint32_t pid, uint32_t tid, uint64_t time,
              uint32_t cpu) {
  out.u32(pid);
  out.u32(tid);
  out.u64(time);
  if (cpu != kNoCpu) {
    out.u32(cpu);
    out.u32(0);
  }
  out.u64(kEventId);
}

uint64_t ptConfig(const Snapshot &snapshot,
                  const PerfDataWriteOptions &options) {
  uint64_t config = kPtConfigBranch | kPtConfigTsc | kPtConfigMtc;
  config |= (uint64_t(snapshot.timing.mtcFreq) << kPtConfigMtcPeriodShift) &
            kPtConfigMtcPeriod;
  if (options.cyc)
    config |= kPtConfigCyc;
  if (options.noRetComp)
    config |= kPtConfigNoRetComp;
  return config;
}

void writeAttr(ByteWriter &out, const Snapshot &snapshot,
               const PerfDataWriteOptions &options) {
  size_t start = out.size();
  out.zeros(kAttrSize);
  out.patch32(start + kAttrTypeOffset, options.pmuType);
  out.patch32(start + kAttrSizeOffset, kAttrSize);
  out.patch64(start + kAttrConfigOffset, ptConfig(snapshot, options));
  out.patch64(start + kAttrSamplePeriodOffset, 1);
  uint64_t sampleType =
      kSampleIp | kSampleTid | kSampleTime | kSampleIdentifier;
  uint64_t flags = kFlagDisabled | kFlagExcludeKernel | kFlagExcludeHv |
                   kFlagMmap | kFlagComm | kFlagEnableOnExec |
                   kFlagSampleIdAll | kFlagMmap2;
  if (options.cpus) {
    sampleType |= kSampleCpu;
    flags |= kFlagContextSwitch;
  }
  out.patch64(start + kAttrSampleTypeOffset, sampleType);
  out.patch64(start + kAttrFlagsOffset, flags);
}

void writeAuxtraceInfo(ByteWriter &out, const Snapshot &snapshot,
                       const PerfDataWriteOptions &options) {
  size_t start = beginRecord(out, kRecordAuxtraceInfo, 0);
  out.u32(kAuxtraceIntelPt);
  out.u32(0); // reserved
  uint64_t priv[kPtPrivCount] = {};
  priv[kPtPmuType] = options.pmuType;
  priv[kPtTimeShift] = snapshot.time.timeShift;
  priv[kPtTimeMult] = snapshot.time.timeMult;
  priv[kPtTimeZero] = snapshot.time.timeZero;
  priv[kPtCapUserTimeZero] = 1;
  priv[kPtTscBit] = kPtConfigTsc;
  priv[kPtNoRetCompBit] = kPtConfigNoRetComp;
  priv[kPtMtcBit] = kPtConfigMtc;
  priv[kPtMtcFreqBits] = kPtConfigMtcPeriod;
  priv[kPtTscCtcN] = snapshot.timing.cpuid15Ebx;
  priv[kPtTscCtcD] = snapshot.timing.cpuid15Eax;
  priv[kPtCycBit] = kPtConfigCyc;
  priv[kPtMaxNonTurboRatio] = snapshot.timing.nomFreq;
  priv[kPtFilterStrLen] = 0;
  priv[kPtSnapshotMode] = options.snapshotPieces > 1;
  // perf's values: 3 is a CPU-wide switch event (SWITCH_CPU_WIDE records).
  priv[kPtHaveSchedSwitch] = options.cpus ? 3 : 0;
  priv[kPtPerCpuMmaps] = options.cpus > 0;
  for (uint64_t word : priv)
    out.u64(word);
  out.u64(0); // cap_event_trace (perf 5.19+): no event trace
  finishRecord(out, start);
}

void writeComm(ByteWriter &out, uint32_t pid, uint32_t tid, StringRef name,
               uint64_t time, uint32_t cpu) {
  size_t start = beginRecord(out, kRecordComm, 0);
  out.u32(pid);
  out.u32(tid);
  out.paddedString(name.take_front(15), 8); // TASK_COMM_LEN is 16
  sampleId(out, pid, tid, time, cpu);
  finishRecord(out, start);
}

/// The file name an MMAP2 gives: the run-time path, as perf records it, when
/// perf can open it here or it names kernel-provided memory ("[vdso]"); else
/// the module's copy (a bundle from another machine, a relative path).
StringRef mmapFileName(const Module &module) {
  StringRef path = module.path;
  if (module.fileCopy.empty() || path.starts_with("[") ||
      (sys::path::is_absolute(path) && sys::fs::exists(path)))
    return path;
  return module.fileCopy;
}

void writeMmap2(ByteWriter &out, uint32_t pid, const Module &module,
                const LoadedSegment &segment, uint64_t time, uint32_t cpu) {
  size_t start = beginRecord(out, kRecordMmap2, kMiscUser);
  out.u32(pid);
  out.u32(pid);
  out.u64(segment.address);
  out.u64(segment.size);
  out.u64(segment.fileOffset);
  out.zeros(24); // maj, min, ino, ino_generation: unknown
  out.u32(kProtReadExec);
  out.u32(kMapPrivate);
  out.paddedString(mmapFileName(module), 8);
  sampleId(out, pid, pid, time, cpu);
  finishRecord(out, start);
}

struct AuxtraceEntry {
  uint64_t fileOffset = 0;
  uint64_t size = 0;
};

/// One AUXTRACE record and its PT, zero-padded to 8 bytes (zeros are PAD
/// packets) as perf record pads it.
AuxtraceEntry writeAuxtrace(ByteWriter &out, uint32_t tid, uint32_t cpu,
                            ArrayRef<uint8_t> bytes, uint64_t offset,
                            uint64_t reference, uint32_t idx) {
  AuxtraceEntry entry;
  entry.fileOffset = out.size();
  uint64_t size = alignTo(bytes.size(), 8);
  size_t start = beginRecord(out, kRecordAuxtrace, 0);
  out.u64(size);
  out.u64(offset);    // offset in the AUX area
  out.u64(reference); // perf needs it non-zero
  out.u32(idx);
  out.u32(tid);
  out.u32(cpu); // -1: a per-thread buffer
  out.u32(0);
  finishRecord(out, start);
  out.raw(bytes);
  out.zeros(size - bytes.size());
  // perf checks that an index entry's size is the record's header.size,
  // without the trace after it.
  entry.size = kAuxtraceRecordSize;
  return entry;
}

/// HEADER_BUILD_ID: one entry per module with a build-id.
void writeBuildIds(ByteWriter &out, const Snapshot &snapshot) {
  for (const Module &module : snapshot.modules) {
    // A module without a recorded build-id (the emulator's vdso copy) gets
    // its file's, so a reader can tell which vdso it was.
    std::string id =
        fromHex(module.buildId.empty() ? readBuildId(module.fileToRead())
                                       : module.buildId);
    if (id.empty() || id.size() > kBuildIdMax)
      continue;
    size_t start = beginRecord(out, 0, kMiscUser | kMiscBuildIdSize);
    out.u32(uint32_t(snapshot.pid));
    out.raw(arrayRefFromStringRef(id));
    out.zeros(kBuildIdMax - id.size());
    out.u8(uint8_t(id.size()));
    out.zeros(3);
    out.paddedString(mmapFileName(module), kNameAlign);
    finishRecord(out, start);
  }
}

/// perf_header_string: u32 length (padded), then the padded string.
void headerString(ByteWriter &out, StringRef text) {
  out.u32(uint32_t(alignTo(text.size() + 1, kNameAlign)));
  out.paddedString(text, kNameAlign);
}

/// perf's x86 CPUID string: "vendor,family,model,stepping".
std::string cpuIdString(const CpuIdentity &cpu) {
  return cpu.vendor + "," + std::to_string(cpu.family) + "," +
         std::to_string(cpu.model) + "," + std::to_string(cpu.stepping);
}

/// Writes the feature table and payloads at the end of `out`, and sets the
/// header's feature bits.
void writeFeatures(ByteWriter &out, const Snapshot &snapshot,
                   const std::vector<AuxtraceEntry> &index) {
  const unsigned features[] = {kFeatBuildId, kFeatArch, kFeatCpuId,
                               kFeatAuxtrace};
  size_t table = out.size();
  out.zeros(16 * std::size(features));
  for (size_t i = 0; i < std::size(features); ++i) {
    size_t begin = out.size();
    switch (features[i]) {
    case kFeatBuildId:
      writeBuildIds(out, snapshot);
      break;
    case kFeatArch:
      headerString(out, "x86_64");
      break;
    case kFeatCpuId:
      headerString(out, cpuIdString(snapshot.cpu));
      break;
    case kFeatAuxtrace:
      out.u64(index.size());
      for (const AuxtraceEntry &entry : index) {
        out.u64(entry.fileOffset);
        out.u64(entry.size);
      }
      break;
    }
    out.patch64(table + 16 * i, begin);
    out.patch64(table + 16 * i + 8, out.size() - begin);
    size_t word = 72 + 8 * (features[i] / 64);
    out.bytes[word + (features[i] % 64) / 8] |= uint8_t(1) << (features[i] % 8);
  }
}

/// The file header, the attr and its id; returns where the data section
/// starts.
size_t beginFile(ByteWriter &out, const Snapshot &snapshot,
                 const PerfDataWriteOptions &options) {
  out.u64(kMagic);
  out.u64(kFileHeaderSize);
  out.u64(kAttrSize + 16); // perf_file_attr: attr and its ids section
  out.zeros(kFileHeaderSize - out.size());

  size_t attrs = out.size();
  writeAttr(out, snapshot, options);
  size_t idsSection = out.size();
  out.zeros(16);
  size_t ids = out.size();
  out.u64(kEventId);
  out.patch64(idsSection, ids);
  out.patch64(idsSection + 8, 8);
  out.patch64(24, attrs);
  out.patch64(32, kAttrSize + 16);
  return out.size();
}

/// FINISHED_ROUND ends the data section at `data`; the features follow.
void endFile(ByteWriter &out, size_t data, const Snapshot &snapshot,
             const std::vector<AuxtraceEntry> &index) {
  size_t round = beginRecord(out, kRecordFinishedRound, 0);
  finishRecord(out, round);
  out.patch64(40, data);
  out.patch64(48, out.size() - data);
  writeFeatures(out, snapshot, index);
}

void writeSwitch(ByteWriter &out, uint32_t pid, const LaneRecord &record) {
  bool leaving = record.kind == LaneRecord::SwitchOut;
  size_t start = beginRecord(out, kRecordSwitchCpuWide,
                             leaving ? kMiscSwitchOut : uint16_t(0));
  // The idle task is pid 0; every other task is the recorded process's.
  out.u32(record.otherTid ? pid : 0);
  out.u32(record.otherTid);
  sampleId(out, record.tid ? pid : 0, record.tid, record.time, record.cpu);
  finishRecord(out, start);
}

void writeItraceStart(ByteWriter &out, uint32_t pid, const LaneRecord &record) {
  size_t start = beginRecord(out, kRecordItraceStart, 0);
  out.u32(pid);
  out.u32(record.tid);
  sampleId(out, pid, record.tid, record.time, record.cpu);
  finishRecord(out, start);
}

void writeAux(ByteWriter &out, uint32_t pid, const LaneRecord &record) {
  size_t start = beginRecord(out, kRecordAux, 0);
  out.u64(record.offset);
  out.u64(record.size);
  out.u64(0); // flags: nothing truncated, overwritten or lost
  sampleId(out, pid, record.tid, record.time, record.cpu);
  finishRecord(out, start);
}

} // namespace

std::vector<uint8_t> buildPerfData(const Snapshot &snapshot,
                                   const PerfDataWriteOptions &options) {
  ByteWriter out;
  size_t data = beginFile(out, snapshot, options);
  // Sideband times: no later than the first PT timestamp, which converts to
  // at least time_zero.
  uint64_t time = snapshot.time.timeZero;
  uint32_t pid = uint32_t(snapshot.pid);
  writeAuxtraceInfo(out, snapshot, options);
  for (const ThreadTrace &thread : snapshot.threads)
    writeComm(out, pid, uint32_t(thread.tid), snapshot.processName, time,
              kNoCpu);
  for (const Module &module : snapshot.modules)
    for (const LoadedSegment &segment : module.segments)
      if (segment.executable)
        writeMmap2(out, pid, module, segment, time, kNoCpu);
  std::vector<AuxtraceEntry> index;
  uint64_t reference = 0;
  for (size_t i = 0; i < snapshot.threads.size(); ++i) {
    const ThreadTrace &thread = snapshot.threads[i];
    ArrayRef<uint8_t> bytes(thread.bytes);
    unsigned pieces = std::max(1u, options.snapshotPieces);
    // Snapshot pieces: [start, start + length), each starting `overlap`
    // bytes before the previous one ended.
    uint64_t overlap = pieces > 1 ? options.snapshotOverlap : 0;
    uint64_t length =
        (bytes.size() + (pieces - 1) * overlap + pieces - 1) / pieces;
    if (length <= overlap)
      pieces = 1, overlap = 0, length = bytes.size();
    // A snapshot ends where the ring's head was, after a whole packet: here
    // before the first PSB at or after `length` bytes; the next starts
    // `overlap` bytes earlier, anywhere (a wrapped ring's oldest byte).
    for (uint64_t begin = 0;;) {
      uint64_t end = bytes.size();
      if (pieces > 1 && begin + length < bytes.size()) {
        const uint8_t *at =
            std::search(bytes.begin() + begin + length, bytes.end(),
                        std::begin(pt_bytes::kPsb), std::end(pt_bytes::kPsb));
        end = at - bytes.begin();
      }
      index.push_back(writeAuxtrace(out, uint32_t(thread.tid), kNoCpu,
                                    bytes.slice(begin, end - begin), begin,
                                    ++reference, uint32_t(i)));
      if (end == bytes.size() || end <= overlap)
        break;
      begin = end - overlap;
    }
  }
  endFile(out, data, snapshot, index);
  return std::move(out.bytes);
}

Expected<std::vector<uint8_t>>
buildPerCpuPerfData(const Snapshot &snapshot,
                    const PerfDataWriteOptions &options) {
  Expected<PerCpuLayout> layout = layOutPerCpu(snapshot, options.cpus);
  if (!layout)
    return layout.takeError();
  ByteWriter out;
  size_t data = beginFile(out, snapshot, options);
  uint64_t time = snapshot.time.timeZero;
  uint32_t pid = uint32_t(snapshot.pid);
  writeAuxtraceInfo(out, snapshot, options);
  for (const ThreadTrace &thread : snapshot.threads)
    writeComm(out, pid, uint32_t(thread.tid), snapshot.processName, time, 0);
  for (const Module &module : snapshot.modules)
    for (const LoadedSegment &segment : module.segments)
      if (segment.executable)
        writeMmap2(out, pid, module, segment, time, 0);
  for (const LaneRecord &record : layout->records) {
    switch (record.kind) {
    case LaneRecord::SwitchOut:
    case LaneRecord::SwitchIn:
      writeSwitch(out, pid, record);
      break;
    case LaneRecord::ItraceStart:
      writeItraceStart(out, pid, record);
      break;
    case LaneRecord::Aux:
      writeAux(out, pid, record);
      break;
    }
  }
  std::vector<AuxtraceEntry> index;
  for (uint32_t cpu = 0; cpu < layout->cpus.size(); ++cpu)
    if (!layout->cpus[cpu].empty())
      index.push_back(
          writeAuxtrace(out, pid, cpu, layout->cpus[cpu], 0, cpu + 1, cpu));
  endFile(out, data, snapshot, index);
  return std::move(out.bytes);
}

Error writePerfData(const Snapshot &snapshot, StringRef path,
                    const PerfDataWriteOptions &options) {
  std::vector<uint8_t> bytes;
  if (options.cpus) {
    Expected<std::vector<uint8_t>> built =
        buildPerCpuPerfData(snapshot, options);
    if (!built)
      return built.takeError();
    bytes = std::move(*built);
  } else {
    bytes = buildPerfData(snapshot, options);
  }
  // 0600, as perf writes perf.data.
  return writeOutputFile(
      path,
      StringRef(reinterpret_cast<const char *>(bytes.data()), bytes.size()));
}

bool isPerfDataFile(StringRef path) {
  if (!sys::fs::is_regular_file(path))
    return false;
  auto buffer = MemoryBuffer::getFileSlice(path, 64, 0);
  if (!buffer)
    return false;
  StringRef start = (*buffer)->getBuffer().ltrim();
  return start.empty() || start.front() != '{';
}

} // namespace magic_trace
