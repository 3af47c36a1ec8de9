//===- PacketWriter.cpp - Emulated Intel PT packet stream -----------------===//
//
// Writes the packets a CPU would write in user-only tracing (Intel SDM vol. 3,
// chapter "Intel Processor Trace"), one pt_packet at a time through libipt's
// encoder, into a RingBuffer. The rules, and the virtual clock behind the
// timing packets, are documented in docs/emulator.md. This file decides
// which packets each executed instruction needs; PacketEncoding.cpp writes
// them.
//
//===----------------------------------------------------------------------===//
#include "PacketWriterImpl.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace magic_trace {

using packet_writer::PacketWriterImpl;

llvm::Expected<PtDialect> parseDialect(llvm::StringRef text) {
  PtDialect dialect;
  llvm::SmallVector<llvm::StringRef, 8> names;
  text.split(names, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef name : names) {
    bool all = name == "all";
    if (all || name == "status-after-mode")
      dialect.statusAfterModeExec = true;
    if (all || name == "psb-off")
      dialect.psbOffTimingOnly = true;
    if (all || name == "pad")
      dialect.padEvery = 7;
    if (all || name == "tnt64")
      dialect.tnt64 = true;
    if (all || name == "bdm70")
      dialect.fupInOffPsb = true;
    if (all || name == "deferred-tip")
      dialect.deferTips = true;
    if (!all && !llvm::is_contained({"status-after-mode", "psb-off", "pad",
                                     "tnt64", "bdm70", "deferred-tip"},
                                    name))
      return llvm::createStringError(
          llvm::formatv("unknown dialect '{0}' (use status-after-mode, "
                        "psb-off, pad, tnt64, bdm70, deferred-tip or all)",
                        name)
              .str());
  }
  return dialect;
}

CpuIdentity dialectCpu(const PtDialect &dialect) {
  CpuIdentity cpu = emulatorCpu();
  if (dialect.fupInOffPsb) {
    cpu.model = 158;
    cpu.stepping = 9;
  }
  return cpu;
}

PacketWriter::PacketWriter(const Options &options)
    : quietAllowed(!options.overflowEvery),
      compressReturns(!options.noRetComp &&
                      options.timer != TimerResolution::High),
      tntLimit(options.dialect.tnt64 ? packet_writer::maxLongTntBits
                                     : packet_writer::maxShortTntBits),
      psbPeriod(options.psbPeriod) {}

PacketWriter::~PacketWriter() = default;

llvm::Expected<std::unique_ptr<PacketWriter>>
PacketWriter::create(Options options) {
  llvm::Expected<RingBuffer> ring =
      options.ringMemory
          ? RingBuffer::attach(options.ringMemory, options.bufferSize,
                               options.ringHead, options.ringGate)
          : RingBuffer::create(options.bufferSize);
  if (!ring)
    return ring.takeError();
  if (options.psbPeriod < 256)
    return llvm::createStringError(
        llvm::formatv("psb period {0} is too small (use at least 256 bytes)",
                      options.psbPeriod)
            .str());
  auto writer =
      std::make_unique<PacketWriterImpl>(options, std::move(*ring), nullptr);
  if (llvm::Error error = writer->init())
    return std::move(error);
  return std::move(writer);
}

