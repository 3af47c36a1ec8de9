//===- JitRecords.cpp - Perf maps and jitdump, read -----------------------===//
#include "magic_trace/JitRecords.h"

#include "magic_trace/InputFiles.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <unordered_map>

namespace magic_trace {
namespace {

// jitdump-specification.txt: the file header, the record header, the kinds.
constexpr uint32_t kJitDumpMagic = 0x4A695444; // "JiTD" as a little-endian u32
constexpr size_t kJitDumpHeaderSize = 40;
constexpr size_t kRecordHeaderSize = 16;
constexpr uint64_t kArchTimestampFlag = 1;
enum JitRecordKind : uint32_t {
  kCodeLoad = 0,
  kCodeMove = 1,
  kDebugInfo = 2,
  kCodeClose = 3,
};

/// A bounds-checked little-endian reader over one record.
class Cursor {
public:
  Cursor(const uint8_t *data, size_t size) : data(data), size(size) {}

  template <class T> bool read(T &out) {
    if (at > size || size - at < sizeof(T))
      return false;
    std::memcpy(&out, data + at, sizeof(T));
    at += sizeof(T);
    return true;
  }
  /// A NUL-terminated string.
  bool string(std::string &out) {
    if (at >= size)
      return false;
    const void *end = std::memchr(data + at, 0, size - at);
    if (!end)
      return false;
    out.assign(reinterpret_cast<const char *>(data + at),
               static_cast<const uint8_t *>(end) - (data + at));
    at = static_cast<const uint8_t *>(end) - data + 1;
    return true;
  }
  bool bytes(size_t count, std::vector<uint8_t> &out) {
    if (at > size || size - at < count)
      return false;
    out.assign(data + at, data + at + count);
    at += count;
    return true;
  }

private:
  const uint8_t *data;
  size_t size;
  size_t at = 0;
};

bool parseHex(llvm::StringRef text, uint64_t &value) {
  text.consume_front("0x");
  return !text.empty() && !text.getAsInteger(16, value);
}

} // namespace

std::vector<JitSymbol> parsePerfMap(llvm::StringRef text) {
  std::vector<JitSymbol> symbols;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    auto [start, fields] = line.trim().split(' ');
    auto [size, name] = fields.split(' ');
    JitSymbol symbol;
    if (!parseHex(start, symbol.address) || !parseHex(size, symbol.size) ||
        name.trim().empty() ||
        !badCodeRange(symbol.address, symbol.size).empty())
      continue;
    symbol.name = name.trim().take_front(kMaxJitNameLength).str();
    symbols.push_back(std::move(symbol));
  }
  return symbols;
}

/// A perf map or jitdump at `path`: in /tmp, so the user's or root's own
/// regular file only, never a FIFO waited on (issue 50), and no larger than a
/// JIT writes; parsed by `parse`, out of memory said in one line.
template <typename Parse>
static auto readSharedJitFile(llvm::StringRef path, Parse parse)
    -> decltype(parse(llvm::StringRef())) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> file =
      readInputFile(path, InputPlace::Shared, kMaxJitFileBytes);
  if (!file)
    return file.takeError();
  if (!*file)
    return llvm::createStringError(
        llvm::formatv("cannot read {0}: no such file", path).str());
  try {
    return parse((*file)->getBuffer());
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  return llvm::createStringError(
      llvm::formatv("{0}: out of memory reading its {1} bytes (skipped)", path,
                    (*file)->getBufferSize())
          .str());
}

llvm::Expected<std::vector<JitSymbol>> readPerfMap(llvm::StringRef path) {
  return readSharedJitFile(path, [](llvm::StringRef text) {
    return llvm::Expected<std::vector<JitSymbol>>(parsePerfMap(text));
  });
}

llvm::Expected<JitDump> readJitDump(llvm::StringRef path) {
  return readSharedJitFile(path, [path](llvm::StringRef bytes) {
    return parseJitDump(llvm::arrayRefFromStringRef(bytes), path);
  });
}

