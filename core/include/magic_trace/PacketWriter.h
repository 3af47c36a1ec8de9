//===- PacketWriter.h - Emulated Intel PT packet stream ---------*- C++ -*-===//
//
// Given the instructions a thread executed, one at a time with their class
// and observed successor, writes the PT packet stream the CPU would have
// written in user-only tracing, with libipt's encoder, into a RingBuffer.
// It does not care who steps the target (ptrace stepper, LLDB SB API).
//
// Virtual clock: documented in docs/emulator.md (instructions x a fixed CPI;
// the TSC runs at the core clock; timeConversion() maps it to ns like perf).
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PACKETWRITER_H
#define MAGIC_TRACE_PACKETWRITER_H

#include "magic_trace/RingBuffer.h"
#include "magic_trace/Snapshot.h"
#include "magic_trace/TraceItems.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace magic_trace {

/// magic-trace's -timer-resolution: low = TSC in PSB+ only (plus MTC), normal
/// = MTC + CYC, high = also noretcomp (every return a TIP).
enum class TimerResolution { Low, Normal, High };

struct ExecutedInsn {
  uint64_t ip = 0;
  uint8_t size = 0;
  BranchClass branch = BranchClass::Other;
  uint64_t nextIp = 0; ///< Where execution actually went next.
};

class PacketWriter {
public:
  struct Options {
    uint64_t bufferSize = 4 << 20; ///< Power of two.
    uint64_t psbPeriod = 4096;     ///< Bytes between PSB+ (hardware-like).
    TimerResolution timer = TimerResolution::Normal;
    bool noRetComp = false;     ///< Every return as a TIP.
    uint64_t overflowEvery = 0; ///< Inject OVF every N instructions; 0 off.
  };

  static llvm::Expected<std::unique_ptr<PacketWriter>> create(Options options);
  virtual ~PacketWriter();

  /// Tracing starts (or resumes after a syscall/untraced stretch) at `ip`:
  /// PSB+ if needed, then TIP.PGE.
  virtual llvm::Error enable(uint64_t ip) = 0;
  /// One executed instruction. A Syscall-class instruction disables tracing
  /// (TIP.PGD, IP suppressed); the next enable() resumes it.
  virtual llvm::Error step(const ExecutedInsn &insn) = 0;
  /// An asynchronous transfer (signal) interrupted execution at `ip`:
  /// FUP(ip) + TIP.PGD; the next enable() resumes at the handler.
  virtual llvm::Error interrupt(uint64_t ip) = 0;
  /// The snapshot point: FUP(nextIp) + TIP.PGD, and pending TNT flushed.
  virtual llvm::Error disable(uint64_t nextIp) = 0;

  virtual const RingBuffer &buffer() const = 0;
  virtual TimeConversion timeConversion() const = 0;
  virtual uint64_t instructions() const = 0;
  /// Instruction index ranges [first, first + count) (indices count every
  /// step() call from 0) whose packets an injected overflow dropped: a
  /// decoder cannot see them, so tests leave them out of the ground truth.
  virtual std::vector<std::pair<uint64_t, uint64_t>>
  lostInstructions() const = 0;
};

} // namespace magic_trace

#endif
