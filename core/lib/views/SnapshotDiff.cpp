//===- SnapshotDiff.cpp - Two snapshots of one program side by side -------===//
#include "magic_trace/SnapshotDiff.h"

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

/// The program a snapshot is of: its executable's build-id (or path) when
/// the module list has it, else the process's name.
std::string programOf(const Snapshot &snapshot) {
  for (const Module &module : snapshot.modules)
    if (sys::path::filename(module.path) == snapshot.processName)
      return module.buildId.empty() ? module.path : module.buildId;
  return snapshot.processName;
}

/// The calls of every call path of `model` ("_start;main;fib"), frames of
/// decode errors left out. Paths are a trie of (caller's path, name), so
/// each distinct path is spelled once.
std::map<std::string, uint64_t> callPaths(const TraceModel &model) {
  struct Node {
    uint32_t parent;
    StringId name;
    uint64_t calls;
  };
  constexpr uint32_t Root = UINT32_MAX;
  std::vector<Node> nodes;
  DenseMap<std::pair<uint32_t, StringId>, uint32_t> index;
  for (const ThreadModel &thread : model.threads)
    for (const Segment &segment : thread.segments) {
      std::vector<uint32_t> nodeOf(segment.frames.size(), Root);
      uint32_t continued =
          segment.stitchedToPrevious ? segment.continuedFrames : 0;
      for (size_t i = 0; i < segment.frames.size(); ++i) {
        const Frame &frame = segment.frames[i];
        const FrameSite &site = thread.sites[frame.site];
        if (site.kind == FrameKind::DecodeError)
          continue;
        uint32_t parent =
            frame.parent == Frame::NoParent ? Root : nodeOf[frame.parent];
        auto [slot, inserted] =
            index.try_emplace({parent, site.name}, uint32_t(nodes.size()));
        if (inserted)
          nodes.push_back({parent, site.name, 0});
        nodeOf[i] = slot->second;
        if (i >= continued)
          ++nodes[slot->second].calls;
      }
    }
  std::vector<std::string> spelled(nodes.size());
  std::map<std::string, uint64_t> paths;
  // A parent is made before its children: one pass spells them all.
  for (size_t i = 0; i < nodes.size(); ++i) {
    StringRef name = model.strings.get(nodes[i].name);
    spelled[i] = nodes[i].parent == Root
                     ? name.str()
                     : spelled[nodes[i].parent] + ";" + name.str();
    paths[spelled[i]] += nodes[i].calls;
  }
  return paths;
}

/// The paths of `mine` that `other` lacks but whose caller's path it has
/// (or that are roots): where the two snapshots' calls part.
std::vector<CallPathChange>
pathsOnlyIn(const std::map<std::string, uint64_t> &mine,
            const std::map<std::string, uint64_t> &other) {
  std::vector<CallPathChange> only;
  for (const auto &[path, calls] : mine) {
    if (other.count(path))
      continue;
    size_t cut = path.rfind(';');
    if (cut != std::string::npos && !other.count(path.substr(0, cut)))
      continue;
    only.push_back({path, calls});
  }
  std::sort(only.begin(), only.end(),
            [](const CallPathChange &a, const CallPathChange &b) {
              return std::make_tuple(b.calls, StringRef(a.path)) <
                     std::make_tuple(a.calls, StringRef(b.path));
            });
  return only;
}

uint64_t magnitude(int64_t value) {
  return value < 0 ? uint64_t(0) - uint64_t(value) : uint64_t(value);
}

std::string signedCount(int64_t value) {
  if (value == 0)
    return "0";
  return (value > 0 ? "+" : "-") + withCommas(magnitude(value));
}

std::string signedTime(int64_t value) {
  if (value == 0)
    return "0";
  return (value > 0 ? "+" : "-") + formatDuration(magnitude(value));
}

