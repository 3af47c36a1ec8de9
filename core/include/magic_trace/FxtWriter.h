//===- FxtWriter.h - Fuchsia trace format writer ----------------*- C++ -*-===//
//
// Writes a finished TraceModel as a Fuchsia trace (.fxt), the binary format
// Perfetto UI opens natively. Spec:
// https://fuchsia.dev/fuchsia-src/reference/tracing/trace-format
// The layout we emit is described in docs/formats.md.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_FXTWRITER_H
#define MAGIC_TRACE_FXTWRITER_H

#include "magic_trace/TraceModel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace magic_trace {

/// Format limits of the Fuchsia trace format.
namespace fxt {
/// Longest string a string record (or inline string) may hold.
constexpr size_t MaxStringLength = 32000;
/// Longest text we write inline in an event (gap reasons, names of process
/// and threads), so that a record never exceeds the 4095-word size field.
constexpr size_t MaxInlineStringLength = 1024;
/// String table indices are 15 bits; index 0 is not used.
constexpr unsigned MaxStringIndex = 0x7fff;
/// Thread table indices are 8 bits; index 0 means "inline thread".
constexpr unsigned MaxThreadIndex = 0xff;
/// Record sizes are counted in 64-bit words in a 12-bit field.
constexpr unsigned MaxRecordWords = 0xfff;
} // namespace fxt

/// What each frame's slice carries besides its name and times
/// (docs/formats.md, "Slice arguments").
enum class FxtSliceArgs {
  /// The frame's kind as the category (`magic-trace` for a physical frame,
  /// `magic-trace,inlined`, `magic-trace,syscall`, ...) and one argument
  /// `site` = "FILE:LINE 0xADDRESS" interned per site: 32 bytes a slice.
  Compact,
  /// Arguments `address`, `file`, `line`, `inlined` (for code), category
  /// `magic-trace` for every frame: 64 bytes a slice.
  Full,
};

/// Parses "compact" or "full"; the error names both.
llvm::Expected<FxtSliceArgs> parseFxtSliceArgs(llvm::StringRef text);

struct FxtOptions {
  /// Category of every event (Perfetto shows it, and filters by it); in
  /// FxtSliceArgs::Compact, frames other than physical ones add their kind.
  std::string category = "magic-trace";
  FxtSliceArgs sliceArgs = FxtSliceArgs::Compact;
  /// Compress the whole output as gzip (RFC 1952); Perfetto opens .fxt.gz.
  bool gzip = false;
};

/// Writes `model` as a Fuchsia trace to `os`. Frames become duration-complete
/// events (arguments: FxtSliceArgs) at displayed times that Perfetto nests as
/// the model (DisplayClock.h, docs/formats.md "Displayed times"); decode
/// errors and gaps between segments also become instant events, and a
/// thread whose times were estimated from instruction counts says so in an
/// instant at its start and a `clock` argument of its thread object. Strings
/// longer than fxt::MaxStringLength are truncated (ending in "..."). Any number
/// of threads and of distinct strings is supported (table slots are re-bound).
/// Errors: the model violates its invariants (validateModel); gzip requested
/// but this LLVM has no zlib (see fxtGzipAvailable).
llvm::Error writeFxt(const TraceModel &model, llvm::raw_ostream &os,
                     const FxtOptions &options = {});

/// True when writeFxt can compress (libLLVM was built with zlib).
bool fxtGzipAvailable();

/// The error of a .gz output when this LLVM has no zlib: one line, what to
/// write instead.
llvm::Error gzipUnavailableError();

/// Wraps `data` in a gzip member (RFC 1952) using LLVM's zlib.
/// Errors: no zlib in this LLVM.
llvm::Error gzipCompress(llvm::ArrayRef<uint8_t> data,
                         llvm::SmallVectorImpl<uint8_t> &out);

/// Truncates `text` to at most `limit` bytes without splitting a UTF-8
/// sequence; a truncated text ends in "...". Returns the text unchanged when
/// it fits.
std::string truncateUtf8(llvm::StringRef text, size_t limit);

} // namespace magic_trace

#endif
