//===- RefBundle.cpp - trace.json reader for the reference decoder --------===//
//
// Reads LLDB's intel-pt bundle schema with llvm::json. Every error names the
// field by its JSON path ("processes[0].modules[2].loadAddress").
//
//===----------------------------------------------------------------------===//
#include "RefBundle.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace ref_decode {

namespace {

/// Reads fields of one trace.json, naming the file and field in errors.
class FieldReader {
public:
  FieldReader(StringRef jsonPath, StringRef bundleDir)
      : jsonPath(jsonPath.str()), bundleDir(bundleDir.str()) {}

  Error fail(const Twine &field, const Twine &problem) const {
    return createStringError(jsonPath + ": " + field + ": " + problem);
  }

  /// The object `value`, or an error when it is missing or not an object.
  Expected<const json::Object *> object(const json::Value *value,
                                        const Twine &field) const {
    if (!value)
      return fail(field, "missing");
    if (const json::Object *result = value->getAsObject())
      return result;
    return fail(field, "expected an object");
  }

  /// The array `parent[key]`.
  Expected<const json::Array *> array(const json::Object &parent, StringRef key,
                                      const Twine &field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (const json::Array *result = value->getAsArray())
      return result;
    return fail(field, "expected an array");
  }

  /// The string `parent[key]`; std::nullopt when absent or null and
  /// `optional` is set.
  Expected<std::optional<std::string>> string(const json::Object &parent,
                                              StringRef key, const Twine &field,
                                              bool optional) const {
    const json::Value *value = parent.get(key);
    if (!value || value->kind() == json::Value::Null) {
      if (optional)
        return std::optional<std::string>();
      return fail(field, "missing");
    }
    if (std::optional<StringRef> text = value->getAsString())
      return std::optional<std::string>(text->str());
    return fail(field, "expected a string");
  }

  /// An unsigned integer: a JSON number, or a decimal or 0x-hex string (LLDB
  /// writes addresses either way).
  Expected<uint64_t> integer(const json::Object &parent, StringRef key,
                             const Twine &field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (std::optional<int64_t> number = value->getAsInteger())
      if (*number >= 0)
        return static_cast<uint64_t>(*number);
    if (std::optional<uint64_t> number = value->getAsUINT64())
      return *number;
    uint64_t number = 0;
    if (std::optional<StringRef> text = value->getAsString())
      if (!text->trim().getAsInteger(0, number))
        return number;
    return fail(field, "expected an unsigned integer or a decimal or hex "
                       "string");
  }

