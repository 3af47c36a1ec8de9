//===- LldbView.cpp - What LLDB's trace load reads of a snapshot ----------===//
#include "LldbView.h"

#include "../../base/PacketIp.h"
#include "../../base/PtBytes.h"
#include "../CodeElf.h"
#include "BundleFields.h"
#include "magic_trace/PrivateFiles.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <map>
#include <set>

using namespace llvm;

namespace magic_trace::bundle_detail {
namespace {

constexpr const char *bundleTriple = "x86_64-unknown-linux-gnu";

/// LLDB accepts only these two vendors in cpuInfo.
StringRef lldbVendor(StringRef vendor) {
  return vendor == "GenuineIntel" ? "GenuineIntel" : "unknown";
}

/// Whether `a` and `b` put the same code where they overlap: the same file
/// at the same place (a library loaded again), or the same bytes.
bool sameCode(const CodeChange &a, const CodeChange &b) {
  if (a.kind != b.kind)
    return false;
  if (a.kind == CodeChange::Kind::Load)
    return a.module.path == b.module.path &&
           a.module.loadAddress == b.module.loadAddress;
  uint64_t begin = std::max(a.address, b.address);
  uint64_t end = std::min(a.end(), b.end());
  return std::equal(a.bytes.begin() + (begin - a.address),
                    a.bytes.begin() + (end - a.address),
                    b.bytes.begin() + (begin - b.address));
}

bool holdsCode(const CodeChange &change) {
  return change.kind != CodeChange::Kind::Unload && change.size > 0;
}

/// Changes by where they begin, for the overlap questions below in
/// O(log n) (a history may hold a JIT's hundred thousand loads): a range
/// that overlaps a query begins at most `longest` bytes before it.
class RangeSet {
public:
  explicit RangeSet(const std::vector<CodeChange> &changes)
      : changes(&changes) {}

  void insert(size_t index) {
    const CodeChange &change = (*changes)[index];
    byBegin.emplace(change.address, index);
    longest = std::max(longest, change.size);
  }
  /// Whether `test` holds for one of the changes overlapping `change`.
  template <class Test> bool any(const CodeChange &change, Test test) const {
    for (auto it = firstMaybe(change.address);
         it != byBegin.end() && it->first < change.end(); ++it)
      if ((*changes)[it->second].overlaps(change.address, change.end()) &&
          test((*changes)[it->second]))
        return true;
    return false;
  }
  /// Removes the changes overlapping `change` for which `test` holds.
  template <class Test> void eraseIf(const CodeChange &change, Test test) {
    for (auto it = firstMaybe(change.address);
         it != byBegin.end() && it->first < change.end();)
      if ((*changes)[it->second].overlaps(change.address, change.end()) &&
          test((*changes)[it->second]))
        it = byBegin.erase(it);
      else
        ++it;
  }
  std::vector<size_t> indices() const {
    std::vector<size_t> all;
    for (const auto &[begin, index] : byBegin)
      all.push_back(index);
    llvm::sort(all);
    return all;
  }

private:
  std::multimap<uint64_t, size_t>::const_iterator
  firstMaybe(uint64_t address) const {
    return byBegin.lower_bound(address > longest ? address - longest : 0);
  }