json::Object sideJson(const FunctionStats &side) {
  return json::Object{{"calls", side.calls},
                      {"instructions", side.instructions},
                      {"self_ns", side.selfNs},
                      {"total_ns", side.totalNs},
                      {"estimated", side.estimated}};
}

json::Value pathsJson(const std::vector<CallPathChange> &paths, size_t rows) {
  json::Array list;
  for (size_t i = 0; i < std::min(rows, paths.size()); ++i)
    list.push_back(
        json::Object{{"path", paths[i].path}, {"calls", paths[i].calls}});
  return list;
}

} // namespace

Expected<SnapshotDiff> diffSnapshots(SnapshotLog &log, unsigned first,
                                     unsigned second, SymbolCache *cache) {
  Expected<SnapshotRecord *> a = log.find(first);
  if (!a)
    return a.takeError();
  Expected<SnapshotRecord *> b = log.find(second);
  if (!b)
    return b.takeError();
  if (*a == *b)
    return createStringError("both are snapshot %u (diff compares two "
                             "snapshots: give two numbers, e.g. 'magic-trace "
                             "diff 1 2')",
                             (*a)->number);
  for (unsigned number : {(*a)->number, (*b)->number})
    if (Expected<SnapshotRecord *> decoded = log.findDecoded(number); !decoded)
      return decoded.takeError();
  const Snapshot &one = (*a)->snapshot, &two = (*b)->snapshot;
  if (programOf(one) != programOf(two))
    return createStringError(
        "snapshots %u and %u are of different programs (%s and %s): diff "
        "compares two snapshots of one program",
        (*a)->number, (*b)->number, one.processName.c_str(),
        two.processName.c_str());

  SnapshotDiff diff;
  diff.first = (*a)->number;
  diff.second = (*b)->number;
  diff.program = one.processName;
  std::map<std::string, FunctionChange> byName;
  for (SnapshotRecord *record : {*a, *b}) {
    Expected<FunctionTable> table =
        functionTable(record->snapshot, record->result.model, cache);
    if (!table)
      return table.takeError();
    diff.unwalked += table->unwalked;
    for (FunctionStats &function : table->all) {
      FunctionChange &change = byName[function.name];
      FunctionStats &side = record == *a ? change.first : change.second;
      side = std::move(function);
    }
  }
  for (auto &[name, change] : byName) {
    // A side where it did not run still names it.
    for (FunctionStats *side : {&change.first, &change.second}) {
      const FunctionStats &other =
          side == &change.first ? change.second : change.first;
      if (side->name.empty()) {
        side->name = other.name;
        side->file = other.file;
        side->line = other.line;
        side->kind = other.kind;
      }
    }
    diff.functions.push_back(std::move(change));
  }
  auto key = [](const FunctionChange &change) {
    return std::make_tuple(magnitude(change.selfNs()),
                           magnitude(change.instructions()),
                           magnitude(change.calls()));
  };
  std::sort(diff.functions.begin(), diff.functions.end(),
            [&](const FunctionChange &x, const FunctionChange &y) {
              if (key(x) != key(y))
                return key(x) > key(y);
              return x.first.name < y.first.name;
            });
  std::map<std::string, uint64_t> pathsA = callPaths((*a)->result.model);
  std::map<std::string, uint64_t> pathsB = callPaths((*b)->result.model);
  diff.onlyFirst = pathsOnlyIn(pathsA, pathsB);
  diff.onlySecond = pathsOnlyIn(pathsB, pathsA);
  return diff;
}

