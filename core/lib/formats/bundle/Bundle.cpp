//===- Bundle.cpp - LLDB intel-pt trace bundles, read ---------------------===//
//
// trace.json follows `lldb-22 -b -o 'trace schema intel-pt'`; our extras live
// in magic-trace.json next to it (format in docs/emulator.md). Writing is
// BundleWrite.cpp.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/Bundle.h"
#include "magic_trace/InputFiles.h"

#include "BundleFields.h"
#include "BundleHistory.h"
#include "LldbView.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <new>
#include <optional>
#include <stdexcept>

using namespace llvm;

namespace magic_trace {

using namespace bundle_detail;

namespace {

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

Expected<json::Value> readJson(StringRef path) {
  Expected<std::unique_ptr<MemoryBuffer>> buffer =
      readInputFile(path, InputPlace::Named);
  if (!buffer)
    return buffer.takeError();
  if (!*buffer)
    return createStringError(
        formatv("cannot read {0}: no such file (check the bundle path)", path)
            .str());
  if (Error tooMany = checkJsonObjectCount(path, (*buffer)->getBuffer()))
    return std::move(tooMany);
  Expected<json::Value> value = json::parse((*buffer)->getBuffer());
  if (!value)
    return createStringError(formatv("{0}: invalid JSON: {1} (fix the file or "
                                     "record the bundle again)",
                                     path, toString(value.takeError()))
                                 .str());
  return std::move(*value);
}

/// Lower-case hex without dashes, whatever LLDB wrote.
std::string normalizeUuid(StringRef uuid) {
  std::string result;
  for (char c : uuid)
    if (c != '-')
      result.push_back(toLower(c));
  return result;
}

Error readCpu(const FieldReader &reader, const json::Object &root,
              Snapshot &snapshot) {
  auto cpu = reader.object(root.get("cpuInfo"), "cpuInfo");
  if (!cpu)
    return cpu.takeError();
  auto vendor = reader.string(**cpu, "vendor", "cpuInfo.vendor");
  auto family = reader.number(**cpu, "family", "cpuInfo.family");
  auto model = reader.number(**cpu, "model", "cpuInfo.model");
  auto stepping = reader.number(**cpu, "stepping", "cpuInfo.stepping");
  if (!vendor)
    return vendor.takeError();
  if (!family)
    return family.takeError();
  if (!model)
    return model.takeError();
  if (!stepping)
    return stepping.takeError();
  snapshot.cpu.vendor = *vendor;
  snapshot.cpu.family = static_cast<unsigned>(*family);
  snapshot.cpu.model = static_cast<unsigned>(*model);
  snapshot.cpu.stepping = static_cast<unsigned>(*stepping);
  return Error::success();
}

Error readTimeConversion(const FieldReader &reader, const json::Object &root,
                         Snapshot &snapshot) {
  const json::Value *value = root.get("tscPerfZeroConversion");
  if (!value || value->kind() == json::Value::Null)
    return Error::success(); // optional in LLDB's schema
  auto conversion = reader.object(value, "tscPerfZeroConversion");
  if (!conversion)
    return conversion.takeError();
  auto mult = reader.integer(**conversion, "timeMult",
                             "tscPerfZeroConversion.timeMult");
  auto shift = reader.integer(**conversion, "timeShift",
                              "tscPerfZeroConversion.timeShift");
  auto zero = reader.integer(**conversion, "timeZero",
                             "tscPerfZeroConversion.timeZero");
  if (!mult)
    return mult.takeError();
  if (!shift)
    return shift.takeError();
  if (!zero)
    return zero.takeError();
  if (*shift > 63)
    return reader.fail("tscPerfZeroConversion.timeShift", "above 63");
  snapshot.time.timeMult = static_cast<uint32_t>(*mult);
  snapshot.time.timeShift = static_cast<uint16_t>(*shift);
  snapshot.time.timeZero = *zero;
  return Error::success();
}

/// A process's threads. A thread already read (from an earlier process: an
/// epoch of our own bundles, LldbView.h) gets this trace appended.
Error readThreads(const FieldReader &reader, const json::Object &process,
                  StringRef processAt, StringRef dir, Snapshot &snapshot) {
  std::string threadsAt = field(processAt, "threads");
  auto threads = reader.array(process, "threads", threadsAt);
  if (!threads)
    return threads.takeError();
  for (size_t i = 0; i < (*threads)->size(); ++i) {
    std::string at = field(threadsAt, i);
    auto thread = reader.object(&(**threads)[i], at);
    if (!thread)
      return thread.takeError();
    auto tid = reader.number(**thread, "tid", field(at, "tid"));
    if (!tid)
      return tid.takeError();
    // A later epoch's piece of a thread (LldbView.h) says whose it is.
    if (std::optional<int64_t> owner = (*thread)->getInteger("magicTraceTid"))
      *tid = *owner;
    // LLDB 15 named the file "traceBuffer"; LLDB 16 on reads only
    // "iptTrace" and would decode such a thread to nothing. Same meaning,
    // so we read either (and write "iptTrace").
    StringRef key = (*thread)->get("iptTrace") || !(*thread)->get("traceBuffer")
                        ? "iptTrace"
                        : "traceBuffer";
    auto trace = reader.optionalString(**thread, key, field(at, key));
    if (!trace)
      return trace.takeError();
    ThreadTrace result;
    result.tid = *tid;
    if (*trace) {
      std::string path = resolve(dir, **trace);
      Expected<bool> read =
          readInputFileInto(path, InputPlace::Named, result.bytes);
      if (!read)
        return reader.fail(field(at, key), toString(read.takeError()));
      if (!*read)
        return reader.fail(
            field(at, key),
            formatv("cannot read {0}: no such file", path).str());
      // The next piece's PSB+ that a piece carries for LLDB (LldbView.h).
      uint64_t tail = (*thread)->getInteger("magicTraceTail").value_or(0);
      result.bytes.resize(result.bytes.size() -
                          std::min<uint64_t>(tail, result.bytes.size()));
    }
    auto earlier = llvm::find_if(snapshot.threads, [&](const ThreadTrace &t) {
      return t.tid == result.tid;
    });
    if (earlier == snapshot.threads.end())
      snapshot.threads.push_back(std::move(result));
    else
      earlier->bytes.insert(earlier->bytes.end(), result.bytes.begin(),
                            result.bytes.end());
  }
  return Error::success();
}

/// A process's modules, but the ELF files we wrote for LLDB of code outside
/// files (its code is in the code history) and modules an earlier process
/// listed.
Error readModules(const FieldReader &reader, const json::Object &process,
                  StringRef processAt, StringRef dir, Snapshot &snapshot) {
  std::string modulesAt = field(processAt, "modules");
  auto modules = reader.array(process, "modules", modulesAt);
  if (!modules)
    return modules.takeError();
  for (size_t i = 0; i < (*modules)->size(); ++i) {
    std::string at = field(modulesAt, i);
    auto module = reader.object(&(**modules)[i], at);
    if (!module)
      return module.takeError();
    if ((*module)->getBoolean("magicTraceCode").value_or(false))
      continue;
    auto path = reader.string(**module, "systemPath", field(at, "systemPath"));
    if (!path)
      return path.takeError();
    auto file = reader.optionalString(**module, "file", field(at, "file"));
    if (!file)
      return file.takeError();
    auto load =
        reader.integer(**module, "loadAddress", field(at, "loadAddress"));
    if (!load)
      return load.takeError();
    auto uuid = reader.optionalString(**module, "uuid", field(at, "uuid"));
    if (!uuid)
      return uuid.takeError();
    Module result;
    result.path = *path;
    if (*file)
      result.fileCopy = resolve(dir, **file);
    result.loadAddress = *load;
    if (*uuid)
      result.buildId = normalizeUuid(**uuid);
    if (llvm::none_of(snapshot.modules, [&](const Module &other) {
          return other.path == result.path &&
                 other.loadAddress == result.loadAddress;
        }))
      snapshot.modules.push_back(std::move(result));
  }
  return Error::success();
}

/// A plain `trace save` bundle has no segment list: the loaded segments are
/// the ELF file's PT_LOAD headers moved so that file offset 0 lands at
/// loadAddress. A file that cannot be read keeps an empty list (the decoder
/// reports the module as missing).
void deriveSegments(Module &module) {
  auto binary = object::ObjectFile::createObjectFile(module.fileToRead());
  if (!binary) {
    consumeError(binary.takeError());
    return;
  }
  auto *elf = dyn_cast<object::ELF64LEObjectFile>(binary->getBinary());
  if (!elf)
    return;
  auto headers = elf->getELFFile().program_headers();
  if (!headers) {
    consumeError(headers.takeError());
    return;
  }
  // The first PT_LOAD maps file offset 0 (or the page holding it).
  std::optional<uint64_t> offsetZeroVaddr;
  for (const auto &header : *headers)
    if (header.p_type == ELF::PT_LOAD && !offsetZeroVaddr)
      offsetZeroVaddr = header.p_vaddr - header.p_offset;
  if (!offsetZeroVaddr)
    return;
  for (const auto &header : *headers) {
    if (header.p_type != ELF::PT_LOAD)
      continue;
    LoadedSegment segment;
    segment.address = module.loadAddress + (header.p_vaddr - *offsetZeroVaddr);
    segment.size = header.p_filesz;
    segment.fileOffset = header.p_offset;
    segment.executable = header.p_flags & ELF::PF_X;
    module.segments.push_back(segment);
  }
}

/// ptTiming: the pt_config clock facts (optional).
Error readExtraTiming(const FieldReader &reader, const json::Object &root,
                      Snapshot &snapshot) {
  if (const json::Value *timingValue = root.get("ptTiming")) {
    auto timing = reader.object(timingValue, "ptTiming");
    if (!timing)
      return timing.takeError();
    uint64_t values[4];
    const char *keys[4] = {"mtcFreq", "nomFreq", "cpuid15Eax", "cpuid15Ebx"};
    for (int i = 0; i < 4; ++i) {
      auto number =
          reader.integer(**timing, keys[i], field("ptTiming", keys[i]));
      if (!number)
        return number.takeError();
      values[i] = *number;
    }
    snapshot.timing.mtcFreq = static_cast<uint8_t>(values[0]);
    snapshot.timing.nomFreq = static_cast<uint8_t>(values[1]);
    snapshot.timing.cpuid15Eax = static_cast<uint32_t>(values[2]);
    snapshot.timing.cpuid15Ebx = static_cast<uint32_t>(values[3]);
  }
  return Error::success();
}

/// modules[].segments, matched to trace.json's modules.
Error readExtraModules(const FieldReader &reader, const json::Object &root,
                       Snapshot &snapshot) {
  auto modules = reader.array(root, "modules", "modules");
  if (!modules)
    return modules.takeError();
  for (size_t i = 0; i < (*modules)->size(); ++i) {
    std::string at = field("modules", i);
    auto module = reader.object(&(**modules)[i], at);
    if (!module)
      return module.takeError();
    auto systemPath =
        reader.string(**module, "systemPath", field(at, "systemPath"));
    if (!systemPath)
      return systemPath.takeError();
    auto load =
        reader.integer(**module, "loadAddress", field(at, "loadAddress"));
    if (!load)
      return load.takeError();
    // Match by path and load address: the same file may be mapped twice.
    Module *target = nullptr;
    for (Module &candidate : snapshot.modules)
      if (candidate.path == *systemPath && candidate.loadAddress == *load)
        target = &candidate;
    if (!target)
      return reader.fail(at, formatv("module {0} at {1:x} is not in "
                                     "trace.json",
                                     *systemPath, *load)
                                 .str());
    auto segments = reader.array(**module, "segments", field(at, "segments"));
    if (!segments)
      return segments.takeError();
    for (size_t j = 0; j < (*segments)->size(); ++j) {
      std::string segmentAt = field(field(at, "segments"), j);
      auto segment = reader.object(&(**segments)[j], segmentAt);
      if (!segment)
        return segment.takeError();
      auto address =
          reader.integer(**segment, "address", field(segmentAt, "address"));
      auto size = reader.integer(**segment, "size", field(segmentAt, "size"));
      auto offset = reader.integer(**segment, "fileOffset",
                                   field(segmentAt, "fileOffset"));
      auto executable = reader.boolean(**segment, "executable",
                                       field(segmentAt, "executable"));
      if (!address)
        return address.takeError();
      if (!size)
        return size.takeError();
      if (!offset)
        return offset.takeError();
      if (!executable)
        return executable.takeError();
      target->segments.push_back(
          LoadedSegment{*address, *size, *offset, *executable});
    }
  }
  return Error::success();
}

/// threads[].wrapped.
Error readExtraThreads(const FieldReader &reader, const json::Object &root,
                       Snapshot &snapshot) {
  auto threads = reader.array(root, "threads", "threads");
  if (!threads)
    return threads.takeError();
  for (size_t i = 0; i < (*threads)->size(); ++i) {
    std::string at = field("threads", i);
    auto thread = reader.object(&(**threads)[i], at);
    if (!thread)
      return thread.takeError();
    auto tid = reader.integer(**thread, "tid", field(at, "tid"));
    if (!tid)
      return tid.takeError();
    auto wrapped = reader.boolean(**thread, "wrapped", field(at, "wrapped"));
    if (!wrapped)
      return wrapped.takeError();
    std::vector<ImageMark> marks;
    if (Error error = readMarks(reader, **thread, at, marks))
      return error;
    for (ThreadTrace &trace : snapshot.threads)
      if (trace.tid == *tid) {
        trace.wrapped = *wrapped;
        trace.imageMarks = marks;
      }
  }
  return Error::success();
}

/// stop[]: each thread's stack at the stop.
Error readStopContext(const FieldReader &reader, const json::Object &root,
                      Snapshot &snapshot) {
  auto stop = reader.array(root, "stop", "stop");
  if (!stop)
    return stop.takeError();
  for (size_t i = 0; i < (*stop)->size(); ++i) {
    std::string at = field("stop", i);
    auto thread = reader.object(&(**stop)[i], at);
    if (!thread)
      return thread.takeError();
    ThreadStop result;
    auto tid = reader.integer(**thread, "tid", field(at, "tid"));
    if (!tid)
      return tid.takeError();
    result.tid = *tid;
    auto triggered =
        reader.boolean(**thread, "triggered", field(at, "triggered"));
    if (!triggered)
      return triggered.takeError();
    result.triggered = *triggered;
    auto frames = reader.array(**thread, "frames", field(at, "frames"));
    if (!frames)
      return frames.takeError();
    for (size_t j = 0; j < (*frames)->size(); ++j) {
      std::optional<StringRef> text = (**frames)[j].getAsString();
      uint64_t address = 0;
      if (!text || text->getAsInteger(0, address))
        return reader.fail(field(field(at, "frames"), j),
                           "expected a hex string");
      result.frames.push_back(address);
    }
    auto names =
        reader.array(**thread, "functionNames", field(at, "functionNames"));
    if (!names)
      return names.takeError();
    for (size_t j = 0; j < (*names)->size(); ++j) {
      std::optional<StringRef> text = (**names)[j].getAsString();
      if (!text)
        return reader.fail(field(field(at, "functionNames"), j),
                           "expected a string");
      result.functionNames.push_back(text->str());
    }
    snapshot.stop.push_back(std::move(result));
  }
  return Error::success();
}

/// magic-trace.json, on top of what trace.json gave `snapshot`.
Error readExtras(StringRef path, StringRef dir, Snapshot &snapshot) {
  Expected<json::Value> value = readJson(path);
  if (!value)
    return value.takeError();
  FieldReader reader(path.str());
  auto root = reader.object(&*value, "(top level)");
  if (!root)
    return root.takeError();
  auto version = reader.integer(**root, "formatVersion", "formatVersion");
  if (!version)
    return version.takeError();
  if (*version != uint64_t(extrasFormatVersion))
    return reader.fail("formatVersion",
                       formatv("version {0} is not supported (this build "
                               "reads version {1})",
                               *version, extrasFormatVersion)
                           .str());
  if (auto name = reader.optionalString(**root, "processName", "processName");
      !name)
    return name.takeError();
  else if (*name)
    snapshot.processName = **name;

  if (Error error = readExtraTiming(reader, **root, snapshot))
    return error;
  if (Error error = readExtraModules(reader, **root, snapshot))
    return error;
  if (Error error = readExtraThreads(reader, **root, snapshot))
    return error;
  if (Error error = readCodeHistory(reader, **root, dir, snapshot.code))
    return error;
  return readStopContext(reader, **root, snapshot);
}

} // namespace

namespace {

Expected<Snapshot> loadBundleUnguarded(StringRef dirOrJson) {
  std::string tracePath = dirOrJson.str();
  if (sys::fs::is_directory(dirOrJson))
    tracePath = resolve(dirOrJson, traceJsonName);
  // Absolute, so that paths inside the bundle stay valid when the snapshot
  // is written somewhere else.
  SmallString<256> absoluteTrace(tracePath);
  if (std::error_code ec = sys::fs::make_absolute(absoluteTrace))
    return createStringError(
        formatv("cannot resolve {0}: {1}", tracePath, ec.message()).str());
  tracePath = std::string(absoluteTrace);
  std::string dir = sys::path::parent_path(tracePath).str();

  Expected<json::Value> value = readJson(tracePath);
  if (!value)
    return value.takeError();
  FieldReader reader(tracePath);
  auto root = reader.object(&*value, "(top level)");
  if (!root)
    return root.takeError();
  auto type = reader.string(**root, "type", "type");
  if (!type)
    return type.takeError();
  if (*type != "intel-pt")
    return reader.fail("type", "expected \"intel-pt\", got \"" + *type + "\"");
  // Per-CPU bundles: "cpus" since LLDB 16, "cores" in LLDB 15.
  for (const char *key : {"cpus", "cores"})
    if (const json::Value *cpus = (*root)->get(key);
        cpus && cpus->kind() != json::Value::Null)
      return reader.fail(key, "per-cpu traces are not supported (record "
                              "per thread, as `trace save` of a per-thread "
                              "session does)");

  Snapshot snapshot;
  if (Error error = readCpu(reader, **root, snapshot))
    return std::move(error);
  if (Error error = readTimeConversion(reader, **root, snapshot))
    return std::move(error);
  auto processes = reader.array(**root, "processes", "processes");
  if (!processes)
    return processes.takeError();
  if ((*processes)->empty())
    return reader.fail("processes", "no process (a bundle of one process is "
                                    "supported)");
  // Several processes of one pid: the epochs of a code history that we
  // wrote for LLDB (LldbView.h); their threads' pieces join again.
  for (size_t i = 0; i < (*processes)->size(); ++i) {
    std::string at = field("processes", i);
    auto process = reader.object(&(**processes)[i], at);
    if (!process)
      return process.takeError();
    auto pid = reader.number(**process, "pid", field(at, "pid"));
    if (!pid)
      return pid.takeError();
    if (i > 0 && *pid != snapshot.pid)
      return reader.fail("processes",
                         formatv("{0} processes; exactly one is supported",
                                 (*processes)->size())
                             .str());
    snapshot.pid = *pid;
    if (Error error = readThreads(reader, **process, at, dir, snapshot))
      return std::move(error);
    if (Error error = readModules(reader, **process, at, dir, snapshot))
      return std::move(error);
  }

  std::string extrasPath = resolve(dir, extrasJsonName);
  if (sys::fs::exists(extrasPath)) {
    if (Error error = readExtras(extrasPath, dir, snapshot))
      return std::move(error);
    if (Error error = checkHistory(extrasPath, snapshot))
      return std::move(error);
    return snapshot;
  }
  // A plain LLDB bundle: what magic-trace.json would have said, derived.
  for (Module &module : snapshot.modules)
    deriveSegments(module);
  if (!snapshot.modules.empty())
    snapshot.processName = sys::path::filename(snapshot.modules[0].path).str();
  return snapshot;
}

} // namespace

Expected<Snapshot> loadBundle(StringRef dirOrJson) {
  // The parser's boundary: an allocation a hostile bundle makes fail is
  // its error, never an exception in the debugger (issue 50).
  try {
    return loadBundleUnguarded(dirOrJson);
  } catch (const std::length_error &) {
  } catch (const std::bad_alloc &) {
  }
  return createStringError(
      formatv("{0}: out of memory while reading the bundle (it is damaged or "
              "too large; record a shorter run)",
              dirOrJson)
          .str());
}

} // namespace magic_trace
