//===- PerfDataRecords.cpp - perf.data's records and features -------------===//
//
// The record loop and one function per record kind (PerfDataContents.h):
// COMM, MMAP/MMAP2, AUXTRACE and its data (snapshot copies joined), AUX and
// ITRACE_START (per-CPU streams), the header's features (build-ids, CPU).
//
//===----------------------------------------------------------------------===//
#include "PerfDataContents.h"

#include "KernelRecords.h"
#include "PerfDataFormat.h"

#include "../../base/PtBytes.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace magic_trace::perfdata {
namespace {

constexpr uint32_t kProtExec = 0x4;
constexpr uint16_t kMiscMmapData = 0x2000; ///< MMAP of a non-executable map.

/// The sample_id trailer of a non-sample record (perf_event_open(2),
/// sample_id_all), as `sampleType` lays it out; fields it lacks stay 0.
struct SampleId {
  uint32_t pid = 0, tid = 0, cpu = 0;
  uint64_t time = 0;
};

bool readSampleId(Cursor &record, uint64_t sampleType, SampleId *out) {
  uint64_t size = 0;
  for (uint64_t bit : {kSampleTid, kSampleTime, kSampleId, kSampleStreamId,
                       kSampleCpu, kSampleIdentifier})
    size += (sampleType & bit) ? 8 : 0;
  if (record.remaining() < size || !record.skip(record.remaining() - size))
    return false;
  uint64_t ignored = 0;
  uint32_t reserved = 0;
  if ((sampleType & kSampleTid) &&
      (!record.u32(&out->pid) || !record.u32(&out->tid)))
    return false;
  if ((sampleType & kSampleTime) && !record.u64(&out->time))
    return false;
  if ((sampleType & kSampleId) && !record.u64(&ignored))
    return false;
  if ((sampleType & kSampleStreamId) && !record.u64(&ignored))
    return false;
  if ((sampleType & kSampleCpu) &&
      (!record.u32(&out->cpu) || !record.u32(&reserved)))
    return false;
  return true;
}

/// The sample_type of the Intel PT event (whose sideband the AUX records
/// are), else of the first attr.
uint64_t ptSampleType(const Contents &contents) {
  if (contents.ptPriv)
    for (const Attr &attr : contents.attrs)
      if (attr.type == (*contents.ptPriv)[kPtPmuType])
        return attr.sampleIdAll ? attr.sampleType : 0;
  if (!contents.attrs.empty() && contents.attrs.front().sampleIdAll)
    return contents.attrs.front().sampleType;
  return 0;
}

Error readSection(Cursor &cursor, Section *section, const char *what) {
  uint64_t at = cursor.offset();
  if (!cursor.u64(&section->offset) || !cursor.u64(&section->size))
    return malformed(at, Twine("truncated ") + what + " section");
  return Error::success();
}

/// A section must lie inside the file.
Error checkSection(const Section &section, uint64_t fileSize, uint64_t at,
                   const char *what) {
  if (section.offset > fileSize || section.size > fileSize - section.offset)
    return malformed(at, Twine(what) + " section [" + Twine(section.offset) +
                             ", +" + Twine(section.size) +
                             ") is outside the file (truncated?)");
  return Error::success();
}

Error readAttrs(ArrayRef<uint8_t> file, const Section &attrs, uint64_t attrSize,
                Contents &contents) {
  if (attrSize < kAttrSizeVer0 + 16)
    return malformed(16, "attr_size " + Twine(attrSize) + " is too small");
  if (attrs.size % attrSize)
    return malformed(24, "attrs section is not a multiple of attr_size");
  for (uint64_t at = attrs.offset; at < attrs.offset + attrs.size;
       at += attrSize) {
    Cursor cursor(file, at, at + attrSize);
    Attr attr;
    uint32_t size = 0;
    uint64_t flags = 0;
    if (!cursor.u32(&attr.type) || !cursor.u32(&size) ||
        !cursor.u64(&attr.config) || !cursor.skip(8) ||
        !cursor.u64(&attr.sampleType) || !cursor.skip(8) || !cursor.u64(&flags))
      return malformed(at, "truncated perf_event_attr");
    attr.sampleIdAll = flags & kFlagSampleIdAll;
    contents.attrs.push_back(attr);
  }
  return Error::success();
}

Error readAuxtraceInfo(Cursor &record, uint64_t at, Contents &contents) {
  uint32_t type = 0;
  if (!record.u32(&type) || !record.skip(4))
    return malformed(at, "truncated AUXTRACE_INFO");
  if (type != kAuxtraceIntelPt)
    return malformed(at, "AUXTRACE_INFO of type " + Twine(type) +
                             " is not Intel PT (only intel_pt "
                             "recordings are read)");
  std::vector<uint64_t> priv;
  uint64_t word = 0;
  while (record.u64(&word))
    priv.push_back(word);
  if (priv.size() < kPtPrivMin)
    return malformed(at, "AUXTRACE_INFO has " + Twine(priv.size()) +
                             " words, Intel PT needs at least " +
                             Twine(kPtPrivMin));
  contents.perCpu = priv[kPtPerCpuMmaps] != 0;
  contents.ptPriv = std::move(priv);
  contents.ptPrivOffset = at;
  return Error::success();
}

using pt_bytes::kOvf;
using pt_bytes::kPsb;

/// Appends snapshot-mode buffer `next` to a thread's trace `trace`. Each is a
/// copy of the ring at one snapshot, so `next` may begin with bytes `trace`
/// already ends with: those are dropped (perf's decoder does the same). The
/// overlap is the longest end of `trace` (less up to 7 bytes of the zero
/// padding perf adds after each buffer) that `next` begins with, found from
/// where `next`'s first 16 bytes occur in `trace` (a shorter overlap reads
/// as a gap). Without one, data was lost
/// between the snapshots: an OVF marks it, then `next` from its first PSB
/// (the bytes before it cannot be decoded).
void appendSnapshot(std::vector<uint8_t> &trace, ArrayRef<uint8_t> next) {
  size_t padding = 0;
  while (padding < 7 && padding < trace.size() &&
         trace[trace.size() - 1 - padding] == 0)
    ++padding;
  ArrayRef<uint8_t> anchor = next.take_front(16);
  size_t window = trace.size() > next.size() ? trace.size() - next.size() : 0;
  if (anchor.size() == 16)
    for (auto at = std::search(trace.begin() + window, trace.end(),
                               anchor.begin(), anchor.end());
         at != trace.end();
         at = std::search(at + 1, trace.end(), anchor.begin(), anchor.end())) {
      size_t q = at - trace.begin();
      for (size_t pad = 0; pad <= padding; ++pad) {
        if (trace.size() - pad < q + anchor.size())
          break;
        size_t length = trace.size() - pad - q;
        if (length > next.size() ||
            !std::equal(trace.begin() + q, trace.end() - pad, next.begin()))
          continue;
        trace.resize(trace.size() - pad);
        trace.insert(trace.end(), next.begin() + length, next.end());
        return;
      }
    }
  trace.insert(trace.end(), std::begin(kOvf), std::end(kOvf));
  const uint8_t *psb =
      std::search(next.begin(), next.end(), std::begin(kPsb), std::end(kPsb));
  trace.insert(trace.end(), psb, next.end());
}

/// An AUXTRACE record and the trace after it; `cursor` is the data section.
Error readAuxtrace(Cursor &data, Cursor &record, uint64_t at,
                   Contents &contents) {
  uint64_t size = 0, offset = 0, reference = 0;
  uint32_t idx = 0, tid = 0, cpu = 0;
  if (!record.u64(&size) || !record.u64(&offset) || !record.u64(&reference) ||
      !record.u32(&idx) || !record.u32(&tid) || !record.u32(&cpu))
    return malformed(at, "truncated AUXTRACE record");
  if (!contents.ptPriv)
    return malformed(at, "AUX data without an AUXTRACE_INFO record before it");
  ArrayRef<uint8_t> trace;
  if (!data.bytes(size, &trace))
    return malformed(at, "AUXTRACE data of " + Twine(size) +
                             " bytes runs past the data section (truncated?)");
  if (contents.perCpu) {
    // One stream per CPU; AUX records say whose its bytes are.
    CpuStream &stream = contents.cpus[cpu];
    stream.tids.insert(tid);
    if (!stream.haveBase) {
      stream.base = offset;
      stream.haveBase = true;
    } else if ((*contents.ptPriv)[kPtSnapshotMode]) {
      appendSnapshot(stream.bytes, trace);
      return Error::success();
    } else if (offset != stream.base + stream.bytes.size()) {
      // Bytes between two buffers are missing: mark the loss.
      stream.bytes.insert(stream.bytes.end(), std::begin(kOvf), std::end(kOvf));
      stream.haveBase = false;
    }
    stream.bytes.insert(stream.bytes.end(), trace.begin(), trace.end());
    return Error::success();
  }
  auto it = llvm::find_if(contents.threads, [&](const ThreadTrace &thread) {
    return thread.tid == tid;
  });
  if (it == contents.threads.end()) {
    contents.threads.push_back(ThreadTrace{tid, {}, false});
    it = contents.threads.end() - 1;
  } else if ((*contents.ptPriv)[kPtSnapshotMode]) {
    appendSnapshot(it->bytes, trace);
    return Error::success();
  }
  it->bytes.insert(it->bytes.end(), trace.begin(), trace.end());
  return Error::success();
}

Error readComm(Cursor &record, uint64_t at, Contents &contents) {
  uint32_t pid = 0, tid = 0;
  std::string name;
  // The name is NUL-terminated, padded to 8 bytes; sample_id follows it.
  if (!record.u32(&pid) || !record.u32(&tid) ||
      !record.paddedString(record.remaining(), &name))
    return malformed(at, "truncated COMM record");
  contents.pidOfTid[tid] = pid;
  contents.commOfTid[tid] = name;
  return Error::success();
}

Error readMmap(Cursor &record, uint64_t at, uint32_t type, uint16_t misc,
               Contents &contents) {
  Mapping mapping;
  uint32_t tid = 0;
  if (!record.u32(&mapping.pid) || !record.u32(&tid) ||
      !record.u64(&mapping.segment.address) ||
      !record.u64(&mapping.segment.size) ||
      !record.u64(&mapping.segment.fileOffset))
    return malformed(at, "truncated MMAP record");
  bool executable = !(misc & kMiscMmapData);
  if (type == kRecordMmap2) {
    uint8_t idSize = 0;
    ArrayRef<uint8_t> ids;
    uint32_t prot = 0, flags = 0;
    if (!record.u8(&idSize) || !record.skip(3) || !record.bytes(20, &ids) ||
        !record.u32(&prot) || !record.u32(&flags))
      return malformed(at, "truncated MMAP2 record");
    if ((misc & kMiscMmapBuildId) && idSize <= kBuildIdMax)
      mapping.buildId = toHex(ids.take_front(idSize), /*LowerCase=*/true);
    executable = prot & kProtExec;
  }
  // The file name is NUL-terminated; the sample_id trailer follows it.
  if (!record.paddedString(record.remaining(), &mapping.path))
    return malformed(at, "truncated MMAP record");
  mapping.segment.executable = executable;
  if (executable)
    contents.mappings.push_back(std::move(mapping));
  return Error::success();
}

/// PERF_RECORD_AUX's body: {aux_offset, aux_size, flags} and the writer's
/// sample_id. Shared by the file reader and the live ring (KernelRecords.h).
bool parseAuxBody(Cursor &record, uint64_t sampleType, AuxPiece *piece) {
  SampleId id;
  if (!record.u64(&piece->offset) || !record.u64(&piece->size) ||
      !record.u64(&piece->flags) || !readSampleId(record, sampleType, &id))
    return false;
  piece->tid = id.tid;
  piece->cpu = id.cpu;
  piece->time = id.time;
  return true;
}

/// PERF_RECORD_ITRACE_START's body: {pid, tid} and the sample_id.
bool parseItraceStartBody(Cursor &record, uint64_t sampleType, uint32_t *pid,
                          uint32_t *tid, SampleId *id) {
  return record.u32(pid) && record.u32(tid) &&
         readSampleId(record, sampleType, id);
}

/// PERF_RECORD_AUX: {aux_offset, aux_size, flags} and the writer's sample_id.
Error readAux(Cursor &record, uint64_t at, Contents &contents) {
  AuxPiece piece;
  if (!parseAuxBody(record, ptSampleType(contents), &piece))
    return malformed(at, "truncated AUX record");
  contents.auxPieces.push_back(piece);
  return Error::success();
}

/// PERF_RECORD_ITRACE_START: `tid` starts tracing on the record's CPU.
Error readItraceStart(Cursor &record, uint64_t at, Contents &contents) {
  uint32_t pid = 0, tid = 0;
  SampleId id;
  if (!parseItraceStartBody(record, ptSampleType(contents), &pid, &tid, &id))
    return malformed(at, "truncated ITRACE_START record");
  if (contents.perCpu)
    contents.cpus[id.cpu].tids.insert(tid);
  contents.pidOfTid.emplace(tid, pid);
  return Error::success();
}

/// Gives one framed record its meaning; `data` is positioned after it.
Error readRecord(Cursor &data, Cursor &record, uint64_t at, uint32_t type,
                 uint16_t misc, Contents &contents) {
  switch (type) {
  case kRecordAuxtraceInfo:
    return readAuxtraceInfo(record, at, contents);
  case kRecordAuxtrace:
    return readAuxtrace(data, record, at, contents);
  case kRecordComm:
    return readComm(record, at, contents);
  case kRecordAux:
    return readAux(record, at, contents);
  case kRecordItraceStart:
    return readItraceStart(record, at, contents);
  case kRecordMmap:
  case kRecordMmap2:
    return readMmap(record, at, type, misc, contents);
  default:
    return Error::success(); // Samples, rounds, stats: not in a Snapshot.
  }
}

/// Frames the data section's records and hands each to readRecord.
Error readRecords(ArrayRef<uint8_t> file, const Section &dataSection,
                  Contents &contents, PerfDataStats *stats) {
  Cursor data(file, dataSection.offset, dataSection.offset + dataSection.size);
  while (data.remaining()) {
    uint64_t at = data.offset();
    uint32_t type = 0;
    uint16_t misc = 0, size = 0;
    if (!data.u32(&type) || !data.u16(&misc) || !data.u16(&size))
      return malformed(at, "truncated record header");
    if (size < kEventHeaderSize || !data.skip(size - kEventHeaderSize))
      return malformed(at, "record of type " + Twine(type) + " has size " +
                               Twine(size) +
                               (size < kEventHeaderSize
                                    ? " (smaller than its header)"
                                    : " past the data section (truncated?)"));
    Cursor record(file, at + kEventHeaderSize, at + size);
    if (stats)
      ++stats->records[type];
    if (Error err = readRecord(data, record, at, type, misc, contents))
      return err;
  }
  return Error::success();
}

/// HEADER_BUILD_ID: entries of header, pid, build-id, file name.
Error readBuildIds(ArrayRef<uint8_t> file, const Section &section,
                   Contents &contents) {
  Cursor cursor(file, section.offset, section.offset + section.size);
  while (cursor.remaining()) {
    uint64_t at = cursor.offset();
    uint32_t type = 0, pid = 0;
    uint16_t misc = 0, size = 0;
    ArrayRef<uint8_t> id;
    uint8_t idSize = kBuildIdMax;
    if (!cursor.u32(&type) || !cursor.u16(&misc) || !cursor.u16(&size) ||
        !cursor.u32(&pid) || !cursor.bytes(kBuildIdMax, &id) ||
        !cursor.u8(&idSize) || !cursor.skip(3) || size < kBuildIdEntryFixed)
      return malformed(at, "truncated HEADER_BUILD_ID entry");
    std::string path;
    if (!cursor.paddedString(size - kBuildIdEntryFixed, &path))
      return malformed(at, "HEADER_BUILD_ID entry past its section");
    if (!(misc & kMiscBuildIdSize))
      idSize = kBuildIdMax; // Older perf: always 20 bytes.
    if (idSize > kBuildIdMax)
      return malformed(at, "build-id of " + Twine(unsigned(idSize)) + " bytes");
    contents.buildIds[path] = toHex(id.take_front(idSize), true);
  }
  return Error::success();
}

/// HEADER_CPUID on x86: "GenuineIntel,6,85,4" (vendor,family,model,stepping).
Error readCpuId(ArrayRef<uint8_t> file, const Section &section,
                Contents &contents) {
  Cursor cursor(file, section.offset, section.offset + section.size);
  uint32_t length = 0;
  std::string text;
  if (!cursor.u32(&length) || !cursor.paddedString(length, &text))
    return malformed(section.offset, "truncated HEADER_CPUID");
  SmallVector<StringRef, 4> fields;
  StringRef(text).split(fields, ',');
  CpuIdentity cpu;
  if (fields.size() < 4 || fields[1].getAsInteger(10, cpu.family) ||
      fields[2].getAsInteger(10, cpu.model) ||
      fields[3].getAsInteger(10, cpu.stepping))
    return Error::success(); // Not x86's form: the CPU stays unknown.
  cpu.vendor = fields[0].str();
  contents.cpu = cpu;
  return Error::success();
}

Error readFeatures(ArrayRef<uint8_t> file, const Section &data,
                   ArrayRef<uint8_t> bits, Contents &contents) {
  Cursor table(file, data.offset + data.size, file.size());
  for (unsigned feature = 0; feature < kFeatureBits; ++feature) {
    if (!(bits[feature / 8] & (1u << (feature % 8))))
      continue;
    uint64_t at = table.offset();
    Section section;
    if (Error err = readSection(table, &section, "feature"))
      return err;
    if (Error err = checkSection(section, file.size(), at, "feature"))
      return err;
    if (feature == kFeatBuildId)
      if (Error err = readBuildIds(file, section, contents))
        return err;
    if (feature == kFeatCpuId)
      if (Error err = readCpuId(file, section, contents))
        return err;
  }
  return Error::success();
}

} // namespace

