//===- Bundle.h - LLDB intel-pt trace bundles, read and written -*- C++ -*-===//
//
// The on-disk form of a Snapshot. `trace.json` follows LLDB's schema
// (`lldb-22 -b -o 'trace schema intel-pt'`): cpuInfo, processes -> threads
// with iptTrace, modules with systemPath/loadAddress/uuid, and
// tscPerfZeroConversion; one .intelpt_trace per thread. What LLDB ignores and
// we need lives in separate files next to it:
//   magic-trace.json   module segments, stop context, process name, and
//                      whether each ring wrapped.
// loadBundle reads both ours and plain `trace save` bundles (modules +
// iptTrace only; segments are then derived from the ELF files).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_BUNDLE_H
#define MAGIC_TRACE_BUNDLE_H

#include "magic_trace/Snapshot.h"

#include "llvm/Support/Error.h"

namespace magic_trace {

/// Writes `snapshot` into `dir` (created if missing). On failure nothing that
/// looks like a valid bundle is left: trace.json is written last.
llvm::Error writeBundle(const Snapshot &snapshot, llvm::StringRef dir);

/// Loads a bundle from its directory or its trace.json. Errors say which file
/// and field is wrong.
llvm::Expected<Snapshot> loadBundle(llvm::StringRef dirOrJson);

} // namespace magic_trace

#endif
