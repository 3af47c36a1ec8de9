//===- Views.h - What report --annotate, report --top and diff print -*- C++
//-*-===//
//
// The views of kept snapshots as both debugger hosts print them: the host
// parses its command's options into a ViewRequest and prints the text
// (or the JSON) these return. Annotate.h, TopFunctions.h and
// SnapshotDiff.h compute them.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_VIEWS_H
#define MAGIC_TRACE_VIEWS_H

#include "magic_trace/Annotate.h"
#include "magic_trace/SnapshotDiff.h"
#include "magic_trace/SnapshotLog.h"
#include "magic_trace/TopFunctions.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace magic_trace {

/// Functions `report --top` lists by default.
constexpr size_t kDefaultTopRows = 20;

/// `report --annotate FUNCTION [--insns]` or `report --top [N] [--by
/// ORDER]`, with `--thread`, `--rows`, `--json`.
struct ViewRequest {
  std::string annotate; ///< FUNCTION; empty: not --annotate.
  bool instructions = false;
  bool top = false;
  size_t topRows = kDefaultTopRows;
  FunctionOrder order = FunctionOrder::Self;
  size_t rows = kDefaultViewRows; ///< --annotate's lines, diff's rows.
  uint64_t tid = 0;               ///< --thread; 0: every thread.
  bool json = false;
};

/// Whether `request` asks for a view rather than the call tree (or says
/// one of a view's options: renderReportView says what it lacks).
inline bool isView(const ViewRequest &request) {
  return request.top || !request.annotate.empty() || request.instructions;
}

/// The view `request` asks for, of `model` (snapshot `record`'s kept
/// window, or another one decoded from it), as text or one line of JSON.
/// `cache` is the session's (its lock held). Errors: --annotate with
/// --top, the view's (Annotate.h, TopFunctions.h).
llvm::Expected<std::string> renderReportView(const SnapshotRecord &record,
                                             const TraceModel &model,
                                             SymbolCache *cache,
                                             const ViewRequest &request);

/// `diff first second`: diffSnapshots' text, or one line of JSON, with at
/// most `rows` rows per list. Errors: diffSnapshots'.
llvm::Expected<std::string> renderDiffView(SnapshotLog &log, unsigned first,
                                           unsigned second, SymbolCache *cache,
                                           size_t rows, bool json);

} // namespace magic_trace

#endif
