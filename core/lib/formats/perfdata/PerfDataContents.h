//===- PerfDataContents.h - perf.data framed, and what it says --*- C++
//-*-===//
//
// Private to formats/perfdata/: the reader's two first stages, as Perfetto
// splits its importer. Framing: a Cursor reads bounds-checked little-endian
// fields and says where it is; a field that does not fit is an error with
// its byte offset, never a read past the buffer. Records
// (PerfDataRecords.cpp): the record loop frames the data section's records
// and each kind has one function that gives it meaning, gathering what the
// file says into Contents; AUX data is stitched into each thread's (or
// CPU's) stream there. PerfDataReader.cpp assembles a Snapshot from it.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_FORMATS_PERFDATA_PERFDATACONTENTS_H
#define MAGIC_TRACE_LIB_FORMATS_PERFDATA_PERFDATACONTENTS_H

#include "magic_trace/PerfData.h"
#include "magic_trace/Snapshot.h"

#include "PerCpuTrace.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace::perfdata {

inline llvm::Error malformed(uint64_t offset, const llvm::Twine &what) {
  return llvm::createStringError("perf.data: " + what + " at byte " +
                                 llvm::Twine(offset));
}

/// Bounds-checked reads of [begin, end) of the file, from a position.
class Cursor {
public:
  Cursor(llvm::ArrayRef<uint8_t> file, uint64_t begin, uint64_t end)
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
  bool bytes(uint64_t count, llvm::ArrayRef<uint8_t> *out) {
    if (count > remaining())
      return false;
    *out = file.slice(pos, count);
    pos += count;
    return true;
  }
  /// A NUL-padded string field of `count` bytes; the text ends at the first
  /// NUL (or the field's end).
  bool paddedString(uint64_t count, std::string *out) {
    llvm::ArrayRef<uint8_t> field;
    if (!bytes(count, &field))
      return false;
    llvm::StringRef text = llvm::toStringRef(field);
    *out = text.take_until([](char c) { return c == '\0'; }).str();
    return true;
  }

private:
  template <typename T> bool integer(T *out) {
    if (sizeof(T) > remaining())
      return false;
    *out = llvm::support::endian::read<T, llvm::endianness::little>(
        file.data() + pos);
    pos += sizeof(T);
    return true;
  }

  llvm::ArrayRef<uint8_t> file;
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

/// Every record and feature of `file` gathered (PerfDataRecords.cpp);
/// `stats` (optional) counts what was skipped. Errors: a malformed file,
/// with the byte offset.
llvm::Expected<Contents> readContents(llvm::ArrayRef<uint8_t> file,
                                      PerfDataStats *stats);

} // namespace magic_trace::perfdata

#endif
