//===- ImageTimeline.cpp - The code of each moment of a trace -------------===//
#include "ImageTimeline.h"

#include "LibiptError.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>

using namespace llvm;

namespace magic_trace::decode_detail {
namespace {

/// The history's sizes past CodeHistory.h's limits, or "": every history
/// reaches the decoder through here, also those no parser checked.
std::string historyLimits(const CodeHistory &history) {
  size_t loads = 0;
  uint64_t bytes = 0;
  for (const CodeChange &change : history.changes) {
    loads += change.kind == CodeChange::Kind::Load;
    bytes += change.bytes.size();
  }
  if (loads > kMaxHistoryLoads)
    return std::to_string(loads) + " file mappings, more than " +
           std::to_string(kMaxHistoryLoads);
  if (bytes > kMaxHistoryCodeBytes)
    return std::to_string(bytes >> 20) + " MiB of code outside files";
  return "";
}

/// The addresses a module's sections cover, or its load address alone.
std::pair<uint64_t, uint64_t> extentOf(const Module &module,
                                       const std::vector<CachedSection> &cached,
                                       uint64_t size) {
  uint64_t begin = UINT64_MAX, end = 0;
  for (const CachedSection &section : cached) {
    begin = std::min(begin, section.begin);
    end = std::max(end, section.end);
  }
  for (const LoadedSegment &segment : module.segments) {
    begin = std::min(begin, segment.address);
    end = std::max(end, segment.address + segment.size);
  }
  if (begin >= end)
    return {module.loadAddress,
            module.loadAddress + std::max<uint64_t>(size, 1)};
  return {begin, end};
}

} // namespace

Expected<std::unique_ptr<ImageTimeline>>
ImageTimeline::build(const Snapshot &snapshot, ReadMemoryFn readMemory,
                     std::vector<ModuleImageStatus> &report) {
  std::unique_ptr<ImageTimeline> timeline(new ImageTimeline());
  timeline->readMemory = readMemory;
  timeline->time = snapshot.time;
  if (snapshot.code.changes.empty()) {
    auto image =
        PtImage::build(snapshot.modules, std::move(readMemory), report);
    if (!image)
      return image.takeError();
    timeline->images[{}] = std::move(*image);
    return std::move(timeline);
  }
  // The costs below are bounded by the history's (CodeHistory.h): a
  // recorder's or a file's history past them is refused in one line.
  if (std::string problem = historyLimits(snapshot.code); !problem.empty())
    return createStringError("the code history has " + problem +
                             " (record a shorter run)");
  // The snapshot's changes as they are (it outlives the timeline), unless
  // they need sorting: a copy of a million versions' bytes cost a second
  // and hundreds of MiB (issue 50's hostile sizes).
  const std::vector<CodeChange> &given = snapshot.code.changes;
  auto bySeq = [](const CodeChange &a, const CodeChange &b) {
    return a.seq < b.seq;
  };
  if (!llvm::is_sorted(given, bySeq)) {
    timeline->owned = given;
    llvm::sort(timeline->owned, bySeq);
  }
  timeline->changes = timeline->owned.empty() ? &given : &timeline->owned;
  const std::vector<CodeChange> &changes = *timeline->changes;
  timeline->sections.resize(changes.size());
  timeline->extents.resize(changes.size());
  for (size_t i = 0; i < changes.size(); ++i) {
    const CodeChange &change = changes[i];
    Extent &extent = timeline->extents[i];
    extent = {change.address, change.end()};
    if (change.kind == CodeChange::Kind::Load) {
      ModuleImageStatus status;
      timeline->sections[i] = cacheModuleSections(change.module, status);
      report.push_back(std::move(status));
      auto [begin, end] =
          extentOf(change.module, timeline->sections[i], change.size);
      extent = {begin, end};
    } else if (change.kind == CodeChange::Kind::Bytes) {
      extent.end =
          change.address + std::min<uint64_t>(change.size, change.bytes.size());
    }
    if (change.kind != CodeChange::Kind::Unload && extent.begin < extent.end)
      timeline->byAddress.push_back({extent.begin, extent.end, i});
    if (change.timeNs)
      timeline->timed.emplace_back(change.timeNs, change.seq);
  }
  llvm::sort(timeline->byAddress,
             [](const Entry &a, const Entry &b) { return a.begin < b.begin; });
  uint64_t maxEnd = 0;
  for (const Entry &entry : timeline->byAddress)
    timeline->maxEndSoFar.push_back(maxEnd = std::max(maxEnd, entry.end));
  std::vector<VersionIndex::Range> ranges;
  for (const Entry &entry : timeline->byAddress)
    ranges.push_back({entry.begin, entry.end, uint32_t(entry.change)});
  timeline->index.build(changes, ranges);
  timeline->rivals.resize(changes.size());
  for (const Entry &entry : timeline->byAddress)
    if (changes[entry.change].kind == CodeChange::Kind::Load)
      timeline->forEachOverlap(entry.begin, entry.end, [&](size_t other) {
        if (other != entry.change)
          timeline->rivals[entry.change].push_back(other);
      });
  llvm::sort(timeline->timed);
  // A time's seq is the largest up to it.
  for (size_t i = 1; i < timeline->timed.size(); ++i)
    timeline->timed[i].second =
        std::max(timeline->timed[i].second, timeline->timed[i - 1].second);
  // The debugger's modules fill in where the history knows nothing.
  for (const Module &module : snapshot.modules) {
    ModuleImageStatus status;
    std::vector<CachedSection> cached = cacheModuleSections(module, status);
    bool known = llvm::any_of(cached, [&](const CachedSection &section) {
      bool overlaps = false;
      timeline->forEachOverlap(section.begin, section.end,
                               [&](size_t) { overlaps = true; });
      return overlaps;
    });
    if (known)
      continue;
    report.push_back(std::move(status));
    llvm::append_range(timeline->baseSections, cached);
  }
  return std::move(timeline);
}

uint64_t ImageTimeline::seqAt(const ThreadTrace &trace, uint64_t offset,
                              uint64_t tsc) const {
  uint64_t seq = 0;
  auto mark = llvm::upper_bound(
      trace.imageMarks, offset,
      [](uint64_t value, const ImageMark &m) { return value < m.offset; });
  if (mark != trace.imageMarks.begin())
    seq = std::prev(mark)->seq;
  return std::max(seq, seqAtTime(tsc));
}

uint64_t ImageTimeline::seqAtTime(uint64_t tsc) const {
  if (!tsc || timed.empty())
    return 0;
  uint64_t ns = time.tscToNs(time.fullTsc(tsc));
  auto at = llvm::upper_bound(
      timed, ns, [](uint64_t value, const std::pair<uint64_t, uint64_t> &t) {
        return value < t.first;
      });
  return at == timed.begin() ? 0 : std::prev(at)->second;
}

const CodeChange *ImageTimeline::holder(uint64_t address, uint64_t seq,
                                        ReadCache *cache) const {
  if (!cache)
    return index.holder(address, seq);
  if (cache->seq != seq || address < cache->span.begin ||
      address >= cache->span.end) {
    cache->seq = seq;
    cache->change = index.holder(address, seq, &cache->span);
  }
  return cache->change;
}

template <class Visit>
void ImageTimeline::forEachOverlap(uint64_t begin, uint64_t end,
                                   Visit visit) const {
  // Entries that start before `end`, back while one of them so far may
  // still reach past `begin` (maxEndSoFar): a window, not every entry.
  auto next =
      llvm::lower_bound(byAddress, end, [](const Entry &e, uint64_t value) {
        return e.begin < value;
      });
  for (size_t i = next - byAddress.begin(); i-- > 0;) {
    if (maxEndSoFar[i] <= begin)
      break;
    if (byAddress[i].end > begin)
      visit(byAddress[i].change);
  }
}

std::vector<size_t> ImageTimeline::filesAt(uint64_t seq) const {
  std::vector<size_t> files;
  const std::vector<CodeChange> &changes = *this->changes;
  for (size_t i = 0; i < changes.size(); ++i) {
    const CodeChange &load = changes[i];
    if (load.kind != CodeChange::Kind::Load || sections[i].empty() ||
        !codeChangeCanHold(load, seq))
      continue;
    bool beaten = llvm::any_of(rivals[i], [&](size_t rival) {
      return codeChangeWins(changes[rival], load, seq);
    });
    if (!beaten)
      files.push_back(i);
  }
  return files;
}

Expected<const PtImage *> ImageTimeline::imageAt(uint64_t seq) const {
  std::vector<size_t> files;
  if (versioned())
    files = filesAt(seq);
  std::lock_guard<std::mutex> hold(lock);
  auto found = images.find(files);
  if (found != images.end())
    return found->second.get();
  std::vector<CachedSection> all = baseSections;
  for (size_t index : files)
    llvm::append_range(all, sections[index]);
  auto image = PtImage::fromSections(all, readMemory);
  if (!image)
    return image.takeError();
  const PtImage *result = image->get();
  images.emplace(std::move(files), std::move(*image));
  return result;
}

size_t ImageTimeline::read(uint64_t address, uint64_t seq, uint8_t *buffer,
                           size_t size, ReadCache *cache) const {
  size_t got = 0;
  // An instruction may run into the next version's range: read on.
  while (got < size) {
    const CodeChange *change = holder(address + got, seq, cache);
    if (!change) {
      if (got == 0 && readMemory)
        return readMemory(address, buffer, size);
      break;
    }
    if (change->kind != CodeChange::Kind::Bytes)
      break;
    const Extent &extent = extents[change - changes->data()];
    uint64_t from = address + got - extent.begin;
    size_t take = std::min<uint64_t>(size - got, extent.end - address - got);
    std::memcpy(buffer + got, change->bytes.data() + from, take);
    got += take;
  }
  return got;
}

std::string ImageTimeline::explainMissing(uint64_t address,
                                          uint64_t seq) const {
  const CodeChange *change = holder(address, seq);
  // Code that is there only from a later time (codeChangeCanHold).
  const CodeChange *later = nullptr;
  if (!change)
    forEachOverlap(address, address + 1, [&](size_t i) {
      const CodeChange &candidate = (*changes)[i];
      if (candidate.timeNs && candidate.seq > seq &&
          (!later || candidate.seq < later->seq))
        later = &candidate;
    });
  if (later)
    return "code at 0x" + utohexstr(address) +
           " was not captured: the memory was made executable again later "
           "(the kernel's MMAP2 record), so only its later code is known (a "
           "jitdump stamped with the TSC, JITDUMP_USE_ARCH_TIMESTAMP=1, would "
           "give the earlier code)";
  if (!change)
    return "code at 0x" + utohexstr(address) +
           " was not captured: no module and no recorded code holds it "
           "(JIT code the recorder did not see, or a module missing from "
           "the list)";
  if (change->kind == CodeChange::Kind::Load)
    return "code at 0x" + utohexstr(address) + " is in " + change->module.path +
           ", which could not be read (see the module problems)";
  return "no memory mapped at this address";
}

} // namespace magic_trace::decode_detail