  const std::vector<CodeChange> *changes;
  std::multimap<uint64_t, size_t> byBegin;
  uint64_t longest = 0;
};

/// Whether `change` would replace code one of `held` puts there.
bool replacesAny(const RangeSet &held, const CodeChange &change) {
  return held.any(change, [&](const CodeChange &other) {
    return !sameCode(other, change);
  });
}

/// Whether one of `held` puts the same code over all of `change`'s range.
bool coveredBySame(const RangeSet &held, const CodeChange &change) {
  return held.any(change, [&](const CodeChange &other) {
    return other.address <= change.address && change.end() <= other.end() &&
           sameCode(other, change);
  });
}

bool overlapsAny(const std::vector<CodeChange> &changes,
                 const std::vector<size_t> &held, const CodeChange &change) {
  return std::any_of(held.begin(), held.end(), [&](size_t index) {
    return changes[index].overlaps(change.address, change.end());
  });
}

/// The code mapped after `changes[index]`: what it replaces or unmaps goes
/// (a range an unmap only cuts into stays: its other bytes are still there).
void apply(const std::vector<CodeChange> &changes, size_t index,
           RangeSet &live) {
  const CodeChange &change = changes[index];
  live.eraseIf(change, [&](const CodeChange &old) {
    bool covered = change.address <= old.address && old.end() <= change.end();
    return covered || holdsCode(change);
  });
  if (holdsCode(change))
    live.insert(index);
}

size_t epochOf(const std::vector<LldbEpoch> &epochs, uint64_t seq) {
  size_t epoch = 0;
  while (epoch + 1 < epochs.size() && epochs[epoch + 1].firstSeq <= seq)
    ++epoch;
  return epoch;
}

} // namespace

std::vector<LldbEpoch> lldbEpochs(const CodeHistory &history,
                                  const std::vector<uint64_t> &psbTimes) {
  const std::vector<CodeChange> &changes = history.changes;
  std::vector<LldbEpoch> epochs(1);
  RangeSet live(changes), held(changes); ///< held: the last epoch's.
  uint64_t epochTime = 0; ///< When the current epoch's first change came.
  // Whether a stretch starts in [from, to): it would see the code before.
  auto psbIn = [&](uint64_t from, uint64_t to) {
    auto first = llvm::lower_bound(psbTimes, from);
    return first != psbTimes.end() && *first < to;
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    const CodeChange &change = changes[i];
    bool replaces = holdsCode(change) && replacesAny(held, change);
    bool arrives = holdsCode(change) && change.timeNs &&
                   !coveredBySame(held, change) &&
                   psbIn(epochTime, change.timeNs);
    apply(changes, i, live);
    if (replaces || arrives) {
      LldbEpoch next;
      next.firstSeq = change.seq;
      next.changes = live.indices();
      epochs.push_back(std::move(next));
      held = live;
      epochTime = change.timeNs;
    } else if (holdsCode(change) && !coveredBySame(held, change)) {
      // (Code the epoch already holds, as another change gave it: the
      // stop's bytes and a jitdump's load of them, is not given twice:
      // LLDB maps one module at an address.)
      epochs.back().changes.push_back(i);
      held.insert(i);
    }
  }
  // Code a recorder first logged in a later epoch, where nothing of this
  // one is, ran here too if a stretch of this epoch reached it; not code
  // with a time (codeChangeCanHold): it was not there yet.
  // (Each epoch's untimed changes first: a jitdump's many loads are not
  // walked once per pair of epochs.)
  std::vector<std::vector<size_t>> untimed(epochs.size());
  for (size_t e = 0; e < epochs.size(); ++e)
    for (size_t index : epochs[e].changes)
      if (!changes[index].timeNs)
        untimed[e].push_back(index);
  for (size_t e = 0; e + 1 < epochs.size(); ++e)
    for (size_t later = e + 1; later < epochs.size(); ++later)
      for (size_t index : untimed[later])
        if (!llvm::is_contained(epochs[e].changes, index) &&
            !overlapsAny(changes, epochs[e].changes, changes[index]))
          epochs[e].changes.push_back(index);
  for (LldbEpoch &epoch : epochs)
    llvm::sort(epoch.changes);
  return epochs;
}

/// Calls `visit(offset, ns)` for each PSB of `thread`: its PSB+'s TSC on the
/// snapshot's clock, 0 when the PSB+ has none.
template <class Visit>
void forEachPsb(const Snapshot &snapshot, const ThreadTrace &thread,
                Visit visit) {
  const uint8_t *bytes = thread.bytes.data();
  uint64_t size = thread.bytes.size();
  llvm::StringRef text(reinterpret_cast<const char *>(bytes), size);
  llvm::StringRef psb(reinterpret_cast<const char *>(pt_bytes::kPsb),
                      sizeof(pt_bytes::kPsb));
  for (size_t at = text.find(psb); at != llvm::StringRef::npos;
       at = text.find(psb, at + 1)) {
    uint64_t tsc = pt_bytes::psbTsc(bytes, size, at);
    visit(at, tsc ? snapshot.time.tscToNs(snapshot.time.fullTsc(tsc)) : 0);
  }
}

/// Where a thread's stretches may change seq, and the seq from there on
/// (ImageTimeline::seqAt): its marks and, when changes have times (perf's
/// rule: a jitdump's loads), each PSB at its PSB+'s time. LLDB starts a
/// stretch at a PSB, so a change between two PSBs takes effect for it at
/// the next one.
std::vector<ImageMark> seqSteps(const Snapshot &snapshot,
                                const ThreadTrace &thread) {
  std::vector<std::pair<uint64_t, uint64_t>> timed;
  for (const CodeChange &change : snapshot.code.changes)
    if (change.timeNs)
      timed.emplace_back(change.timeNs, change.seq);
  if (timed.empty())
    return thread.imageMarks;
  llvm::sort(timed);
  std::vector<ImageMark> steps;
  auto mark = thread.imageMarks.begin();
  uint64_t markSeq = 0, timeSeq = 0;
  forEachPsb(snapshot, thread, [&](uint64_t at, uint64_t ns) {
    for (; mark != thread.imageMarks.end() && mark->offset <= at; ++mark)
      markSeq = std::max(markSeq, mark->seq);
    // A PSB+ without a TSC (one a recorder wrote where it joined two
    // stretches) keeps the time it follows; seqs only move forward.
    if (ns) {
      auto next = llvm::upper_bound(
          timed, ns,
          [](uint64_t value, const std::pair<uint64_t, uint64_t> &t) {
            return value < t.first;
          });
      if (next != timed.begin())
        timeSeq = std::max(timeSeq, std::prev(next)->second);
    }
    steps.push_back({at, std::max(markSeq, timeSeq)});
  });
  for (; mark != thread.imageMarks.end(); ++mark)
    steps.push_back(*mark);
  return steps;
}

std::vector<uint64_t> psbTimesOf(const Snapshot &snapshot) {
  std::vector<uint64_t> times;
  if (llvm::none_of(snapshot.code.changes,
                    [](const CodeChange &change) { return change.timeNs; }))
    return times;
  for (const ThreadTrace &thread : snapshot.threads)
    forEachPsb(snapshot, thread, [&](uint64_t, uint64_t ns) {
      if (ns)
        times.push_back(ns);
    });
  llvm::sort(times);
  return times;
}

std::vector<LldbPiece> lldbPieces(const Snapshot &snapshot,
                                  const std::vector<LldbEpoch> &epochs) {
  std::vector<LldbPiece> pieces;
  for (const ThreadTrace &thread : snapshot.threads) {
    uint64_t size = thread.bytes.size();
    // Before its first mark a stretch's seq is 0 (ImageTimeline::seqAt).
    LldbPiece piece{thread.tid, epochOf(epochs, 0), 0, size};
    for (const ImageMark &step : seqSteps(snapshot, thread)) {
      size_t epoch = epochOf(epochs, step.seq);
      if (epoch == piece.epoch || step.offset >= size)
        continue;
      piece.end = step.offset;
      if (piece.end > piece.begin)
        pieces.push_back(piece);
      piece = LldbPiece{thread.tid, epoch, step.offset, size};
    }
    pieces.push_back(piece);
  }
  return pieces;
}

std::vector<Module> modulesBeside(const Snapshot &snapshot,
                                  const LldbEpoch &epoch) {
  std::vector<Module> modules;
  for (const Module &module : snapshot.modules) {
    std::pair<uint64_t, uint64_t> extent = moduleExtent(module);
    bool shadowed =
        std::any_of(epoch.changes.begin(), epoch.changes.end(), [&](size_t i) {
          return snapshot.code.changes[i].overlaps(extent.first, extent.second);
        });
    if (!shadowed)
      modules.push_back(module);
  }
  return modules;
}

namespace {

/// The offset just after the PSBEND of the PSB+ at `offset` of `bytes`, or
/// `offset` when there is none there (libipt's packet decoder walks it).
uint64_t psbPlusEnd(const std::vector<uint8_t> &bytes, uint64_t offset) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t *>(bytes.data());
  config.end = const_cast<uint8_t *>(bytes.data() + bytes.size());
  PacketDecoderPtr decoder(pt_pkt_alloc_decoder(&config));
  if (!decoder || pt_pkt_sync_set(decoder.get(), offset) < 0)
    return offset;
  for (bool first = true;; first = false) {
    pt_packet packet;
    if (pt_pkt_next(decoder.get(), &packet, sizeof(packet)) < 0 ||
        (first && packet.type != ppt_psb))
      return offset;
    if (packet.type == ppt_psbend) {
      uint64_t end = offset;
      pt_pkt_get_offset(decoder.get(), &end);
      return end;
    }
  }
}

json::Object moduleJson(const Module &module) {
  json::Object entry{{"systemPath", module.path},
                     {"loadAddress", hex(module.loadAddress)}};
  if (!module.fileCopy.empty())
    entry["file"] = module.fileCopy;
  if (!module.buildId.empty())
    entry["uuid"] = module.buildId;
  return entry;
}

std::string codeElfPath(const CodeChange &change) {
  return "modules/code-" + std::to_string(change.seq) + ".elf";
}

/// The module a Load change maps: the debugger's entry for the same file
/// says more (build-id, a copy to read).
const Module &loadedModule(const Snapshot &snapshot, const CodeChange &load) {
  for (const Module &module : snapshot.modules) {
    std::pair<uint64_t, uint64_t> extent = moduleExtent(module);
    if (module.path == load.module.path &&
        load.overlaps(extent.first, extent.second))
      return module;
  }
  return load.module;
}

/// One epoch's module list for trace.json; writes the ELF files of its code
/// outside files that `written` does not hold yet.
Expected<json::Array> epochModules(const Snapshot &snapshot,
                                   const LldbEpoch &epoch, OutputDir &dir,
                                   std::set<uint64_t> &written) {
  json::Array modules;
  std::set<std::pair<std::string, uint64_t>> listed;
  auto add = [&](const Module &module) {
    if (listed.emplace(module.path, module.loadAddress).second)
      modules.push_back(moduleJson(module));
  };
  for (size_t index : epoch.changes) {
    const CodeChange &change = snapshot.code.changes[index];
    if (change.kind == CodeChange::Kind::Load) {
      add(loadedModule(snapshot, change));
      continue;
    }
    std::string path = codeElfPath(change);
    if (!listed.emplace(path, change.address).second)
      continue;
    if (written.insert(change.seq).second)
      if (Error error =
              dir.writeFile(path, codeElf(change.address, change.bytes,
                                          snapshot.code.symbols)))
        return std::move(error);
    modules.push_back(json::Object{{"systemPath", path},
                                   {"file", path},
                                   {"loadAddress", hex(change.address)},
                                   {"magicTraceCode", true}});
  }
  for (const Module &module : modulesBeside(snapshot, epoch))
    add(module);
  return std::move(modules);
}

} // namespace

