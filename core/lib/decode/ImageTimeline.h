//===- ImageTimeline.h - The code of each moment of a trace -----*- C++ -*-===//
//
// Internal to core/lib/decode/. A snapshot's code over time (CodeHistory.h)
// as the decoder reads it. A stretch of trace between two PSBs runs the code
// of one moment, named by a seq (every change up to it has happened):
//  - files: one libipt image per set of files in force (most histories have
//    one set: loads that replace nothing stay in every image), built the
//    first time a seq needs it, from sections in the shared section cache;
//  - code outside files (Bytes changes): read through the image's callback,
//    the version in force at the seq.
// Which change holds an address at a seq is codeChangeWins' rule. Without a
// history the timeline is one image of the snapshot's modules, as before.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODE_IMAGETIMELINE_H
#define MAGIC_TRACE_DECODE_IMAGETIMELINE_H

#include "Image.h"
#include "VersionIndex.h"

#include "magic_trace/Decoder.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace magic_trace::decode_detail {

class ImageTimeline {
public:
  /// Checks and caches every file the snapshot's modules and history name
  /// (problems go to `report`, one entry per module). The snapshot must
  /// outlive the timeline (its changes are not copied). Errors: libipt
  /// cannot allocate an image, the history is past CodeHistory.h's limits.
  static llvm::Expected<std::unique_ptr<ImageTimeline>>
  build(const Snapshot &snapshot, ReadMemoryFn readMemory,
        std::vector<ModuleImageStatus> &report);

  /// True when the snapshot has a code history: seqs matter.
  bool versioned() const { return changes && !changes->empty(); }

  /// The seq of the PSB at `offset` of `trace`, whose PSB+ holds `tsc` (0
  /// when none): its thread's last mark at or before `offset`, and every
  /// change with a time at or before the PSB's.
  uint64_t seqAt(const ThreadTrace &trace, uint64_t offset, uint64_t tsc) const;

  /// True when some change has a time: the seq can move between PSBs.
  bool hasTimedChanges() const { return !timed.empty(); }
  /// The largest seq of a change with a time at or before `tsc`'s, else 0.
  uint64_t seqAtTime(uint64_t tsc) const;

  /// The image of the files in force at `seq`. Thread-safe; the image lives
  /// as long as the timeline. Errors: libipt cannot allocate or copy.
  llvm::Expected<const PtImage *> imageAt(uint64_t seq) const;

  /// One reader's last answer: libipt reads JIT code an instruction at a
  /// time, and a run of them falls in one span of the same holder.
  struct ReadCache {
    uint64_t seq = UINT64_MAX;
    VersionIndex::Span span; ///< Empty: nothing cached.
    const CodeChange *change = nullptr;
  };

  /// Reads up to `size` bytes of code outside files at `address`, as it
  /// was at `seq`; else through the snapshot's memory callback. Returns the
  /// bytes read, 0 where a file holds the address at `seq` (its section
  /// did not make it into the image) or nothing is known. `cache`, when
  /// given, is one reader's (not shared between threads).
  size_t read(uint64_t address, uint64_t seq, uint8_t *buffer, size_t size,
              ReadCache *cache = nullptr) const;

  /// Why no code is known at `address` at `seq`, for a decode error there
  /// ("no memory mapped"): one line that says what was missing.
  std::string explainMissing(uint64_t address, uint64_t seq) const;

private:
  ImageTimeline() = default;
  /// A change's range, in byAddress.
  struct Entry {
    uint64_t begin = 0;
    uint64_t end = 0;
    size_t change = 0; ///< Into `changes`.
  };
  /// The change holding `address` at `seq` (codeChangeWins), or null;
  /// from `cache` when it holds the answer, else into it.
  const CodeChange *holder(uint64_t address, uint64_t seq,
                           ReadCache *cache = nullptr) const;
  /// Calls `visit` with each change whose range overlaps [begin, end).
  template <class Visit>
  void forEachOverlap(uint64_t begin, uint64_t end, Visit visit) const;
  /// The file loads (indices into `changes`) in force at `seq`.
  std::vector<size_t> filesAt(uint64_t seq) const;

  /// The history's changes, ascending seq: the snapshot's own (which
  /// outlives the timeline), or `owned` when they had to be sorted.
  const std::vector<CodeChange> *changes = nullptr;
  std::vector<CodeChange> owned;
  /// Per change, the addresses it covers: a Load's from its sections, a
  /// Bytes change's as far as its bytes go.
  struct Extent {
    uint64_t begin = 0;
    uint64_t end = 0;
  };
  std::vector<Extent> extents;
  /// Per change, its cached sections (Load only).
  std::vector<std::vector<CachedSection>> sections;
  /// Per change, the other changes its range overlaps (Load only).
  std::vector<std::vector<size_t>> rivals;
  /// The snapshot's modules that no change overlaps, as sections.
  std::vector<CachedSection> baseSections;
  /// Bytes and Load changes by begin, with the largest end so far (for a
  /// bounded scan back).
  std::vector<Entry> byAddress;
  std::vector<uint64_t> maxEndSoFar;
  /// holder's index over byAddress.
  VersionIndex index;
  /// Changes with a time, as (time in ns, seq), ascending.
  std::vector<std::pair<uint64_t, uint64_t>> timed;
  TimeConversion time;
  ReadMemoryFn readMemory;
  /// The image of each set of files, by the set.
  mutable std::mutex lock;
  mutable std::map<std::vector<size_t>, std::unique_ptr<PtImage>> images;
};

} // namespace magic_trace::decode_detail

#endif
