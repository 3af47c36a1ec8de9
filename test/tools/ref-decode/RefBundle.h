//===- RefBundle.h - trace.json reader for the reference decoder -*- C++
//-*-===//
//
// A small reader of LLDB's intel-pt trace bundle schema, written apart from
// the core library's Bundle.cpp so that the reference decoder shares no code
// with the decoder it checks. It reads only what a libipt instruction decode
// needs: cpuInfo, and per process its threads (tid, iptTrace) and modules
// (file or systemPath, loadAddress, uuid). Paths come back resolved against the
// bundle directory.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_REF_DECODE_REFBUNDLE_H
#define MAGIC_TRACE_REF_DECODE_REFBUNDLE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ref_decode {

/// cpuInfo as the bundle states it.
struct RefCpu {
  std::string vendor;
  unsigned family = 0;
  unsigned model = 0;
  unsigned stepping = 0;
};

/// One traced thread; `tracePath` is empty when the bundle has no iptTrace.
struct RefThread {
  uint64_t tid = 0;
  std::optional<std::string> tracePath;
};

/// One module: the ELF file to read, where LLDB says it is loaded (the
/// runtime address of its first PT_LOAD) and its uuid (lower-case hex without
/// dashes; empty when not given).
struct RefModule {
  std::string path;
  uint64_t loadAddress = 0;
  std::string uuid;
};

struct RefProcess {
  uint64_t pid = 0;
  std::vector<RefThread> threads;
  std::vector<RefModule> modules;
};

struct RefBundle {
  RefCpu cpu;
  std::vector<RefProcess> processes;
};

/// Reads `dirOrJson` (a bundle directory or its trace.json). Errors name the
/// file and the field that is wrong.
llvm::Expected<RefBundle> readRefBundle(llvm::StringRef dirOrJson);

} // namespace ref_decode

#endif
