//===- CodeHistory.cpp - The code a process ran, over time ----------------===//
#include "magic_trace/CodeHistory.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <string>

namespace magic_trace {

bool codeChangeCanHold(const CodeChange &change, uint64_t seq) {
  return change.seq <= seq || !change.timeNs;
}

bool codeChangeWins(const CodeChange &candidate, const CodeChange &other,
                    uint64_t seq) {
  bool candidateHolds = codeChangeCanHold(candidate, seq);
  if (candidateHolds != codeChangeCanHold(other, seq))
    return candidateHolds;
  bool candidateSeen = candidate.seq <= seq;
  bool otherSeen = other.seq <= seq;
  if (candidateSeen != otherSeen)
    return candidateSeen;
  // Both seen: the later replaced the earlier. Neither: the earlier was
  // there first, and nothing replaced it before the later change.
  return candidateSeen ? candidate.seq > other.seq : candidate.seq < other.seq;
}

std::string badCodeRange(uint64_t address, uint64_t size) {
  if (size > kMaxCodeRange)
    return "a range of 0x" + llvm::utohexstr(size, /*LowerCase=*/true) +
           " bytes (more than a process can map)";
  if (address + size < address)
    return "a range that wraps past the end of the address space (0x" +
           llvm::utohexstr(address, /*LowerCase=*/true) + " + 0x" +
           llvm::utohexstr(size, /*LowerCase=*/true) + ")";
  return "";
}

std::string historyProblem(const CodeHistory &history) {
  uint64_t previous = 0;
  size_t loads = 0;
  uint64_t codeBytes = 0;
  for (const CodeChange &change : history.changes) {
    std::string at = "change " + std::to_string(change.seq);
    if (change.seq <= previous)
      return at + " comes after change " + std::to_string(previous) +
             " (seqs must ascend)";
    previous = change.seq;
    if (std::string bad = badCodeRange(change.address, change.size);
        !bad.empty())
      return at + " has " + bad;
    if (change.kind == CodeChange::Kind::Load && ++loads > kMaxHistoryLoads)
      return "more than " + std::to_string(kMaxHistoryLoads) +
             " file mappings (at " + at + ")";
    if (change.kind == CodeChange::Kind::Bytes) {
      if (change.bytes.size() != change.size)
        return at + " has " + std::to_string(change.bytes.size()) +
               " bytes for a size of " + std::to_string(change.size);
      codeBytes += change.size;
      if (codeBytes > kMaxHistoryCodeBytes)
        return "more than " + std::to_string(kMaxHistoryCodeBytes >> 20) +
               " MiB of code outside files (at " + at + ")";
    }
  }
  return "";
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
