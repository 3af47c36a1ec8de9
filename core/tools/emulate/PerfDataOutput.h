//===- PerfDataOutput.h - magic-trace-emulate --perf-data -------*- C++ -*-===//
//
// The --perf-data option: a perf.data beside the bundle, for Linux perf's own
// Intel PT decoder (`perf script --itrace`). Kept out of Emulate.cpp so the
// main file stays about recording.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TOOLS_EMULATE_PERFDATAOUTPUT_H
#define MAGIC_TRACE_TOOLS_EMULATE_PERFDATAOUTPUT_H

#include "magic_trace/PacketWriter.h"
#include "magic_trace/Snapshot.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace magic_trace {

/// The category that holds --perf-data (shown next to the tool's own).
llvm::cl::OptionCategory &perfDataCategory();

/// Writes the perf.data that --perf-data names, if it names one; `writer`
/// says which packets the trace has (CYC, return compression); module copies
/// named relative to the bundle (-o) are written as absolute paths.
/// Errors: the file cannot be written.
llvm::Error writePerfDataOption(const Snapshot &snapshot,
                                const PacketWriter::Options &writer);

} // namespace magic_trace

#endif
