//===- EhFrameBounds.cpp - Function extents from FDEs ---------------------===//
//
// Layout (LSB 5.0 core, "Exception Frames"):
//   .eh_frame is a list of records: a length (4 bytes, or 0xffffffff and 8
//   bytes; 0 is a terminator), an id (4 bytes: 0 for a CIE, else the
//   distance back to the record's CIE), then
//     CIE: version, augmentation string, [an "eh" pointer], code and data
//          alignment, return register, and for a 'z' augmentation a length
//          and one datum per letter ('L' LSDA encoding, 'P' personality
//          encoding and pointer, 'R' the FDEs' pointer encoding);
//     FDE: pc_begin (in the CIE's 'R' encoding), pc_range (its format, no
//          application), then CFA instructions we do not read.
//   .eh_frame_hdr: version 1, eh_frame_ptr_enc, fde_count_enc, table_enc,
//   eh_frame_ptr, fde_count, and fde_count (initial_location, fde_address)
//   pairs sorted by initial_location; datarel is relative to the header.
// Pointer encodings: DW_EH_PE_* (llvm/BinaryFormat/Dwarf.h).
//
//===----------------------------------------------------------------------===//
#include "EhFrameBounds.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/BinaryFormat/Dwarf.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/DataExtractor.h"

#include <algorithm>
#include <optional>
#include <string>

using namespace llvm;

namespace magic_trace {
namespace {

constexpr uint8_t FrameHeaderVersion = 1;
constexpr uint32_t ExtendedLengthMark = 0xffffffff;
constexpr uint32_t CieId = 0;
constexpr uint8_t PointerFormatMask = 0x0f;
constexpr uint8_t PointerApplicationMask = 0x70;

/// One section's bytes and the file address of its first byte.
struct SectionView {
  StringRef bytes;
  uint64_t address = 0;
};

/// The allocated section `name` of `object`, if it has one with bytes.
Expected<std::optional<SectionView>>
sectionNamed(const object::ObjectFile &object, StringRef name) {
  for (const object::SectionRef &section : object.sections()) {
    Expected<StringRef> sectionName = section.getName();
    if (!sectionName) {
      consumeError(sectionName.takeError());
      continue;
    }
    if (*sectionName != name)
      continue;
    // A separate debug file keeps the header but not the bytes.
    if (isa<object::ELFObjectFileBase>(object) &&
        object::ELFSectionRef(section).getType() == ELF::SHT_NOBITS)
      return std::nullopt;
    Expected<StringRef> contents = section.getContents();
    if (!contents)
      return contents.takeError();
    return SectionView{*contents, section.getAddress()};
  }
  return std::nullopt;
}

/// A cursor over [offset, end) of a section's bytes. A read past the end
/// yields 0 and makes ok() false; the cursor's error is always consumed
/// here, so no path leaves it unchecked.
class FieldReader {
public:
  FieldReader(const SectionView &section, const DataExtractor &whole,
              uint64_t offset, uint64_t end)
      : section(section), data(whole.getData().take_front(end),
                               whole.isLittleEndian(), whole.getAddressSize()),
        cursor(offset) {}
  ~FieldReader() { consumeError(cursor.takeError()); }

  bool ok() { return bool(cursor); }
  uint64_t tell() const { return cursor.tell(); }
  uint8_t u8() { return data.getU8(cursor); }
  uint32_t u32() { return data.getU32(cursor); }
  uint64_t u64() { return data.getU64(cursor); }
  uint64_t uleb() { return data.getULEB128(cursor); }
  int64_t sleb() { return data.getSLEB128(cursor); }
  StringRef string() { return data.getCStrRef(cursor); }
  void skip(uint64_t bytes) { data.skip(cursor, bytes); }

