//===- PacketEncoding.cpp - PacketWriter's packets, through libipt -------===//
//
// The packets themselves (Intel SDM vol. 3, chapter "Intel Processor
// Trace"): each one a pt_packet through libipt's encoder, into the ring in
// place or round its end; PSB+, TNT, TIP/FUP with IP compression, CYC and
// MTC from the virtual clock (docs/emulator.md).
//
//===----------------------------------------------------------------------===//
#include "PacketWriterImpl.h"

#include "llvm/Support/FormatVariadic.h"

namespace magic_trace::packet_writer {

namespace {

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

llvm::Error encodingError(pt_packet_type type, int status) {
  return llvm::createStringError(
      llvm::formatv("libipt cannot encode a packet of type {0}: {1} (this is "
                    "a bug in the emulator)",
                    int(type), pt_errstr(pt_errcode(status)))
          .str());
}

} // namespace

llvm::Error PacketWriterImpl::init() {
  RefreshOnExit refresh{*this};
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
    // The encoder's position moves on with each packet: it needs setting
    // only after a write round the end.
    auto offset = static_cast<uint64_t>(at - ring.data());
    if (offset != ringEncoderAt)
      status = pt_enc_sync_set(ringEncoder.get(), offset);
    if (status >= 0)
      status = pt_enc_next(ringEncoder.get(), &packet);
    ring.commit(status < 0 ? 0 : static_cast<size_t>(status));
    ringEncoderAt = status < 0 ? ~uint64_t(0) : offset + uint64_t(status);
  } else {
    ringEncoderAt = ~uint64_t(0);
    status = pt_enc_sync_set(encoder.get(), 0);
    if (status >= 0)
      status = pt_enc_next(encoder.get(), &packet);
    if (status >= 0)
      ring.write(scratch.data(), static_cast<size_t>(status));
  }
  if (status < 0)
    return encodingError(packet.type, status);
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
  if (++tntBits == tntLimit)
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

/// The same state and packets as stepRunWithPackets (step() when count is 0)
/// with checkStep, beforeInstruction and branchPackets, for the case
/// fastPacketsApply accepts: [CYC] TNT for a full TNT, else [CYC] [TNT] TIP.
__attribute__((always_inline)) inline llvm::Error
PacketWriterImpl::writeFastPackets(uint64_t count, const ExecutedInsn &last) {
  stepped += count + 1;
  cycles += (count + 1) * VirtualClock::cyclesPerInstruction;
  expectedIp = last.nextIp;
  previousNeededPacket = true;
  afterLastPacket = stepped;
  bool tip = true;
  uint64_t fallThrough = last.ip + last.size;
  switch (last.branch) {
  case BranchClass::CondBranch:
    tntPayload = (tntPayload << 1) | (last.nextIp != fallThrough ? 1 : 0);
    ++tntBits;
    tip = false;
    break;
  case BranchClass::Return:
    if (compressReturns && returns.topIs(last.nextIp)) {
      returns.pop();
      tntPayload = (tntPayload << 1) | 1;
      ++tntBits;
      tip = false;
    } else {
      returns.clear(); // As branchPackets does, and why.
    }
    break;
  case BranchClass::IndirectCall:
    returns.push(fallThrough);
    break;
  default:
    break;
  }
  std::array<pt_packet, 3> packets; // Each one cleared as it is used.
  size_t used = 0;
  if (cycleAccurate() && cycles != lastCyc) {
    packets[used] = pt_packet{};
    packets[used].type = ppt_cyc;
    packets[used++].payload.cyc.value = cycles - lastCyc;
    lastCyc = cycles;
  }
  if (tntBits) {
    packets[used] = pt_packet{};
    packets[used].type = options.dialect.tnt64 ? ppt_tnt_64 : ppt_tnt_8;
    packets[used].payload.tnt.bit_size = static_cast<uint8_t>(tntBits);
    packets[used++].payload.tnt.payload = tntPayload;
    tntBits = 0;
    tntPayload = 0;
  }
  if (tip) {
    packets[used] = pt_packet{};
    packets[used].type = ppt_tip;
    packets[used].payload.ip.ipc =
        chooseCompression(last.nextIp, lastIp, haveLastIp);
    packets[used++].payload.ip.ip = last.nextIp;
    lastIp = last.nextIp;
    haveLastIp = true;
  }
  uint8_t *at = ring.reserve(fastPacketsRoom);
  auto offset = static_cast<uint64_t>(at - ring.data());
  int status = 0;
  if (offset != ringEncoderAt)
    status = pt_enc_sync_set(ringEncoder.get(), offset);
  uint64_t written = 0;
  for (size_t i = 0; i < used && status >= 0; ++i) {
    status = pt_enc_next(ringEncoder.get(), &packets[i]);
    if (status >= 0)
      written += static_cast<uint64_t>(status);
  }
  ring.commit(written);
  sincePsb += written;
  // fastPacketsApply held, so runs were quiet before (refreshQuiet); of
  // what that needs, only the PSB+ may have come due.
  if (sincePsb >= psbPeriod || status < 0)
    quietCycles = 0;
  ringEncoderAt = status < 0 ? ~uint64_t(0) : offset + written;
  if (status < 0)
    return encodingError(packets[0].type, status);
  return llvm::Error::success();
}

// Here, with writeFastPackets inline: a block that writes packets is one
// call from the QEMU recorder's callback.
llvm::Error PacketWriterImpl::stepRunWithPackets(uint64_t ip, uint64_t count,
                                                 const ExecutedInsn &last) {
  if (fastPacketsApply(ip, count, last))
    return writeFastPackets(count, last); // It keeps quietCycles itself.
  return stepRunInGeneral(ip, count, last);
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

} // namespace magic_trace::packet_writer