llvm::Expected<JitDump> parseJitDump(llvm::ArrayRef<uint8_t> bytes,
                                     llvm::StringRef path) {
  const uint8_t *data = bytes.data();
  size_t size = bytes.size();
  Cursor header(data, size);
  uint32_t magic = 0, version = 0, headerSize = 0, machine = 0, pad = 0,
           pid = 0;
  uint64_t timestamp = 0, flags = 0;
  if (!header.read(magic) || magic != kJitDumpMagic || !header.read(version) ||
      !header.read(headerSize) || !header.read(machine) || !header.read(pad) ||
      !header.read(pid) || !header.read(timestamp) || !header.read(flags) ||
      headerSize < kJitDumpHeaderSize || headerSize > size)
    return llvm::createStringError(
        llvm::formatv("{0} is not a jitdump file (no 'JiTD' header)", path)
            .str());
  JitDump dump;
  dump.pid = pid;
  dump.tscTimestamps = flags & kArchTimestampFlag;
  // The last load at each address (CODE_MOVE and DEBUG_INFO name one): a
  // lookup, not a scan back over every load. Not a DenseMap: it reserves
  // two keys (~0 and ~0 - 1) that a file may name (fuzz-jitdump found it).
  std::unordered_map<uint64_t, size_t> lastLoadAt;
  uint64_t codeBytes = 0;
  size_t at = headerSize;
  // Loads and their bytes are bounded (CodeHistory.h's limits): a CODE_MOVE
  // copies its load's code, so a file of moves could ask for any amount.
  auto keep = [&](JitCodeLoad load) -> llvm::Error {
    codeBytes += load.bytes.size();
    if (dump.loads.size() >= kMaxJitLoads || codeBytes > kMaxHistoryCodeBytes)
      return llvm::createStringError(
          llvm::formatv("{0}: offset {1}: more than {2} code loads or {3} MiB "
                        "of code (the file is damaged or not a JIT's)",
                        path, at, kMaxJitLoads, kMaxHistoryCodeBytes >> 20)
              .str());
    lastLoadAt[load.address] = dump.loads.size();
    dump.loads.push_back(std::move(load));
    return llvm::Error::success();
  };
  while (size - at >= kRecordHeaderSize) {
    Cursor prefix(data + at, size - at);
    uint32_t kind = 0, total = 0;
    uint64_t time = 0;
    prefix.read(kind);
    prefix.read(total);
    prefix.read(time);
    if (total < kRecordHeaderSize)
      return llvm::createStringError(
          llvm::formatv("{0}: a record at offset {1} has size {2} (the file "
                        "is damaged)",
                        path, at, total)
              .str());
    if (total > size - at) {
      dump.cutShortAt = at; // The JIT is still writing it.
      break;
    }
    Cursor record(data + at + kRecordHeaderSize, total - kRecordHeaderSize);
    uint32_t recordPid = 0, tid = 0;
    uint64_t vma = 0, codeAddress = 0, codeSize = 0, index = 0;
    if (kind == kCodeLoad) {
      JitCodeLoad load;
      load.timestamp = time;
      bool header = record.read(recordPid) && record.read(tid) &&
                    record.read(vma) && record.read(codeAddress) &&
                    record.read(codeSize) && record.read(index) &&
                    record.string(load.symbol.name);
      // A load whose code is not in its record (issue 50: one claiming
      // 4 GiB was skipped without a word) is a damaged file.
      if (header && (!record.bytes(codeSize, load.bytes) ||
                     !badCodeRange(codeAddress, codeSize).empty()))
        return llvm::createStringError(
            llvm::formatv("{0}: offset {1}: a code load of {2} bytes at {3:x} "
                          "in a record of {4} bytes (the file is damaged)",
                          path, at, codeSize, codeAddress, total)
                .str());
      if (header) {
        load.symbol.name.resize(
            std::min(load.symbol.name.size(), kMaxJitNameLength));
        load.address = codeAddress;
        load.symbol.address = codeAddress;
        load.symbol.size = codeSize;
        if (llvm::Error full = keep(std::move(load)))
          return std::move(full);
      }
    } else if (kind == kCodeMove) {
      uint64_t oldAddress = 0, newAddress = 0;
      if (record.read(recordPid) && record.read(tid) && record.read(vma) &&
          record.read(oldAddress) && record.read(newAddress) &&
          record.read(codeSize) && record.read(index))
        if (auto found = lastLoadAt.find(oldAddress);
            found != lastLoadAt.end()) {
          JitCodeLoad moved = dump.loads[found->second];
          if (!badCodeRange(newAddress, moved.bytes.size()).empty())
            return llvm::createStringError(
                llvm::formatv("{0}: offset {1}: a code move to {2:x} that "
                              "wraps past the end of the address space (the "
                              "file is damaged)",
                              path, at, newAddress)
                    .str());
          moved.timestamp = time;
          moved.address = moved.symbol.address = newAddress;
          if (llvm::Error full = keep(std::move(moved)))
            return std::move(full);
        }
    } else if (kind == kDebugInfo) {
      uint64_t count = 0;
      uint64_t entryAddress = 0;
      uint32_t line = 0, discriminator = 0;
      std::string file;
      // The first entry names the function's file and line: the name of
      // the load whose code is at code_addr gets them.
      if (record.read(codeAddress) && record.read(count) && count > 0 &&
          record.read(entryAddress) && record.read(line) &&
          record.read(discriminator) && record.string(file))
        if (auto found = lastLoadAt.find(codeAddress);
            found != lastLoadAt.end()) {
          dump.loads[found->second].symbol.file =
              file.substr(0, kMaxJitNameLength);
          dump.loads[found->second].symbol.line = line;
        }
    } else if (kind == kCodeClose) {
      break;
    }
    at += total;
  }
  return dump;
}