  /// `path` made absolute against the bundle directory.
  std::string resolve(StringRef path) const {
    if (sys::path::is_absolute(path))
      return path.str();
    SmallString<256> result(bundleDir);
    sys::path::append(result, path);
    return std::string(result);
  }

private:
  std::string jsonPath;
  std::string bundleDir;
};

std::string at(const Twine &parent, size_t index) {
  return (parent + "[" + Twine(index) + "]").str();
}

Expected<RefCpu> readCpu(const FieldReader &reader, const json::Object &root) {
  auto cpu = reader.object(root.get("cpuInfo"), "cpuInfo");
  if (!cpu)
    return cpu.takeError();
  RefCpu result;
  auto vendor = reader.string(**cpu, "vendor", "cpuInfo.vendor", false);
  if (!vendor)
    return vendor.takeError();
  result.vendor = **vendor;
  unsigned *fields[] = {&result.family, &result.model, &result.stepping};
  const char *names[] = {"family", "model", "stepping"};
  for (size_t i = 0; i < 3; ++i) {
    auto value = reader.integer(**cpu, names[i], Twine("cpuInfo.") + names[i]);
    if (!value)
      return value.takeError();
    *fields[i] = static_cast<unsigned>(*value);
  }
  return result;
}

Expected<RefThread> readThread(const FieldReader &reader,
                               const json::Value &value, const Twine &field) {
  auto thread = reader.object(&value, field);
  if (!thread)
    return thread.takeError();
  RefThread result;
  auto tid = reader.integer(**thread, "tid", field + ".tid");
  if (!tid)
    return tid.takeError();
  result.tid = *tid;
  auto trace = reader.string(**thread, "iptTrace", field + ".iptTrace", true);
  if (!trace)
    return trace.takeError();
  if (*trace)
    result.tracePath = reader.resolve(**trace);
  return result;
}

/// A module: `file` (the copy in the bundle) when given, else `systemPath`.
Expected<RefModule> readModule(const FieldReader &reader,
                               const json::Value &value, const Twine &field) {
  auto module = reader.object(&value, field);
  if (!module)
    return module.takeError();
  auto systemPath =
      reader.string(**module, "systemPath", field + ".systemPath", false);
  if (!systemPath)
    return systemPath.takeError();
  auto file = reader.string(**module, "file", field + ".file", true);
  if (!file)
    return file.takeError();
  auto load = reader.integer(**module, "loadAddress", field + ".loadAddress");
  if (!load)
    return load.takeError();
  auto uuid = reader.string(**module, "uuid", field + ".uuid", true);
  if (!uuid)
    return uuid.takeError();
  RefModule result;
  result.path = reader.resolve(*file ? **file : **systemPath);
  result.loadAddress = *load;
  if (*uuid)
    for (char c : **uuid)
      if (c != '-')
        result.uuid.push_back(toLower(c));
  return result;
}

Expected<RefProcess> readProcess(const FieldReader &reader,
                                 const json::Value &value,
                                 const std::string &field) {
  auto process = reader.object(&value, field);
  if (!process)
    return process.takeError();
  RefProcess result;
  auto pid = reader.integer(**process, "pid", field + ".pid");
  if (!pid)
    return pid.takeError();
  result.pid = *pid;
  std::string threadsField = field + ".threads";
  auto threads = reader.array(**process, "threads", threadsField);
  if (!threads)
    return threads.takeError();
  for (size_t i = 0; i < (*threads)->size(); ++i) {
    auto thread = readThread(reader, (**threads)[i], at(threadsField, i));
    if (!thread)
      return thread.takeError();
    result.threads.push_back(std::move(*thread));
  }
  std::string modulesField = field + ".modules";
  auto modules = reader.array(**process, "modules", modulesField);
  if (!modules)
    return modules.takeError();
  for (size_t i = 0; i < (*modules)->size(); ++i) {
    auto module = readModule(reader, (**modules)[i], at(modulesField, i));
    if (!module)
      return module.takeError();
    result.modules.push_back(std::move(*module));
  }
  return result;
}

/// The trace.json path and the bundle directory for `dirOrJson`.
std::pair<std::string, std::string> locate(StringRef dirOrJson) {
  if (sys::fs::is_directory(dirOrJson)) {
    SmallString<256> json(dirOrJson);
    sys::path::append(json, "trace.json");
    return {std::string(json), dirOrJson.str()};
  }
  StringRef dir = sys::path::parent_path(dirOrJson);
  return {dirOrJson.str(), dir.empty() ? std::string(".") : dir.str()};
}

} // namespace

Expected<RefBundle> readRefBundle(StringRef dirOrJson) {
  auto [jsonPath, bundleDir] = locate(dirOrJson);
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(jsonPath);
  if (!buffer)
    return createStringError("cannot read " + jsonPath + ": " +
                             buffer.getError().message());
  Expected<json::Value> root = json::parse((*buffer)->getBuffer());
  if (!root)
    return createStringError(jsonPath +
                             ": invalid JSON: " + toString(root.takeError()));
  FieldReader reader(jsonPath, bundleDir);
  auto object = reader.object(&*root, "top level");
  if (!object)
    return object.takeError();
  auto type = reader.string(**object, "type", "type", false);
  if (!type)
    return type.takeError();
  if (**type != "intel-pt")
    return reader.fail("type", "expected \"intel-pt\", not \"" + **type + "\"");
  RefBundle bundle;
  auto cpu = readCpu(reader, **object);
  if (!cpu)
    return cpu.takeError();
  bundle.cpu = std::move(*cpu);
  auto processes = reader.array(**object, "processes", "processes");
  if (!processes)
    return processes.takeError();
  for (size_t i = 0; i < (*processes)->size(); ++i) {
    auto process = readProcess(reader, (**processes)[i], at("processes", i));
    if (!process)
      return process.takeError();
    bundle.processes.push_back(std::move(*process));
  }
  return bundle;
}

} // namespace ref_decode