Expected<Contents> readContents(ArrayRef<uint8_t> file, PerfDataStats *stats) {
  Cursor header(file, 0, kFileHeaderSize);
  uint64_t magic = 0, headerSize = 0, attrSize = 0;
  if (!header.u64(&magic))
    return malformed(0, "file of " + Twine(file.size()) +
                            " bytes is too short for a perf.data header");
  if (magic != kMagic)
    return malformed(0, "wrong magic (not a little-endian perf.data "
                        "version 2 file)");
  Section attrs, data;
  ArrayRef<uint8_t> bits;
  // A pipe-mode file (`perf record -o -`) has a 16-byte header and its
  // attrs and features as records (perf's Documentation/perf.data-file-
  // format.txt, "Pipe-mode data").
  if (header.u64(&headerSize) && headerSize == kPipeHeaderSize)
    return malformed(8, "a pipe-mode perf.data (perf record -o -) is not "
                        "read (record to a file: perf record -o FILE)");
  header = Cursor(file, 8, kFileHeaderSize);
  if (!header.u64(&headerSize) || !header.u64(&attrSize) ||
      !header.u64(&attrs.offset) || !header.u64(&attrs.size) ||
      !header.u64(&data.offset) || !header.u64(&data.size) ||
      !header.skip(16) || !header.bytes(kFeatureBits / 8, &bits))
    return malformed(header.offset(), "truncated perf.data header");
  if (headerSize != kFileHeaderSize)
    return malformed(8, "header size " + Twine(headerSize) + ", expected " +
                            Twine(kFileHeaderSize));
  if (Error err = checkSection(attrs, file.size(), 24, "attrs"))
    return std::move(err);
  if (Error err = checkSection(data, file.size(), 40, "data"))
    return std::move(err);
  Contents contents;
  if (Error err = readAttrs(file, attrs, attrSize, contents))
    return std::move(err);
  if (Error err = readRecords(file, data, contents, stats))
    return std::move(err);
  if (Error err = readFeatures(file, data, bits, contents))
    return std::move(err);
  return contents;
}

