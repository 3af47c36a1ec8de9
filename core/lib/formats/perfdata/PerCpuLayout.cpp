//===- PerCpuLayout.cpp - Per-thread traces -> per-CPU AUX streams --------===//
//
// Walks each thread's PT with libipt's packet decoder (this writer, like the
// packet writer, reads and writes packets itself), cuts it at its PSBs,
// schedules the pieces onto CPUs and encodes the packets it adds with
// libipt's encoder. See PerCpuLayout.h for the rules.
//
//===----------------------------------------------------------------------===//
#include "PerCpuLayout.h"

#include "BoundaryPackets.h"

#include "../../base/PacketIp.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace llvm;

namespace magic_trace::perfdata {
namespace {

/// One PSB+ of a thread's trace: where a piece may start.
struct Cut {
  uint64_t offset = 0; ///< The PSB.
  uint64_t end = 0;    ///< Just after PSBEND.
  uint64_t tsc = 0;    ///< The PSB+'s TSC.
  /// Tracing was on: the PSB+ holds FUP(ip) at [fupAt, fupAt + fupSize).
  bool on = false;
  uint64_t ip = 0;
  uint64_t fupAt = 0, fupSize = 0;
  /// Its MODE.Exec, when it has one, at [modeAt, modeAt + modeSize).
  uint64_t modeAt = 0, modeSize = 0;
};

/// A thread's trace, walked.
struct ThreadScan {
  uint32_t tid = 0;
  ArrayRef<uint8_t> bytes;
  std::vector<Cut> cuts;           ///< cuts[0] is at offset 0.
  std::vector<uint64_t> tscAt;     ///< Offsets of every TSC packet.
  std::vector<uint64_t> endBounds; ///< Per piece: no later than its end.
};

/// Sums what the timing packets after a piece's last TSC can add to it,
/// for the thread's last piece, which no next PSB closes: each MTC at most
/// one MTC period, plus the CYC cycles since (core cycles = TSC ticks at the
/// nominal ratio the emulator writes), plus one more period.
struct TailClock {
  uint64_t tsc = 0;
  uint64_t mtcs = 0;
  uint64_t cycles = 0;
  uint64_t bound(uint64_t mtcPeriod) const {
    return tsc + (mtcs + 2) * mtcPeriod + cycles;
  }
};

Expected<ThreadScan> scanThread(const ThreadTrace &thread, uint64_t mtcPeriod) {
  ThreadScan scan;
  scan.tid = uint32_t(thread.tid);
  scan.bytes = thread.bytes;
  auto fail = [&](const Twine &why) {
    return createStringError(formatv("thread {0}: {1}", thread.tid, why).str());
  };
  if (thread.wrapped)
    return fail("its ring wrapped; --per-cpu needs a whole trace (record "
                "with a bigger --buffer-size)");
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t *>(thread.bytes.data());
  config.end = const_cast<uint8_t *>(thread.bytes.data() + thread.bytes.size());
  PacketDecoderPtr decoder(pt_pkt_alloc_decoder(&config));
  if (!decoder || pt_pkt_sync_set(decoder.get(), 0) < 0)
    return fail("cannot walk its PT (check libipt)");
  uint64_t lastIp = 0;
  bool inPsb = false;
  TailClock tail;
  for (;;) {
    uint64_t at = 0;
    pt_packet packet;
    if (pt_pkt_get_offset(decoder.get(), &at) < 0)
      break;
    int status = pt_pkt_next(decoder.get(), &packet, sizeof(packet));
    if (status == -pte_eos)
      break;
    if (status < 0)
      return fail(formatv("libipt cannot read the packet at offset {0}: {1}",
                          at, pt_errstr(pt_errcode(status))));
    switch (packet.type) {
    case ppt_psb:
      if (scan.cuts.empty() && at != 0)
        return fail("its trace does not start with a PSB");
      if (!scan.cuts.empty())
        scan.endBounds.push_back(0); // Filled in by the TSC below.
      scan.cuts.push_back({});
      scan.cuts.back().offset = at;
      lastIp = 0;
      inPsb = true;
      break;
    case ppt_psbend:
      scan.cuts.back().end = at + packet.size;
      inPsb = false;
      break;
    case ppt_tsc:
      scan.tscAt.push_back(at);
      tail = {packet.payload.tsc.tsc, 0, 0};
      if (inPsb) {
        scan.cuts.back().tsc = packet.payload.tsc.tsc;
        if (scan.endBounds.size() >= 1 && scan.endBounds.back() == 0)
          scan.endBounds.back() = packet.payload.tsc.tsc;
      }
      break;
    case ppt_mtc:
      ++tail.mtcs;
      tail.cycles = 0;
      break;
    case ppt_cyc:
      tail.cycles += packet.payload.cyc.value;
      break;
    case ppt_mode:
      if (inPsb && packet.payload.mode.leaf == pt_mol_exec) {
        scan.cuts.back().modeAt = at;
        scan.cuts.back().modeSize = packet.size;
      }
      break;
    case ppt_fup:
    case ppt_tip:
    case ppt_tip_pge:
    case ppt_tip_pgd: {
      uint64_t ip = 0;
      bool hasIp = resolvePacketIp(packet.payload.ip, lastIp, &ip);
      if (inPsb && packet.type == ppt_fup && hasIp) {
        Cut &cut = scan.cuts.back();
        cut.on = true;
        cut.ip = ip;
        cut.fupAt = at;
        cut.fupSize = packet.size;
      }
      break;
    }
    case ppt_ovf:
      return fail(formatv("its trace has an overflow at offset {0}; "
                          "--per-cpu needs a trace without loss",
                          at));
    default:
      break;
    }
  }
  if (scan.cuts.empty())
    return fail("its trace has no PSB");
  for (const Cut &cut : scan.cuts)
    if (!cut.end || !cut.tsc)
      return fail(formatv("the PSB+ at offset {0} has no PSBEND or no TSC; "
                          "--per-cpu needs timing (TSC in every PSB+)",
                          cut.offset));
  scan.endBounds.push_back(tail.bound(mtcPeriod));
  return scan;
}

/// Appends thread bytes [begin, end) to `out`, every TSC packet in them
/// moved `shift` ticks later.
void appendShifted(const ThreadScan &scan, uint64_t begin, uint64_t end,
                   uint64_t shift, std::vector<uint8_t> &out) {
  size_t base = out.size();
  out.insert(out.end(), scan.bytes.begin() + begin, scan.bytes.begin() + end);
  auto first = std::lower_bound(scan.tscAt.begin(), scan.tscAt.end(), begin);
  for (auto it = first; it != scan.tscAt.end() && *it < end; ++it) {
    uint8_t *payload = out.data() + base + (*it - begin) + 1;
    uint64_t tsc = 0;
    for (unsigned i = 0; i < 7; ++i)
      tsc |= uint64_t(payload[i]) << (8 * i);
    tsc += shift;
    for (unsigned i = 0; i < 7; ++i)
      payload[i] = uint8_t(tsc >> (8 * i));
  }
}

/// Appends piece `index` of a thread as it reads on a CPU, TSC moved by
/// `shift` (see PerCpuLayout.h).
void appendPiece(const ThreadScan &scan, size_t index, uint64_t shift,
                 std::vector<uint8_t> &out) {
  const Cut &cut = scan.cuts[index];
  uint64_t end = index + 1 < scan.cuts.size() ? scan.cuts[index + 1].offset
                                              : scan.bytes.size();
  if (index > 0 && cut.on) {
    // PSB+ without FUP and MODE.Exec, then MODE.Exec and TIP.PGE.
    std::vector<std::pair<uint64_t, uint64_t>> drop = {
        {cut.fupAt, cut.fupAt + cut.fupSize}};
    if (cut.modeSize)
      drop.push_back({cut.modeAt, cut.modeAt + cut.modeSize});
    std::sort(drop.begin(), drop.end());
    uint64_t from = cut.offset;
    for (auto [dropBegin, dropEnd] : drop) {
      appendShifted(scan, from, dropBegin, shift, out);
      from = dropEnd;
    }
    appendShifted(scan, from, cut.end, shift, out);
    if (cut.modeSize)
      out.insert(out.end(), scan.bytes.begin() + cut.modeAt,
                 scan.bytes.begin() + cut.modeAt + cut.modeSize);
    encodeIpPacket(ppt_tip_pge, cut.ip, out);
    appendShifted(scan, cut.end, end, shift, out);
  } else {
    appendShifted(scan, cut.offset, end, shift, out);
  }
  if (index + 1 < scan.cuts.size() && scan.cuts[index + 1].on) {
    encodeIpPacket(ppt_fup, scan.cuts[index + 1].ip, out);
    encodeIpPacket(ppt_tip_pgd, 0, out);
  }
}

} // namespace

Expected<PerCpuLayout> layOutPerCpu(const Snapshot &snapshot, unsigned cpus) {
  if (cpus == 0 || cpus > 1024)
    return createStringError("--per-cpu takes 1 to 1024 CPUs");
  const PtTimingConfig &timing = snapshot.timing;
  if (!timing.cpuid15Ebx || !timing.cpuid15Eax)
    return createStringError(
        "--per-cpu needs the recording's TSC:CTC ratio (CPUID 0x15), to move "
        "pieces in time without changing their MTC and TMA packets");
  // Q: 2^16 CTC ticks (TMA's CTC field) and a multiple of MTC's 8-bit
  // payload's period, in TSC ticks.
  unsigned ctcBits = std::max(16u, unsigned(timing.mtcFreq) + 8);
  uint64_t quantum = (uint64_t(1) << ctcBits) * timing.cpuid15Ebx;
  if (quantum % timing.cpuid15Eax)
    return createStringError("--per-cpu: the TSC:CTC ratio does not divide "
                             "a whole CTC period");
  quantum /= timing.cpuid15Eax;
  uint64_t mtcPeriod =
      (uint64_t(1) << timing.mtcFreq) * timing.cpuid15Ebx / timing.cpuid15Eax;
  // At least 1 µs between pieces on a CPU, at any TSC rate up to 6 GHz.
  constexpr uint64_t kGap = 6000;

  std::vector<ThreadScan> scans;
  for (const ThreadTrace &thread : snapshot.threads) {
    if (thread.bytes.empty())
      continue;
    Expected<ThreadScan> scan = scanThread(thread, mtcPeriod);
    if (!scan)
      return scan.takeError();
    scans.push_back(std::move(*scan));
  }
  if (scans.empty())
    return createStringError("--per-cpu: no thread has trace");

  PerCpuLayout layout;
  layout.cpus.resize(cpus);
  struct Lane {
    uint64_t free = 0; ///< TSC after which the next piece may start.
    uint32_t lastTid = 0;
  };
  std::vector<Lane> lanes(cpus);
  struct Progress {
    size_t next = 0;
    uint64_t periods = 0; ///< Shift of the last piece, in Q.
    uint64_t readyAt = 0; ///< Shifted end of the last piece.
    uint32_t lastCpu = UINT32_MAX;
  };
  std::vector<Progress> progress(scans.size());
  std::map<std::pair<uint32_t, uint32_t>, bool> started; // (tid, cpu)
  auto ns = [&](uint64_t tsc) { return snapshot.time.tscToNs(tsc); };
  auto add = [&](LaneRecord record) { layout.records.push_back(record); };

  for (;;) {
    // The CPU that frees first takes the thread that can start on it
    // soonest; on a tie, another thread than the one it just ran.
    uint32_t cpu = 0;
    for (uint32_t c = 1; c < cpus; ++c)
      if (lanes[c].free < lanes[cpu].free)
        cpu = c;
    Lane &lane = lanes[cpu];
    size_t best = SIZE_MAX;
    uint64_t bestPeriods = 0, bestStart = 0;
    for (size_t t = 0; t < scans.size(); ++t) {
      const ThreadScan &scan = scans[t];
      const Progress &p = progress[t];
      if (p.next >= scan.cuts.size())
        continue;
      uint64_t start = scan.cuts[p.next].tsc;
      uint64_t earliest = std::max(lane.free, p.readyAt) + kGap;
      uint64_t periods = p.periods;
      if (start + periods * quantum < earliest)
        periods = (earliest - start + quantum - 1) / quantum;
      uint64_t shifted = start + periods * quantum;
      bool better = best == SIZE_MAX || shifted < bestStart ||
                    (shifted == bestStart && scans[best].tid == lane.lastTid &&
                     scan.tid != lane.lastTid);
      if (better) {
        best = t;
        bestPeriods = periods;
        bestStart = shifted;
      }
    }
    if (best == SIZE_MAX)
      break;
    const ThreadScan &scan = scans[best];
    Progress &p = progress[best];
    uint64_t shift = bestPeriods * quantum;
    uint64_t end = scan.endBounds[p.next] + shift;
    std::vector<uint8_t> &stream = layout.cpus[cpu];

    // In: the idle task switches to the thread, which starts tracing here.
    uint64_t in = ns(bestStart - kGap / 4);
    add({LaneRecord::SwitchOut, in - 2, cpu, 0, scan.tid});
    add({LaneRecord::SwitchIn, in - 1, cpu, scan.tid, 0});
    if (!started[{scan.tid, cpu}]) {
      started[{scan.tid, cpu}] = true;
      add({LaneRecord::ItraceStart, in, cpu, scan.tid, 0});
    }
    uint64_t offset = stream.size();
    appendPiece(scan, p.next, shift, stream);
    // Out: the piece ends, its AUX record, then the idle task.
    uint64_t out = ns(end + kGap / 4);
    add({LaneRecord::SwitchOut, out, cpu, scan.tid, 0});
    add({LaneRecord::Aux, out + 1, cpu, scan.tid, 0, offset,
         stream.size() - offset});
    add({LaneRecord::SwitchIn, out + 2, cpu, 0, scan.tid});

    ++layout.pieces;
    if (p.lastCpu != UINT32_MAX && p.lastCpu != cpu)
      ++layout.migrations;
    p.lastCpu = cpu;
    p.periods = bestPeriods;
    p.readyAt = end;
    ++p.next;
    lane.free = end;
    lane.lastTid = scan.tid;
  }
  // In time order, ties in the order written (std::stable_sort's buffer
  // is deprecated in this libstdc++).
  std::vector<size_t> order(layout.records.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const LaneRecord &x = layout.records[a], &y = layout.records[b];
    return x.time != y.time ? x.time < y.time : a < b;
  });
  std::vector<LaneRecord> sorted;
  sorted.reserve(order.size());
  for (size_t i : order)
    sorted.push_back(layout.records[i]);
  layout.records = std::move(sorted);
  return layout;
}

} // namespace magic_trace::perfdata
