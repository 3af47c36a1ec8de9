//===- JitRecords.cpp - Perf maps and jitdump, read -----------------------===//
#include "magic_trace/JitRecords.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

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

llvm::Expected<std::vector<JitSymbol>> readPerfMap(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return llvm::createStringError(
        llvm::formatv("cannot read {0}: {1}", path, file.getError().message())
            .str());
  std::vector<JitSymbol> symbols;
  llvm::SmallVector<llvm::StringRef, 0> lines;
  (*file)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    auto [start, rest] = line.trim().split(' ');
    auto [size, name] = rest.split(' ');
    JitSymbol symbol;
    if (!parseHex(start, symbol.address) || !parseHex(size, symbol.size) ||
        name.trim().empty())
      continue;
    symbol.name = name.trim().str();
    symbols.push_back(std::move(symbol));
  }
  return symbols;
}

llvm::Expected<JitDump> readJitDump(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return llvm::createStringError(
        llvm::formatv("cannot read {0}: {1}", path, file.getError().message())
            .str());
  const auto *data =
      reinterpret_cast<const uint8_t *>((*file)->getBufferStart());
  size_t size = (*file)->getBufferSize();
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
  for (size_t at = headerSize; size - at >= kRecordHeaderSize;) {
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
    if (total > size - at)
      break; // The JIT is still writing it.
    Cursor record(data + at + kRecordHeaderSize, total - kRecordHeaderSize);
    uint32_t recordPid = 0, tid = 0;
    uint64_t vma = 0, codeAddress = 0, codeSize = 0, index = 0;
    if (kind == kCodeLoad) {
      JitCodeLoad load;
      load.timestamp = time;
      if (record.read(recordPid) && record.read(tid) && record.read(vma) &&
          record.read(codeAddress) && record.read(codeSize) &&
          record.read(index) && record.string(load.symbol.name) &&
          record.bytes(codeSize, load.bytes)) {
        load.address = codeAddress;
        load.symbol.address = codeAddress;
        load.symbol.size = codeSize;
        dump.loads.push_back(std::move(load));
      }
    } else if (kind == kCodeMove) {
      uint64_t oldAddress = 0, newAddress = 0;
      if (record.read(recordPid) && record.read(tid) && record.read(vma) &&
          record.read(oldAddress) && record.read(newAddress) &&
          record.read(codeSize) && record.read(index))
        for (size_t i = dump.loads.size(); i-- > 0;)
          if (dump.loads[i].address == oldAddress) {
            JitCodeLoad moved = dump.loads[i];
            moved.timestamp = time;
            moved.address = moved.symbol.address = newAddress;
            dump.loads.push_back(std::move(moved));
            break;
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
        for (size_t i = dump.loads.size(); i-- > 0;)
          if (dump.loads[i].address == codeAddress) {
            dump.loads[i].symbol.file = file;
            dump.loads[i].symbol.line = line;
            break;
          }
    } else if (kind == kCodeClose) {
      break;
    }
    at += total;
  }
  return dump;
}

std::vector<std::string> addJitRecords(uint64_t pid,
                                       const std::vector<std::string> &dirs,
                                       bool withCode, CodeHistory &history) {
  std::vector<std::string> notes;
  std::string mapPath = llvm::formatv("/tmp/perf-{0}.map", pid).str();
  if (llvm::sys::fs::exists(mapPath)) {
    llvm::Expected<std::vector<JitSymbol>> symbols = readPerfMap(mapPath);
    if (!symbols) {
      notes.push_back(llvm::toString(symbols.takeError()));
    } else {
      notes.push_back(llvm::formatv("names from {0} ({1} entries)", mapPath,
                                    symbols->size())
                          .str());
      history.symbols.insert(history.symbols.end(), symbols->begin(),
                             symbols->end());
    }
  }
  std::string dumpName = llvm::formatv("jit-{0}.dump", pid).str();
  for (const std::string &dir : dirs) {
    llvm::SmallString<256> dumpPath(dir);
    llvm::sys::path::append(dumpPath, dumpName);
    if (!llvm::sys::fs::exists(dumpPath))
      continue;
    llvm::Expected<JitDump> dump = readJitDump(dumpPath);
    if (!dump) {
      notes.push_back(llvm::toString(dump.takeError()));
      break;
    }
    notes.push_back(llvm::formatv("names from {0} ({1} code loads)", dumpPath,
                                  dump->loads.size())
                        .str());
    uint64_t seq = history.lastSeq();
    for (JitCodeLoad &load : dump->loads) {
      history.symbols.push_back(load.symbol);
      if (!withCode || load.bytes.empty())
        continue;
      CodeChange change;
      change.kind = CodeChange::Kind::Bytes;
      change.seq = ++seq;
      change.address = load.address;
      change.size = load.bytes.size();
      change.bytes = std::move(load.bytes);
      history.changes.push_back(std::move(change));
    }
    break;
  }
  return notes;
}

} // namespace magic_trace
