//===- Views.cpp - What report --annotate, report --top and diff print ----===//
#include "magic_trace/Views.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace magic_trace {

static std::string jsonLine(const json::Value &value) {
  std::string text;
  raw_string_ostream os(text);
  os << value << '\n';
  return text;
}

Expected<std::string> renderReportView(const SnapshotRecord &record,
                                       const TraceModel &model,
                                       SymbolCache *cache,
                                       const ViewRequest &request) {
  if (request.top && !request.annotate.empty())
    return createStringError("--annotate and --top are two views (ask for "
                             "one at a time)");
  if (request.instructions && request.annotate.empty())
    return createStringError("--insns lists the instructions of an "
                             "annotated function (add --annotate FUNCTION)");
  if (request.top) {
    Expected<FunctionTable> table =
        functionTable(record.snapshot, model, cache, request.tid);
    if (!table)
      return table.takeError();
    if (request.json)
      return jsonLine(topJson(std::move(*table), record.number, request.order,
                              request.topRows));
    return renderTop(std::move(*table), record.number, request.order,
                     request.topRows);
  }
  AnnotateOptions options;
  options.function = request.annotate;
  options.tid = request.tid;
  options.instructions = request.instructions;
  Expected<Annotation> annotation =
      annotateFunction(record.snapshot, model, cache, options);
  if (!annotation)
    return annotation.takeError();
  if (request.json)
    return jsonLine(annotationJson(*annotation, record.number, request.rows));
  return renderAnnotation(*annotation, record.number, request.rows);
}

Expected<std::string> renderDiffView(SnapshotLog &log, unsigned first,
                                     unsigned second, SymbolCache *cache,
                                     size_t rows, bool json) {
  Expected<SnapshotDiff> diff = diffSnapshots(log, first, second, cache);
  if (!diff)
    return diff.takeError();
  if (json)
    return jsonLine(diffJson(*diff, rows));
  return renderDiff(*diff, rows);
}

} // namespace magic_trace