namespace packet_writer {

llvm::Error PacketWriterImpl::enable(uint64_t ip) {
  RefreshOnExit refresh{*this};
  RingBatch batch(ring);
  if (enabled)
    return llvm::createStringError(
        llvm::formatv("enable({0:x}) while tracing is enabled (call disable, "
                      "interrupt or step a syscall first)",
                      ip)
            .str());
  bool wrotePsb = !started || sincePsb >= options.psbPeriod;
  if (wrotePsb)
    if (llvm::Error error = psb(/*withFup=*/false, ip))
      return error;
  // A timing-only PSB+ left the mode out: it binds to the TIP.PGE instead.
  if (wrotePsb && options.dialect.psbOffTimingOnly)
    if (llvm::Error error = emitModeExec())
      return error;
  started = true;
  enabled = true;
  expectedIp = ip;
  if (llvm::Error error = emitCyc())
    return error;
  return emitIp(ppt_tip_pge, ip);
}

llvm::Error PacketWriterImpl::branchPackets(const ExecutedInsn &insn) {
  uint64_t fallThrough = insn.ip + insn.size;
  switch (insn.branch) {
  case BranchClass::Other:
  case BranchClass::DirectJump:
    return llvm::Error::success();
  case BranchClass::CondBranch:
    return addTnt(insn.nextIp != fallThrough);
  case BranchClass::DirectCall:
    // libipt does not push a call to the next instruction (the PIC idiom
    // for reading the IP), so we do not either.
    if (insn.nextIp != fallThrough)
      returns.push(fallThrough);
    return llvm::Error::success();
  case BranchClass::IndirectCall:
    returns.push(fallThrough);
    break;
  case BranchClass::Return:
    if (compressReturns && returns.topIs(insn.nextIp)) {
      returns.pop();
      return addTnt(true);
    }
    // A return that does not go to its call's next IP (a signal handler's,
    // longjmp's, an unwinder's): libipt pops its stack only on a compressed
    // return, Linux perf's decoder on every return, and the SDM's text we
    // could read does not settle which the CPU does (docs/decoder.md,
    // "Return compression"). Compression is optional, so no return below
    // this point is compressed: the stack starts again empty, and every
    // decoder reads the same targets whichever rule it follows.
    returns.clear();
    break;
  case BranchClass::IndirectJump:
  case BranchClass::Unknown:
    break;
  case BranchClass::FarTransfer:
    // A far transfer that stays in user space reports its target; one that
    // leaves it (nextIp 0) disables tracing like a syscall.
    if (insn.nextIp)
      break;
    [[fallthrough]];
  case BranchClass::Syscall:
    if (llvm::Error error = flushTnt())
      return error;
    if (llvm::Error error = emitCyc())
      return error;
    enabled = false;
    return emitSuppressed(ppt_tip_pgd);
  }
  // Deferred TIP: it waits behind the TNT being filled (SDM "Deferred
  // TIPs"); flushTnt() sends both, the TNT first. Not for a return: an
  // uncompressed RET finds no TNT in progress, which is how a decoder tells
  // it from a compressed one (SDM "Indirect Transfer Compression for
  // Returns").
  if (options.dialect.deferTips && tntBits &&
      insn.branch != BranchClass::Return) {
    deferredTips.push_back(insn.nextIp);
    return llvm::Error::success();
  }
  if (llvm::Error error = flushTnt())
    return error;
  if (llvm::Error error = emitCyc())
    return error;
  return emitIp(ppt_tip, insn.nextIp);
}

/// A step at `ip` must come while tracing is on, where execution is, with a
/// classified size.
llvm::Error PacketWriterImpl::checkStep(uint64_t ip, uint8_t size) const {
  if (!enabled)
    return llvm::createStringError(
        llvm::formatv("step at {0:x} while tracing is disabled (call enable "
                      "first)",
                      ip)
            .str());
  // A gap in the instruction stream (a missed step, an unreported signal)
  // would make the packets undecodable; refuse it instead.
  if (ip != expectedIp)
    return llvm::createStringError(
        llvm::formatv("step at {0:x} but execution was at {1:x} (report every "
                      "executed instruction, and signals with interrupt)",
                      ip, expectedIp)
            .str());
  if (size == 0 || size > 15)
    return llvm::createStringError(
        llvm::formatv("instruction at {0:x} has size {1} (classify it first)",
                      ip, unsigned(size))
            .str());
  return llvm::Error::success();
}

llvm::Error PacketWriterImpl::step(const ExecutedInsn &insn) {
  RefreshOnExit refresh{*this};
  RingBatch batch(ring);
  if (llvm::Error error = checkStep(insn.ip, insn.size))
    return error;
  expectedIp = insn.nextIp;
  uint64_t index = stepped++;
  bool leavesUser = insn.branch == BranchClass::Syscall ||
                    (insn.branch == BranchClass::FarTransfer && !insn.nextIp);
  // An overflow window ends early at an instruction that disables tracing,
  // so that OVF always binds to a FUP (SDM: OVF resolved while PacketEn=1).
  if (lostLeft && leavesUser)
    if (llvm::Error error = endOverflow(insn.ip))
      return error;
  // An overflow starts at or after each multiple of overflowEvery, at the
  // first instruction that needs a packet right after one that wrote one.
  // Then no packet-less instruction lies between the last packet and the
  // lost ones, and no decoder can report a lost instruction: libipt stops
  // at the last packet before OVF, or at the next instruction needing one,
  // depending on the packet it last read.
  bool startsOverflow = !lostLeft && options.overflowEvery &&
                        index >= nextOverflow && previousNeededPacket &&
                        needsPacket(insn) && !leavesUser;
  previousNeededPacket = needsPacket(insn);
  if (startsOverflow) {
    if (llvm::Error error = flushTnt())
      return error;
    nextOverflow = (index / options.overflowEvery + 1) * options.overflowEvery;
    lostLeft = lostPerOverflow;
    lost.emplace_back(index, 0);
  }
  if (lostLeft) {
    // The CPU had no room for this instruction's packets: nothing is
    // written, but calls it made are invisible to the decoder.
    ++lost.back().second;
    cycles += VirtualClock::cyclesPerInstruction;
    if (--lostLeft == 0)
      return endOverflow(insn.nextIp);
    return llvm::Error::success();
  }
  if (llvm::Error error = beforeInstruction(insn.ip))
    return error;
  cycles += VirtualClock::cyclesPerInstruction;
  if (needsPacket(insn))
    afterLastPacket = index + 1;
  return branchPackets(insn);
}

llvm::Error PacketWriterImpl::stepRunInGeneral(uint64_t ip, uint64_t count,
                                               const ExecutedInsn &last) {
  RefreshOnExit refresh{*this};
  RingBatch batch(ring);
  if (options.overflowEvery || lostLeft)
    return llvm::createStringError(
        "stepRun with overflow injection (step each instruction instead)");
  if (count == 0)
    return step(last);
  if (llvm::Error error = checkStep(ip, last.size))
    return error;
  // The same packets as step() for each instruction, without its per-
  // instruction checks: the run needs no packet, so only the PSB+ and MTC
  // due before it and before `last` are written, and no overflow starts
  // (there is no injection).
  if (count) {
    if (sincePsb >= options.psbPeriod)
      if (llvm::Error error = psb(/*withFup=*/true, ip))
        return error;
    stepped += count;
    cycles += count * VirtualClock::cyclesPerInstruction;
    previousNeededPacket = false;
  }
  if (llvm::Error error = beforeInstruction(last.ip))
    return error;
  ++stepped;
  cycles += VirtualClock::cyclesPerInstruction;
  expectedIp = last.nextIp;
  previousNeededPacket = needsPacket(last);
  if (previousNeededPacket)
    afterLastPacket = stepped;
  return branchPackets(last);
}

llvm::Error PacketWriterImpl::markLoss(uint64_t resumeIp, uint64_t count) {
  RefreshOnExit refresh{*this};
  RingBatch batch(ring);
  if (!enabled)
    return llvm::createStringError(
        "markLoss while tracing is disabled (call enable first)");
  uint64_t first = afterLastPacket;
  if (lostLeft)
    first = lost.back().first; // Extend the injected overflow in progress.
  else
    lost.emplace_back(first, 0);
  stepped += count;
  cycles += count * VirtualClock::cyclesPerInstruction;
  lost.back().second = stepped - lost.back().first;
  afterLastPacket = stepped;
  previousNeededPacket = false;
  expectedIp = resumeIp;
  if (llvm::Error error = flushTnt())
    return error;
  return endOverflow(resumeIp);
}

llvm::Error PacketWriterImpl::interrupt(uint64_t ip) {
  RefreshOnExit refresh{*this};
  RingBatch batch(ring);
  if (!enabled)
    return llvm::Error::success();
  if (lostLeft)
    if (llvm::Error error = endOverflow(ip))
      return error;
  if (llvm::Error error = flushTnt())
    return error;
  if (llvm::Error error = emitCyc())
    return error;
  if (llvm::Error error = emitIp(ppt_fup, ip))
    return error;
  enabled = false;
  return emitSuppressed(ppt_tip_pgd);
}

llvm::Error PacketWriterImpl::disable(uint64_t nextIp) {
  RefreshOnExit refresh{*this};
  // The snapshot point and an asynchronous stop look the same on the wire:
  // FUP names the first instruction that did not run, so decoders stop
  // exactly there instead of running on to the next branch.
  return interrupt(nextIp);
}

llvm::Expected<uint64_t> PacketWriterImpl::sync() {
  RefreshOnExit refresh{*this};
  RingBatch batch(ring);
  if (!enabled) {
    // The next enable() writes the PSB+ (a PSB is due).
    sincePsb = std::max(sincePsb, options.psbPeriod);
    return ring.written();
  }
  // The TNT bits so far belong to the code before the PSB+.
  if (llvm::Error error = flushTnt())
    return std::move(error);
  uint64_t at = ring.written();
  if (llvm::Error error = psb(/*withFup=*/true, expectedIp))
    return std::move(error);
  return at;
}

} // namespace packet_writer

} // namespace magic_trace
