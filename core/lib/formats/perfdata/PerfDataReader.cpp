//===- PerfDataReader.cpp - A per-thread Intel PT perf.data -> Snapshot ---===//
//
// Framing is separate from meaning, as in Perfetto's importers: a Cursor
// reads bounds-checked little-endian fields and says where it is; the record
// loop frames records inside the data section; each record kind has one
// function that gives it meaning. A field that does not fit is an error with
// its byte offset, never a read past the buffer.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PerfData.h"
#include "magic_trace/ProcessModules.h"

#include "KernelRecords.h"
#include "PerCpuTrace.h"
#include "PerfDataFormat.h"

#include "../../base/PtBytes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <optional>

using namespace llvm;

namespace magic_trace {
namespace {

using namespace perfdata;

constexpr uint32_t kProtExec = 0x4;
constexpr uint16_t kMiscMmapData = 0x2000; ///< MMAP of a non-executable map.

Error malformed(uint64_t offset, const Twine &what) {
  return createStringError("perf.data: " + what + " at byte " + Twine(offset));
}

/// Bounds-checked reads of [begin, end) of the file, from a position.
class Cursor {
public:
  Cursor(ArrayRef<uint8_t> file, uint64_t begin, uint64_t end)
      : file(file), pos(begin), end(std::min<uint64_t>(end, file.size())) {}

  uint64_t offset() const { return pos; }
  uint64_t remaining() const { return pos < end ? end - pos : 0; }

  bool u8(uint8_t *out) { return integer(out); }
  bool u16(uint16_t *out) { return integer(out); }
  bool u32(uint32_t *out) { return integer(out); }
  bool u64(uint64_t *out) { return integer(out); }
  bool skip(uint64_t count) {
    if (count > remaining())
      return false;
    pos += count;
    return true;
  }
  bool bytes(uint64_t count, ArrayRef<uint8_t> *out) {
    if (count > remaining())
      return false;
    *out = file.slice(pos, count);
    pos += count;
    return true;
  }
  /// A NUL-padded string field of `count` bytes; the text ends at the first
  /// NUL (or the field's end).
  bool paddedString(uint64_t count, std::string *out) {
    ArrayRef<uint8_t> field;
    if (!bytes(count, &field))
      return false;
    StringRef text = toStringRef(field);
    *out = text.take_until([](char c) { return c == '\0'; }).str();
    return true;
  }

private:
  template <typename T> bool integer(T *out) {
    if (sizeof(T) > remaining())
      return false;
    *out = support::endian::read<T, endianness::little>(file.data() + pos);
    pos += sizeof(T);
    return true;
  }