Expected<json::Object> writeLldbView(const Snapshot &snapshot, OutputDir &dir) {
  std::vector<LldbEpoch> epochs =
      lldbEpochs(snapshot.code, psbTimesOf(snapshot));
  std::vector<LldbPiece> pieces = lldbPieces(snapshot, epochs);
  bool split = epochs.size() > 1;
  Expected<std::unique_ptr<OutputDir>> threadsDir = dir.subdirectory("threads");
  if (!threadsDir)
    return threadsDir.takeError();
  std::vector<json::Array> threads(epochs.size());
  for (const LldbPiece &piece : pieces) {
    std::string name = "threads/" + std::to_string(piece.tid);
    if (split)
      name += "-" + std::to_string(piece.epoch);
    name += ".intelpt_trace";
    const ThreadTrace &thread =
        *llvm::find_if(snapshot.threads, [&](const ThreadTrace &t) {
          return t.tid == piece.tid;
        });
    // LLDB drops the last instruction of a buffer (its decoder stops at the
    // status that says the trace ends, before appending the instruction
    // that came with it): a piece the thread's trace goes on after carries
    // the next piece's PSB+ too, a block of its own in LLDB's decode that
    // lists nothing, and says how many bytes of it are the next piece's.
    uint64_t tail = 0;
    if (piece.end < thread.bytes.size())
      tail = psbPlusEnd(thread.bytes, piece.end) - piece.end;
    StringRef bytes(reinterpret_cast<const char *>(thread.bytes.data()) +
                        piece.begin,
                    piece.end + tail - piece.begin);
    if (Error error = dir.writeFile(name, bytes))
      return std::move(error);
    json::Object entry{{"tid", int64_t(lldbTid(piece.tid, piece.epoch))},
                       {"iptTrace", std::move(name)}};
    if (piece.epoch > 0)
      entry["magicTraceTid"] = int64_t(piece.tid);
    if (tail)
      entry["magicTraceTail"] = int64_t(tail);
    threads[piece.epoch].push_back(std::move(entry));
  }
  json::Array processes;
  std::set<uint64_t> written;
  for (size_t e = 0; e < epochs.size(); ++e) {
    Expected<json::Array> modules =
        epochModules(snapshot, epochs[e], dir, written);
    if (!modules)
      return modules.takeError();
    processes.push_back(json::Object{{"pid", int64_t(snapshot.pid)},
                                     {"triple", bundleTriple},
                                     {"threads", std::move(threads[e])},
                                     {"modules", std::move(*modules)}});
  }
  return json::Object{
      {"type", "intel-pt"},
      {"cpuInfo", json::Object{{"vendor", lldbVendor(snapshot.cpu.vendor)},
                               {"family", int64_t(snapshot.cpu.family)},
                               {"model", int64_t(snapshot.cpu.model)},
                               {"stepping", int64_t(snapshot.cpu.stepping)}}},
      {"processes", std::move(processes)},
      {"tscPerfZeroConversion",
       json::Object{{"timeMult", int64_t(snapshot.time.timeMult)},
                    {"timeShift", int64_t(snapshot.time.timeShift)},
                    {"timeZero", hex(snapshot.time.timeZero)}}}};
}

} // namespace magic_trace::bundle_detail
