//===- BundleHistory.cpp - A snapshot's code history in a bundle ----------===//
#include "BundleHistory.h"

#include "magic_trace/InputFiles.h"
#include "magic_trace/QemuCodeLog.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

namespace magic_trace::bundle_detail {
namespace {

constexpr const char *codeBinName = "code.bin";

const char *kindName(CodeChange::Kind kind) {
  switch (kind) {
  case CodeChange::Kind::Load:
    return "load";
  case CodeChange::Kind::Unload:
    return "unload";
  case CodeChange::Kind::Bytes:
    return "bytes";
  }
  return "?";
}

json::Object moduleJson(const Module &module) {
  json::Array segments;
  for (const LoadedSegment &segment : module.segments)
    segments.push_back(json::Object{{"address", hex(segment.address)},
                                    {"size", hex(segment.size)},
                                    {"fileOffset", hex(segment.fileOffset)},
                                    {"executable", segment.executable}});
  json::Object object{{"systemPath", module.path},
                      {"loadAddress", hex(module.loadAddress)},
                      {"segments", std::move(segments)}};
  if (!module.fileCopy.empty())
    object["file"] = module.fileCopy;
  if (!module.buildId.empty())
    object["uuid"] = module.buildId;
  return object;
}

Expected<Module> readModule(const FieldReader &reader,
                            const json::Object &object, StringRef at,
                            StringRef dir) {
  Module module;
  auto path = reader.string(object, "systemPath", field(at, "systemPath"));
  if (!path)
    return path.takeError();
  module.path = *path;
  auto load = reader.integer(object, "loadAddress", field(at, "loadAddress"));
  if (!load)
    return load.takeError();
  module.loadAddress = *load;
  auto file = reader.optionalString(object, "file", field(at, "file"));
  if (!file)
    return file.takeError();
  if (*file)
    module.fileCopy = resolve(dir, **file);
  auto uuid = reader.optionalString(object, "uuid", field(at, "uuid"));
  if (!uuid)
    return uuid.takeError();
  if (*uuid)
    module.buildId = **uuid;
  auto segments = reader.array(object, "segments", field(at, "segments"));
  if (!segments)
    return segments.takeError();
  for (size_t i = 0; i < (*segments)->size(); ++i) {
    std::string segmentAt = field(field(at, "segments"), i);
    auto segment = reader.object(&(**segments)[i], segmentAt);
    if (!segment)
      return segment.takeError();
    auto address =
        reader.integer(**segment, "address", field(segmentAt, "address"));
    if (!address)
      return address.takeError();
    auto size = reader.integer(**segment, "size", field(segmentAt, "size"));
    if (!size)
      return size.takeError();
    auto offset =
        reader.integer(**segment, "fileOffset", field(segmentAt, "fileOffset"));
    if (!offset)
      return offset.takeError();
    auto executable =
        reader.boolean(**segment, "executable", field(segmentAt, "executable"));
    if (!executable)
      return executable.takeError();
    module.segments.push_back({*address, *size, *offset, *executable});
  }
  return module;
}

Error readChanges(const FieldReader &reader, const json::Object &history,
                  StringRef dir, CodeHistory &out) {
  auto changes = reader.array(history, "changes", "codeHistory.changes");
  if (!changes)
    return changes.takeError();
  std::unique_ptr<llvm::MemoryBuffer> bin;
  uint64_t binEnd = 0, previousSeq = 0;
  size_t loads = 0;
  for (size_t i = 0; i < (*changes)->size(); ++i) {
    std::string at = field("codeHistory.changes", i);
    auto object = reader.object(&(**changes)[i], at);
    if (!object)
      return object.takeError();
    CodeChange change;
    auto seq = reader.integer(**object, "seq", field(at, "seq"));
    auto kind = reader.string(**object, "kind", field(at, "kind"));
    auto address = reader.integer(**object, "address", field(at, "address"));
    auto size = reader.integer(**object, "size", field(at, "size"));
    if (!seq)
      return seq.takeError();
    if (!kind)
      return kind.takeError();
    if (!address)
      return address.takeError();
    if (!size)
      return size.takeError();
    // Inconsistent history is the input's error, not a guess (issue 50).
    if (*seq <= previousSeq)
      return reader.fail(field(at, "seq"),
                         formatv("{0} does not follow the previous change's "
                                 "{1} (seqs ascend)",
                                 *seq, previousSeq)
                             .str());
    previousSeq = *seq;
    if (std::string range = badCodeRange(*address, *size); !range.empty())
      return reader.fail(field(at, "size"), range);
    change.seq = *seq;
    change.address = *address;
    change.size = *size;
    if ((*object)->get("timeNs")) {
      auto time = reader.integer(**object, "timeNs", field(at, "timeNs"));
      if (!time)
        return time.takeError();
      change.timeNs = *time;
    }
    if (*kind == "load") {
      if (++loads > kMaxHistoryLoads)
        return reader.fail(
            at, formatv("more than {0} file mappings", kMaxHistoryLoads).str());
      change.kind = CodeChange::Kind::Load;
      auto module =
          reader.object((*object)->get("module"), field(at, "module"));
      if (!module)
        return module.takeError();
      auto read = readModule(reader, **module, field(at, "module"), dir);
      if (!read)
        return read.takeError();
      change.module = std::move(*read);
    } else if (*kind == "unload") {
      change.kind = CodeChange::Kind::Unload;
    } else if (*kind == "bytes") {
      change.kind = CodeChange::Kind::Bytes;
      auto offset =
          reader.integer(**object, "codeOffset", field(at, "codeOffset"));
      if (!offset)
        return offset.takeError();
      if (!bin) {
        // Read whole, no larger than a history's code may be: a code.bin
        // that is a FIFO or a link to /dev/zero is an error, not a wait.
        auto file = readInputFile(resolve(dir, codeBinName), InputPlace::Named,
                                  kMaxHistoryCodeBytes);
        if (!file)
          return reader.fail(at, toString(file.takeError()));
        if (!*file)
          return reader.fail(at,
                             "the bundle has no " + std::string(codeBinName));
        bin = std::move(*file);
      }
      // Without a sum that could wrap (issue 50: size 0xffffffffffffffff,
      // or codeOffset 0xfffffffffffff000, passed `offset + size > length`
      // and read outside the file). The writer puts each version's bytes
      // after the previous one's: bytes named twice are not its.
      uint64_t length = bin->getBufferSize();
      if (*offset > length || *size > length - *offset)
        return reader.fail(field(at, "codeOffset"),
                           formatv("{0:x} + {1:x} is beyond the end of {2} "
                                   "({3} bytes)",
                                   *offset, *size, codeBinName, length)
                               .str());
      if (*offset < binEnd)
        return reader.fail(field(at, "codeOffset"),
                           "bytes of code.bin an earlier change has");
      binEnd = *offset + *size;
      const auto *begin =
          reinterpret_cast<const uint8_t *>(bin->getBufferStart()) + *offset;
      change.bytes.assign(begin, begin + *size);
    } else {
      return reader.fail(field(at, "kind"),
                         "expected load, unload or bytes, got " + *kind);
    }
    out.changes.push_back(std::move(change));
  }
  return Error::success();
}

Error readSymbols(const FieldReader &reader, const json::Object &history,
                  CodeHistory &out) {
  const json::Value *value = history.get("symbols");
  if (!value)
    return Error::success();
  auto symbols = reader.array(history, "symbols", "codeHistory.symbols");
  if (!symbols)
    return symbols.takeError();
  for (size_t i = 0; i < (*symbols)->size(); ++i) {
    std::string at = field("codeHistory.symbols", i);
    auto object = reader.object(&(**symbols)[i], at);
    if (!object)
      return object.takeError();
    JitSymbol symbol;
    auto address = reader.integer(**object, "address", field(at, "address"));
    auto size = reader.integer(**object, "size", field(at, "size"));
    auto name = reader.string(**object, "name", field(at, "name"));
    if (!address)
      return address.takeError();
    if (!size)
      return size.takeError();
    if (!name)
      return name.takeError();
    symbol.address = *address;
    symbol.size = *size;
    symbol.name = *name;
    auto file = reader.optionalString(**object, "file", field(at, "file"));
    if (!file)
      return file.takeError();
    if (*file) {
      symbol.file = **file;
      auto line = reader.integer(**object, "line", field(at, "line"));
      if (!line)
        return line.takeError();
      symbol.line = uint32_t(*line);
    }
    out.symbols.push_back(std::move(symbol));
  }
  return Error::success();
}

} // namespace

Error writeCodeHistory(const CodeHistory &history, OutputDir &dir,
                       json::Object &root) {
  json::Array symbols;
  for (const JitSymbol &symbol : history.symbols) {
    json::Object object{{"address", hex(symbol.address)},
                        {"size", hex(symbol.size)},
                        {"name", symbol.name}};
    if (!symbol.file.empty()) {
      object["file"] = symbol.file;
      object["line"] = int64_t(symbol.line);
    }
    symbols.push_back(std::move(object));
  }
  if (!history.logDir.empty()) {
    root["codeLog"] = json::Object{{"dir", history.logDir},
                                   {"lastSeq", int64_t(history.logLastSeq)}};
    if (!symbols.empty())
      root["codeHistory"] = json::Object{{"changes", json::Array()},
                                         {"symbols", std::move(symbols)}};
    return Error::success();
  }
  if (history.changes.empty() && symbols.empty())
    return Error::success();
  Expected<std::unique_ptr<OutputFile>> binFile = dir.createFile(codeBinName);
  if (!binFile)
    return binFile.takeError();
  llvm::raw_ostream &bin = (*binFile)->os();
  uint64_t written = 0;
  json::Array changes;
  for (const CodeChange &change : history.changes) {
    json::Object object{{"seq", int64_t(change.seq)},
                        {"kind", kindName(change.kind)},
                        {"address", hex(change.address)},
                        {"size", hex(change.size)}};
    if (change.timeNs)
      object["timeNs"] = int64_t(change.timeNs);
    if (change.kind == CodeChange::Kind::Load)
      object["module"] = moduleJson(change.module);
    if (change.kind == CodeChange::Kind::Bytes) {
      object["codeOffset"] = hex(written);
      bin.write(reinterpret_cast<const char *>(change.bytes.data()),
                change.bytes.size());
      written += change.bytes.size();
      object["size"] = hex(change.bytes.size());
    }
    changes.push_back(std::move(object));
  }
  if (Error error = (*binFile)->commit())
    return error;
  root["codeHistory"] = json::Object{{"changes", std::move(changes)},
                                     {"symbols", std::move(symbols)}};
  return Error::success();
}

Error readCodeHistory(const FieldReader &reader, const json::Object &root,
                      StringRef dir, CodeHistory &history) {
  if (const json::Value *value = root.get("codeHistory")) {
    auto object = reader.object(value, "codeHistory");
    if (!object)
      return object.takeError();
    if (Error error = readChanges(reader, **object, dir, history))
      return error;
    if (Error error = readSymbols(reader, **object, history))
      return error;
  }
  if (const json::Value *value = root.get("codeLog")) {
    auto log = reader.object(value, "codeLog");
    if (!log)
      return log.takeError();
    auto logDir = reader.string(**log, "dir", "codeLog.dir");
    if (!logDir)
      return logDir.takeError();
    auto last = reader.integer(**log, "lastSeq", "codeLog.lastSeq");
    if (!last)
      return last.takeError();
    // lastSeq 0 is a log with no change yet, not "every change".
    if (*last)
      if (Error error = readQemuCodeLog(resolve(dir, *logDir), *last, history))
        return error;
  }
  return Error::success();
}

json::Array marksJson(const std::vector<ImageMark> &marks) {
  json::Array array;
  for (const ImageMark &mark : marks)
    array.push_back(json::Array{int64_t(mark.offset), int64_t(mark.seq)});
  return array;
}

Error readMarks(const FieldReader &reader, const json::Object &thread,
                StringRef at, std::vector<ImageMark> &marks) {
  if (!thread.get("imageMarks"))
    return Error::success();
  auto array = reader.array(thread, "imageMarks", field(at, "imageMarks"));
  if (!array)
    return array.takeError();
  for (size_t i = 0; i < (*array)->size(); ++i) {
    const json::Array *pair = (**array)[i].getAsArray();
    std::optional<int64_t> offset, seq;
    if (pair && pair->size() == 2) {
      offset = (*pair)[0].getAsInteger();
      seq = (*pair)[1].getAsInteger();
    }
    if (!offset || !seq)
      return reader.fail(field(field(at, "imageMarks"), i),
                         "expected [offset, seq]");
    marks.push_back({uint64_t(*offset), uint64_t(*seq)});
  }
  return Error::success();
}

Error checkJsonObjectCount(StringRef path, StringRef text) {
  size_t objects = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' && ++objects > kMaxJsonObjects) {
      return createStringError(
          formatv("{0}: offset {1}: more than {2} JSON objects (a bundle has "
                  "fewer; fix the bundle or record a shorter run)",
                  path, i, kMaxJsonObjects)
              .str());
    }
  }
  return Error::success();
}

Error checkHistory(StringRef path, const Snapshot &snapshot) {
  FieldReader reader(path.str());
  if (std::string problem = historyProblem(snapshot.code); !problem.empty())
    return reader.fail("codeHistory", problem);
  uint64_t lastSeq =
      std::max(snapshot.code.lastSeq(), snapshot.code.logLastSeq);
  for (const ThreadTrace &thread : snapshot.threads) {
    std::string at = formatv("threads[tid {0}].imageMarks", thread.tid).str();
    uint64_t previous = 0;
    for (const ImageMark &mark : thread.imageMarks) {
      if (mark.offset > thread.bytes.size() || mark.offset < previous)
        return reader.fail(at,
                           formatv("a mark at offset {0} is past the "
                                   "trace's {1} bytes or before the "
                                   "previous mark",
                                   int64_t(mark.offset), thread.bytes.size())
                               .str());
      previous = mark.offset;
      if (mark.seq > lastSeq)
        return reader.fail(at, formatv("a mark names seq {0}, after every "
                                       "change (the last is {1})",
                                       int64_t(mark.seq), lastSeq)
                                   .str());
    }
  }
  return Error::success();
}

} // namespace magic_trace::bundle_detail