std::string renderDiff(const SnapshotDiff &diff, size_t rows) {
  std::string out;
  raw_string_ostream os(out);
  size_t changed = std::count_if(diff.functions.begin(), diff.functions.end(),
                                 [](const FunctionChange &change) {
                                   return change.calls() ||
                                          change.instructions() ||
                                          change.selfNs() || change.totalNs();
                                 });
  os << "diff of snapshots " << diff.first << " and " << diff.second << " ("
     << diff.program << "): " << diff.functions.size() << " functions, "
     << changed << " changed; the largest change (self time, then "
     << "instructions, then calls) first\n";
  auto pair = [&](const std::string &one, const std::string &two) {
    return one + " -> " + two;
  };
  views::TextTable table;
  table.add({"calls " + std::to_string(diff.first) + " -> " +
                 std::to_string(diff.second),
             "change", "instructions", "change", "self", "change", "total",
             "change", "function"});
  size_t shown = std::min(rows, diff.functions.size());
  for (size_t i = 0; i < shown; ++i) {
    const FunctionChange &change = diff.functions[i];
    const FunctionStats &a = change.first, &b = change.second;
    table.add({pair(withCommas(a.calls), withCommas(b.calls)),
               signedCount(change.calls()),
               pair(withCommas(a.instructions), withCommas(b.instructions)),
               signedCount(change.instructions()),
               pair(views::timeText(a.selfNs, a.estimated),
                    views::timeText(b.selfNs, b.estimated)),
               signedTime(change.selfNs()),
               pair(views::timeText(a.totalNs, a.estimated),
                    views::timeText(b.totalNs, b.estimated)),
               signedTime(change.totalNs()), a.name});
  }
  os << table.render("  ");
  bool estimated =
      std::any_of(diff.functions.begin(), diff.functions.begin() + shown,
                  [](const FunctionChange &change) {
                    return change.first.estimated || change.second.estimated;
                  });
  if (diff.functions.size() > shown)
    os << "  ... " << withCommas(diff.functions.size() - shown)
       << " more functions (--rows N shows more)\n";
  auto paths = [&](const std::vector<CallPathChange> &only, unsigned in,
                   unsigned notIn) {
    if (only.empty())
      return;
    os << "call paths in snapshot " << in << " only (not in " << notIn
       << "):\n";
    size_t listed = std::min(rows, only.size());
    for (size_t i = 0; i < listed; ++i)
      os << "  " << withCommas(only[i].calls) << " call"
         << (only[i].calls == 1 ? "" : "s") << "  " << only[i].path << '\n';
    if (only.size() > listed)
      os << "  ... " << withCommas(only.size() - listed)
         << " more paths (--rows N shows more)\n";
  };
  paths(diff.onlyFirst, diff.first, diff.second);
  paths(diff.onlySecond, diff.second, diff.first);
  if (diff.onlyFirst.empty() && diff.onlySecond.empty())
    os << "every call path ran in both\n";
  if (estimated)
    os << views::kEstimatedNote;
  os << views::unwalkedNote(diff.unwalked);
  return out;
}

json::Value diffJson(const SnapshotDiff &diff, size_t rows) {
  json::Array functions;
  size_t shown = std::min(rows, diff.functions.size());
  for (size_t i = 0; i < shown; ++i) {
    const FunctionChange &change = diff.functions[i];
    json::Object row = functionJson(change.first);
    for (const char *field :
         {"calls", "instructions", "self_ns", "total_ns", "estimated"})
      row.erase(field);
    row["first"] = sideJson(change.first);
    row["second"] = sideJson(change.second);
    row["delta"] = json::Object{{"calls", change.calls()},
                                {"instructions", change.instructions()},
                                {"self_ns", change.selfNs()},
                                {"total_ns", change.totalNs()}};
    functions.push_back(std::move(row));
  }
  auto more = [&](size_t size) {
    return uint64_t(size - std::min(rows, size));
  };
  return json::Object{{"first", diff.first},
                      {"second", diff.second},
                      {"program", diff.program},
                      {"functions", std::move(functions)},
                      {"more", more(diff.functions.size())},
                      {"only_first", pathsJson(diff.onlyFirst, rows)},
                      {"only_second", pathsJson(diff.onlySecond, rows)},
                      {"more_only_first", more(diff.onlyFirst.size())},
                      {"more_only_second", more(diff.onlySecond.size())}};
}

} // namespace magic_trace
