//===- TopFunctions.h - Where a snapshot's time went, per function -*- C++
//-*-===//
//
// `magic-trace report --top [N]`: every function of a snapshot's window
// with its calls (its frames, as the call tree lists them), its self and
// total time (the model's), and the instructions that ran in it (exact:
// the window decoded again), across threads and per thread, sorted by one
// of them. `magic-trace diff` compares two such tables. Host-neutral.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TOPFUNCTIONS_H
#define MAGIC_TRACE_TOPFUNCTIONS_H

#include "magic_trace/Snapshot.h"
#include "magic_trace/Symbolizer.h"
#include "magic_trace/TraceModel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// One function of a window (its frames and its code, by name).
struct FunctionStats {
  std::string name;
  std::string file; ///< Where it is, when known.
  uint32_t line = 0;
  FrameKind kind = FrameKind::Physical;
  /// Its frames: one per activation (a frame continued across a stitched
  /// gap counts once), as `report` lists them.
  uint64_t calls = 0;
  /// Instructions of its own code that ran (an inlined callee's are the
  /// callee's, as its self time is).
  uint64_t instructions = 0;
  uint64_t selfNs = 0;  ///< Time in it, less the time of its callees.
  uint64_t totalNs = 0; ///< Time in its outermost frames.
  /// Some of its instructions were timed from instruction counts.
  bool estimated = false;
};

struct ThreadFunctions {
  uint64_t tid = 0;
  std::vector<FunctionStats> functions;
};

struct FunctionTable {
  std::vector<FunctionStats> all; ///< Across threads.
  std::vector<ThreadFunctions> threads;
  /// Instructions whose code could not be read again (0 normally).
  uint64_t unwalked = 0;
};

/// The functions of `model`'s window (the snapshot's kept one, or another
/// decoded from it), unsorted; with `tid`, that thread's only (`all` is
/// then its). `cache` is the session's (its lock held). Errors: no thread
/// `tid` in the window, the decoder's.
llvm::Expected<FunctionTable> functionTable(const Snapshot &snapshot,
                                            const TraceModel &model,
                                            SymbolCache *cache,
                                            uint64_t tid = 0);

enum class FunctionOrder { Self, Total, Calls, Instructions };

/// "self", "total", "calls" or "instructions". Errors: anything else.
llvm::Expected<FunctionOrder> parseFunctionOrder(llvm::StringRef text);
const char *functionOrderName(FunctionOrder order);

/// Largest first by `order`, then by self time, then by name.
void sortFunctions(std::vector<FunctionStats> &functions, FunctionOrder order);

/// The table for the terminal, sorted by `order`: all threads, then each
/// thread when there are several; at most `rows` functions each and a
/// count of the rest.
std::string renderTop(FunctionTable table, unsigned snapshot,
                      FunctionOrder order, size_t rows);

/// {snapshot, by, all: {functions: [{name, file, line, kind, calls,
/// instructions, self_ns, total_ns, estimated}], more}, threads: [{tid,
/// functions, more}]}.
llvm::json::Value topJson(FunctionTable table, unsigned snapshot,
                          FunctionOrder order, size_t rows);

/// A function's row as JSON (its fields above).
llvm::json::Object functionJson(const FunctionStats &function);

} // namespace magic_trace

#endif