  ArrayRef<uint8_t> file;
  uint64_t pos;
  uint64_t end;
};

struct Section {
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct Attr {
  uint32_t type = 0;
  uint64_t config = 0;
  uint64_t sampleType = 0;
  bool sampleIdAll = false;
};

struct Mapping {
  uint32_t pid = 0;
  LoadedSegment segment;
  std::string path;
  std::string buildId; ///< From an MMAP2 that carries one.
};

/// What the records and features say, before it becomes a Snapshot.
struct Contents {
  std::vector<Attr> attrs;
  std::optional<std::vector<uint64_t>> ptPriv; ///< AUXTRACE_INFO words.
  uint64_t ptPrivOffset = 0;
  std::vector<ThreadTrace> threads;      ///< In order of first AUXTRACE.
  std::map<uint32_t, uint32_t> pidOfTid; ///< From COMM records.
  std::map<uint32_t, std::string> commOfTid;
  std::vector<Mapping> mappings;
  std::map<std::string, std::string> buildIds; ///< Path -> hex build-id.
  std::optional<CpuIdentity> cpu;
  /// A per-CPU recording (AUXTRACE_INFO's per_cpu_mmaps): the AUX bytes of
  /// each CPU and the AUX records that say whose they are (PerCpuTrace.h).
  bool perCpu = false;
  std::map<uint32_t, CpuStream> cpus;
  std::vector<AuxPiece> auxPieces;
};

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

/// Whether a mapping names a module: a file or the vdso, not anonymous or
/// kernel-provided memory.
bool isModulePath(StringRef path) {
  if (path == "[vdso]")
    return true;
  return !path.empty() && !path.starts_with("[") && !path.starts_with("//");
}

std::vector<Module> buildModules(const Contents &contents, uint64_t pid,
                                 StringRef symfs) {
  std::vector<Module> modules;
  std::map<std::string, size_t> byPath;
  for (const Mapping &mapping : contents.mappings) {
    if (mapping.pid != pid || !isModulePath(mapping.path))
      continue;
    auto [it, inserted] = byPath.try_emplace(mapping.path, modules.size());
    if (inserted) {
      Module module;
      module.path = mapping.path;
      module.buildId = mapping.buildId;
      auto known = contents.buildIds.find(mapping.path);
      if (module.buildId.empty() && known != contents.buildIds.end())
        module.buildId = known->second;
      // File offset 0 sits pgoff bytes below the mapping (segments keep
      // their file layout).
      module.loadAddress = mapping.segment.address - mapping.segment.fileOffset;
      std::string file = lookUpModuleFile(module.path, module.buildId, symfs);
      if (file != module.path)
        module.fileCopy = file;
      modules.push_back(std::move(module));
    }
    modules[it->second].segments.push_back(mapping.segment);
  }
  // "pgoff bytes below the mapping" is file offset 0 only where the code
  // segment's offset equals its address; lld's (`LOAD 0x620 vaddr 0x1620`)
  // maps offset 0 again at 0x1000, so the ELF headers place the module.
  for (Module &module : modules) {
    Expected<PlacedElf> placed =
        placeElfByMappings(module.fileToRead(), module.segments);
    if (placed)
      module.loadAddress = placed->loadAddress;
    else
      consumeError(placed.takeError());
  }
  return modules;
}

/// The intel_pt attr: the one whose type AUXTRACE_INFO names.
Expected<const Attr *> findPtAttr(const Contents &contents) {
  uint64_t pmuType = (*contents.ptPriv)[kPtPmuType];
  for (const Attr &attr : contents.attrs)
    if (attr.type == pmuType)
      return &attr;
  return malformed(contents.ptPrivOffset,
                   "no attr has the Intel PT PMU type " + Twine(pmuType) +
                       " that AUXTRACE_INFO names (unknown attr type)");
}

Expected<Snapshot> buildSnapshot(Contents contents,
                                 const PerfDataReadOptions &options) {
  Snapshot snapshot;
  if (contents.ptPriv) {
    const std::vector<uint64_t> &priv = *contents.ptPriv;
    Expected<const Attr *> attr = findPtAttr(contents);
    if (!attr)
      return attr.takeError();
    snapshot.time.timeShift = uint16_t(priv[kPtTimeShift]);
    snapshot.time.timeMult = uint32_t(priv[kPtTimeMult]);
    snapshot.time.timeZero = priv[kPtTimeZero];
    if (priv.size() > kPtCycBit && priv[kPtMtcFreqBits]) {
      uint64_t bits = priv[kPtMtcFreqBits];
      snapshot.timing.mtcFreq =
          uint8_t(((*attr)->config & bits) >> countr_zero(bits));
      snapshot.timing.cpuid15Ebx = uint32_t(priv[kPtTscCtcN]);
      snapshot.timing.cpuid15Eax = uint32_t(priv[kPtTscCtcD]);
    }
    if (priv.size() > kPtMaxNonTurboRatio)
      snapshot.timing.nomFreq = uint8_t(priv[kPtMaxNonTurboRatio]);
    for (ThreadTrace &thread : contents.threads)
      thread.wrapped = priv[kPtSnapshotMode] != 0;
    if (contents.perCpu) {
      PerCpuStats split;
      Expected<std::vector<ThreadTrace>> threads =
          splitPerCpu(contents.cpus, std::move(contents.auxPieces),
                      priv[kPtSnapshotMode] != 0, &split);
      if (options.stats) {
        options.stats->piecesUsed = split.pieces;
        options.stats->piecesLost = split.lostPieces;
        options.stats->wholeStreams = split.wholeStreams;
        for (const auto &[cpu, stream] : contents.cpus)
          options.stats->auxBytesByCpu[cpu] = stream.bytes.size();
      }
      if (!threads)
        return threads.takeError();
      contents.threads = std::move(*threads);
    }
  } else if (options.requireTrace) {
    return createStringError("perf.data: no AUXTRACE_INFO record (not an "
                             "Intel PT recording: record with perf record -e "
                             "intel_pt//u --per-thread)");
  }
  if (options.requireTrace && contents.threads.empty())
    return createStringError("perf.data: no AUXTRACE data (the recording has "
                             "no Intel PT bytes)");
  if (contents.cpu)
    snapshot.cpu = *contents.cpu;
  // The process: the one whose thread was traced, else the first COMM.
  std::optional<uint32_t> firstTid;
  if (!contents.threads.empty())
    firstTid = uint32_t(contents.threads.front().tid);
  else if (!contents.pidOfTid.empty())
    firstTid = contents.pidOfTid.begin()->first;
  if (firstTid) {
    auto pid = contents.pidOfTid.find(*firstTid);
    snapshot.pid = pid != contents.pidOfTid.end() ? pid->second : *firstTid;
    auto comm = contents.commOfTid.find(uint32_t(snapshot.pid));
    if (comm == contents.commOfTid.end())
      comm = contents.commOfTid.find(*firstTid);
    if (comm != contents.commOfTid.end())
      snapshot.processName = comm->second;
  }
  snapshot.modules = buildModules(contents, snapshot.pid, options.symfs);
  snapshot.threads = std::move(contents.threads);
  return snapshot;
}

} // namespace

namespace perfdata {

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
  default:
    return Error::success();
  }
}

} // namespace perfdata