  /// A pointer in DW_EH_PE `encoding`; datarel is relative to `dataBase`.
  /// Fails for encodings that need memory or sections we do not have
  /// (indirect, textrel, funcrel, aligned) and for unknown formats.
  Expected<uint64_t> pointer(uint8_t encoding, uint64_t dataBase) {
    if (encoding == dwarf::DW_EH_PE_omit ||
        (encoding & dwarf::DW_EH_PE_indirect))
      return createStringError("unsupported pointer encoding 0x%x",
                               unsigned(encoding));
    uint64_t fieldAddress = section.address + tell();
    uint64_t value = 0;
    switch (encoding & PointerFormatMask) {
    case dwarf::DW_EH_PE_absptr:
      value = data.getUnsigned(cursor, data.getAddressSize());
      break;
    case dwarf::DW_EH_PE_uleb128:
      value = uleb();
      break;
    case dwarf::DW_EH_PE_udata2:
      value = data.getU16(cursor);
      break;
    case dwarf::DW_EH_PE_udata4:
      value = u32();
      break;
    case dwarf::DW_EH_PE_udata8:
    case dwarf::DW_EH_PE_sdata8:
      value = u64();
      break;
    case dwarf::DW_EH_PE_sleb128:
      value = uint64_t(sleb());
      break;
    case dwarf::DW_EH_PE_sdata2:
      value = uint64_t(int64_t(int16_t(data.getU16(cursor))));
      break;
    case dwarf::DW_EH_PE_sdata4:
      value = uint64_t(int64_t(int32_t(u32())));
      break;
    default:
      return createStringError("unknown pointer format 0x%x",
                               unsigned(encoding));
    }
    switch (encoding & PointerApplicationMask) {
    case 0:
      break;
    case dwarf::DW_EH_PE_pcrel:
      value += fieldAddress;
      break;
    case dwarf::DW_EH_PE_datarel:
      value += dataBase;
      break;
    default:
      return createStringError("unsupported pointer application 0x%x",
                               unsigned(encoding));
    }
    if (data.getAddressSize() == 4)
      value &= UINT32_MAX;
    return value;
  }

private:
  const SectionView &section;
  DataExtractor data;
  DataExtractor::Cursor cursor;
};

/// One .eh_frame record: where the next begins, and for a readable FDE its
/// bounds; `problem` says why an FDE gave none.
struct FrameRecord {
  uint64_t next = 0;
  std::optional<FunctionBounds> bounds;
  std::string problem;
};

/// Reads .eh_frame records, each CIE's FDE encoding once.
class FrameReader {
public:
  FrameReader(SectionView section, bool littleEndian, uint8_t addressSize)
      : section(section), data(section.bytes, littleEndian, addressSize) {}

  uint64_t address() const { return section.address; }
  uint64_t size() const { return section.bytes.size(); }

  /// The record at `offset`. Fails only when its length cannot be read or
  /// runs past the section: then no later record can be found either.
  Expected<FrameRecord> record(uint64_t offset) {
    FrameRecord result;
    uint64_t bodyBegin = 0, end = 0;
    if (Error error = extent(offset, bodyBegin, end))
      return error;
    result.next = end;
    if (bodyBegin == end)
      return result; // A terminator.
    FieldReader fields(section, data, bodyBegin, end);
    uint32_t id = fields.u32();
    if (!fields.ok()) {
      result.problem = "a record shorter than its id";
      return result;
    }
    if (id == CieId)
      return result; // A CIE: read when an FDE refers to it.
    if (id > bodyBegin) {
      result.problem = "CIE pointer " + hex(id) + " points before .eh_frame";
      return result;
    }
    Expected<uint8_t> encoding = fdeEncoding(bodyBegin - id);
    if (!encoding) {
      result.problem = "its CIE at offset " + hex(bodyBegin - id) + ": " +
                       toString(encoding.takeError());
      return result;
    }
    Expected<uint64_t> begin = fields.pointer(*encoding, 0);
    if (!begin) {
      result.problem = "pc_begin: " + toString(begin.takeError());
      return result;
    }
    Expected<uint64_t> range = fields.pointer(*encoding & PointerFormatMask, 0);
    if (!range) {
      result.problem = "pc_range: " + toString(range.takeError());
      return result;
    }
    if (!fields.ok() || *begin + *range < *begin) {
      result.problem = "pc_begin and pc_range run past the record";
      return result;
    }
    result.bounds = FunctionBounds{*begin, *begin + *range};
    return result;
  }

private:
  /// The body [bodyBegin, end) of the record at `offset`.
  Error extent(uint64_t offset, uint64_t &bodyBegin, uint64_t &end) {
    FieldReader fields(section, data, offset, size());
    uint64_t length = fields.u32();
    if (length == ExtendedLengthMark)
      length = fields.u64();
    bodyBegin = fields.tell();
    if (!fields.ok() || length > size() - bodyBegin)
      return createStringError("record at offset %s: length runs past the "
                               "section's end",
                               hex(offset).c_str());
    end = bodyBegin + length;
    return Error::success();
  }

