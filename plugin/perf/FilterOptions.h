//===- FilterOptions.h - The dlfilter's --dlarg options ---------*- C++ -*-===//
//
// What `perf script --dlfilter libmagic-trace-perf.so --dlarg KEY=VALUE ...`
// asks of the filter: where to write the trace and in which format, which
// samples to take (a time window, threads, one process), where the modules'
// files are, and magic-trace's drop-same-symbol mode for perf's own text
// output. docs/dlfilter.md lists them.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PLUGIN_PERF_FILTEROPTIONS_H
#define MAGIC_TRACE_PLUGIN_PERF_FILTEROPTIONS_H

#include "magic_trace/FxtWriter.h"
#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include "magic_trace/Pipeline.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace magic_trace {

struct FilterOptions {
  /// out=FILE: the trace to write at the end; empty: none (only with
  /// drop=same-symbol, which filters perf's own output instead).
  std::string output;
  /// format=NAME, else the format `output`'s suffix names.
  std::optional<OutputFormat> format;
  FxtOptions fxt; ///< slice-args=compact|full.
  /// time=BEGIN,END in perf's clock (seconds as perf script prints them, or
  /// with an ns suffix); samples outside are left out. Either may be empty.
  uint64_t beginNs = 0;
  uint64_t endNs = UINT64_MAX;
  std::set<uint64_t> tids; ///< tid=T1,T2,...; empty: every thread.
  /// pid=P: only this process's threads; 0: every thread, modelled with
  /// the modules of the first sample's process (as magic-trace-decode).
  uint64_t pid = 0;
  /// symfs=DIR; empty: perf's own --symfs from its command line.
  std::string symfs;
  /// drop=same-symbol: return 1 (drop) for a branch whose source and
  /// target are in one function, but keep calls to a function's entry and
  /// returns (magic-trace's perf_dlfilter.c dropped recursion too).
  bool dropSameSymbol = false;
  bool stitch = true; ///< stitch=0 turns stitching off.
  /// window=DURATION|all and max-slices=N: the stretch of the trace written
  /// (Pipeline.h's WindowOptions; the default fits 10 M slices).
  WindowOptions window;
};

/// Parses perf's --dlarg values ("KEY=VALUE" each). Errors: an unknown key,
/// a value that makes no sense, a format neither named nor implied, nothing
/// to do (neither out= nor drop=); each message says what to pass instead.
llvm::Expected<FilterOptions>
parseFilterOptions(llvm::ArrayRef<const char *> args);

/// The --symfs value on perf's command line (`cmdline`: NUL-separated, as
/// /proc/self/cmdline), or "". perf gives a filter no call for it.
std::string symfsFromCommandLine(llvm::StringRef cmdline);

/// Fails when perf's command line (as for symfsFromCommandLine) asks
/// --itrace for samples without every branch ('b'): calls and returns
/// alone ('cr') hide jumps and tail calls, and the model would be wrong.
llvm::Error checkItrace(llvm::StringRef cmdline);

} // namespace magic_trace

#endif
