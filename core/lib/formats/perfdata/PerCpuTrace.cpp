//===- PerCpuTrace.cpp - Per-CPU AUX streams -> per-thread traces ---------===//
#include "PerCpuTrace.h"

#include "BoundaryPackets.h"

#include "../../base/PtBytes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace llvm;

namespace magic_trace::perfdata {
namespace {

/// Appends the bytes of `packets`, in order.
template <size_t... Sizes>
void appendPackets(std::vector<uint8_t> &bytes,
                   const uint8_t (&...packets)[Sizes]) {
  (bytes.insert(bytes.end(), std::begin(packets), std::end(packets)), ...);
}

/// PSB then PSBEND (Intel SDM vol. 3C, "Packet Stream Boundary"): a sync
/// point that resets the decoder's last IP and tracing state; PT without a
/// FUP in it is disabled until the next TIP.PGE.
void appendSyncPoint(std::vector<uint8_t> &bytes) {
  appendPackets(bytes, pt_bytes::kPsb, pt_bytes::kPsbEnd);
}
/// OVF: the CPU lost trace here.
void appendOverflow(std::vector<uint8_t> &bytes) {
  appendPackets(bytes, pt_bytes::kOvf);
}
/// The sync point after an OVF: a MODE.Exec (64-bit) in its PSB+. libipt
/// binds an OVF that a PSB follows to tracing off (pt_qry_find_ovf_fup);
/// after it, a PSB+ without FUP gave the decoder no status update to resync
/// at (PieceDecoder::crossedPsb), so it decoded the next piece on from the
/// overflow's state and failed there ("no memory mapped at this address":
/// PerfFakeKernel.TruncatedAuxRecordShowsAsMarkedGap). libipt reports the
/// MODE.Exec: the decoder resyncs at this PSB, and the next piece's own PSB+
/// sets the mode before any instruction runs.
void appendResyncPoint(std::vector<uint8_t> &bytes) {
  appendPackets(bytes, pt_bytes::kPsb, pt_bytes::kModeExec64,
                pt_bytes::kPsbEnd);
}

struct ThreadPieces {
  std::vector<uint8_t> bytes;
  bool started = false;
  bool afterOverflow = false; ///< The bytes end with an OVF.
  uint32_t lastCpu = 0;
  uint64_t lastEnd = 0; ///< AUX offset right after the last piece.
};

/// True when the AUX records on `cpu` cover its stream without overwrites.
bool tiles(const CpuStream &stream, ArrayRef<AuxPiece> pieces) {
  if (!stream.haveBase || pieces.empty())
    return false;
  uint64_t covered = 0;
  for (const AuxPiece &piece : pieces) {
    if (piece.flags & kAuxFlagOverwrite)
      return false;
    covered += piece.size;
  }
  return covered > 0;
}

} // namespace

Expected<std::vector<ThreadTrace>>
splitPerCpu(std::map<uint32_t, CpuStream> &cpus, std::vector<AuxPiece> pieces,
            bool snapshotMode, PerCpuStats *stats) {
  PerCpuStats local;
  PerCpuStats &counts = stats ? *stats : local;
  std::map<uint32_t, std::vector<AuxPiece>> byCpu;
  for (const AuxPiece &piece : pieces)
    byCpu[piece.cpu].push_back(piece);

  std::vector<AuxPiece> used;
  std::map<uint32_t, ThreadTrace> whole;
  for (auto &[cpu, stream] : cpus) {
    std::vector<AuxPiece> &mine = byCpu[cpu];
    if (!snapshotMode && tiles(stream, mine)) {
      used.insert(used.end(), mine.begin(), mine.end());
      continue;
    }
    if (stream.tids.size() != 1)
      return createStringError(
          formatv("perf.data: CPU {0}'s trace was written by {1} threads and "
                  "no AUX records say which bytes are whose (a system-wide "
                  "or snapshot recording of several threads: record the "
                  "process with perf record -e intel_pt//u -p PID, or "
                  "--per-thread)",
                  cpu, stream.tids.size())
              .str());
    ++counts.wholeStreams;
    uint32_t tid = *stream.tids.begin();
    ThreadTrace &thread = whole[tid];
    thread.tid = tid;
    thread.wrapped = snapshotMode;
    if (!thread.bytes.empty())
      appendSyncPoint(thread.bytes);
    thread.bytes.insert(thread.bytes.end(), stream.bytes.begin(),
                        stream.bytes.end());
  }

  // Pieces in the order they were written (each AUX record ends one).
  // (std::stable_sort is deprecated in this libstdc++ under clang: sort by
  // time, then by the order the file holds them.)
  std::vector<std::pair<uint64_t, size_t>> keys;
  for (size_t i = 0; i < used.size(); ++i)
    keys.push_back({used[i].time, i});
  std::sort(keys.begin(), keys.end());
  std::vector<AuxPiece> sorted;
  for (const auto &key : keys)
    sorted.push_back(used[key.second]);
  used = std::move(sorted);
  std::map<uint32_t, ThreadPieces> threads;
  std::vector<uint32_t> order;
  for (const AuxPiece &piece : used) {
    const CpuStream &stream = cpus[piece.cpu];
    ThreadPieces &thread = threads[piece.tid];
    if (!thread.started)
      order.push_back(piece.tid);
    bool inFile =
        piece.offset >= stream.base &&
        piece.offset - stream.base <= stream.bytes.size() &&
        piece.size <= stream.bytes.size() - (piece.offset - stream.base);
    bool continues = thread.started && thread.lastCpu == piece.cpu &&
                     thread.lastEnd == piece.offset;
    if (!inFile) {
      ++counts.lostPieces;
      if (thread.started) {
        appendOverflow(thread.bytes);
        thread.afterOverflow = true;
      }
      thread.started = true;
      thread.lastEnd = UINT64_MAX;
      continue;
    }
    ArrayRef<uint8_t> bytes =
        ArrayRef<uint8_t>(stream.bytes)
            .slice(piece.offset - stream.base, piece.size);
    if (thread.started && !continues && thread.afterOverflow) {
      appendResyncPoint(thread.bytes);
      // A piece whose own PSB+ has tracing on (a FUP) is entered as a
      // switch-in is (TIP.PGE to that IP): a decoder that resyncs at the
      // resync point (LLDB's, after the overflow's error) finds tracing
      // enabled there, as libipt's rules want, and the piece's PSB+ that
      // follows is a status update at the same IP.
      if (std::optional<uint64_t> ip = psbFupIp(bytes))
        encodeIpPacket(ppt_tip_pge, *ip, thread.bytes);
    } else if (thread.started && !continues)
      appendSyncPoint(thread.bytes);
    thread.afterOverflow = false;
    thread.bytes.insert(thread.bytes.end(), bytes.begin(), bytes.end());
    ++counts.pieces;
    thread.started = true;
    thread.lastCpu = piece.cpu;
    thread.lastEnd = piece.offset + piece.size;
    // The kernel cut this piece short: what followed it is lost.
    if (piece.flags & (kAuxFlagTruncated | kAuxFlagCollision)) {
      ++counts.lostPieces;
      appendOverflow(thread.bytes);
      thread.afterOverflow = true;
      thread.lastEnd = UINT64_MAX;
    }
  }

  std::vector<ThreadTrace> result;
  for (uint32_t tid : order) {
    ThreadTrace trace;
    trace.tid = tid;
    trace.bytes = std::move(threads[tid].bytes);
    auto extra = whole.find(tid);
    if (extra != whole.end()) {
      appendSyncPoint(trace.bytes);
      trace.bytes.insert(trace.bytes.end(), extra->second.bytes.begin(),
                         extra->second.bytes.end());
      whole.erase(extra);
    }
    result.push_back(std::move(trace));
  }
  for (auto &[tid, trace] : whole)
    result.push_back(std::move(trace));
  return result;
}

} // namespace magic_trace::perfdata
