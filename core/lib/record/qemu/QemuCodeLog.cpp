//===- QemuCodeLog.cpp - Reading the QEMU recorder's code log -------------===//
//
// The reader side of the recorder's code log (QemuRings.h, "the code log";
// plugin/qemu/QemuCode.cpp writes it): DIR/code.log and DIR/code.bin become
// a CodeHistory, DIR/marks.<tid> a thread's image marks. Records are whole
// lines; a line the recorder is still writing (no newline yet) is not read.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/ProcessModules.h"
#include "magic_trace/QemuRings.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>

namespace magic_trace {
namespace {

std::string inDir(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

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

llvm::Error readQemuCodeLog(llvm::StringRef dir, uint64_t lastSeq,
                            CodeHistory &history) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> log =
      llvm::MemoryBuffer::getFile(inDir(dir, "code.log"), /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!log)
    return llvm::Error::success(); // The recorder logged no code.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bin =
      llvm::MemoryBuffer::getFile(inDir(dir, "code.bin"), /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  llvm::StringRef bytes = bin ? (*bin)->getBuffer() : llvm::StringRef();
  // A file mapped where the same file already was (dlopen of a library
  // whose other segment the log has) is the same load.
  std::map<std::pair<std::string, uint64_t>, size_t> loaded;
  for (llvm::StringRef line : completeLines((*log)->getBuffer())) {
    llvm::SmallVector<llvm::StringRef, 6> fields;
    line.split(fields, ' ', /*MaxSplit=*/5, /*KeepEmpty=*/false);
    auto bad = [&] {
      return llvm::createStringError(
          llvm::formatv("{0}/code.log: bad record '{1}' (record again with "
                        "this build's recorder)",
                        dir, line)
              .str());
    };
    uint64_t seq = 0, start = 0, end = 0, extra = 0;
    if (fields.size() < 4 || fields[1].getAsInteger(10, seq) ||
        !hexField(fields[2], start) || !hexField(fields[3], end))
      return bad();
    if (lastSeq && seq > lastSeq)
      break;
    CodeChange change;
    change.seq = seq;
    change.address = start;
    if (fields[0] == "L") {
      if (fields.size() < 6 || !hexField(fields[4], extra) || end <= start)
        return bad();
      Module module = moduleOf(fields[5], start, end, extra);
      auto same = loaded.find({module.path, module.loadAddress});
      if (same != loaded.end())
        continue;
      change.kind = CodeChange::Kind::Load;
      change.size = end - start;
      change.module = std::move(module);
      loaded[{change.module.path, change.module.loadAddress}] =
          history.changes.size();
    } else if (fields[0] == "U") {
      if (end <= start)
        return bad();
      change.kind = CodeChange::Kind::Unload;
      change.size = end - start;
      // A file unmapped here and mapped again is a new load.
      for (auto it = loaded.begin(); it != loaded.end();)
        it = history.changes[it->second].overlaps(start, end) ? loaded.erase(it)
                                                              : std::next(it);
    } else if (fields[0] == "B") {
      // B SEQ START SIZE OFFSET-IN-CODE.BIN
      uint64_t size = end;
      if (fields.size() < 5 || !hexField(fields[4], extra) ||
          extra + size > bytes.size())
        return bad();
      change.kind = CodeChange::Kind::Bytes;
      change.size = size;
      change.bytes.assign(bytes.begin() + extra, bytes.begin() + extra + size);
    } else {
      return bad();
    }
    history.changes.push_back(std::move(change));
  }
  return llvm::Error::success();
}

std::vector<ImageMark> readQemuMarks(llvm::StringRef dir, uint64_t tid,
                                     uint64_t firstOffset) {
  std::vector<ImageMark> marks;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(
          inDir(dir, llvm::formatv("marks.{0}", tid).str()),
          /*IsText=*/false,
          /*RequiresNullTerminator=*/false);
  if (!file)
    return marks;
  for (llvm::StringRef line : completeLines((*file)->getBuffer())) {
    auto [at, seqText] = line.split(' ');
    uint64_t offset = 0, seq = 0;
    if (!hexField(at, offset) || seqText.trim().getAsInteger(10, seq))
      continue;
    // A mark before the copy's first byte says what the copy starts with.
    offset = offset < firstOffset ? 0 : offset - firstOffset;
    if (!marks.empty() && marks.back().offset == offset)
      marks.back().seq = seq;
    else
      marks.push_back({offset, seq});
  }
  return marks;
}

} // namespace magic_trace
