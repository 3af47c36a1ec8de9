//===- GroundTruth.h - What the emulated thread really executed -*- C++ -*-===//
//
// The emulator's record of each traced thread: every executed instruction
// address in order, one event per control transfer, and the instruction
// ranges an injected overflow lost. Tests compare decoders against it.
//
// On disk (docs/emulator-cli.md), in DIR/groundtruth/:
//   <tid>.insns   little-endian uint64 address of every executed instruction
//   <tid>.events  "<insn-index> <kind> 0x<from> 0x<to>" per line
//   <tid>.lost    "<first-insn-index> <count>" per line
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_GROUNDTRUTH_H
#define MAGIC_TRACE_GROUNDTRUTH_H

#include "magic_trace/TraceItems.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace magic_trace {

enum class TruthEventKind : uint8_t {
  Call,
  Return,
  Jump, ///< Taken conditional branch, direct or indirect jump, far transfer.
  Syscall,
  Interrupt, ///< A signal handler interrupted execution.
  Enable,    ///< Tracing (re)started at `to`.
  Disable,   ///< Tracing stopped; `to` is where execution would continue.
};

/// The name used in .events files ("call", "return", ...).
llvm::StringRef truthEventName(TruthEventKind kind);

struct TruthEvent {
  /// For transfers, the index of the transferring instruction; for enable,
  /// interrupt and disable, the index of the next instruction to execute.
  uint64_t index = 0;
  TruthEventKind kind = TruthEventKind::Jump;
  uint64_t from = 0;
  uint64_t to = 0;
};

struct ThreadTruth {
  uint64_t tid = 0;
  std::vector<uint64_t> insns;
  std::vector<TruthEvent> events;
  /// (first instruction index, count) lost to injected overflows.
  std::vector<std::pair<uint64_t, uint64_t>> lost;

  /// Records one executed instruction and, if it transfers control, its
  /// event.
  void addInstruction(uint64_t ip, uint8_t size, BranchClass branch,
                      uint64_t nextIp);
  void addEvent(TruthEventKind kind, uint64_t from, uint64_t to) {
    events.push_back({insns.size(), kind, from, to});
  }
};

/// Appends `event`'s .events line: "INDEX KIND 0xFROM 0xTO\n", the index
/// in decimal and the addresses as printf's "0x%" PRIx64 writes them.
void appendTruthEvent(std::string &out, const TruthEvent &event);

/// Writes DIR/groundtruth/<tid>.{insns,events,lost} for every thread.
llvm::Error writeGroundTruth(const std::vector<ThreadTruth> &threads,
                             llvm::StringRef dir);

/// Reads one thread's .insns file (for tests and tools).
llvm::Expected<std::vector<uint64_t>> readTruthInsns(llvm::StringRef path);

/// Reads thread `tid`'s files from DIR/groundtruth/ as writeGroundTruth
/// wrote them (a missing .lost file means nothing was lost).
/// Errors: a missing or truncated .insns or .events file, a malformed line.
llvm::Expected<ThreadTruth> readGroundTruth(llvm::StringRef dir, uint64_t tid);

/// The ground truth DIR/groundtruth/ holds for the threads of `tids` that
/// have it (a recorder trigger's bundle has the hitting thread's); empty
/// when there is none. A file that does not read is left out.
std::vector<ThreadTruth> readGroundTruthOf(llvm::StringRef dir,
                                           const std::vector<uint64_t> &tids);

} // namespace magic_trace

#endif
