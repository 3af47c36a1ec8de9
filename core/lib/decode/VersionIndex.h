//===- VersionIndex.h - Which change holds an address at a seq --*- C++ -*-===//
//
// Internal to core/lib/decode/. The changes of a code history that hold
// code (Load and Bytes), indexed so that "which of them holds ADDRESS for a
// stretch marked SEQ" (codeChangeWins) costs O(log^2 n) whatever the
// history: a segment tree over the elementary intervals between the
// ranges' ends, each range stored at O(log n) nodes, each node's changes
// in seq order. A scan of every change that covers the address cost one
// step per version: a million versions of one page took over 20 s in
// libipt's read callback (issue 50).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODE_VERSIONINDEX_H
#define MAGIC_TRACE_DECODE_VERSIONINDEX_H

#include "magic_trace/CodeHistory.h"

#include <cstdint>
#include <vector>

namespace magic_trace::decode_detail {

class VersionIndex {
public:
  /// One range of code: [begin, end) held by changes[change].
  struct Range {
    uint64_t begin = 0;
    uint64_t end = 0;
    uint32_t change = 0;
  };

  /// Indexes `ranges` (empty ones are left out) of `changes`, which must
  /// outlive the index and not move.
  void build(const std::vector<CodeChange> &changes,
             const std::vector<Range> &ranges);

  /// Addresses [begin, end) that, at any one seq, share one holder.
  struct Span {
    uint64_t begin = 0;
    uint64_t end = 0;
  };

  /// The change holding `address` at `seq` (codeChangeWins among the
  /// ranges that cover it), or null when none does. With `span`, also the
  /// addresses around `address` that the same ranges cover (its elementary
  /// interval): at `seq`, each of them has the same holder.
  const CodeChange *holder(uint64_t address, uint64_t seq,
                           Span *span = nullptr) const;

private:
  /// The best of node's changes at `seq`: the last with a seq up to it,
  /// else the first without a time (they are in seq order), else none.
  const CodeChange *bestAt(size_t node, uint64_t seq) const;
  void insert(size_t node, size_t low, size_t high, size_t from, size_t to,
              uint32_t change);

  const std::vector<CodeChange> *changes = nullptr;
  /// The elementary intervals' starts, ascending; the last is an end.
  std::vector<uint64_t> bounds;
  /// Per node of the tree over [0, bounds.size() - 1), its changes.
  std::vector<std::vector<uint32_t>> nodes;
  /// Per node, its first change without a time (codeChangeCanHold), or
  /// UINT32_MAX.
  std::vector<uint32_t> firstUntimed;
};

} // namespace magic_trace::decode_detail

#endif
