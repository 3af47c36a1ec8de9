//===- TraceItems.h - Decoded control flow of one thread --------*- C++ -*-===//
//
// The decoder's output: per thread, an ordered stream of compact items. A
// Block is a run of consecutive instructions (libipt's pt_block); the other
// kinds mark where tracing was enabled/disabled, where data was lost, and
// where decoding failed. Anomalies are data here, never failures.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_TRACEITEMS_H
#define MAGIC_TRACE_TRACEITEMS_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace magic_trace {

/// How an instruction transfers control. Shared by the emulator's classifier
/// and the decoder (for the last instruction of a block).
enum class BranchClass : uint8_t {
  Other,        ///< Falls through.
  CondBranch,   ///< Jcc, JRCXZ, LOOP*.
  DirectJump,   ///< JMP rel.
  IndirectJump, ///< JMP r/m.
  DirectCall,   ///< CALL rel.
  IndirectCall, ///< CALL r/m.
  Return,       ///< RET.
  Syscall,      ///< SYSCALL, SYSENTER, INT n: leaves user space.
  FarTransfer,  ///< Far CALL/JMP/RET, IRET, UD2-like traps.
  Unknown,      ///< Could not be classified.
};

/// The processor's execution mode for code (Intel SDM Vol. 3C, "MODE.Exec"):
/// 64-bit, or compatibility mode with 32- or 16-bit default operand size.
enum class ExecMode : uint8_t { Bits64 = 0, Bits32 = 1, Bits16 = 2 };

/// "64-bit", "32-bit", "16-bit".
const char *execModeName(ExecMode mode);

enum class ItemKind : uint8_t {
  Block,    ///< Instructions [ip .. lastIp], `detail` of them.
  Enable,   ///< Tracing (re)starts at ip (TIP.PGE).
  Disable,  ///< Tracing stops (TIP.PGD); ip is where it will resume, or 0.
  Overflow, ///< The CPU lost packets (OVF); tracing resumes at ip.
  Error,    ///< Decoding failed; see ThreadDecode::errors[detail].
  /// From here on the code is that of the code history's changes up to seq
  /// `ip` (CodeHistory.h); only in snapshots with a history.
  Image,
};

/// 32 bytes. Times are nanoseconds (TimeConversion applied), monotonic per
/// thread; for a Block, the time of its first instruction.
struct TraceItem {
  uint64_t ip = 0;
  uint64_t lastIp = 0; ///< Block: address of the last instruction.
  uint64_t timeNs = 0;
  uint32_t detail = 0; ///< Block: instruction count; Error: error index.
  ItemKind kind = ItemKind::Block;
  BranchClass lastClass = BranchClass::Other; ///< Block: its last instruction.
  ExecMode mode = ExecMode::Bits64;           ///< Block: its code's mode.
  /// Block: the size of its last instruction when it is a call or jump (so
  /// a call's return address is lastIp + lastSize); 0 when not known.
  uint8_t lastSize = 0;
};
static_assert(sizeof(TraceItem) == 32, "TraceItem must stay compact");

/// A decode error: where in the buffer, what libipt said, and the IP.
struct DecodeError {
  uint64_t offset = 0; ///< Byte offset in the thread's PT buffer.
  int code = 0;        ///< libipt status (negative pte_* value).
  uint64_t ip = 0;     ///< Last known IP, 0 if none.
  std::string message; ///< pt_errstr() text.
  /// PT bytes from the error to where decoding resumed (the next PSB, or
  /// the end of the buffer): the trace the error cost.
  uint64_t skippedBytes = 0;
};

struct ThreadDecode {
  uint64_t tid = 0;
  std::vector<TraceItem> items;
  std::vector<DecodeError> errors;
  uint64_t instructions = 0; ///< Sum of Block instruction counts.
  /// Instructions whose times the decoder estimated from instruction counts
  /// (no timing packet before or after them; docs/decoder.md, "Time").
  uint64_t estimatedInstructions = 0;
};

/// Receives one thread's items in order, a batch at a time, as the decoder
/// finishes them (blocks joined, times final): a consumer that needs no more
/// than the items in hand (the model builder) never holds a thread's whole
/// item stream.
class ItemSink {
public:
  virtual ~ItemSink() = default;
  /// `items` continue the previous batches'. `errors` continue theirs: an
  /// Error item's detail indexes the errors of every batch so far, in order,
  /// and its error arrives no later than the item.
  virtual void consume(llvm::ArrayRef<TraceItem> items,
                       llvm::ArrayRef<DecodeError> errors) = 0;
  /// Once, before the last batch: how many of the thread's instructions got
  /// times from instruction counts rather than timing packets.
  virtual void timesEstimated(uint64_t instructions) { (void)instructions; }
  /// Before the batch that holds them: instructions [first, first + count)
  /// of the thread's (counted in stream order from 0) got their times from
  /// instruction counts. Ranges come in order, never overlapping; the
  /// views mark times so made (report --annotate).
  virtual void estimatedRange(uint64_t first, uint64_t count) {
    (void)first;
    (void)count;
  }
};

} // namespace magic_trace

#endif
