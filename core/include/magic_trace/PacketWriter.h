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
#include "magic_trace/VirtualClock.h"

#include "llvm/Support/Error.h"

#include <array>
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

/// Packet shapes real CPUs write that our default stream does not (all are
/// valid Intel PT, Intel SDM Vol. 3C "Intel Processor Trace"); each one is a
/// way to check that decoders follow the hardware, not our own habits.
struct PtDialect {
  /// PSB+ as recorded on real CPUs: TSC, TMA, MODE.Exec, FUP, then status
  /// packets CBR, PIP and MODE.TSX after MODE.Exec (ours: CBR before it).
  bool statusAfterModeExec = false;
  /// A PSB+ written while tracing is off holds timing packets only (no
  /// MODE.Exec); MODE.Exec then comes right before TIP.PGE.
  bool psbOffTimingOnly = false;
  /// A PAD packet after every this many packets (0: none).
  unsigned padEvery = 0;
  /// Long TNT packets (TNT-64, up to 47 branches) instead of TNT-8.
  bool tnt64 = false;
  /// The BDM70 shape: a PSB+ written while tracing is off still holds a FUP,
  /// and TIP.PGE follows. Decodable with libipt's bdm70 workaround, so a
  /// bundle with it claims a CPU that has the erratum (dialectCpu()).
  bool fupInOffPsb = false;
  /// Deferred TIPs (SDM "Deferred TIPs"): a TIP due while a TNT is being
  /// filled waits until the TNT is sent, then follows it.
  bool deferTips = false;

  bool any() const {
    return statusAfterModeExec || psbOffTimingOnly || padEvery || tnt64 ||
           fupInOffPsb || deferTips;
  }
};

/// Parses magic-trace-emulate's --dialect: a comma-separated list of
/// status-after-mode, psb-off, pad, tnt64, bdm70, deferred-tip, or "all".
llvm::Expected<PtDialect> parseDialect(llvm::StringRef text);

/// The CPU a trace of `dialect` claims to come from: the emulator's
/// (emulatorCpu()), or a Skylake (6/158/9) when the BDM70 shape needs
/// libipt's workaround for it.
CpuIdentity dialectCpu(const PtDialect &dialect);

namespace packet_writer {

/// libipt's decoders keep a return stack of this many entries
/// (pt_retstack_size); older entries are overwritten when it is full.
constexpr size_t retStackSize = 64;

/// A mirror of libipt's return-address stack (pt_retstack): a ring of 64
/// entries where a push onto a full stack drops the oldest entry. A return is
/// compressed only when its target is on top, so the decoder's pop is right.
class ReturnStack {
public:
  void push(uint64_t ip) {
    entries[(bottom + count) % retStackSize] = ip;
    if (count < retStackSize)
      ++count;
    else
      bottom = (bottom + 1) % retStackSize;
  }
  bool topIs(uint64_t ip) const {
    return count && entries[(bottom + count - 1) % retStackSize] == ip;
  }
  void pop() { --count; }
  void clear() { count = bottom = 0; }

private:
  std::array<uint64_t, retStackSize> entries{};
  size_t bottom = 0;
  size_t count = 0;
};

} // namespace packet_writer

class PacketWriter {
public:
  struct Options {
    uint64_t bufferSize = 4 << 20; ///< Power of two.
    uint64_t psbPeriod = 4096;     ///< Bytes between PSB+ (hardware-like).
    TimerResolution timer = TimerResolution::Normal;
    bool noRetComp = false;     ///< Every return as a TIP.
    uint64_t overflowEvery = 0; ///< Inject OVF every N instructions; 0 off.
    PtDialect dialect;          ///< Hardware packet shapes to write.
    /// When set, packets go to these `bufferSize` bytes owned by the caller
    /// (shared memory), and every write publishes the byte count to
    /// `*ringHead` (RingBuffer::attach).
    uint8_t *ringMemory = nullptr;
    uint64_t *ringHead = nullptr;
    RingGate ringGate; ///< With ringMemory: a reader's pause protocol.
  };

  static llvm::Expected<std::unique_ptr<PacketWriter>> create(Options options);
  virtual ~PacketWriter();