namespace {

/// Keeps the names worth keeping when the recorder has the code itself: those
/// of code it logged (a perf map may name every function a JIT ever made),
/// at most kMaxJitSymbols, the latest (a later name wins anyway).
size_t keepUsefulSymbols(CodeHistory &history, size_t from) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const CodeChange &change : history.changes)
    if (change.kind == CodeChange::Kind::Bytes)
      ranges.emplace_back(change.address, change.end());
  llvm::sort(ranges);
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto &range : ranges)
    if (!merged.empty() && range.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, range.second);
    else
      merged.push_back(range);
  auto logged = [&](const JitSymbol &symbol) {
    auto next = llvm::upper_bound(
        merged, symbol.address,
        [](uint64_t address, const std::pair<uint64_t, uint64_t> &range) {
          return address < range.first;
        });
    if (next != merged.end() && next->first < symbol.address + symbol.size)
      return true;
    return next != merged.begin() && std::prev(next)->second > symbol.address;
  };
  std::vector<JitSymbol> &symbols = history.symbols;
  size_t before = symbols.size();
  symbols.erase(std::remove_if(symbols.begin() + from, symbols.end(),
                               [&](const JitSymbol &s) { return !logged(s); }),
                symbols.end());
  if (symbols.size() > kMaxJitSymbols)
    symbols.erase(symbols.begin(), symbols.end() - kMaxJitSymbols);
  return before - symbols.size();
}

} // namespace

std::vector<std::string> jitRecordDirs(uint64_t pid) {
  std::vector<std::string> dirs;
  llvm::SmallString<256> cwd;
  std::string link = llvm::formatv("/proc/{0}/cwd", pid).str();
  if (!llvm::sys::fs::real_path(link, cwd))
    dirs.push_back(std::string(cwd));
  if (!llvm::sys::fs::current_path(cwd))
    dirs.push_back(std::string(cwd));
  dirs.push_back("/tmp");
  return dirs;
}