  /// The pointer encoding of the FDEs of the CIE at `offset`.
  Expected<uint8_t> fdeEncoding(uint64_t offset) {
    auto cached = encodings.find(offset);
    if (cached != encodings.end())
      return cached->second;
    Expected<uint8_t> encoding = readCie(offset);
    if (encoding)
      encodings[offset] = *encoding;
    return encoding;
  }

  Expected<uint8_t> readCie(uint64_t offset) {
    uint64_t bodyBegin = 0, end = 0;
    if (Error error = extent(offset, bodyBegin, end))
      return error;
    FieldReader fields(section, data, bodyBegin, end);
    if (fields.u32() != CieId || !fields.ok())
      return createStringError("not a CIE");
    uint8_t version = fields.u8();
    if (version != 1 && version != 3 && version != 4)
      return createStringError("version %u", unsigned(version));
    StringRef augmentation = fields.string();
    std::string text = augmentation.str();
    if (augmentation.consume_front("eh")) // GCC 2's pointer to its EH data.
      fields.skip(data.getAddressSize());
    if (version == 4)
      fields.skip(2); // Address and segment selector sizes.
    fields.uleb();    // Code alignment.
    fields.sleb();    // Data alignment.
    if (version == 1)
      fields.u8(); // Return address register.
    else
      fields.uleb();
    uint8_t encoding = dwarf::DW_EH_PE_absptr;
    if (!augmentation.empty()) {
      if (!augmentation.consume_front("z"))
        return createStringError("augmentation '%s'", text.c_str());
      fields.uleb(); // Augmentation data length.
      for (size_t i = 0; i < augmentation.size(); ++i) {
        char letter = augmentation[i];
        if (letter == 'R') {
          encoding = fields.u8();
        } else if (letter == 'L') {
          fields.u8();
        } else if (letter == 'P') {
          // Only skipped: an indirect personality is still a pointer.
          uint8_t personality = fields.u8() & ~dwarf::DW_EH_PE_indirect;
          Expected<uint64_t> skipped = fields.pointer(personality, 0);
          if (!skipped)
            return createStringError("personality: " +
                                     toString(skipped.takeError()));
        } else if (letter != 'S' && letter != 'B' && letter != 'G') {
          // An unknown letter's datum has an unknown size: an 'R' after it
          // cannot be found, without one the default encoding holds.
          if (augmentation.drop_front(i).contains('R'))
            return createStringError("augmentation '%s'", text.c_str());
          break;
        }
      }
    }
    if (!fields.ok())
      return createStringError("runs past its record");
    return encoding;
  }

  SectionView section;
  DataExtractor data;
  DenseMap<uint64_t, uint8_t> encodings; ///< By CIE offset.
};

/// FDEs whose records could not be read, for one warning line.
struct SkippedRecords {
  uint64_t count = 0;
  uint64_t firstOffset = 0;
  std::string firstProblem;

