//===- PacketWriterImpl.h - The packet writer's state -----------*- C++ -*-===//
//
// PacketWriter's implementation, shared by its two files: PacketWriter.cpp
// decides per executed instruction which packets are due (the steps),
// PacketEncoding.cpp turns them into bytes with libipt's encoder (the
// packets, PSB+, timing). Private to core/lib/record.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_RECORD_PACKETWRITERIMPL_H
#define MAGIC_TRACE_RECORD_PACKETWRITERIMPL_H

#include "magic_trace/PacketWriter.h"
#include "magic_trace/VirtualClock.h"

#include <intel-pt.h>

#include <array>
#include <memory>
#include <utility>
#include <vector>

namespace magic_trace::packet_writer {

/// Short TNT (TNT-8) holds up to 6 branch bits, long TNT (TNT-64) 47.
constexpr unsigned maxShortTntBits = 6;
constexpr unsigned maxLongTntBits = 47;
/// The CR3 a PIP of the statusAfterModeExec dialect reports (user-only
/// tracing of one process: any fixed value).
constexpr uint64_t dialectCr3 = 0x1000;
/// Instructions whose packets one injected overflow drops.
constexpr uint64_t lostPerOverflow = 8;
/// Room at the ring's write position for any packet to be encoded in place
/// (libipt's largest, PSB, is 16 bytes).
constexpr size_t inPlaceRoom = 32;
/// Room for writeFastPackets' packets: CYC (at most 15 bytes for any cycle
/// count below 2^64), TNT-64 (8) and TIP (9).
constexpr size_t fastPacketsRoom = 32;

struct EncoderDeleter {
  void operator()(pt_encoder *encoder) const { pt_free_encoder(encoder); }
};

/// One public call's packets go to the ring as one batch (one gate entry,
/// one head update); a nested call joins its caller's.
class RingBatch {
public:
  explicit RingBatch(RingBuffer &ring)
      : ring(ring), outermost(!ring.inBatch()) {
    if (outermost)
      ring.beginBatch();
  }
  ~RingBatch() {
    if (outermost)
      ring.endBatch();
  }

private:
  RingBuffer &ring;
  bool outermost;
};

class PacketWriterImpl final : public PacketWriter {
public:
  PacketWriterImpl(Options options, RingBuffer ring, pt_encoder *encoder)
      : PacketWriter(options), options(options), ring(std::move(ring)),
        encoder(encoder),
        plainPackets(!options.dialect.padEvery && !options.dialect.deferTips) {
    // QuietRuns writes a full TNT itself only in the shapes it knows: short
    // TNTs, no PAD, no TIP deferred behind a TNT.
    if (plainPackets && !options.dialect.tnt64 && quietAllowed)
      tntRing = &this->ring;
    cycPackets = cycleAccurate();
  }

  llvm::Error init();
  static bool needsPacket(const ExecutedInsn &insn) {
    switch (insn.branch) {
    case BranchClass::Other:
    case BranchClass::DirectJump:
    case BranchClass::DirectCall:
      return false;
    default:
      return true;
    }
  }
  llvm::Error enable(uint64_t ip) override;
  llvm::Error step(const ExecutedInsn &insn) override;
  llvm::Error markLoss(uint64_t resumeIp, uint64_t count) override;
  llvm::Error interrupt(uint64_t ip) override;
  llvm::Error disable(uint64_t nextIp) override;
  llvm::Expected<uint64_t> sync() override;

  const RingBuffer &buffer() const override { return ring; }
  TimeConversion timeConversion() const override {
    return VirtualClock::conversion();
  }
  uint64_t instructions() const override { return stepped; }
  std::vector<std::pair<uint64_t, uint64_t>> lostInstructions() const override {
    return lost;
  }

private:
  /// Ends a public call: stepQuietly's bound follows what the call changed,
  /// on every return path.
  struct RefreshOnExit {
    PacketWriterImpl &writer;
    ~RefreshOnExit() { writer.refreshQuiet(); }
  };
  bool cycleAccurate() const { return options.timer != TimerResolution::Low; }
  uint64_t tsc() const { return VirtualClock::startTsc + cycles; }
  uint64_t ctc() const { return tsc() / VirtualClock::tscPerCtc; }
  uint64_t mtcPeriod() const { return ctc() >> VirtualClock::timing.mtcFreq; }

