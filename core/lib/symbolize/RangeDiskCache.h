//===- RangeDiskCache.h - Symbol ranges kept across runs --------*- C++ -*-===//
//
// Internal to core/lib/symbolize/. The ranges an ObjectInfo computed for an
// object file (its chains, each for the largest range of file addresses in
// which it cannot change) are kept in the user's cache directory, one file
// per build-id and debug file, so that a later run (a later magic-trace-
// decode, a later debugger session) finds them without reading DWARF:
// decompressing a distribution's debug file and parsing its units was most
// of a small trace's decode (docs/symbolizer.md, "Ranges kept across
// runs"). A cache is only a shortcut: a file that is missing, damaged, of
// another version or not the user's own is ignored, and a range not in it
// is computed as before.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLIZE_RANGEDISKCACHE_H
#define MAGIC_TRACE_SYMBOLIZE_RANGEDISKCACHE_H

#include "ObjectInfo.h"

#include "magic_trace/StringTable.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>

namespace magic_trace {

/// The cache file for the object read from `objectPath` with build-id
/// `buildId` (hex), symbolized with `debugPath` (its separate debug file, or
/// "") and `options`; "" when there is none to use: no build-id, no file,
/// no usable cache directory, or MAGIC_TRACE_NO_SYMBOL_CACHE set. The name
/// carries what the ranges depend on: the object's and the debug file's
/// sizes and times (a stripped copy keeps its build-id; a -dbg package
/// installed later gives other ranges), the options, and the format's
/// version.
std::string rangeCachePath(llvm::StringRef buildId, llvm::StringRef objectPath,
                           llvm::StringRef debugPath,
                           const Symbolizer::Options &options);

/// Reads the ranges kept at `path` into `ranges` (empty before), their
/// strings interned in `strings`. Returns how many; 0 when the file is
/// missing or unusable (then `ranges` stays empty).
size_t loadRangeCache(llvm::StringRef path, StringTable &strings,
                      std::map<uint64_t, FileRange> &ranges);

/// Writes `ranges` to `path` privately (a new file renamed into place, so a
/// reader sees a whole file or the old one). Failures are ignored: the
/// next run computes the ranges again.
void saveRangeCache(llvm::StringRef path, const StringTable &strings,
                    const std::map<uint64_t, FileRange> &ranges);

} // namespace magic_trace

#endif
