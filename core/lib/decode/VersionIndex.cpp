//===- VersionIndex.cpp - Which change holds an address at a seq ----------===//
#include "VersionIndex.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace magic_trace::decode_detail {

void VersionIndex::build(const std::vector<CodeChange> &all,
                         const std::vector<Range> &ranges) {
  changes = &all;
  bounds.clear();
  nodes.clear();
  for (const Range &range : ranges)
    if (range.begin < range.end) {
      bounds.push_back(range.begin);
      bounds.push_back(range.end);
    }
  llvm::sort(bounds);
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  if (bounds.size() < 2)
    return;
  size_t leaves = bounds.size() - 1;
  nodes.resize(4 * leaves);
  // In seq order, so each node's list is sorted as it fills.
  std::vector<Range> bySeq(ranges);
  llvm::sort(bySeq, [&](const Range &a, const Range &b) {
    return std::make_pair(all[a.change].seq, a.change) <
           std::make_pair(all[b.change].seq, b.change);
  });
  for (const Range &range : bySeq) {
    if (range.begin >= range.end)
      continue;
    size_t from = llvm::lower_bound(bounds, range.begin) - bounds.begin();
    size_t to = llvm::lower_bound(bounds, range.end) - bounds.begin();
    insert(1, 0, leaves, from, to, range.change);
  }
  firstUntimed.assign(nodes.size(), UINT32_MAX);
  for (size_t node = 0; node < nodes.size(); ++node) {
    auto untimed = llvm::find_if(
        nodes[node], [&](uint32_t i) { return all[i].timeNs == 0; });
    if (untimed != nodes[node].end())
      firstUntimed[node] = *untimed;
  }
}

void VersionIndex::insert(size_t node, size_t low, size_t high, size_t from,
                          size_t to, uint32_t change) {
  // [from, to) and the node's [low, high) are in elementary intervals.
  if (to <= low || high <= from)
    return;
  if (from <= low && high <= to) {
    nodes[node].push_back(change);
    return;
  }
  size_t middle = low + (high - low) / 2;
  insert(2 * node, low, middle, from, to, change);
  insert(2 * node + 1, middle, high, from, to, change);
}

const CodeChange *VersionIndex::bestAt(size_t index, uint64_t seq) const {
  const std::vector<uint32_t> &node = nodes[index];
  auto seen = llvm::upper_bound(node, seq, [&](uint64_t value, uint32_t i) {
    return value < (*changes)[i].seq;
  });
  if (seen != node.begin())
    return &(*changes)[*std::prev(seen)];
  // None seen: the first that was there before (codeChangeCanHold).
  uint32_t first = firstUntimed[index];
  return first == UINT32_MAX ? nullptr : &(*changes)[first];
}

const CodeChange *VersionIndex::holder(uint64_t address, uint64_t seq,
                                       Span *span) const {
  if (bounds.size() < 2 || address < bounds.front() ||
      address >= bounds.back()) {
    // Outside every range: before the first, or from the last end on.
    if (span)
      *span = bounds.size() < 2          ? Span{0, UINT64_MAX}
              : address < bounds.front() ? Span{0, bounds.front()}
                                         : Span{bounds.back(), UINT64_MAX};
    return nullptr;
  }
  size_t leaf = llvm::upper_bound(bounds, address) - bounds.begin() - 1;
  if (span)
    *span = {bounds[leaf], bounds[leaf + 1]};
  const CodeChange *best = nullptr;
  size_t node = 1, low = 0, high = bounds.size() - 1;
  while (true) {
    if (const CodeChange *candidate = bestAt(node, seq))
      if (!best || codeChangeWins(*candidate, *best, seq))
        best = candidate;
    if (high - low == 1)
      return best;
    size_t middle = low + (high - low) / 2;
    if (leaf < middle) {
      node = 2 * node;
      high = middle;
    } else {
      node = 2 * node + 1;
      low = middle;
    }
  }
}

} // namespace magic_trace::decode_detail
