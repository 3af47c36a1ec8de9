//===- SizeOptions.h - Sizes the debugger commands take ---------*- C++ -*-===//
//
// One reading of --snapshot-size, --keep-memory and --max-trace for both
// debugger hosts (LLDB's commands and GDB's, through its module) and
// magic-trace-decode: a number of bytes,
// decimal or 0x hexadecimal, with an optional unit K, M or G (powers of
// 1024; KB, KiB and the like read the same), in any case.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_SIZEOPTIONS_H
#define MAGIC_TRACE_SIZEOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace magic_trace {

/// A ring's size (--snapshot-size): a power of two of at least 4 KiB.
/// Errors: one line naming the text and what to give.
llvm::Expected<uint64_t> parseSnapshotSize(llvm::StringRef text);

/// A memory budget (--keep-memory): more than 0 bytes. Errors: one line
/// naming the text and what to give.
llvm::Expected<uint64_t> parseMemorySize(llvm::StringRef text);

/// The decode's budget (--max-trace, WindowOptions::maxTraceBytes): more
/// than 0 bytes. Errors: one line naming the text and what to give.
llvm::Expected<uint64_t> parseTraceBudget(llvm::StringRef text);

} // namespace magic_trace

#endif
