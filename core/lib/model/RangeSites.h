//===- RangeSites.h - The model builder's cache of symbol ranges -*- C++
//-*-===//
//
// Private to core/lib/model. The segment builder looks up the range of every
// block start and every range boundary inside a block, compares the inline
// chain of each with the open frames, and interns a site for every frame it
// pushes: on a 57 M-instruction trace that is ~10 M lookups through
// SymbolLookup and ~8 M SiteTable hashes for a few hundred distinct ranges.
// RangeSites answers all three from tables of its own: a direct-mapped table
// of the ranges looked up, each range's successor (the range at its end),
// per range the site ids of its chain, interned on first use (so ids come in
// the same order as when every push interned), and per chain level a node of
// a trie of inline chains, so that two chains agree up to a level exactly
// when their nodes there are equal (one compare instead of three per level).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_MODEL_RANGESITES_H
#define MAGIC_TRACE_LIB_MODEL_RANGESITES_H

#include "ModelInternal.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace magic_trace {
namespace model {

/// A node of the inline-chain trie: 0 is the empty chain (a physical frame);
/// a node names one inlined level and every level above it.
using ChainNode = uint32_t;

/// One range the builder looked up, with what its hot paths read of it.
struct RangeInfo {
  const SymbolRange *range = nullptr;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t functionEntry = 0; ///< range->functionEntry.
  StringId function = 0;      ///< range->frames[0].function, if any.
  /// range->frames.size(): 0 only for a lookup that breaks its contract.
  uint32_t levels = 0;
  uint32_t first = 0;   ///< Its level 0 in RangeSites' per-level tables.
  bool unknown = false; ///< range->unknown.
  /// The range containing `end`, once asked for (RangeSites::after).
  const RangeInfo *next = nullptr;
};

class RangeSites {
public:
  /// `lookup` must return the same range for every address inside it for
  /// as long as this object lives (the SymbolLookup contract: ranges are
  /// immutable and at stable addresses).
  RangeSites(SymbolLookup lookup, SiteTable &sites)
      : lookupFn(lookup), sites(sites), recent(size_t(1) << RecentBits) {}

  /// The range containing `address`.
  const RangeInfo &lookup(uint64_t address) {
    const RangeInfo *&entry =
        recent[(address * 0x9e3779b97f4a7c15ull) >> (64 - RecentBits)];
    if (!entry || address < entry->begin || address >= entry->end)
      miss(address, entry);
    return *entry;
  }

  /// The range containing `info.end` (lookup(info.end)), remembered.
  const RangeInfo &after(const RangeInfo &info) {
    if (!info.next)
      const_cast<RangeInfo &>(info).next = &lookup(info.end);
    return *info.next;
  }

  /// The site of chain level `level` of `info` (siteForRange), interned in
  /// the thread's table the first time it is asked for.
  SiteId site(const RangeInfo &info, size_t level) {
    SiteId id = ids[info.first + level];
    return id != Unset ? id : intern(info, level);
  }

  /// The trie node of `info`'s chain up to `level` (0 at level 0).
  ChainNode chain(const RangeInfo &info, size_t level) const {
    return chains[info.first + level];
  }

private:
  static constexpr unsigned RecentBits = 12;
  static constexpr SiteId Unset = UINT32_MAX;

  // The rare paths (a level's first use, a table miss, a range's first
  // lookup) are out of line, so that lookup() and site() inline into the
  // builder's loop.
  __attribute__((noinline)) SiteId intern(const RangeInfo &info, size_t level) {
    return ids[info.first + level] =
               sites.intern(siteForRange(*info.range, level));
  }

  __attribute__((noinline)) void miss(uint64_t address,
                                      const RangeInfo *&entry) {
    entry = &infoOf(lookupFn(address));
  }

  RangeInfo &infoOf(const SymbolRange &range);
  ChainNode childOf(ChainNode parent, const SymbolFrame &caller,
                    const SymbolFrame &callee);

  SymbolLookup lookupFn;
  SiteTable &sites;
  std::vector<const RangeInfo *> recent;
  std::deque<RangeInfo> infos; ///< Stable addresses.
  llvm::DenseMap<const SymbolRange *, RangeInfo *> infoFor;
  std::vector<SiteId> ids;       ///< Per range, one per chain level.
  std::vector<ChainNode> chains; ///< Parallel to ids.
  /// (parent node << 32 | callee function, call file << 32 | call line).
  llvm::DenseMap<std::pair<uint64_t, uint64_t>, ChainNode> children;
};

inline RangeInfo &RangeSites::infoOf(const SymbolRange &range) {
  auto [found, added] = infoFor.try_emplace(&range, nullptr);
  if (!added)
    return *found->second;
  RangeInfo &info = infos.emplace_back();
  found->second = &info;
  info.range = &range;
  info.begin = range.begin;
  info.end = range.end;
  info.functionEntry = range.functionEntry;
  info.levels = uint32_t(range.frames.size());
  info.first = uint32_t(ids.size());
  info.unknown = range.unknown;
  if (info.levels == 0)
    return info;
  info.function = range.frames[0].function;
  ids.resize(ids.size() + info.levels, Unset);
  chains.push_back(0);
  for (size_t level = 1; level < info.levels; ++level)
    chains.push_back(
        childOf(chains.back(), range.frames[level - 1], range.frames[level]));
  return info;
}

/// Inlined frame `callee` called from `caller`'s file and line, under the
/// chain `parent`: two inlined frames are the same instance when their
/// function and call site agree, and so are all the levels above them.
inline ChainNode RangeSites::childOf(ChainNode parent,
                                     const SymbolFrame &caller,
                                     const SymbolFrame &callee) {
  std::pair<uint64_t, uint64_t> key{uint64_t(parent) << 32 | callee.function,
                                    uint64_t(caller.file) << 32 | caller.line};
  auto [found, added] =
      children.try_emplace(key, ChainNode(children.size() + 1));
  return found->second;
}

} // namespace model
} // namespace magic_trace

#endif
