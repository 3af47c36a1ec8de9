//===- RangeDiskCache.cpp - Symbol ranges kept across runs ----------------===//
//
// The file is text, one range a line and one line per frame of it, fields
// separated by tabs (no name or path holds a tab or a newline):
//   magic-trace ranges 1
//   R <begin> <end> <entry> <fromDebugInfo> <noFunction> <frames>   (hex)
//   F <line> <inlined> <function> <file>
// Ranges ascend and do not overlap; anything else makes the whole file
// unusable.
//
//===----------------------------------------------------------------------===//
#include "RangeDiskCache.h"

#include "magic_trace/InputFiles.h"
#include "magic_trace/PrivateFiles.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>

using namespace llvm;

namespace magic_trace {
namespace {

constexpr StringLiteral Header = "magic-trace ranges 1";
/// The largest cache file read: far above any module's (libc's whole .text
/// in single-instruction ranges would be a few tens of megabytes).
constexpr uint64_t MaxCacheBytes = uint64_t(256) << 20;

bool parseHex(StringRef text, uint64_t &value) {
  return !text.empty() && !text.getAsInteger(16, value);
}

/// Parses the file's lines after its header into `ranges`; false at the
/// first line that is not what the format says.
bool parseRanges(StringRef text, StringTable &strings,
                 std::map<uint64_t, FileRange> &ranges) {
  SmallVector<StringRef, 8> fields;
  uint64_t lastEnd = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    fields.clear();
    line.split(fields, '\t');
    uint64_t begin, end, entry, fromDebug, noFunction, count;
    if (fields.size() != 7 || fields[0] != "R" || !parseHex(fields[1], begin) ||
        !parseHex(fields[2], end) || !parseHex(fields[3], entry) ||
        !parseHex(fields[4], fromDebug) || !parseHex(fields[5], noFunction) ||
        !parseHex(fields[6], count) || begin >= end || begin < lastEnd ||
        count > 64)
      return false;
    lastEnd = end;
    FileRange range;
    range.interval.begin = begin;
    range.interval.end = end;
    range.functionEntry = entry;
    range.fromDebugInfo = fromDebug != 0;
    range.noFunction = noFunction != 0;
    range.fromCache = true;
    for (uint64_t i = 0; i < count; ++i) {
      auto [frameLine, after] = text.split('\n');
      text = after;
      fields.clear();
      frameLine.split(fields, '\t');
      uint64_t number, inlined;
      if (fields.size() != 5 || fields[0] != "F" ||
          !parseHex(fields[1], number) || !parseHex(fields[2], inlined) ||
          number > UINT32_MAX)
        return false;
      SymbolFrame frame;
      frame.line = uint32_t(number);
      frame.inlined = inlined != 0;
      frame.function = strings.intern(fields[3]);
      frame.file = strings.intern(fields[4]);
      range.frames.push_back(frame);
    }
    ranges.emplace_hint(ranges.end(), begin, std::move(range));
  }
  return true;
}

} // namespace

/// "SIZE-INODE-TIME" of the file at `path` (the time in nanoseconds), or ""
/// when it cannot be read: a file rewritten in place, or a copy made in the
/// same second, gets another name.
static std::string fileStamp(StringRef path) {
  sys::fs::file_status status;
  if (path.empty() || sys::fs::status(path, status))
    return "";
  uint64_t nanos =
      uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   status.getLastModificationTime().time_since_epoch())
                   .count());
  return utohexstr(status.getSize()) + "-" +
         utohexstr(status.getUniqueID().getFile()) + "-" + utohexstr(nanos);
}

std::string rangeCachePath(StringRef buildId, StringRef objectPath,
                           StringRef debugPath,
                           const Symbolizer::Options &options) {
  if (buildId.empty() || std::getenv("MAGIC_TRACE_NO_SYMBOL_CACHE"))
    return "";
  // A stripped copy has its original's build-id but not its symbols: the
  // object's own file is part of the name too.
  std::string object = fileStamp(objectPath);
  if (object.empty())
    return "";
  Expected<std::string> cache = userCacheDir();
  if (!cache) {
    consumeError(cache.takeError());
    return "";
  }
  std::string debug = "nodebug";
  if (!debugPath.empty()) {
    debug = fileStamp(debugPath);
    if (debug.empty())
      return "";
  }
  SmallString<256> path(*cache);
  sys::path::append(path, "ranges");
  if (createOutputDirectories(path))
    return "";
  sys::path::append(path, buildId.lower() + "-" + object + "-" + debug + "-" +
                              (options.demangle ? "d" : "m") +
                              (options.useDebugInfo ? "g" : "s") + ".2");
  return std::string(path);
}

size_t loadRangeCache(StringRef path, StringTable &strings,
                      std::map<uint64_t, FileRange> &ranges) {
  if (path.empty())
    return 0;
  // The user's own regular file, or nothing (a cache directory is a place
  // to check as a shared one: InputFiles.h).
  Expected<std::unique_ptr<MemoryBuffer>> file =
      readInputFile(path, InputPlace::Shared, MaxCacheBytes);
  if (!file) {
    consumeError(file.takeError());
    return 0;
  }
  if (!*file)
    return 0;
  StringRef text = (*file)->getBuffer();
  if (!text.consume_front(Header) || !text.consume_front("\n") ||
      !parseRanges(text, strings, ranges)) {
    ranges.clear();
    return 0;
  }
  return ranges.size();
}

void saveRangeCache(StringRef path, const StringTable &strings,
                    const std::map<uint64_t, FileRange> &ranges) {
  if (path.empty())
    return;
  std::string text;
  raw_string_ostream os(text);
  os << Header << '\n';
  auto writable = [&](const FileRange &range) {
    for (const SymbolFrame &frame : range.frames)
      for (StringId id : {frame.function, frame.file})
        if (strings.get(id).find_first_of("\t\n") != StringRef::npos)
          return false;
    return true;
  };
  for (const auto &[begin, range] : ranges) {
    if (range.interval.end <= begin || !writable(range))
      continue;
    os << "R\t" << utohexstr(begin) << '\t' << utohexstr(range.interval.end)
       << '\t' << utohexstr(range.functionEntry) << '\t'
       << (range.fromDebugInfo ? "1" : "0") << '\t'
       << (range.noFunction ? "1" : "0") << '\t'
       << utohexstr(range.frames.size()) << '\n';
    for (const SymbolFrame &frame : range.frames)
      os << "F\t" << utohexstr(frame.line) << '\t'
         << (frame.inlined ? "1" : "0") << '\t' << strings.get(frame.function)
         << '\t' << strings.get(frame.file) << '\n';
  }
  if (Error error = writeOutputFile(path, text))
    consumeError(std::move(error));
}

} // namespace magic_trace
