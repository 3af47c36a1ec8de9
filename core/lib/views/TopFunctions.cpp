//===- TopFunctions.cpp - Where a snapshot's time went, per function ------===//
#include "magic_trace/TopFunctions.h"

#include "ExecutedCode.h"
#include "ViewSupport.h"

#include "magic_trace/TraceWriters.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace llvm;

namespace magic_trace {

namespace {

/// Instructions per function (the innermost frame of their range), per
/// thread.
class InstructionCounter : public views::RunVisitor {
public:
  struct Count {
    uint64_t instructions = 0;
    bool estimated = false;
  };

  void beginThread(uint64_t tid) override { current = &byThread[tid]; }
  void run(const views::CodeRun &run, InstructionWalker &) override {
    const SymbolFrame *inner = views::innermostFrame(*run.range);
    Count &count = (*current)[inner ? inner->function : 0];
    count.instructions += run.count;
    count.estimated |= run.estimated;
  }

  std::map<uint64_t, DenseMap<StringId, Count>> byThread;

private:
  DenseMap<StringId, Count> *current = nullptr;
};

/// The rows of one thread (tid) or of all (0): the model's frames, and the
/// instructions `counts` has for them (by name).
std::vector<FunctionStats>
rowsOf(const TraceModel &model, uint64_t tid,
       const std::map<std::string, InstructionCounter::Count> &counts) {
  std::map<std::string, FunctionStats> rows;
  for (auto &[name, totals] : views::frameTotals(model, tid)) {
    FunctionStats &row = rows[name];
    row.name = name;
    row.file = totals.file;
    row.line = totals.line;
    row.kind = totals.kind;
    row.calls = totals.calls;
    row.selfNs = totals.selfNs;
    row.totalNs = totals.totalNs;
  }
  for (const auto &[name, count] : counts) {
    auto [slot, inserted] = rows.try_emplace(name);
    slot->second.name = name;
    slot->second.instructions += count.instructions;
    slot->second.estimated |= count.estimated;
  }
  std::vector<FunctionStats> list;
  list.reserve(rows.size());
  for (auto &[name, row] : rows)
    list.push_back(std::move(row));
  return list;
}

uint64_t keyOf(const FunctionStats &function, FunctionOrder order) {
  switch (order) {
  case FunctionOrder::Self:
    return function.selfNs;
  case FunctionOrder::Total:
    return function.totalNs;
  case FunctionOrder::Calls:
    return function.calls;
  case FunctionOrder::Instructions:
    return function.instructions;
  }
  return 0;
}

/// "fib(int)  (emu_calls.cpp:14) [inlined]".
std::string functionText(const FunctionStats &function) {
  std::string text = function.name.empty() ? "[unnamed]" : function.name;
  if (!function.file.empty()) {
    text += "  (" + sys::path::filename(function.file).str();
    if (function.line)
      text += ":" + std::to_string(function.line);
    text += ")";
  }
  if (function.kind == FrameKind::Inlined)
    text += " [inlined]";
  return text;
}

void renderRows(raw_ostream &os, std::vector<FunctionStats> &functions,
                FunctionOrder order, size_t rows) {
  sortFunctions(functions, order);
  views::TextTable table;
  table.add({"self", "total", "calls", "instructions", "function"});
  size_t shown = std::min(rows, functions.size());
  for (size_t i = 0; i < shown; ++i) {
    const FunctionStats &function = functions[i];
    table.add({views::timeText(function.selfNs, function.estimated),
               views::timeText(function.totalNs, function.estimated),
               withCommas(function.calls), withCommas(function.instructions),
               functionText(function)});
  }
  os << table.render("  ");
  if (functions.size() > shown)
    os << "  ... " << withCommas(functions.size() - shown)
       << " more functions (--top " << functions.size() << " shows them all)\n";
}

json::Value rowsJson(std::vector<FunctionStats> &functions, FunctionOrder order,
                     size_t rows) {
  sortFunctions(functions, order);
  json::Array list;
  size_t shown = std::min(rows, functions.size());
  for (size_t i = 0; i < shown; ++i)
    list.push_back(functionJson(functions[i]));
  return json::Object{{"functions", std::move(list)},
                      {"more", uint64_t(functions.size() - shown)}};
}

} // namespace

Expected<FunctionTable> functionTable(const Snapshot &snapshot,
                                      const TraceModel &model,
                                      SymbolCache *cache, uint64_t tid) {
  if (Error error = views::checkThread(model, tid))
    return std::move(error);
  Expected<std::unique_ptr<views::ExecutedCode>> code =
      views::ExecutedCode::create(snapshot, cache);
  if (!code)
    return code.takeError();
  InstructionCounter counter;
  if (Error error = (*code)->walk(model, tid, counter))
    return std::move(error);
  FunctionTable table;
  table.unwalked = (*code)->unwalked();
  std::map<std::string, InstructionCounter::Count> all;
  for (const ThreadModel &thread : model.threads) {
    if (tid && thread.tid != tid)
      continue;
    std::map<std::string, InstructionCounter::Count> counts;
    for (const auto &[id, count] : counter.byThread[thread.tid]) {
      std::string name = (*code)->text(id).str();
      for (auto *into : {&counts[name], &all[name]}) {
        into->instructions += count.instructions;
        into->estimated |= count.estimated;
      }
    }
    table.threads.push_back({thread.tid, rowsOf(model, thread.tid, counts)});
  }
  table.all = rowsOf(model, tid, all);
  return table;
}

Expected<FunctionOrder> parseFunctionOrder(StringRef text) {
  for (FunctionOrder order :
       {FunctionOrder::Self, FunctionOrder::Total, FunctionOrder::Calls,
        FunctionOrder::Instructions})
    if (text == functionOrderName(order))
      return order;
  return createStringError("unknown order '%s' (use self, total, calls or "
                           "instructions)",
                           text.str().c_str());
}

const char *functionOrderName(FunctionOrder order) {
  switch (order) {
  case FunctionOrder::Self:
    return "self";
  case FunctionOrder::Total:
    return "total";
  case FunctionOrder::Calls:
    return "calls";
  case FunctionOrder::Instructions:
    return "instructions";
  }
  return "self";
}

void sortFunctions(std::vector<FunctionStats> &functions, FunctionOrder order) {
  std::sort(
      functions.begin(), functions.end(),
      [&](const FunctionStats &a, const FunctionStats &b) {
        return std::make_tuple(keyOf(b, order), b.selfNs, StringRef(a.name)) <
               std::make_tuple(keyOf(a, order), a.selfNs, StringRef(b.name));
      });
}

std::string renderTop(FunctionTable table, unsigned snapshot,
                      FunctionOrder order, size_t rows) {
  std::string out;
  raw_string_ostream os(out);
  uint64_t instructions = 0;
  bool estimated = false;
  for (const FunctionStats &function : table.all) {
    instructions += function.instructions;
    estimated |= function.estimated;
  }
  os << "snapshot " << snapshot << ": " << table.all.size() << " function"
     << (table.all.size() == 1 ? "" : "s") << " in " << table.threads.size()
     << " thread" << (table.threads.size() == 1 ? "" : "s") << ", "
     << withCommas(instructions) << " instructions, by "
     << (order == FunctionOrder::Self || order == FunctionOrder::Total
             ? std::string(functionOrderName(order)) + " time"
             : functionOrderName(order))
     << '\n';
  renderRows(os, table.all, order, rows);
  if (table.threads.size() > 1)
    for (ThreadFunctions &thread : table.threads) {
      os << "thread " << thread.tid << ":\n";
      renderRows(os, thread.functions, order, rows);
    }
  if (estimated)
    os << views::kEstimatedNote;
  os << views::unwalkedNote(table.unwalked);
  return out;
}

json::Object functionJson(const FunctionStats &function) {
  return json::Object{
      {"name", function.name},          {"file", function.file},
      {"line", function.line},          {"kind", frameKindName(function.kind)},
      {"calls", function.calls},        {"instructions", function.instructions},
      {"self_ns", function.selfNs},     {"total_ns", function.totalNs},
      {"estimated", function.estimated}};
}

json::Value topJson(FunctionTable table, unsigned snapshot, FunctionOrder order,
                    size_t rows) {
  json::Array threads;
  for (ThreadFunctions &thread : table.threads) {
    json::Object entry =
        std::move(*rowsJson(thread.functions, order, rows).getAsObject());
    entry["tid"] = thread.tid;
    threads.push_back(std::move(entry));
  }
  return json::Object{{"snapshot", snapshot},
                      {"by", functionOrderName(order)},
                      {"all", rowsJson(table.all, order, rows)},
                      {"threads", std::move(threads)}};
}

} // namespace magic_trace
