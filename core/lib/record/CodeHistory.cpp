//===- CodeHistory.cpp - The code a process ran, over time ----------------===//
#include "magic_trace/CodeHistory.h"

#include <algorithm>

namespace magic_trace {

bool codeChangeWins(const CodeChange &candidate, const CodeChange &other,
                    uint64_t seq) {
  bool candidateSeen = candidate.seq <= seq;
  bool otherSeen = other.seq <= seq;
  if (candidateSeen != otherSeen)
    return candidateSeen;
  // Both seen: the later replaced the earlier. Neither: the earlier was
  // there first, and nothing replaced it before the later change.
  return candidateSeen ? candidate.seq > other.seq : candidate.seq < other.seq;
}

std::pair<uint64_t, uint64_t> moduleExtent(const Module &module) {
  if (module.segments.empty())
    return {module.loadAddress, module.loadAddress + 1};
  uint64_t begin = UINT64_MAX, end = 0;
  for (const LoadedSegment &segment : module.segments) {
    begin = std::min(begin, segment.address);
    end = std::max(end, segment.address + segment.size);
  }
  return {begin, end};
}

namespace {

bool overlaps(std::pair<uint64_t, uint64_t> a,
              std::pair<uint64_t, uint64_t> b) {
  return a.first < b.second && b.first < a.second;
}

} // namespace

std::vector<Module> modulesOverTime(const std::vector<Module> &atStop,
                                    const CodeHistory &history) {
  std::vector<Module> modules;
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  // Latest first, so that a later load keeps the addresses it shares.
  for (auto change = history.changes.rbegin(); change != history.changes.rend();
       ++change) {
    if (change->kind != CodeChange::Kind::Load)
      continue;
    std::pair<uint64_t, uint64_t> range = moduleExtent(change->module);
    if (std::any_of(taken.begin(), taken.end(),
                    [&](const auto &other) { return overlaps(range, other); }))
      continue;
    taken.push_back(range);
    modules.push_back(change->module);
  }
  std::reverse(modules.begin(), modules.end());
  std::reverse(taken.begin(), taken.end());
  size_t fromHistory = taken.size();
  for (const Module &module : atStop) {
    std::pair<uint64_t, uint64_t> range = moduleExtent(module);
    auto shadow =
        std::find_if(taken.begin(), taken.begin() + fromHistory,
                     [&](const auto &other) { return overlaps(range, other); });
    if (shadow == taken.begin() + fromHistory) {
      modules.push_back(module);
      continue;
    }
    // The same file as the recorder logged: the debugger's entry says more
    // (build-id, a copy to read).
    Module &logged = modules[shadow - taken.begin()];
    if (logged.path == module.path)
      logged = module;
  }
  return modules;
}

} // namespace magic_trace
