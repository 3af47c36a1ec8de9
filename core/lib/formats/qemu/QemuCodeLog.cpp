//===- QemuCodeLog.cpp - The QEMU recorder's directory and code log -------===//
//
// Both sides of the recorder's code log (QemuCodeLog.h): the records as
// plugin/qemu/QemuCode.cpp appends them, and DIR/code.log and DIR/code.bin
// read back as a CodeHistory, DIR/marks.<tid> as a thread's image marks.
// Records are whole lines; a line the recorder is still writing (no newline
// yet) is not read.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/QemuCodeLog.h"
#include "magic_trace/InputFiles.h"
#include "magic_trace/ProcessModules.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>
#include <new>
#include <stdexcept>

namespace magic_trace {

std::string joinPath(llvm::StringRef dir, const llvm::Twine &name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

namespace qemu_dir {
std::string header(llvm::StringRef dir) { return joinPath(dir, "header"); }
std::string ring(llvm::StringRef dir, uint64_t tid) {
  return joinPath(dir, "ring." + llvm::Twine(tid));
}
std::string maps(llvm::StringRef dir) { return joinPath(dir, "maps"); }
std::string codeLog(llvm::StringRef dir) { return joinPath(dir, "code.log"); }
std::string codeBin(llvm::StringRef dir) { return joinPath(dir, "code.bin"); }
std::string marks(llvm::StringRef dir, uint64_t tid) {
  return joinPath(dir, "marks." + llvm::Twine(tid));
}
std::string snapshot(llvm::StringRef dir, uint32_t number) {
  return joinPath(dir, "snap-" + llvm::Twine(number));
}
std::string trigger(llvm::StringRef snapshotDir) {
  return joinPath(snapshotDir, "trigger");
}
} // namespace qemu_dir

// The records' kinds, as letters at the start of their lines.
constexpr char kLoadRecord = 'L', kBytesRecord = 'B', kUnmapRecord = 'U';

std::string formatLoadRecord(uint64_t seq, uint64_t start, uint64_t end,
                             uint64_t fileOffset, llvm::StringRef path) {
  return llvm::formatv("{0} {1} {2:x} {3:x} {4:x} {5}\n", kLoadRecord, seq,
                       start, end, fileOffset, path);
}

std::string formatBytesRecord(uint64_t seq, uint64_t page, uint64_t size,
                              uint64_t binOffset) {
  return llvm::formatv("{0} {1} {2:x} {3:x} {4:x}\n", kBytesRecord, seq, page,
                       size, binOffset);
}

std::string formatUnmapRecord(uint64_t seq, uint64_t start, uint64_t end) {
  return llvm::formatv("{0} {1} {2:x} {3:x}\n", kUnmapRecord, seq, start, end);
}

std::string formatMark(uint64_t ringOffset, uint64_t seq) {
  return llvm::formatv("{0:x} {1}\n", ringOffset, seq);
}

namespace {

/// The complete lines of a file the recorder appends to; empty when it is
/// missing.
std::vector<llvm::StringRef> completeLines(llvm::StringRef text) {
  std::vector<llvm::StringRef> lines;
  size_t end = text.rfind('\n');
  if (end == llvm::StringRef::npos)
    return lines;
  llvm::SmallVector<llvm::StringRef, 0> split;
  text.take_front(end).split(split, '\n', -1, /*KeepEmpty=*/false);
  lines.assign(split.begin(), split.end());
  return lines;
}

/// A hex number, with or without "0x".
bool hexField(llvm::StringRef text, uint64_t &value) {
  text.consume_front("0x");
  return !text.getAsInteger(16, value);
}

/// A file mapping (`L` record) as the module it shows, its segments placed
/// from the ELF program headers (QEMU's host mappings do not show the
/// guest's segments; docs/qemu.md).
Module moduleOf(llvm::StringRef path, uint64_t start, uint64_t end,
                uint64_t fileOffset) {
  Module module;
  module.path = path.str();
  LoadedSegment mapped{start, end - start, fileOffset, true};
  llvm::Expected<PlacedElf> placed = placeElfByMappings(path, {mapped});
  if (!placed) {
    llvm::consumeError(placed.takeError());
    module.loadAddress = start - fileOffset;
    module.segments.push_back(mapped);
    return module;
  }
  module.loadAddress = placed->loadAddress;
  module.segments = std::move(placed->segments);
  return module;
}

} // namespace

llvm::Error parseQemuCodeLog(llvm::StringRef log, llvm::StringRef bin,
                             llvm::StringRef dir, uint64_t lastSeq,
                             CodeHistory &history) {
  // A file mapped where the same file already was (dlopen of a library
  // whose other segment the log has) is the same load.
  std::map<std::pair<std::string, uint64_t>, size_t> loaded;
  uint64_t previousSeq = history.lastSeq(), binEnd = 0;
  size_t loads = 0;
  std::vector<llvm::StringRef> lines = completeLines(log);
  // One change a line at most: grown once, not moved a million times.
  history.changes.reserve(history.changes.size() + lines.size());
  for (llvm::StringRef line : lines) {
    uint64_t at = line.data() - log.data();
    auto bad = [&](llvm::StringRef why) {
      return llvm::createStringError(
          llvm::formatv("{0}/code.log: offset {1}: {2} in '{3}' (record "
                        "again with this build's recorder)",
                        dir, at, why, line.take_front(200))
              .str());
    };
    llvm::SmallVector<llvm::StringRef, 6> fields;
    line.split(fields, ' ', /*MaxSplit=*/5, /*KeepEmpty=*/false);
    uint64_t seq = 0, start = 0, end = 0, extra = 0;
    if (fields.size() < 4 || fields[1].getAsInteger(10, seq) ||
        !hexField(fields[2], start) || !hexField(fields[3], end))
      return bad("a record that does not parse");
    if (lastSeq && seq > lastSeq)
      break;
    // The recorder numbers its records in order: anything else is a log
    // that is not its own, and decoding it would be a guess.
    if (seq <= previousSeq)
      return bad("a seq that does not follow the previous record's");
    previousSeq = seq;
    CodeChange change;
    change.seq = seq;
    change.address = start;
    char kind = fields[0].size() == 1 ? fields[0][0] : 0;
    if (kind == kLoadRecord || kind == kUnmapRecord) {
      if (end <= start)
        return bad("an empty or reversed range");
      if (std::string range = badCodeRange(start, end - start); !range.empty())
        return bad(range);
      change.size = end - start;
    }
    if (kind == kLoadRecord) {
      if (fields.size() < 6 || !hexField(fields[4], extra))
        return bad("a record that does not parse");
      if (++loads > kMaxHistoryLoads)
        return bad(
            llvm::formatv("more than {0} file mappings", kMaxHistoryLoads)
                .str());
      Module module = moduleOf(fields[5], start, end, extra);
      auto same = loaded.find({module.path, module.loadAddress});
      if (same != loaded.end())
        continue;
      change.kind = CodeChange::Kind::Load;
      change.module = std::move(module);
      loaded[{change.module.path, change.module.loadAddress}] =
          history.changes.size();
    } else if (kind == kUnmapRecord) {
      change.kind = CodeChange::Kind::Unload;
      // A file unmapped here and mapped again is a new load.
      for (auto it = loaded.begin(); it != loaded.end();)
        it = history.changes[it->second].overlaps(start, end) ? loaded.erase(it)
                                                              : std::next(it);
    } else if (kind == kBytesRecord) {
      // B SEQ START SIZE OFFSET-IN-CODE.BIN. Checked without a sum that
      // could wrap (issue 50: "B 6 0x4002a2e000 0x8000000000000000
      // 0x8000000000000000" passed `extra + size > bytes.size()`). The
      // recorder appends each page to code.bin once: a record that reuses
      // bytes an earlier one named is not its.
      uint64_t size = end;
      if (fields.size() < 5 || !hexField(fields[4], extra))
        return bad("a record that does not parse");
      if (extra > bin.size() || size > bin.size() - extra)
        return bad(llvm::formatv("bytes beyond the end of code.bin ({0} "
                                 "bytes)",
                                 bin.size())
                       .str());
      if (extra < binEnd)
        return bad("bytes an earlier record of code.bin has");
      if (std::string range = badCodeRange(start, size); !range.empty())
        return bad(range);
      binEnd = extra + size;
      change.kind = CodeChange::Kind::Bytes;
      change.size = size;
      change.bytes.assign(bin.bytes_begin() + extra,
                          bin.bytes_begin() + extra + size);
    } else {
      return bad("an unknown record kind");
    }
    history.changes.push_back(std::move(change));
  }
  return llvm::Error::success();
}

llvm::Error readQemuCodeLog(llvm::StringRef dir, uint64_t lastSeq,
                            CodeHistory &history) {
  // The recorder's directory is under TMPDIR: its files are trusted only as
  // the user's own regular files, never waited on (a FIFO) or read without
  // end (a link to /dev/zero).
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> log =
      readInputFile(qemu_dir::codeLog(dir), InputPlace::Shared);
  if (!log)
    return log.takeError();
  if (!*log)
    return llvm::Error::success(); // The recorder logged no code.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> bin = readInputFile(
      qemu_dir::codeBin(dir), InputPlace::Shared, kMaxHistoryCodeBytes);
  if (!bin)
    return bin.takeError();
  llvm::StringRef bytes = *bin ? (*bin)->getBuffer() : llvm::StringRef();
  // The parser's boundary: an allocation that fails is this file's error,
  // not an exception in the debugger.
  try {
    return parseQemuCodeLog((*log)->getBuffer(), bytes, dir, lastSeq, history);
  } catch (const std::length_error &) {
  } catch (const std::bad_alloc &) {
  }
  return llvm::createStringError(
      llvm::formatv("{0}/code.log: out of memory reading its {1} bytes "
                    "(record a shorter run)",
                    dir, (*log)->getBufferSize())
          .str());
}

std::vector<ImageMark> marksOfCopy(const std::vector<ImageMark> &ringMarks,
                                   uint64_t firstOffset) {
  std::vector<ImageMark> marks;
  for (const ImageMark &mark : ringMarks) {
    uint64_t offset = mark.offset < firstOffset ? 0 : mark.offset - firstOffset;
    if (!marks.empty() && marks.back().offset == offset)
      marks.back().seq = mark.seq;
    else
      marks.push_back({offset, mark.seq});
  }
  return marks;
}

std::vector<ImageMark> readQemuMarks(llvm::StringRef dir, uint64_t tid,
                                     uint64_t firstOffset) {
  std::vector<ImageMark> ringMarks;
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> file =
      readInputFile(qemu_dir::marks(dir, tid), InputPlace::Shared);
  if (!file) {
    llvm::consumeError(file.takeError());
    return ringMarks;
  }
  if (!*file)
    return ringMarks;
  for (llvm::StringRef line : completeLines((*file)->getBuffer())) {
    auto [at, seqText] = line.split(' ');
    uint64_t offset = 0, seq = 0;
    if (!hexField(at, offset) || seqText.trim().getAsInteger(10, seq))
      continue;
    ringMarks.push_back({offset, seq});
  }
  return marksOfCopy(ringMarks, firstOffset);
}

} // namespace magic_trace