  /// Tracing starts (or resumes after a syscall/untraced stretch) at `ip`:
  /// PSB+ if needed, then TIP.PGE.
  virtual llvm::Error enable(uint64_t ip) = 0;
  /// One executed instruction. A Syscall-class instruction disables tracing
  /// (TIP.PGD, IP suppressed); the next enable() resumes it.
  virtual llvm::Error step(const ExecutedInsn &insn) = 0;
  /// A straight run: `count` instructions from `ip` that need no packet
  /// (Other, or direct jumps to the next one) and end right before `last`,
  /// then `last` itself, as step() would write them, except that a PSB+ or
  /// MTC due inside the run comes at its start or before `last` (the
  /// decoder cannot tell: no packet names an instruction inside the run).
  /// For recorders that see basic blocks (QEMU), once per block: a run that
  /// writes no packet is handled inline (stepQuietly). Not with overflow
  /// injection (use step()).
  __attribute__((always_inline)) llvm::Error
  stepRun(uint64_t ip, uint64_t count, const ExecutedInsn &last) {
    if (stepQuietly(ip, count, last))
      return llvm::Error::success();
    return stepRunWithPackets(ip, count, last);
  }
  /// stepRun's common case, inline: when the run writes no packet (the
  /// checks pass, and `last` needs no packet or only appends a bit to a TNT
  /// that is not full after it), updates the state exactly as
  /// stepRunWithPackets would and returns true; else changes nothing and
  /// returns false. A caller with its own fast path calls this, then
  /// stepRunWithPackets when it returns false.
  bool stepQuietly(uint64_t ip, uint64_t count, const ExecutedInsn &last);
  /// stepQuietly for many runs in one loop (the QEMU recorder's block log):
  /// the state it reads and updates is copied into the object, so a loop
  /// keeps it in registers, and written back by commit(). Between creating
  /// it and commit(), the writer takes no other call.
  class QuietRuns;
  /// stepRun when stepQuietly declined the run.
  virtual llvm::Error stepRunWithPackets(uint64_t ip, uint64_t count,
                                         const ExecutedInsn &last) = 0;
  /// Execution went on where the trace cannot follow (a signal or fault
  /// whose successor is unknown): the CPU's way to say packets were lost,
  /// OVF + FUP(resumeIp), and `count` more instructions (indices from
  /// instructions()) counted as lost, with the instructions since the last
  /// packet. Tracing stays enabled at `resumeIp`.
  virtual llvm::Error markLoss(uint64_t resumeIp, uint64_t count) = 0;
  /// An asynchronous transfer (signal) interrupted execution at `ip`:
  /// FUP(ip) + TIP.PGD; the next enable() resumes at the handler.
  virtual llvm::Error interrupt(uint64_t ip) = 0;
  /// The snapshot point: FUP(nextIp) + TIP.PGD, and pending TNT flushed.
  virtual llvm::Error disable(uint64_t nextIp) = 0;
  /// A PSB+ now, before the next instruction (FUP at it), as the periodic
  /// ones; with tracing disabled, the next enable() writes one. For a
  /// recorder that marks where the code changed (CodeHistory.h): a decoder
  /// resyncs there, so no stretch between two PSBs runs two versions of the
  /// code. Returns the byte offset (RingBuffer::written) where the PSB+
  /// begins, or where the next one will.
  virtual llvm::Expected<uint64_t> sync() = 0;

  virtual const RingBuffer &buffer() const = 0;
  virtual TimeConversion timeConversion() const = 0;
  virtual uint64_t instructions() const = 0;
  /// Instruction index ranges [first, first + count) (indices count every
  /// step() call from 0) whose packets an injected overflow dropped: a
  /// decoder cannot see them, so tests leave them out of the ground truth.
  virtual std::vector<std::pair<uint64_t, uint64_t>>
  lostInstructions() const = 0;

protected:
  explicit PacketWriter(const Options &options);
  /// No check fails for the run, and no PSB+, MTC or overflow is due before
  /// `last`.
  __attribute__((always_inline)) bool
  runChecksPass(uint64_t ip, uint64_t count, const ExecutedInsn &last) const {
    return ip == expectedIp && unsigned(last.size) - 1 < 15 &&
           cycles + count * VirtualClock::cyclesPerInstruction < quietCycles;
  }
  /// Sets quietCycles from the state it stands for. The implementation
  /// calls it at the end of every public call, on every path.
  void refreshQuiet() {
    quietCycles = quietAllowed && !lostLeft && enabled && sincePsb < psbPeriod
                      ? mtcDueCycles
                      : 0;
  }

