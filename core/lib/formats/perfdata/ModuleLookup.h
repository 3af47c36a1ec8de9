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

/// The file to read for a module recorded as `path` with `buildId` (may be
/// empty): `path` when it exists with that build-id; else perf's build-id
/// cache, ~/.debug/.build-id/ab/cdef.../{elf,vdso}; for "[vdso]", a copy of
/// this process's own vdso when its build-id is `buildId` (the same kernel);
/// else `path` if it exists at all, else "".
/// With `symfs`, `symfs`/`path` is tried first, as perf's --symfs does.
std::string lookUpModuleFile(llvm::StringRef path, llvm::StringRef buildId,
                             llvm::StringRef symfs = "");

} // namespace magic_trace

#endif
