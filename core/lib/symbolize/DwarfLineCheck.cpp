//===- DwarfLineCheck.cpp - Sanity check of .debug_line prologues ---------===//
//
// Layout: DWARF 5 section 6.2.4 (and 2-4 for the older prologue). Every read
// goes through a DataExtractor cursor, which stops at the end of the data.
//
//===----------------------------------------------------------------------===//

#include "DwarfLineCheck.h"

#include "llvm/BinaryFormat/Dwarf.h"
#include "llvm/Support/DataExtractor.h"
#include "llvm/Support/Format.h"

using namespace llvm;

namespace magic_trace {
namespace {

/// Reads one table of one prologue, bounded by the header's end.
class PrologueReader {
public:
  PrologueReader(const DwarfLineSections &sections, DataExtractor data,
                 uint64_t offset, uint64_t end, uint8_t offsetSize)
      : sections(sections), data(data), cursor(offset), end(end),
        offsetSize(offsetSize) {}

  /// Fails with `what` if the cursor ran past the data or the header end.
  Error check(uint64_t tableOffset, const char *what) {
    if (Error error = cursor.takeError()) {
      consumeError(std::move(error));
      return fail(tableOffset, what);
    }
    if (cursor.tell() > end)
      return fail(tableOffset, what);
    return Error::success();
  }

  /// DWARF 2-4: include_directories, then file_names.
  void skipOldTables() {
    while (cursor && cursor.tell() < end && !data.getCStrRef(cursor).empty()) {
    }
    while (cursor && cursor.tell() < end) {
      if (data.getCStrRef(cursor).empty())
        break;
      data.getULEB128(cursor); // Directory index.
      data.getULEB128(cursor); // Modification time.
      data.getULEB128(cursor); // Length.
    }
  }

  /// DWARF 5: an entry format, a count, and the entries. False if a form is
  /// one a line table may not use or a string offset is out of bounds.
  bool skipNewTable() {
    uint8_t formatCount = data.getU8(cursor);
    SmallVector<uint64_t, 8> forms;
    for (unsigned i = 0; i < formatCount && cursor; ++i) {
      data.getULEB128(cursor); // Content type: any is allowed.
      forms.push_back(data.getULEB128(cursor));
    }
    uint64_t count = data.getULEB128(cursor);
    for (uint64_t entry = 0; entry < count && cursor; ++entry) {
      for (uint64_t form : forms)
        if (!skipForm(form))
          return false;
      if (cursor.tell() > end)
        return false;
    }
    return bool(cursor);
  }

  Error fail(uint64_t tableOffset, const char *what) {
    std::string text;
    raw_string_ostream(text) << "line table at offset "
                             << format_hex(tableOffset, 0) << ": " << what;
    return createStringError(text);
  }

private:
  bool skipForm(uint64_t form) {
    switch (form) {
    case dwarf::DW_FORM_string:
      data.getCStrRef(cursor);
      return true;
    case dwarf::DW_FORM_line_strp:
      return data.getUnsigned(cursor, offsetSize) < sections.lineStr.size();
    case dwarf::DW_FORM_strp:
      return data.getUnsigned(cursor, offsetSize) < sections.str.size();
    case dwarf::DW_FORM_strx:
    case dwarf::DW_FORM_udata:
      data.getULEB128(cursor);
      return true;
    case dwarf::DW_FORM_data1:
    case dwarf::DW_FORM_strx1:
      data.getU8(cursor);
      return true;
    case dwarf::DW_FORM_data2:
    case dwarf::DW_FORM_strx2:
      data.getU16(cursor);
      return true;
    case dwarf::DW_FORM_strx3:
      data.getU24(cursor);
      return true;
    case dwarf::DW_FORM_data4:
    case dwarf::DW_FORM_strx4:
      data.getU32(cursor);
      return true;
    case dwarf::DW_FORM_data8:
      data.getU64(cursor);
      return true;
    case dwarf::DW_FORM_data16:
      data.skip(cursor, 16);
      return true;
    case dwarf::DW_FORM_block: {
      uint64_t size = data.getULEB128(cursor);
      if (size > end - std::min(end, cursor.tell()))
        return false;
      data.skip(cursor, size);
      return true;
    }
    default:
      return false;
    }
  }

  const DwarfLineSections &sections;
  DataExtractor data;

public:
  DataExtractor::Cursor cursor;
  uint64_t end;
  uint8_t offsetSize;
};

/// Checks the table at `offset` and returns the offset of the next one.
Expected<uint64_t> checkOneTable(const DwarfLineSections &sections,
                                 const DataExtractor &data, uint64_t offset) {
  PrologueReader reader(sections, data, offset, data.size(), 4);
  DataExtractor::Cursor &cursor = reader.cursor;
  uint64_t unitLength = data.getU32(cursor);
  if (unitLength == dwarf::DW_LENGTH_DWARF64) {
    reader.offsetSize = 8;
    unitLength = data.getU64(cursor);
  } else if (unitLength >= dwarf::DW_LENGTH_lo_reserved) {
    return reader.fail(offset, "reserved unit length");
  }
  if (Error error = reader.check(offset, "truncated unit length"))
    return std::move(error);
  uint64_t unitEnd = cursor.tell() + unitLength;
  if (unitLength > data.size() - cursor.tell())
    return reader.fail(offset, "unit ends past the section");
  reader.end = unitEnd;

  uint16_t version = data.getU16(cursor);
  if (version < 2 || version > 5)
    return reader.fail(offset, "unsupported version");
  if (version >= 5) {
    data.getU8(cursor); // address_size
    data.getU8(cursor); // segment_selector_size
  }
  uint64_t headerLength = data.getUnsigned(cursor, reader.offsetSize);
  if (Error error = reader.check(offset, "truncated header"))
    return std::move(error);
  if (headerLength > unitEnd - cursor.tell())
    return reader.fail(offset, "header ends past its unit");
  reader.end = cursor.tell() + headerLength;

  data.getU8(cursor); // minimum_instruction_length
  if (version >= 4)
    data.getU8(cursor); // maximum_operations_per_instruction
  data.getU8(cursor);   // default_is_stmt
  data.getU8(cursor);   // line_base
  uint8_t lineRange = data.getU8(cursor);
  uint8_t opcodeBase = data.getU8(cursor);
  if (lineRange == 0)
    return reader.fail(offset, "line_range is 0");
  for (unsigned i = 1; i < opcodeBase && cursor; ++i)
    data.getU8(cursor);
  if (Error error = reader.check(offset, "standard opcode lengths past header"))
    return std::move(error);
  if (version >= 5) {
    if (!reader.skipNewTable())
      return reader.fail(offset, "bad directory table");
    if (!reader.skipNewTable())
      return reader.fail(offset, "bad file name table");
  } else {
    reader.skipOldTables();
  }
  if (Error error = reader.check(offset, "prologue runs past its header"))
    return std::move(error);
  return unitEnd;
}

} // namespace

Error checkDwarfLineTables(const DwarfLineSections &sections) {
  DataExtractor data(sections.line, sections.littleEndian, 8);
  for (uint64_t offset = 0; offset < data.size();) {
    Expected<uint64_t> next = checkOneTable(sections, data, offset);
    if (!next)
      return next.takeError();
    offset = *next;
  }
  return Error::success();
}

} // namespace magic_trace