  // What stepQuietly reads, fixed at creation.
  bool quietAllowed = false; ///< No overflow injection.
  /// The ring, where QuietRuns may write a full TNT itself (as the
  /// implementation would: short TNTs, no PAD, no deferred TIP), else null.
  RingBuffer *tntRing = nullptr;
  bool cycPackets = false; ///< Cycle-accurate: a CYC before each TNT.
  bool compressReturns = false;
  unsigned tntLimit = 0; ///< Bits in a full TNT.
  uint64_t psbPeriod = 0;

  // The state stepQuietly reads and updates (the rest is the
  // implementation's).
  bool enabled = false;
  uint64_t lostLeft = 0;     ///< Instructions still to drop in an overflow.
  uint64_t expectedIp = 0;   ///< Where the next step() must be.
  uint64_t sincePsb = 0;     ///< Bytes written since the last PSB began.
  uint64_t cycles = 0;       ///< Virtual core cycles of traced execution.
  uint64_t lastCyc = 0;      ///< `cycles` at the last CYC packet (or PSB).
  uint64_t mtcDueCycles = 0; ///< When `cycles` reaches it, an MTC is due.
  /// runChecksPass' bound on `cycles`: mtcDueCycles while runs may be quiet
  /// (quietAllowed, no overflow in progress, tracing enabled, no PSB+ due),
  /// else 0 (refreshQuiet).
  uint64_t quietCycles = 0;
  uint64_t tntPayload = 0;
  unsigned tntBits = 0;
  packet_writer::ReturnStack returns;
  uint64_t stepped = 0;              ///< Instructions passed to step().
  bool previousNeededPacket = false; ///< The last step() wrote a packet.
  /// Index after the last instruction that wrote a packet: a decoder may
  /// or may not report the ones from here to an OVF (markLoss).
  uint64_t afterLastPacket = 0;
};

class PacketWriter::QuietRuns {
public:
  __attribute__((always_inline)) explicit QuietRuns(PacketWriter &writer)
      : writer(writer), expectedIp(writer.expectedIp),
        tnt(writer.tntPayload | uint64_t(1) << writer.tntBits),
        budget(writer.quietCycles > writer.cycles
                   ? (writer.quietCycles - writer.cycles + kCpi - 1) / kCpi
                   : 0) {}

  /// stepQuietly on the copy: true when the run wrote no packet (the copy
  /// updated), else false with nothing changed.
  __attribute__((always_inline)) bool step(uint64_t ip, uint64_t count,
                                           const ExecutedInsn &last) {
    // runChecksPass: the run is where the trace is, and no PSB+, MTC or
    // overflow is due before `last` (cycles + count * kCpi < quietCycles).
    if (ip != expectedIp || unsigned(last.size) - 1 >= 15 ||
        ran + count >= budget)
      return false;
    bool taken = last.nextIp != last.ip + last.size;
    unsigned bit = 0; // The TNT bit `last` adds: 0 or 1.
    if (last.branch <= BranchClass::DirectJump) {
      // Other, CondBranch, DirectJump: most blocks, without a branch on
      // which of the three (a jump table per block mispredicts).
      static_assert(unsigned(BranchClass::Other) == 0 &&
                    unsigned(BranchClass::CondBranch) == 1 &&
                    unsigned(BranchClass::DirectJump) == 2);
      bit = last.branch == BranchClass::CondBranch;
      uint64_t next = (tnt << bit) | (taken & bit);
      if (next >> writer.tntLimit) { // The TNT is full: its packet.
        if (!writeFullTnt(next, ran + count + 1))
          return false;
        next = 1;
      }
      tnt = next;
    } else if (last.branch == BranchClass::DirectCall) {
      if (taken)
        writer.returns.push(last.ip + last.size);
    } else if (last.branch == BranchClass::Return) {
      uint64_t next = (tnt << 1) | 1;
      if (!writer.compressReturns || !writer.returns.topIs(last.nextIp))
        return false;
      if (next >> writer.tntLimit) {
        if (!writeFullTnt(next, ran + count + 1))
          return false;
        next = 1;
      }
      writer.returns.pop();
      tnt = next;
      bit = 1;
    } else {
      return false;
    }
    ran += count + 1;
    expectedIp = last.nextIp;
    if (bit)
      lastBitAt = ran;
    return true;
  }

