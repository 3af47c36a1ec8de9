//===- CodeAtStop.cpp - The code outside files as at a stop ---------------===//
//
// The perf and emulate backends' code outside files at a snapshot
// (ProcessRecorder.h, addCodeAtStop), as LLDB's intel-pt plugin reads it:
// the live process's memory at the stop, for what its module list does not
// cover. Code that changed before the stop is what a recorder's own log
// (SteppedCode.h) or, later, jitdump's versions hold.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/ProcessModules.h"
#include "magic_trace/ProcessRecorder.h"

#include "llvm/ADT/STLExtras.h"

#include <set>

namespace magic_trace {

void addCodeAtStop(
    uint64_t pid,
    const std::function<size_t(uint64_t, uint8_t *, size_t)> &read,
    Snapshot &snapshot) {
  llvm::Expected<std::vector<MapsEntry>> maps = readProcMaps(int(pid));
  if (!maps) {
    llvm::consumeError(maps.takeError());
    return;
  }
  auto inModule = [&](const MapsEntry &entry) {
    return llvm::any_of(snapshot.modules, [&](const Module &module) {
      auto [begin, end] = moduleExtent(module);
      return begin < entry.end && entry.start < end;
    });
  };
  uint64_t taken = 0, left = 0;
  for (const MapsEntry &entry : *maps) {
    if (!entry.executable || !entry.holdsNoFile() || entry.end <= entry.start ||
        inModule(entry))
      continue;
    uint64_t size = entry.end - entry.start;
    if (!badCodeRange(entry.start, size).empty())
      continue;
    if (taken + size > kMaxCodeAtStop) {
      left += size;
      continue;
    }
    CodeChange change;
    change.kind = CodeChange::Kind::Bytes;
    change.seq = snapshot.code.lastSeq() + 1;
    change.address = entry.start;
    change.bytes.resize(size);
    // An execute-only or vanished mapping reads short: keep what was read.
    size_t got = read(entry.start, change.bytes.data(), size);
    if (got == 0)
      continue;
    change.bytes.resize(got);
    change.size = got;
    taken += got;
    snapshot.code.changes.push_back(std::move(change));
  }
  if (left)
    snapshot.notes.push_back(
        "the process has " +
        std::to_string((taken + left + (uint64_t(1) << 20) - 1) >> 20) +
        " MiB of code outside files at the stop, more than the " +
        std::to_string(kMaxCodeAtStop >> 20) +
        " MiB read at a snapshot: " + std::to_string(taken >> 20) +
        " MiB were read, and code in the rest is a gap in the trace");
}

void timeCodeAtStop(Snapshot &snapshot, size_t firstAtStop) {
  if (snapshot.execMappings.empty())
    return;
  std::vector<CodeChange> &changes = snapshot.code.changes;
  std::vector<CodeChange> timed;
  for (size_t i = firstAtStop; i < changes.size(); ++i) {
    CodeChange &change = changes[i];
    if (change.kind != CodeChange::Kind::Bytes) {
      timed.push_back(std::move(change));
      continue;
    }
    // The change's pieces: cut at each mapping's ends inside it, each
    // piece at the latest time a mapping covering it was made executable
    // (0: none did). A sweep over the ends, the covering times in a
    // multiset: a JIT that flips W^X per compile has a record per flip.
    struct End {
      uint64_t at, time;
      bool opens;
    };
    std::vector<End> ends;
    for (const ExecMapping &mapping : snapshot.execMappings)
      if (mapping.size &&
          change.overlaps(mapping.address, mapping.address + mapping.size)) {
        uint64_t time = std::max<uint64_t>(1, mapping.timeNs);
        ends.push_back({std::max(mapping.address, change.address), time, true});
        ends.push_back({std::min(mapping.address + mapping.size, change.end()),
                        time, false});
      }
    // Where one mapping ends and another begins, the one beginning first.
    llvm::sort(ends, [](const End &a, const End &b) {
      return std::pair(a.at, !a.opens) < std::pair(b.at, !b.opens);
    });
    std::multiset<uint64_t> covering;
    uint64_t pieceBegin = change.address, pieceTime = 0, at = change.address;
    auto flush = [&](uint64_t end) {
      if (end <= pieceBegin)
        return;
      CodeChange piece;
      piece.kind = CodeChange::Kind::Bytes;
      piece.seq = change.seq;
      piece.timeNs = pieceTime;
      piece.address = pieceBegin;
      piece.size = end - pieceBegin;
      piece.bytes.assign(change.bytes.begin() + (pieceBegin - change.address),
                         change.bytes.begin() + (end - change.address));
      timed.push_back(std::move(piece));
      pieceBegin = end;
    };
    for (size_t e = 0; e <= ends.size();) {
      uint64_t next = e < ends.size() ? ends[e].at : change.end();
      // [at, next) is covered by `covering`.
      if (next > at) {
        uint64_t time = covering.empty() ? 0 : *covering.rbegin();
        if (time != pieceTime) {
          flush(at);
          pieceTime = time;
        }
        at = next;
      }
      if (e == ends.size())
        break;
      for (; e < ends.size() && ends[e].at == next; ++e)
        if (ends[e].opens)
          covering.insert(ends[e].time);
        else if (auto open = covering.find(ends[e].time);
                 open != covering.end())
          covering.erase(open);
    }
    flush(change.end());
  }
  changes.resize(firstAtStop);
  uint64_t seq = changes.empty() ? 0 : changes.back().seq;
  for (CodeChange &change : timed) {
    change.seq = ++seq;
    changes.push_back(std::move(change));
  }
}

void orderChangesByTime(CodeHistory &history) {
  std::vector<size_t> order(history.changes.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  const std::vector<CodeChange> &changes = history.changes;
  // Untimed (time 0) first; stable by position.
  llvm::sort(order, [&](size_t a, size_t b) {
    return std::pair(changes[a].timeNs, a) < std::pair(changes[b].timeNs, b);
  });
  std::vector<CodeChange> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) {
    sorted.push_back(std::move(history.changes[i]));
    sorted.back().seq = sorted.size();
  }
  history.changes = std::move(sorted);
}

} // namespace magic_trace
