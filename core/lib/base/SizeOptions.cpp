//===- SizeOptions.cpp - Sizes the debugger commands take -----------------===//
#include "magic_trace/SizeOptions.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>
#include <string>

namespace magic_trace {
namespace {

/// Bytes of `text` (SizeOptions.h), or nothing when it is not a size or
/// does not fit in 64 bits.
std::optional<uint64_t> parseBytes(llvm::StringRef text) {
  std::string lower = text.trim().lower();
  llvm::StringRef rest(lower);
  // The unit first: the digits of a hexadecimal number may end in "b".
  unsigned shift = 0;
  llvm::StringRef number = rest;
  for (llvm::StringRef suffix : {"ib", "b", ""}) {
    llvm::StringRef body = rest;
    if (!body.consume_back(suffix))
      continue;
    unsigned found = body.ends_with("k")   ? 10
                     : body.ends_with("m") ? 20
                     : body.ends_with("g") ? 30
                                           : 0;
    if (found) {
      shift = found;
      number = body.drop_back();
      break;
    }
  }
  bool hex = number.starts_with("0x");
  // Plain bytes may say so ("4096b"); a hexadecimal number's "b" is a digit.
  if (!shift && !hex)
    number.consume_back("b");
  uint64_t value = 0;
  llvm::StringRef digits = hex ? number.drop_front(2) : number;
  if (digits.empty() ||
      !llvm::all_of(digits, hex ? llvm::isHexDigit : llvm::isDigit) ||
      digits.getAsInteger(hex ? 16 : 10, value) ||
      value > (UINT64_MAX >> shift))
    return std::nullopt;
  return value << shift;
}

/// The one-line error `format` makes of `text`.
llvm::Error refused(const char *format, llvm::StringRef text) {
  return llvm::createStringError(llvm::formatv(format, text).str());
}

} // namespace

llvm::Expected<uint64_t> parseSnapshotSize(llvm::StringRef text) {
  std::optional<uint64_t> bytes = parseBytes(text);
  if (!bytes)
    return refused("bad size '{0}' (give bytes or K, M, G: e.g. 4M)", text);
  if (*bytes < 4096 || (*bytes & (*bytes - 1)))
    return refused("snapshot size {0} is not a power of two of at least 4K "
                   "(e.g. 64K, 4M)",
                   text);
  return *bytes;
}

llvm::Expected<uint64_t> parseMemorySize(llvm::StringRef text) {
  std::optional<uint64_t> bytes = parseBytes(text);
  if (!bytes || *bytes == 0)
    return refused("bad --keep-memory '{0}' (give bytes or K, M, G: e.g. 512M)",
                   text);
  return *bytes;
}

llvm::Expected<uint64_t> parseTraceBudget(llvm::StringRef text) {
  std::optional<uint64_t> bytes = parseBytes(text);
  if (!bytes || *bytes == 0)
    return refused("invalid --max-trace '{0}' (give the trace to decode in "
                   "bytes or K, M, G, above 0: e.g. 16M)",
                   text);
  return *bytes;
}

} // namespace magic_trace