  /// Instructions stepped so far.
  uint64_t instructions() const { return ran; }

  /// The copy back into the writer.
  __attribute__((always_inline)) void commit() {
    if (wrote) {
      if (batched)
        writer.tntRing->endBatch();
      writer.lastCyc = lastCyc;
      writer.refreshQuiet(); // A PSB+ may be due now.
    }
    if (!ran)
      return;
    unsigned bits = 63 - __builtin_clzll(tnt);
    writer.tntBits = bits;
    writer.tntPayload = tnt ^ uint64_t(1) << bits;
    writer.expectedIp = expectedIp;
    if (lastBitAt)
      writer.afterLastPacket = writer.stepped + lastBitAt;
    writer.previousNeededPacket = lastBitAt == ran;
    writer.stepped += ran;
    writer.cycles += ran * kCpi;
  }

  /// A CYC packet's bytes for `value` (> 0), as the SDM lays them out and
  /// libipt's encoder writes them: 5 bits in the header byte (bits 1:0 =
  /// 11b, bit 2 = more), then 7 bits a byte (bit 0 = more). Returns the
  /// byte count (at most 10).
  static size_t encodeCyc(uint64_t value, uint8_t *out) {
    size_t size = 0;
    uint8_t header = uint8_t(0x3 | (value & 0x1f) << 3);
    value >>= 5;
    out[size++] = uint8_t(header | (value ? 0x4 : 0));
    while (value) {
      uint8_t byte = uint8_t((value & 0x7f) << 1);
      value >>= 7;
      out[size++] = uint8_t(byte | (value ? 1 : 0));
    }
    return size;
  }

private:
  /// Writes the full TNT `next` (tnt's form) as the implementation would
  /// when the run that makes `after` instructions stepped ends: [CYC] TNT,
  /// straight into the ring. False, with nothing written, when it must
  /// write it (no ring for it here, or no room before the ring's end).
  __attribute__((noinline)) bool writeFullTnt(uint64_t next, uint64_t after) {
    RingBuffer *ring = writer.tntRing;
    if (!ring)
      return false;
    // One batch for the loop's TNTs: the ring's gate entered once (a
    // fence), its head published once, by commit().
    if (!wrote && !ring->inBatch()) {
      ring->beginBatch();
      batched = true;
    }
    // Room for the longest [CYC] TNT, encoded in place.
    uint8_t *at = ring->reserve(kMaxFullTnt);
    if (!at) {
      if (batched && !wrote) {
        ring->endBatch();
        batched = false;
      }
      return false;
    }
    size_t size = 0;
    uint64_t now = writer.cycles + after * kCpi;
    if (writer.cycPackets && now != lastCyc)
      size = encodeCyc(now - lastCyc, at);
    at[size++] = uint8_t(next << 1); // Short TNT: bit 0 clear.
    ring->commit(size);
    if (writer.cycPackets)
      lastCyc = now;
    writer.sincePsb += size;
    // A PSB+ due comes before the next instruction: no more quiet runs.
    if (writer.sincePsb >= writer.psbPeriod)
      budget = 0;
    wrote = true;
    return true;
  }

  static constexpr uint64_t kCpi = VirtualClock::cyclesPerInstruction;
  /// A CYC of 64 bits (10 bytes) and a short TNT.
  static constexpr size_t kMaxFullTnt = 11;
  PacketWriter &writer;
  uint64_t expectedIp;
  /// tntPayload's bits under a 1 bit at position tntBits: one word.
  uint64_t tnt;
  /// Instructions that fit before quietCycles.
  uint64_t budget;
  uint64_t ran = 0;       ///< Instructions stepped.
  uint64_t lastBitAt = 0; ///< `ran` after the last run that added a bit.
  uint64_t lastCyc = writer.lastCyc; ///< The writer's, as TNTs are written.
  bool wrote = false;                ///< A full TNT went into the ring.
  bool batched = false;              ///< This loop began the ring's batch.
};

__attribute__((always_inline)) inline bool
PacketWriter::stepQuietly(uint64_t ip, uint64_t count,
                          const ExecutedInsn &last) {
  QuietRuns runs(*this);
  if (!runs.step(ip, count, last))
    return false;
  runs.commit();
  return true;
}

} // namespace magic_trace

#endif
