//===- RangeSites.h - The model builder's cache of symbol ranges -*- C++
//-*-===//
//
// Private to core/lib/model. The segment builder looks up the range of every
// block start and every range boundary inside a block, and interns a site
// for every frame it pushes: on a 57 M-instruction trace that is ~10 M
// lookups through SymbolLookup and ~8 M SiteTable hashes for a few hundred
// distinct ranges. RangeSites answers both from tables of its own: a
// direct-mapped table of the ranges looked up, and per range the site ids
// of its chain, interned on first use (so ids come in the same order as
// when every push interned).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_LIB_MODEL_RANGESITES_H
#define MAGIC_TRACE_LIB_MODEL_RANGESITES_H

#include "ModelInternal.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <vector>

namespace magic_trace {
namespace model {

class RangeSites {
public:
  /// `lookup` must return the same range for every address inside it for
  /// as long as this object lives (the SymbolLookup contract: ranges are
  /// immutable and at stable addresses).
  RangeSites(SymbolLookup lookup, SiteTable &sites)
      : lookupFn(lookup), sites(sites), recent(size_t(1) << RecentBits) {}

  /// The range containing `address`, as `lookup` returns it.
  const SymbolRange &lookup(uint64_t address) {
    Entry &entry =
        recent[(address * 0x9e3779b97f4a7c15ull) >> (64 - RecentBits)];
    if (!entry.range || address < entry.range->begin ||
        address >= entry.range->end)
      miss(address, entry);
    last = entry;
    return *entry.range;
  }

  /// The site of chain level `level` of `range` (siteForRange), interned
  /// in the thread's table the first time it is asked for.
  SiteId site(const SymbolRange &range, size_t level) {
    uint32_t first = &range == last.range ? last.first : firstSite(range);
    SiteId id = ids[first + level];
    return id != Unset ? id : intern(range, level, first);
  }

private:
  static constexpr unsigned RecentBits = 12;
  static constexpr SiteId Unset = UINT32_MAX;

  struct Entry {
    const SymbolRange *range = nullptr;
    uint32_t first = 0; ///< Index of its level-0 site id in `ids`.
  };

  // The rare paths (a level's first use, a table miss, a range's first
  // lookup) are out of line, so that lookup() and site() inline into the
  // builder's loop.
  __attribute__((noinline)) SiteId intern(const SymbolRange &range,
                                          size_t level, uint32_t first) {
    return ids[first + level] = sites.intern(siteForRange(range, level));
  }

  __attribute__((noinline)) void miss(uint64_t address, Entry &entry) {
    const SymbolRange &range = lookupFn(address);
    entry = {&range, firstSite(range)};
  }

  __attribute__((noinline)) uint32_t firstSite(const SymbolRange &range) {
    auto [found, added] = firstOf.try_emplace(&range, uint32_t(ids.size()));
    if (added)
      ids.resize(ids.size() + range.frames.size(), Unset);
    return found->second;
  }

  SymbolLookup lookupFn;
  SiteTable &sites;
  std::vector<Entry> recent;
  Entry last; ///< The latest lookup's answer.
  llvm::DenseMap<const SymbolRange *, uint32_t> firstOf;
  std::vector<SiteId> ids; ///< Per range, one per chain level.
};

} // namespace model
} // namespace magic_trace

#endif
