//===- PerfModules.h - Modules from perf's maps -----------------*- C++ -*-===//
//
// perf resolves a sample's address through its own maps (MMAP2 records,
// build-ids, --symfs): the dso's path and build-id and the address's offset
// in the file. Those are what our symbolizer needs to open the same file at
// the same place, so the filter notes one address of each dso and places the
// file by it at the end (placeElfByMappings: lld's layouts too).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_PERF_PERFMODULES_H
#define MAGIC_TRACE_PLUGIN_PERF_PERFMODULES_H

#include "magic_trace/CodeHistory.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace magic_trace {

class PerfModules {
public:
  /// Runtime `address` is at `fileOffset` of `dso` (perf_dlfilter_al's dso
  /// and addr), whose build-id is `buildId` (raw bytes, may be empty).
  void note(llvm::StringRef dso, llvm::ArrayRef<uint8_t> buildId,
            uint64_t address, uint64_t fileOffset);

  /// One Module per dso noted, its file looked up under `symfs` first (as
  /// perf's --symfs) and in perf's build-id cache, placed by the noted
  /// address.
  std::vector<Module> modules(llvm::StringRef symfs) const;

private:
  struct Seen {
    std::string buildId; ///< Lower-case hex.
    LoadedSegment page;  ///< The page of the noted address.
  };
  std::map<std::string, Seen> byPath;
};

} // namespace magic_trace

#endif
