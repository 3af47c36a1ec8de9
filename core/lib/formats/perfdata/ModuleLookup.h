//===- ModuleLookup.h - Find a recorded module's file here -------*- C++
//-*-===//
//
// A perf.data names each module by its path and build-id on the recording
// machine; these find the file to read on this one. Private to
// formats/perfdata.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RECORD_PERF_MODULELOOKUP_H
#define MAGIC_TRACE_RECORD_PERF_MODULELOOKUP_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace magic_trace {

/// The GNU build-id of the ELF file at `path` as lower-case hex, or "" when
/// it has none or cannot be read.
std::string elfFileBuildId(llvm::StringRef path);

// lookUpModuleFile, which finds the file to read, is public (PerfData.h):
// the perf dlfilter (plugin/perf) finds the modules perf names with it.

} // namespace magic_trace

#endif
