//===- ValidatedWriters.h - Writers for a checked model ------- -*- C++ -*-===//
//
// writeFxt, writeChromeJson and writeFolded check the model
// (validateModel) before writing; these are the same writers without that
// check, for writeTraceFile, which checks once before it creates the file
// (the check walks every frame: ~5 % of a snapshot's work). Private to
// core/lib/write.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_WRITE_VALIDATEDWRITERS_H
#define MAGIC_TRACE_WRITE_VALIDATEDWRITERS_H

#include "magic_trace/FxtWriter.h"
#include "magic_trace/TraceWriters.h"

namespace magic_trace::writers {

/// The model passed validateModel.
llvm::Error writeValidatedFxt(const TraceModel &model, llvm::raw_ostream &os,
                              const FxtOptions &options);
void writeValidatedChromeJson(const TraceModel &model, llvm::raw_ostream &os,
                              const ChromeJsonOptions &options);
void writeValidatedFolded(const TraceModel &model, llvm::raw_ostream &os,
                          const FoldedOptions &options);

} // namespace magic_trace::writers

#endif