  llvm::Error checkStep(uint64_t ip, uint8_t size) const;
  llvm::Error emit(const pt_packet &packet);
  llvm::Error emitPacket(const pt_packet &packet);
  llvm::Error emitModeExec();
  llvm::Error emitType(pt_packet_type type);
  llvm::Error emitIp(pt_packet_type type, uint64_t ip);
  llvm::Error emitSuppressed(pt_packet_type type);
  llvm::Error emitCyc();
  llvm::Error flushTnt();
  llvm::Error addTnt(bool taken);
  llvm::Error psb(bool withFup, uint64_t ip);
  llvm::Error beforeInstruction(uint64_t ip);
  llvm::Error endOverflow(uint64_t resumeIp);
  llvm::Error branchPackets(const ExecutedInsn &insn);
  /// stepRunWithPackets' common case, written with one ring reservation
  /// (writeFastPackets): no overflow injection, no check fails, no PSB+ or
  /// MTC is due, the packets have their default shapes (no PAD, no deferred
  /// TIP), the ring has room before its end, and `last` writes what
  /// branchPackets writes for it here: a conditional branch or a compressed
  /// return that fills the TNT, an indirect jump or call, a return that is
  /// not compressed.
  bool fastPacketsApply(uint64_t ip, uint64_t count,
                        const ExecutedInsn &last) const {
    if (!plainPackets || !runChecksPass(ip, count, last) ||
        ring.roomBeforeEnd() < fastPacketsRoom)
      return false;
    switch (last.branch) {
    case BranchClass::CondBranch:
      return tntBits + 1 == tntLimit;
    case BranchClass::Return:
      return !(compressReturns && returns.topIs(last.nextIp)) ||
             tntBits + 1 == tntLimit;
    case BranchClass::IndirectJump:
    case BranchClass::IndirectCall:
      return true;
    default:
      return false;
    }
  }
  llvm::Error writeFastPackets(uint64_t count, const ExecutedInsn &last);
  /// stepRunWithPackets when fastPacketsApply does not hold (out of line:
  /// the common case then needs no stack frame).
  __attribute__((noinline)) llvm::Error
  stepRunInGeneral(uint64_t ip, uint64_t count, const ExecutedInsn &last);
  llvm::Error stepRunWithPackets(uint64_t ip, uint64_t count,
                                 const ExecutedInsn &last) override;
  /// The MTC period changes from lastMtc when `cycles` reaches this.
  void setLastMtc(uint64_t period) {
    lastMtc = period;
    mtcDueCycles = (period + 1) * (uint64_t(VirtualClock::tscPerCtc)
                                   << VirtualClock::timing.mtcFreq) -
                   VirtualClock::startTsc;
  }

  Options options;
  RingBuffer ring;
  std::unique_ptr<pt_encoder, EncoderDeleter> encoder; ///< Into scratch.
  /// Into the ring's bytes, in place, where a packet fits before its end.
  std::unique_ptr<pt_encoder, EncoderDeleter> ringEncoder;
  /// The ring offset ringEncoder writes at next, if known.
  uint64_t ringEncoderAt = ~uint64_t(0);
  std::array<uint8_t, 64> scratch{};
  /// The packets have their default shapes (no PAD, no deferred TIP).
  bool plainPackets = true;

  bool started = false;
  uint64_t lastIp = 0;
  bool haveLastIp = false;
  /// TIP targets deferred behind the TNT being filled (deferTips).
  std::vector<uint64_t> deferredTips;
  uint64_t packetsWritten = 0; ///< For padEvery.

  uint64_t lastMtc = 0;      ///< MTC period of the last MTC or TSC.
  uint64_t nextOverflow = 0; ///< Index from which the next overflow is due.
  std::vector<std::pair<uint64_t, uint64_t>> lost;
};

} // namespace magic_trace::packet_writer

#endif
