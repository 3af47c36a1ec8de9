//===- DebugFileLookup.h - Separate debug files -----------------*- C++ -*-===//
//
// Finds the separate debug file of an object file where llvm-symbolizer
// looks: by build-id under /usr/lib/debug, then by .gnu_debuglink. Internal
// to core/lib/symbolize/.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SYMBOLIZE_DEBUGFILELOOKUP_H
#define MAGIC_TRACE_SYMBOLIZE_DEBUGFILELOOKUP_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Object/ObjectFile.h"

#include <string>

namespace magic_trace {

/// The separate debug file of `object` (read from `path`), looked up where
/// llvm-symbolizer looks by default: first by build-id under
/// /usr/lib/debug/.build-id/, then by .gnu_debuglink next to the file, in its
/// .debug/ folder, and under /usr/lib/debug/<its folder>. Empty if none.
/// The environment variable MT_DEBUG_FILE_DIRS (colon-separated) replaces
/// /usr/lib/debug; set to the empty string, only the file's own folder is
/// searched.
std::string findDebugFile(const llvm::object::ObjectFile &object,
                          llvm::StringRef path);

} // namespace magic_trace

#endif
