//===- PacketWriter.cpp - Emulated Intel PT packet stream -----------------===//
//
// Writes the packets a CPU would write in user-only tracing (Intel SDM vol. 3,
// chapter "Intel Processor Trace"), one pt_packet at a time through libipt's
// encoder, into a RingBuffer. The rules, and the virtual clock behind the
// timing packets, are documented in docs/emulator.md.
//
//===----------------------------------------------------------------------===//
#include "magic_trace/PacketWriter.h"
#include "magic_trace/VirtualClock.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <intel-pt.h>

#include <array>
#include <vector>

namespace magic_trace {

namespace {

/// libipt's decoders keep a return stack of this many entries
/// (pt_retstack_size); older entries are overwritten when it is full.
constexpr size_t retStackSize = 64;
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

/// The smallest IP compression that reconstructs `ip` from `lastIp` (SDM
/// "IP Compression"). Without a last IP (after PSB or OVF) only sext-48 and
/// full stand alone.
pt_ip_compression chooseCompression(uint64_t ip, uint64_t lastIp,
                                    bool haveLastIp) {
  if (haveLastIp && (ip >> 16) == (lastIp >> 16))
    return pt_ipc_update_16;
  if (haveLastIp && (ip >> 32) == (lastIp >> 32))
    return pt_ipc_update_32;
  uint64_t sext48 = static_cast<uint64_t>(static_cast<int64_t>(ip << 16) >> 16);
  if (sext48 == ip)
    return pt_ipc_sext_48;
  if (haveLastIp && (ip >> 48) == (lastIp >> 48))
    return pt_ipc_update_48;
  return pt_ipc_full;
}

class PacketWriterImpl final : public PacketWriter {
public:
  PacketWriterImpl(Options options, RingBuffer ring, pt_encoder *encoder)
      : options(options), ring(std::move(ring)), encoder(encoder) {}

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
  llvm::Error stepRun(uint64_t ip, uint64_t count,
                      const ExecutedInsn &last) override;
  llvm::Error markLoss(uint64_t resumeIp, uint64_t count) override;
  llvm::Error interrupt(uint64_t ip) override;
  llvm::Error disable(uint64_t nextIp) override;

  const RingBuffer &buffer() const override { return ring; }
  TimeConversion timeConversion() const override {
    return VirtualClock::conversion();
  }
  uint64_t instructions() const override { return stepped; }
  std::vector<std::pair<uint64_t, uint64_t>> lostInstructions() const override {
    return lost;
  }

private:
  bool retComp() const {
    return !options.noRetComp && options.timer != TimerResolution::High;
  }
  bool cycleAccurate() const { return options.timer != TimerResolution::Low; }
  uint64_t tsc() const { return VirtualClock::startTsc + cycles; }
  uint64_t ctc() const { return tsc() / VirtualClock::tscPerCtc; }
  uint64_t mtcPeriod() const { return ctc() >> VirtualClock::timing.mtcFreq; }

  unsigned maxTntBits() const {
    return options.dialect.tnt64 ? maxLongTntBits : maxShortTntBits;
  }
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
  bool quietRun(uint64_t ip, uint64_t count, const ExecutedInsn &last);
  __attribute__((noinline)) llvm::Error packetRun(uint64_t ip, uint64_t count,
                                                  const ExecutedInsn &last);
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
  std::array<uint8_t, 64> scratch{};

  bool enabled = false;
  bool started = false;
  uint64_t sincePsb = 0; ///< Bytes written since the last PSB began.
  uint64_t lastIp = 0;
  bool haveLastIp = false;
  uint64_t tntPayload = 0;
  unsigned tntBits = 0;
  /// TIP targets deferred behind the TNT being filled (deferTips).
  std::vector<uint64_t> deferredTips;
  uint64_t packetsWritten = 0; ///< For padEvery.
  ReturnStack returns;