  void add(uint64_t offset, const std::string &problem) {
    if (count++ == 0) {
      firstOffset = offset;
      firstProblem = problem;
    }
  }
};

/// The table of `header`: true if read into `bounds`, false if the header
/// has none. Fails when the table cannot be trusted (then .eh_frame is
/// walked instead); an FDE it points at that cannot be read is skipped.
Expected<bool> readHeaderTable(const SectionView &header, bool littleEndian,
                               uint8_t addressSize, FrameReader &frames,
                               std::vector<FunctionBounds> &bounds,
                               SkippedRecords &skipped) {
  DataExtractor data(header.bytes, littleEndian, addressSize);
  FieldReader fields(header, data, 0, header.bytes.size());
  uint8_t version = fields.u8();
  uint8_t framePointerEncoding = fields.u8();
  uint8_t countEncoding = fields.u8();
  uint8_t tableEncoding = fields.u8();
  if (!fields.ok())
    return createStringError("shorter than its 4-byte header");
  if (version != FrameHeaderVersion)
    return createStringError("version %u", unsigned(version));
  Expected<uint64_t> framePointer =
      fields.pointer(framePointerEncoding, header.address);
  if (!framePointer)
    return createStringError("eh_frame_ptr: " +
                             toString(framePointer.takeError()));
  if (countEncoding == dwarf::DW_EH_PE_omit ||
      tableEncoding == dwarf::DW_EH_PE_omit)
    return false;
  Expected<uint64_t> count = fields.pointer(countEncoding, header.address);
  if (!count)
    return createStringError("fde_count: " + toString(count.takeError()));
  // Each entry takes two bytes at least: a larger count is damage (and
  // would make a long loop).
  uint64_t left = header.bytes.size() -
                  std::min<uint64_t>(fields.tell(), header.bytes.size());
  if (!fields.ok() || *count > left / 2)
    return createStringError("a table of %llu entries runs past the section's "
                             "end",
                             (unsigned long long)*count);
  for (uint64_t i = 0; i < *count; ++i) {
    Expected<uint64_t> location = fields.pointer(tableEncoding, header.address);
    if (!location)
      return createStringError("table entry %llu: %s", (unsigned long long)i,
                               toString(location.takeError()).c_str());
    Expected<uint64_t> entry = fields.pointer(tableEncoding, header.address);
    if (!entry)
      return createStringError("table entry %llu: %s", (unsigned long long)i,
                               toString(entry.takeError()).c_str());
    if (!fields.ok())
      return createStringError("table entry %llu runs past the section's end",
                               (unsigned long long)i);
    if (!bounds.empty() && *location <= bounds.back().begin)
      return createStringError("table entry %llu (%s) is not above the one "
                               "before it",
                               (unsigned long long)i, hex(*location).c_str());
    if (*entry < frames.address() || *entry - frames.address() >= frames.size())
      return createStringError("table entry %llu: FDE address %s is outside "
                               ".eh_frame",
                               (unsigned long long)i, hex(*entry).c_str());
    uint64_t offset = *entry - frames.address();
    Expected<FrameRecord> record = frames.record(offset);
    if (!record)
      return createStringError("table entry %llu: %s", (unsigned long long)i,
                               toString(record.takeError()).c_str());
    if (!record->bounds) {
      if (record->problem.empty())
        return createStringError("table entry %llu points at a CIE",
                                 (unsigned long long)i);
      skipped.add(offset, record->problem);
      continue;
    }
    if (record->bounds->begin != *location)
      return createStringError("table entry %llu says %s, its FDE begins at %s",
                               (unsigned long long)i, hex(*location).c_str(),
                               hex(record->bounds->begin).c_str());
    bounds.push_back(*record->bounds);
  }
  return true;
}

/// Every FDE of .eh_frame in order; fails at a record whose length is
/// damaged, keeping the bounds before it.
Error walkFrames(FrameReader &frames, std::vector<FunctionBounds> &bounds,
                 SkippedRecords &skipped) {
  for (uint64_t offset = 0; offset < frames.size();) {
    Expected<FrameRecord> record = frames.record(offset);
    if (!record)
      return record.takeError();
    if (record->bounds)
      bounds.push_back(*record->bounds);
    else if (!record->problem.empty())
      skipped.add(offset, record->problem);
    offset = record->next;
  }
  return Error::success();
}

Error damaged(StringRef section, const Twine &problem) {
  return createStringError("damaged " + section + ": " + problem);
}

} // namespace

Error EhFrameBounds::read(const object::ObjectFile &object) {
  bounds.clear();
  from = FunctionBoundsSource::None;
  Expected<std::optional<SectionView>> frameSection =
      sectionNamed(object, ".eh_frame");
  if (!frameSection)
    return damaged(".eh_frame", toString(frameSection.takeError()) +
                                    " (no function bounds)");
  if (!*frameSection)
    return Error::success();
  bool littleEndian = object.isLittleEndian();
  uint8_t addressSize = object.getBytesInAddress();
  FrameReader frames(**frameSection, littleEndian, addressSize);
  SkippedRecords skipped;
  Error problems = Error::success();

  Expected<std::optional<SectionView>> header =
      sectionNamed(object, ".eh_frame_hdr");
  Expected<bool> table =
      !header    ? Expected<bool>(header.takeError())
      : !*header ? Expected<bool>(false)
                 : readHeaderTable(**header, littleEndian, addressSize, frames,
                                   bounds, skipped);
  if (!table) {
    problems = damaged(".eh_frame_hdr", toString(table.takeError()) +
                                            " (bounds from .eh_frame)");
    bounds.clear();
    skipped = SkippedRecords();
  } else if (*table) {
    from = FunctionBoundsSource::FrameHeader;
  }
  if (from == FunctionBoundsSource::None) {
    from = FunctionBoundsSource::FrameSection;
    if (Error error = walkFrames(frames, bounds, skipped))
      problems = joinErrors(
          std::move(problems),
          damaged(".eh_frame", toString(std::move(error)) + " (" +
                                   std::to_string(bounds.size()) +
                                   " function bounds before it kept)"));
  }
  if (skipped.count != 0)
    problems = joinErrors(
        std::move(problems),
        damaged(".eh_frame",
                (skipped.count == 1
                     ? "an unreadable FDE at offset "
                     : std::to_string(skipped.count) +
                           " unreadable FDEs, the first at offset ") +
                    hex(skipped.firstOffset) + ": " + skipped.firstProblem +
                    (skipped.count == 1 ? " (no bounds for its function)"
                                        : " (no bounds for their functions)")));
  normalize();
  return problems;
}

/// Sorted by begin, one FDE per begin (the largest), each ending at the
/// next one's begin at the latest, so that find() needs one neighbour.
/// Empty FDEs and FDEs at 0 (a discarded function's, never code) go.
void EhFrameBounds::normalize() {
  bounds.erase(std::remove_if(bounds.begin(), bounds.end(),
                              [](const FunctionBounds &fde) {
                                return fde.begin == 0 || fde.end <= fde.begin;
                              }),
               bounds.end());
  std::sort(bounds.begin(), bounds.end(),
            [](const FunctionBounds &a, const FunctionBounds &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  std::vector<FunctionBounds> unique;
  for (size_t i = 0; i < bounds.size(); ++i)
    if (i + 1 == bounds.size() || bounds[i + 1].begin != bounds[i].begin)
      unique.push_back(bounds[i]);
  for (size_t i = 0; i + 1 < unique.size(); ++i)
    unique[i].end = std::min(unique[i].end, unique[i + 1].begin);
  bounds = std::move(unique);
}

FunctionMatch EhFrameBounds::find(uint64_t address) const {
  FunctionMatch match;
  auto next = std::upper_bound(
      bounds.begin(), bounds.end(), address,
      [](uint64_t a, const FunctionBounds &fde) { return a < fde.begin; });
  if (next != bounds.end())
    match.interval.end = next->begin;
  if (next == bounds.begin())
    return match;
  const FunctionBounds &fde = next[-1];
  if (fde.end <= address) {
    match.interval.begin = fde.end;
    return match;
  }
  match.function = &fde;
  match.interval = {fde.begin, fde.end};
  return match;
}

} // namespace magic_trace