std::string perfRecordName(uint32_t type) {
  // include/uapi/linux/perf_event.h and tools/perf/util/event.h.
  static const char *const kernel[] = {nullptr,        "MMAP",
                                       "LOST",         "COMM",
                                       "EXIT",         "THROTTLE",
                                       "UNTHROTTLE",   "FORK",
                                       "READ",         "SAMPLE",
                                       "MMAP2",        "AUX",
                                       "ITRACE_START", "LOST_SAMPLES",
                                       "SWITCH",       "SWITCH_CPU_WIDE",
                                       "NAMESPACES",   "KSYMBOL",
                                       "BPF_EVENT",    "CGROUP",
                                       "TEXT_POKE",    "AUX_OUTPUT_HW_ID"};
  static const char *const user[] = {"HEADER_ATTR",
                                     "HEADER_EVENT_TYPE",
                                     "HEADER_TRACING_DATA",
                                     "HEADER_BUILD_ID",
                                     "FINISHED_ROUND",
                                     "ID_INDEX",
                                     "AUXTRACE_INFO",
                                     "AUXTRACE",
                                     "AUXTRACE_ERROR",
                                     "THREAD_MAP",
                                     "CPU_MAP",
                                     "STAT_CONFIG",
                                     "STAT",
                                     "STAT_ROUND",
                                     "EVENT_UPDATE",
                                     "TIME_CONV",
                                     "HEADER_FEATURE",
                                     "COMPRESSED",
                                     "FINISHED_INIT"};
  const char *name = nullptr;
  if (type < std::size(kernel))
    name = kernel[type];
  else if (type >= kRecordUserTypeStart &&
           type - kRecordUserTypeStart < std::size(user))
    name = user[type - kRecordUserTypeStart];
  if (!name)
    return "type " + std::to_string(type);
  return std::string("PERF_RECORD_") + name;
}

Expected<Snapshot> parsePerfData(ArrayRef<uint8_t> bytes,
                                 const PerfDataReadOptions &options) {
  Expected<Contents> contents = readContents(bytes, options.stats);
  if (!contents)
    return contents.takeError();
  return buildSnapshot(std::move(*contents), options);
}

Expected<Snapshot> readPerfData(StringRef path,
                                const PerfDataReadOptions &options) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError("cannot read " + path + ": " +
                             buffer.getError().message());
  return parsePerfData(arrayRefFromStringRef((*buffer)->getBuffer()), options);
}

} // namespace magic_trace
