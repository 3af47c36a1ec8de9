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

} // namespace magic_trace
