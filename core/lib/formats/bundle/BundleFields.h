//===- BundleFields.h - Reading and writing a bundle's JSON -----*- C++ -*-===//
//
// Internal to core/lib/formats/bundle/: what Bundle.cpp and BundleHistory.cpp
// share to read a bundle's JSON files field by field (saying which file and
// field is wrong) and to write addresses the way LLDB reads them.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RECORD_BUNDLE_BUNDLEFIELDS_H
#define MAGIC_TRACE_RECORD_BUNDLE_BUNDLEFIELDS_H

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <optional>
#include <string>

namespace magic_trace::bundle_detail {

using llvm::createStringError;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

constexpr const char *traceJsonName = "trace.json";
constexpr const char *extrasJsonName = "magic-trace.json";
constexpr int64_t extrasFormatVersion = 1;

/// An address as LLDB's bundles write it: a 0x-hex string.
inline std::string hex(uint64_t value) { return formatv("{0:x}", value).str(); }

/// Reads JSON fields and says which file and field is wrong.
class FieldReader {
public:
  explicit FieldReader(std::string file) : file(std::move(file)) {}

  Error fail(StringRef field, StringRef problem) const {
    return createStringError(
        formatv("{0}: {1}: {2} (fix the bundle or record it again)", file,
                field, problem)
            .str());
  }

  Expected<const json::Object *> object(const json::Value *value,
                                        StringRef field) const {
    if (!value)
      return fail(field, "missing");
    if (const json::Object *result = value->getAsObject())
      return result;
    return fail(field, "expected an object");
  }

  Expected<const json::Array *> array(const json::Object &parent, StringRef key,
                                      StringRef field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (const json::Array *result = value->getAsArray())
      return result;
    return fail(field, "expected an array");
  }

  Expected<std::string> string(const json::Object &parent, StringRef key,
                               StringRef field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (std::optional<StringRef> result = value->getAsString())
      return result->str();
    return fail(field, "expected a string");
  }

  Expected<std::optional<std::string>>
  optionalString(const json::Object &parent, StringRef key,
                 StringRef field) const {
    // LLDB's `trace save` writes null for absent optional fields.
    const json::Value *value = parent.get(key);
    if (!value || value->kind() == json::Value::Null)
      return std::optional<std::string>();
    Expected<std::string> result = string(parent, key, field);
    if (!result)
      return result.takeError();
    return std::optional<std::string>(*result);
  }

  /// An integer, or (as LLDB allows for addresses) a decimal or 0x-hex
  /// string.
  Expected<uint64_t> integer(const json::Object &parent, StringRef key,
                             StringRef field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (std::optional<int64_t> number = value->getAsInteger())
      return static_cast<uint64_t>(*number);
    if (std::optional<uint64_t> number = value->getAsUINT64())
      return *number;
    if (std::optional<StringRef> text = value->getAsString()) {
      uint64_t number = 0;
      // getAsInteger with radix 0 accepts 0x-prefixed hex and decimal.
      if (!text->getAsInteger(0, number))
        return number;
    }
    return fail(field, "expected an integer or a decimal or hex string");
  }

  /// A JSON integer, nothing else: LLDB's parser reads cpuInfo, pid and tid
  /// as numbers and rejects "6", so a bundle we accept LLDB accepts too.
  Expected<uint64_t> number(const json::Object &parent, StringRef key,
                            StringRef field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (std::optional<int64_t> number = value->getAsInteger())
      return static_cast<uint64_t>(*number);
    if (std::optional<uint64_t> number = value->getAsUINT64())
      return *number;
    return fail(field, "expected a number, as LLDB's schema has it");
  }

  Expected<bool> boolean(const json::Object &parent, StringRef key,
                         StringRef field) const {
    const json::Value *value = parent.get(key);
    if (!value)
      return fail(field, "missing");
    if (std::optional<bool> result = value->getAsBoolean())
      return *result;
    return fail(field, "expected true or false");
  }

private:
  std::string file;
};

inline std::string field(StringRef parent, StringRef key) {
  return (parent + "." + key).str();
}
inline std::string field(StringRef parent, size_t index) {
  return (parent + "[" + Twine(index) + "]").str();
}

/// `path` inside `dir` unless it is absolute (or empty).
inline std::string resolve(StringRef dir, StringRef path) {
  if (path.empty() || llvm::sys::path::is_absolute(path))
    return path.str();
  llvm::SmallString<256> result(dir);
  llvm::sys::path::append(result, path);
  return std::string(result);
}

} // namespace magic_trace::bundle_detail

#endif
