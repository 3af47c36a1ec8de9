//===- LldbView.h - What LLDB's trace load reads of a snapshot -*- C++ -*-===//
//
// Internal to core/lib/formats/bundle/. LLDB's trace bundle has one module
// list per process and no notion of code that changes: `trace load` reads
// every thread's trace with the same image. A snapshot with a code history
// (CodeHistory.h) may have run two versions of code at one address (JIT
// code rewritten in place, a library unloaded and another mapped there).
// So the bundle gives LLDB one process per epoch: a stretch of the history
// in which no change replaces code another change of the epoch holds, with
// the image of that stretch (files, and code outside files as ELF files:
// CodeElf.h), and each thread's trace cut at the image marks where it moves
// to the next epoch (a mark is at a PSB, where LLDB starts a block anyway).
// Our own reader puts the pieces of a thread back together in process order
// ("magicTraceTid" says whose a piece is, "magicTraceTail" how many bytes at
// its end belong to the next).
//
// Which code an epoch holds follows the decoder's rule (codeChangeWins): a
// stretch marked `seq` runs the latest change up to it at each address, or,
// where every change came later, the earliest one. An epoch starts at a
// change that replaces code of the epoch so far; it holds the code live
// then, the changes up to the next epoch, and every later change that
// overlaps none of them (code first logged later was there before).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_FORMATS_BUNDLE_LLDBVIEW_H
#define MAGIC_TRACE_FORMATS_BUNDLE_LLDBVIEW_H

#include "magic_trace/OutputFiles.h"
#include "magic_trace/Snapshot.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <vector>

namespace magic_trace::bundle_detail {

struct LldbEpoch {
  /// Stretches whose seq is at least this (and below the next epoch's)
  /// read this epoch's code.
  uint64_t firstSeq = 0;
  /// The changes whose code the epoch's image holds (indices into the
  /// history's changes: Load and Bytes only).
  std::vector<size_t> changes;
};

/// A stretch of one thread's trace, bytes [begin, end), in one epoch. A
/// thread with an empty trace has one, empty, in the first epoch.
struct LldbPiece {
  uint64_t tid = 0;
  size_t epoch = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// The epochs of `history`, at least one (an empty history has one, with no
/// changes).
/// A change with a time (codeChangeCanHold: its code is not there before
/// it) also starts an epoch when a stretch of trace begins between the
/// current epoch's time and its own: `psbTimes`, the times of every PSB with
/// a TSC, ascending (psbTimesOf).
std::vector<LldbEpoch> lldbEpochs(const CodeHistory &history,
                                  const std::vector<uint64_t> &psbTimes = {});

/// The times (ns, the snapshot's clock) of every PSB with a TSC in every
/// thread's trace, ascending; empty when no change has a time.
std::vector<uint64_t> psbTimesOf(const Snapshot &snapshot);

/// Each thread's trace cut where its marks move it to another epoch, in
/// thread order and then trace order.
std::vector<LldbPiece> lldbPieces(const Snapshot &snapshot,
                                  const std::vector<LldbEpoch> &epochs);

/// The snapshot's modules (the debugger's at the stop) that overlap none of
/// `epoch`'s changes: LLDB needs them too.
std::vector<Module> modulesBeside(const Snapshot &snapshot,
                                  const LldbEpoch &epoch);

/// The thread id LLDB is given for `tid`'s piece in `epoch`: LLDB keeps one
/// trace per thread id across the processes of a bundle, so a later epoch's
/// piece is thread tid + epoch * 10,000,000 (above Linux's PID_MAX_LIMIT,
/// 4,194,304: never a real thread's id), with "magicTraceTid" saying whose.
constexpr uint64_t LldbEpochTidStep = 10000000;
inline uint64_t lldbTid(uint64_t tid, size_t epoch) {
  return tid + epoch * LldbEpochTidStep;
}

/// Writes what LLDB's `trace load` reads of `snapshot` into `dir`: each
/// thread's trace (one file, or a piece per epoch when the history has
/// several), the code outside files of every epoch as ELF files
/// (DIR/modules/code-SEQ.elf, listed with "magicTraceCode": true), and
/// returns trace.json's object, one process per epoch. Errors: a file
/// cannot be written.
llvm::Expected<llvm::json::Object> writeLldbView(const Snapshot &snapshot,
                                                 OutputDir &dir);

} // namespace magic_trace::bundle_detail

#endif