Error parseKernelRecord(ArrayRef<uint8_t> bytes, uint64_t sampleType,
                        KernelRecord *out) {
  Cursor record(bytes, 0, bytes.size());
  uint16_t misc = 0, size = 0;
  if (!record.u32(&out->type) || !record.u16(&misc) || !record.u16(&size) ||
      size < kEventHeaderSize || size > bytes.size())
    return malformed(0, "truncated kernel record header");
  Cursor body(bytes, kEventHeaderSize, size);
  switch (out->type) {
  case kRecordAux:
    if (!parseAuxBody(body, sampleType, &out->aux))
      return malformed(0, "truncated AUX record");
    return Error::success();
  case kRecordItraceStart: {
    SampleId id;
    if (!parseItraceStartBody(body, sampleType, &out->pid, &out->tid, &id))
      return malformed(0, "truncated ITRACE_START record");
    out->aux.cpu = id.cpu;
    out->aux.time = id.time;
    return Error::success();
  }
  case kRecordLost: {
    uint64_t id = 0;
    if (!body.u64(&id) || !body.u64(&out->lost))
      return malformed(0, "truncated LOST record");
    return Error::success();
  }
  case kRecordMmap2: {
    // {pid, tid, addr, len, pgoff, 24 bytes of device and inode or
    // build-id, prot, flags, filename[]}, then the sample_id.
    uint32_t pid = 0, flags = 0;
    uint64_t offset = 0;
    SampleId id;
    Cursor trailer = body;
    if (!body.u32(&pid) || !body.u32(&out->tid) ||
        !body.u64(&out->mmapAddress) || !body.u64(&out->mmapSize) ||
        !body.u64(&offset) || !body.skip(24) || !body.u32(&out->mmapProt) ||
        !body.u32(&flags) || !readSampleId(trailer, sampleType, &id) ||
        !body.paddedString(body.remaining(), &out->mmapPath))
      return malformed(0, "truncated MMAP2 record");
    out->pid = pid;
    out->aux.cpu = id.cpu;
    out->aux.time = id.time;
    return Error::success();
  }
  default:
    return Error::success();
  }
}

} // namespace magic_trace::perfdata
