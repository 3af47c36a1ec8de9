//===- SteppedCode.h - The code outside files a stepper ran -----*- C++ -*-===//
//
// docs/architecture.md, "Image over time", for the single-steppers (the ptrace
// stepper, the LLDB SB API stepper): they see every instruction before it runs,
// so they log the code outside files (JIT code, code rewritten in place) the
// way the QEMU recorder's code log does (docs/qemu.md, "The code log"): each
// 4 KiB page of it once per version, as a Bytes change of a CodeHistory. A
// version that replaces an earlier one is marked in each thread's trace (a
// PSB+ and an ImageMark) before the thread's first instruction that runs
// it, so the decoder reads the stretch before the mark with the old code
// and the stretch after it with the new.
//
// Code outside files is code in a mapping /proc/PID/maps shows with no file
// (anonymous, [heap], [stack]; not [vdso], which is a module) and in no
// module the debugger lists; where the maps cannot be read (a remote
// process), code in no module.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_STEPPEDCODE_H
#define MAGIC_TRACE_STEPPEDCODE_H

#include "magic_trace/CodeHistory.h"
#include "magic_trace/PacketWriter.h"
#include "magic_trace/ProcessModules.h"
#include "magic_trace/RingBuffer.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace magic_trace {

/// Reads `size` bytes of the process at `address` into `buffer`; returns
/// how many it could read (0: none).
using ReadProcessMemory =
    llvm::function_ref<size_t(uint64_t address, uint8_t *buffer, size_t size)>;

/// A stepped thread's marks: where its trace moved to a newer version of the
/// code (CodeHistory.h, ImageMark), by RingBuffer::written offset.
struct SteppedMarks {
  std::vector<ImageMark> marks;
  /// The thread has seen every change up to this one.
  uint64_t seq = 0;

  /// From the thread's next instruction on, its code is that of every change
  /// up to `seq`: a PSB+ (PacketWriter::sync) and a mark there. Errors: the
  /// packet writer's.
  llvm::Error mark(PacketWriter &writer, uint64_t seq);
  /// The marks as offsets into `ring.snapshot()`; a mark before its first
  /// byte says what the copy starts with (offset 0).
  std::vector<ImageMark> inSnapshot(const RingBuffer &ring) const;
};

class SteppedCodeLog {
public:
  /// A page of code outside files is 4 KiB, as the QEMU recorder logs it.
  static constexpr uint64_t kPageSize = 4096;
  /// The most bytes of code the log keeps (every version of every page);
  /// past it, it logs no more and note() says so.
  static constexpr uint64_t kMaxBytes = uint64_t(64) << 20;

  /// The debugger's modules: code in them is never logged. Also forgets
  /// what it knew of the mappings.
  void setModules(const std::vector<Module> &modules);
  /// The process's mappings may have changed (a syscall ran, or the process
  /// ran unstepped): the next page is looked up in /proc/PID/maps again.
  void mappingsChanged();

  /// What the stepper must do before it steps an instruction.
  struct Step {
    /// The thread must mark this seq first (SteppedMarks::mark), or 0.
    uint64_t markSeq = 0;
    /// The log took a new version of a page the instruction is in: a
    /// decoded instruction cached for its address may be stale.
    bool newVersion = false;
  };
  /// The instruction of `size` bytes at `ip` of process `pid` is about to
  /// run in a thread that has marked `markedSeq`: logs the page (or the two
  /// pages) it is in when they hold code outside files that the log has no
  /// version of, or whose bytes under the instruction differ from the last
  /// version's. Memory that cannot be read is not logged (the decode then
  /// says the code was not captured).
  Step beforeStep(uint64_t pid, uint64_t ip, uint8_t size,
                  ReadProcessMemory read, uint64_t markedSeq);

  /// Every version logged so far, seqs from 1 (Bytes changes only).
  const CodeHistory &history() const { return log; }
  /// Why the log stopped growing, or "".
  const std::string &note() const { return limitNote; }

private:
  /// Whether the page at `page` holds code outside files.
  bool outsideFiles(uint64_t pid, uint64_t page);
  /// Logs the page at `page` unless its last version has `current` at
  /// `offset`. Returns the index of its last version in `log.changes`, or
  /// nothing when it is not logged.
  std::optional<size_t> logPage(uint64_t page, uint64_t offset,
                                llvm::ArrayRef<uint8_t> current,
                                ReadProcessMemory read, bool &newVersion);

  CodeHistory log;
  std::string limitNote;
  uint64_t bytes = 0;
  /// Executable module ranges [begin, end), sorted.
  std::vector<std::pair<uint64_t, uint64_t>> moduleRanges;
  /// /proc/PID/maps, read at the first page looked up since the last
  /// mappingsChanged(); empty (and `mapsUnreadable`) when it cannot be.
  std::optional<std::vector<MapsEntry>> maps;
  bool mapsUnreadable = false;
  /// Page -> whether it holds code outside files, since mappingsChanged().
  llvm::DenseMap<uint64_t, bool> pageIsOutside;
  /// Page -> the index of its last version in `log.changes`.
  llvm::DenseMap<uint64_t, size_t> lastVersion;
  /// Parallel to `log.changes`: the version replaced an earlier one.
  std::vector<bool> replaces;
};

} // namespace magic_trace

#endif
