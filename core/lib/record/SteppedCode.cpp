//===- SteppedCode.cpp - The code outside files a stepper ran -------------===//
#include "magic_trace/SteppedCode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>

namespace magic_trace {

llvm::Error SteppedMarks::mark(PacketWriter &writer, uint64_t newSeq) {
  llvm::Expected<uint64_t> at = writer.sync();
  if (!at)
    return at.takeError();
  if (!marks.empty() && marks.back().offset == *at)
    marks.back().seq = newSeq;
  else
    marks.push_back({*at, newSeq});
  seq = newSeq;
  return llvm::Error::success();
}

std::vector<ImageMark> SteppedMarks::inSnapshot(const RingBuffer &ring) const {
  uint64_t written = ring.written();
  uint64_t first = written - std::min<uint64_t>(written, ring.capacity());
  std::vector<ImageMark> kept;
  for (const ImageMark &mark : marks) {
    if (mark.offset >= written)
      break; // A PSB the next enable() writes: nothing after it yet.
    uint64_t offset = mark.offset < first ? 0 : mark.offset - first;
    if (!kept.empty() && kept.back().offset == offset)
      kept.back().seq = mark.seq;
    else
      kept.push_back({offset, mark.seq});
  }
  return kept;
}

void SteppedCodeLog::setModules(const std::vector<Module> &modules) {
  moduleRanges.clear();
  for (const Module &module : modules) {
    if (module.segments.empty()) {
      moduleRanges.push_back(moduleExtent(module));
      continue;
    }
    for (const LoadedSegment &segment : module.segments)
      moduleRanges.emplace_back(segment.address,
                                segment.address + segment.size);
  }
  llvm::sort(moduleRanges);
  mappingsChanged();
}

void SteppedCodeLog::mappingsChanged() {
  maps.reset();
  mapsUnreadable = false;
  pageIsOutside.clear();
}

bool SteppedCodeLog::outsideFiles(uint64_t pid, uint64_t page) {
  auto known = pageIsOutside.find(page);
  if (known != pageIsOutside.end())
    return known->second;
  bool inModule = llvm::any_of(moduleRanges, [&](const auto &range) {
    return range.first < page + kPageSize && page < range.second;
  });
  bool outside = !inModule;
  if (outside && !maps && !mapsUnreadable) {
    llvm::Expected<std::vector<MapsEntry>> read = readProcMaps(int(pid));
    if (read) {
      maps = std::move(*read);
    } else {
      llvm::consumeError(read.takeError());
      mapsUnreadable = true;
    }
  }
  if (outside && maps) {
    const MapsEntry *entry = nullptr;
    for (const MapsEntry &candidate : *maps)
      if (candidate.start <= page && page < candidate.end)
        entry = &candidate;
    outside = entry && entry->holdsNoFile();
  }
  pageIsOutside[page] = outside;
  return outside;
}

std::optional<size_t> SteppedCodeLog::logPage(uint64_t page, uint64_t offset,
                                              llvm::ArrayRef<uint8_t> current,
                                              ReadProcessMemory read,
                                              bool &newVersion) {
  auto last = lastVersion.find(page);
  if (last != lastVersion.end()) {
    const std::vector<uint8_t> &bytes = log.changes[last->second].bytes;
    if (offset + current.size() <= bytes.size() &&
        std::memcmp(bytes.data() + offset, current.data(), current.size()) == 0)
      return last->second;
  }
  if (!limitNote.empty())
    return last != lastVersion.end() ? std::optional(last->second)
                                     : std::nullopt;
  if (bytes + kPageSize > kMaxBytes) {
    limitNote = "the stepper logged " + std::to_string(kMaxBytes >> 20) +
                " MiB of code outside files and logs no more: code that "
                "changed later decodes as a gap (trace a shorter run)";
    return last != lastVersion.end() ? std::optional(last->second)
                                     : std::nullopt;
  }
  CodeChange change;
  change.kind = CodeChange::Kind::Bytes;
  change.seq = log.lastSeq() + 1;
  change.address = page;
  change.bytes.resize(kPageSize);
  size_t got = read(page, change.bytes.data(), kPageSize);
  if (got < offset + current.size())
    return std::nullopt; // Unreadable: the decode says it was not captured.
  change.bytes.resize(got);
  change.size = got;
  bytes += got;
  replaces.push_back(last != lastVersion.end());
  log.changes.push_back(std::move(change));
  lastVersion[page] = log.changes.size() - 1;
  newVersion = true;
  return log.changes.size() - 1;
}

SteppedCodeLog::Step SteppedCodeLog::beforeStep(uint64_t pid, uint64_t ip,
                                                uint8_t size,
                                                ReadProcessMemory read,
                                                uint64_t markedSeq) {
  Step step;
  if (size == 0)
    return step;
  uint64_t firstPage = ip & ~(kPageSize - 1);
  uint64_t lastPage = (ip + size - 1) & ~(kPageSize - 1);
  if (!outsideFiles(pid, firstPage) &&
      (lastPage == firstPage || !outsideFiles(pid, lastPage)))
    return step;
  uint8_t insn[16] = {};
  size_t length = std::min<size_t>(size, sizeof(insn));
  if (read(ip, insn, length) != length)
    return step;
  bool replaced = false;
  for (uint64_t page = firstPage; page <= lastPage; page += kPageSize) {
    if (!outsideFiles(pid, page))
      continue;
    uint64_t from = std::max(page, ip),
             to = std::min(page + kPageSize, ip + length);
    std::optional<size_t> version =
        logPage(page, from - page,
                llvm::ArrayRef<uint8_t>(insn + (from - ip), to - from), read,
                step.newVersion);
    if (version && replaces[*version] && log.changes[*version].seq > markedSeq)
      replaced = true;
  }
  // The thread's code from here on is every change so far: the versions
  // that replaced nothing were there before the log first saw them.
  if (replaced)
    step.markSeq = log.lastSeq();
  return step;
}

} // namespace magic_trace