  uint64_t cycles = 0;       ///< Virtual core cycles of traced execution.
  uint64_t lastCyc = 0;      ///< `cycles` at the last CYC packet (or PSB).
  uint64_t lastMtc = 0;      ///< MTC period of the last MTC or TSC.
  uint64_t mtcDueCycles = 0; ///< See setLastMtc().
  uint64_t stepped = 0;      ///< Instructions passed to step().
  uint64_t lostLeft = 0;     ///< Instructions still to drop in an overflow.
  uint64_t nextOverflow = 0; ///< Index from which the next overflow is due.
  bool previousNeededPacket = false; ///< The last step() wrote a packet.
  uint64_t expectedIp = 0;           ///< Where the next step() must be.
  /// Index after the last instruction that wrote a packet: a decoder may
  /// or may not report the ones from here to an OVF (markLoss).
  uint64_t afterLastPacket = 0;
  std::vector<std::pair<uint64_t, uint64_t>> lost;
};

} // namespace

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

namespace {

llvm::Error PacketWriterImpl::init() {
  nextOverflow = options.overflowEvery;
  pt_config config;
  pt_config_init(&config);
  config.begin = scratch.data();
  config.end = scratch.data() + scratch.size();
  encoder.reset(pt_alloc_encoder(&config));
  config.begin = ring.data();
  config.end = ring.data() + ring.capacity();
  ringEncoder.reset(pt_alloc_encoder(&config));
  if (!encoder || !ringEncoder)
    return llvm::createStringError(
        "cannot allocate libipt's packet encoder (check libipt)");
  return llvm::Error::success();
}

/// Appends one packet, and a PAD after every padEvery packets.
llvm::Error PacketWriterImpl::emit(const pt_packet &packet) {
  if (llvm::Error error = emitPacket(packet))
    return error;
  if (!options.dialect.padEvery ||
      ++packetsWritten % options.dialect.padEvery != 0)
    return llvm::Error::success();
  pt_packet pad{};
  pad.type = ppt_pad;
  return emitPacket(pad);
}

/// Encodes one packet into the ring in place or, near the ring's end, into
/// the scratch area, then round the end.
llvm::Error PacketWriterImpl::emitPacket(const pt_packet &packet) {
  int status = 0;
  if (uint8_t *at = ring.reserve(inPlaceRoom)) {
    status = pt_enc_sync_set(ringEncoder.get(),
                             static_cast<uint64_t>(at - ring.data()));
    if (status >= 0)
      status = pt_enc_next(ringEncoder.get(), &packet);
    ring.commit(status < 0 ? 0 : static_cast<size_t>(status));
  } else {
    status = pt_enc_sync_set(encoder.get(), 0);
    if (status >= 0)
      status = pt_enc_next(encoder.get(), &packet);
    if (status >= 0)
      ring.write(scratch.data(), static_cast<size_t>(status));
  }
  if (status < 0)
    return llvm::createStringError(
        llvm::formatv("libipt cannot encode a packet of type {0}: {1} (this "
                      "is a bug in the emulator)",
                      int(packet.type), pt_errstr(pt_errcode(status)))
            .str());
  sincePsb += static_cast<uint64_t>(status);
  return llvm::Error::success();
}

llvm::Error PacketWriterImpl::emitType(pt_packet_type type) {
  pt_packet packet{};
  packet.type = type;
  return emit(packet);
}

llvm::Error PacketWriterImpl::emitIp(pt_packet_type type, uint64_t ip) {
  pt_packet packet{};
  packet.type = type;
  packet.payload.ip.ipc = chooseCompression(ip, lastIp, haveLastIp);
  packet.payload.ip.ip = ip;
  lastIp = ip;
  haveLastIp = true;
  return emit(packet);
}

llvm::Error PacketWriterImpl::emitSuppressed(pt_packet_type type) {
  pt_packet packet{};
  packet.type = type;
  packet.payload.ip.ipc = pt_ipc_suppressed;
  return emit(packet);
}

/// In cycle-accurate mode a CYC with the cycles since the previous CYC goes
/// before each packet that marks an instruction's time (TNT, TIP, FUP).
llvm::Error PacketWriterImpl::emitCyc() {
  if (!cycleAccurate() || cycles == lastCyc)
    return llvm::Error::success();
  pt_packet packet{};
  packet.type = ppt_cyc;
  packet.payload.cyc.value = cycles - lastCyc;
  lastCyc = cycles;
  return emit(packet);
}

/// Sends the TNT being filled, then the TIPs deferred behind it, in order.
llvm::Error PacketWriterImpl::flushTnt() {
  if (!tntBits)
    return llvm::Error::success();
  if (llvm::Error error = emitCyc())
    return error;
  pt_packet packet{};
  packet.type = options.dialect.tnt64 ? ppt_tnt_64 : ppt_tnt_8;
  packet.payload.tnt.bit_size = static_cast<uint8_t>(tntBits);
  packet.payload.tnt.payload = tntPayload;
  tntBits = 0;
  tntPayload = 0;
  if (llvm::Error error = emit(packet))
    return error;
  if (deferredTips.empty())
    return llvm::Error::success();
  std::vector<uint64_t> tips = std::move(deferredTips);
  deferredTips.clear();
  for (uint64_t target : tips)
    if (llvm::Error error = emitIp(ppt_tip, target))
      return error;
  return llvm::Error::success();
}

/// The oldest branch is the most significant payload bit.
llvm::Error PacketWriterImpl::addTnt(bool taken) {
  tntPayload = (tntPayload << 1) | (taken ? 1 : 0);
  if (++tntBits == maxTntBits())
    return flushTnt();
  return llvm::Error::success();
}

llvm::Error PacketWriterImpl::emitModeExec() {
  pt_packet mode{};
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec.csl = 1;
  mode.payload.mode.bits.exec.csd = 0;
  return emit(mode);
}

/// PSB+: PSB, TSC, TMA, CBR, MODE.Exec, FUP (only while tracing), PSBEND;
/// the dialect reorders it (status after MODE.Exec), leaves MODE.Exec out
/// while tracing is off, or keeps the FUP then (BDM70). The decoder forgets
/// its last IP and (when it syncs here) its return stack, so we forget ours.
llvm::Error PacketWriterImpl::psb(bool withFup, uint64_t ip) {
  if (llvm::Error error = flushTnt())
    return error;
  sincePsb = 0;
  haveLastIp = false;
  returns.clear();
  if (llvm::Error error = emitType(ppt_psb))
    return error;
  pt_packet tsc{};
  tsc.type = ppt_tsc;
  tsc.payload.tsc.tsc = this->tsc();
  pt_packet tma{};
  tma.type = ppt_tma;
  tma.payload.tma.ctc = static_cast<uint16_t>(ctc() & 0xffff);
  tma.payload.tma.fc =
      static_cast<uint16_t>(this->tsc() - ctc() * VirtualClock::tscPerCtc);
  pt_packet cbr{};
  cbr.type = ppt_cbr;
  cbr.payload.cbr.ratio = VirtualClock::timing.nomFreq;
  const PtDialect &dialect = options.dialect;
  bool tracing = withFup;
  bool modeExec = tracing || !dialect.psbOffTimingOnly;
  for (const pt_packet *packet : {&tsc, &tma})
    if (llvm::Error error = emit(*packet))
      return error;
  if (!dialect.statusAfterModeExec)
    if (llvm::Error error = emit(cbr))
      return error;
  if (modeExec)
    if (llvm::Error error = emitModeExec())
      return error;
  setLastMtc(mtcPeriod());
  lastCyc = cycles;
  if (tracing)
    if (llvm::Error error = emitIp(ppt_fup, ip))
      return error;
  // The BDM70 FUP while tracing is off: decoders with the workaround drop
  // it whole when TIP.PGE follows (libipt's pt_qry_header_fup), so it must
  // not be the last IP the TIP.PGE is compressed against.
  if (!tracing && dialect.fupInOffPsb) {
    pt_packet stray{};
    stray.type = ppt_fup;
    stray.payload.ip.ipc = pt_ipc_sext_48;
    stray.payload.ip.ip = ip;
    if (llvm::Error error = emit(stray))
      return error;
  }
  if (dialect.statusAfterModeExec) {
    pt_packet pip{};
    pip.type = ppt_pip;
    pip.payload.pip.cr3 = dialectCr3;
    pt_packet tsx{};
    tsx.type = ppt_mode;
    tsx.payload.mode.leaf = pt_mol_tsx;
    for (const pt_packet *packet : {&cbr, &pip, &tsx})
      if (llvm::Error error = emit(*packet))
        return error;
  }
  return emitType(ppt_psbend);
}

/// Packets due at an instruction boundary, before the instruction at `ip`:
/// PSB+ when the byte counter says so, then MTC when the crystal clock
/// crossed an MTC period. Both flush pending TNT first.
llvm::Error PacketWriterImpl::beforeInstruction(uint64_t ip) {
  if (sincePsb >= options.psbPeriod)
    if (llvm::Error error = psb(/*withFup=*/true, ip))
      return error;
  if (cycles < mtcDueCycles) // mtcPeriod() == lastMtc
    return llvm::Error::success();
  if (llvm::Error error = flushTnt())
    return error;
  setLastMtc(mtcPeriod());
  pt_packet mtc{};
  mtc.type = ppt_mtc;
  mtc.payload.mtc.ctc = static_cast<uint8_t>(lastMtc & 0xff);
  return emit(mtc);
}

/// OVF, then FUP at the instruction where packets resume. The decoder resets
/// (last IP, return stack), and so do we.
llvm::Error PacketWriterImpl::endOverflow(uint64_t resumeIp) {
  lostLeft = 0;
  haveLastIp = false;
  returns.clear();
  if (llvm::Error error = emitType(ppt_ovf))
    return error;
  return emitIp(ppt_fup, resumeIp);
}

llvm::Error PacketWriterImpl::enable(uint64_t ip) {
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
    if (retComp() && returns.topIs(insn.nextIp)) {
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

/// stepRun's common case, when it writes no packet: no check fails, no
/// PSB+ or MTC is due before `last`, and `last` needs no packet or only
/// appends a bit to a TNT that is not full after it. Then it updates the
/// state exactly as stepRun would and returns true; else it changes nothing.
bool PacketWriterImpl::quietRun(uint64_t ip, uint64_t count,
                                const ExecutedInsn &last) {
  if (options.overflowEvery || lostLeft || !enabled || ip != expectedIp ||
      last.size == 0 || last.size > 15 || sincePsb >= options.psbPeriod ||
      cycles + count * VirtualClock::cyclesPerInstruction >= mtcDueCycles)
    return false;
  uint64_t fallThrough = last.ip + last.size;
  bool taken = last.nextIp != fallThrough;
  switch (last.branch) {
  case BranchClass::Other:
  case BranchClass::DirectJump:
    break;
  case BranchClass::DirectCall:
    if (taken)
      returns.push(fallThrough);
    break;
  case BranchClass::CondBranch:
    if (tntBits + 1 >= maxTntBits())
      return false;
    tntPayload = (tntPayload << 1) | (taken ? 1 : 0);
    ++tntBits;
    break;
  case BranchClass::Return:
    if (!retComp() || !returns.topIs(last.nextIp) ||
        tntBits + 1 >= maxTntBits())
      return false;
    returns.pop();
    tntPayload = (tntPayload << 1) | 1;
    ++tntBits;
    break;
  default:
    return false;
  }
  stepped += count + 1;
  cycles += (count + 1) * VirtualClock::cyclesPerInstruction;
  expectedIp = last.nextIp;
  previousNeededPacket = needsPacket(last);
  if (previousNeededPacket)
    afterLastPacket = stepped;
  return true;
}

llvm::Error PacketWriterImpl::stepRun(uint64_t ip, uint64_t count,
                                      const ExecutedInsn &last) {
  if (quietRun(ip, count, last))
    return llvm::Error::success();
  return packetRun(ip, count, last);
}

/// stepRun when it may write packets (kept out of line: the quiet path
/// then needs no stack frame).
llvm::Error PacketWriterImpl::packetRun(uint64_t ip, uint64_t count,
                                        const ExecutedInsn &last) {
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
  // The snapshot point and an asynchronous stop look the same on the wire:
  // FUP names the first instruction that did not run, so decoders stop
  // exactly there instead of running on to the next branch.
  return interrupt(nextIp);
}

} // namespace

} // namespace magic_trace