/// The loads of `dump` as Bytes changes after `history`'s last, in time
/// order (file order among equal times), each at its time on `clock`. The
/// history's code stays within kMaxHistoryCodeBytes: the newest loads that
/// fit are kept; returns how many older ones were not.
static size_t addTimedJitCode(JitDump &dump, const TimeConversion &clock,
                              CodeHistory &history) {
  std::vector<size_t> order(dump.loads.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::sort(order, [&](size_t a, size_t b) {
    return std::pair(dump.loads[a].timestamp, a) <
           std::pair(dump.loads[b].timestamp, b);
  });
  uint64_t held = 0;
  for (const CodeChange &change : history.changes)
    held += change.bytes.size();
  uint64_t room = held < kMaxHistoryCodeBytes ? kMaxHistoryCodeBytes - held : 0;
  size_t first = order.size();
  for (; first > 0; --first) {
    uint64_t size = dump.loads[order[first - 1]].bytes.size();
    if (size > room)
      break;
    room -= size;
  }
  uint64_t seq = history.lastSeq();
  for (size_t i : llvm::ArrayRef(order).drop_front(first)) {
    JitCodeLoad &load = dump.loads[i];
    if (load.bytes.empty())
      continue;
    CodeChange change;
    change.kind = CodeChange::Kind::Bytes;
    change.seq = ++seq;
    // 0 is "no time": a load stamped before the clock's zero is at 1 ns.
    change.timeNs = std::max<uint64_t>(1, clock.tscToNs(load.timestamp));
    change.address = load.address;
    change.size = load.bytes.size();
    change.bytes = std::move(load.bytes);
    history.changes.push_back(std::move(change));
  }
  return first;
}

JitRecordNotes addJitRecords(uint64_t pid, const std::vector<std::string> &dirs,
                             JitCode code, CodeHistory &history,
                             const TimeConversion *clock) {
  JitRecordNotes notes;
  size_t firstSymbol = history.symbols.size();
  std::string mapPath = llvm::formatv("/tmp/perf-{0}.map", pid).str();
  // lstat, not stat: a link there is a plant to report, never followed.
  if (llvm::sys::fs::file_status status;
      !llvm::sys::fs::status(mapPath, status, /*Follow=*/false)) {
    llvm::Expected<std::vector<JitSymbol>> symbols = readPerfMap(mapPath);
    if (!symbols) {
      notes.skipped.push_back(llvm::toString(symbols.takeError()));
    } else {
      notes.read.push_back(llvm::formatv("names from {0} ({1} entries)",
                                         mapPath, symbols->size())
                               .str());
      history.symbols.insert(history.symbols.end(), symbols->begin(),
                             symbols->end());
    }
  }
  bool withCode = false;
  std::string dumpName = llvm::formatv("jit-{0}.dump", pid).str();
  for (const std::string &dir : dirs) {
    llvm::SmallString<256> dumpPath(dir);
    llvm::sys::path::append(dumpPath, dumpName);
    if (llvm::sys::fs::file_status status;
        llvm::sys::fs::status(dumpPath, status, /*Follow=*/false))
      continue;
    llvm::Expected<JitDump> dump = readJitDump(dumpPath);
    if (!dump) {
      notes.skipped.push_back(llvm::toString(dump.takeError()));
      break;
    }
    notes.read.push_back(
        llvm::formatv("names from {0} ({1} code loads{2})", dumpPath,
                      dump->loads.size(),
                      dump->cutShortAt ? "; the last record is cut short" : "")
            .str());
    for (const JitCodeLoad &load : dump->loads)
      history.symbols.push_back(load.symbol);
    if (code == JitCode::ByTime && clock && dump->tscTimestamps)
      withCode = true;
    else if (code == JitCode::ByTime && !dump->tscTimestamps &&
             !dump->loads.empty())
      notes.unused.push_back(
          llvm::formatv("{0}: its code versions are not used (its times are "
                        "the monotonic clock, not the trace's TSC: run the "
                        "program with JITDUMP_USE_ARCH_TIMESTAMP=1, as perf "
                        "record does for Intel PT); code outside files "
                        "decodes as at the stop",
                        dumpPath)
              .str());
    if (withCode)
      if (size_t left = addTimedJitCode(*dump, *clock, history))
        notes.unused.push_back(
            llvm::formatv("{0}: its {1} oldest code loads are not used (the "
                          "code history holds at most {2} MiB)",
                          dumpPath, left, kMaxHistoryCodeBytes >> 20)
                .str());
    break;
  }
  if (!withCode)
    if (size_t dropped = keepUsefulSymbols(history, firstSymbol))
      notes.read.push_back(llvm::formatv("{0} names of code the recorder did "
                                         "not log (or past the {1} kept) "
                                         "dropped",
                                         dropped, kMaxJitSymbols)
                               .str());
  return notes;
}

} // namespace magic_trace
