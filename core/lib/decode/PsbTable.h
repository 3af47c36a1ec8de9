//===- PsbTable.h - A buffer's PSBs and libipt's configuration --*- C++ -*-===//
//
// Internal to core/lib/decode/. libipt's configuration for one thread's
// bytes, and the scans of the buffer with libipt's packet decoder that come
// before any block is decoded: where every PSB is and what its PSB+ holds
// (where a piece may start, docs/decoder.md "PSB pieces"), and whether any
// TSC packet is there at all.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODE_PSBTABLE_H
#define MAGIC_TRACE_DECODE_PSBTABLE_H

#include "magic_trace/CpuIdentity.h"
#include "magic_trace/PtTiming.h"

#include "llvm/ADT/ArrayRef.h"

#include <intel-pt.h>

#include <cstdint>
#include <vector>

namespace magic_trace::decode_detail {

/// libipt's configuration for one thread's bytes: CPU errata, timing, and
/// blocks that end after every call and jump (so each Block's last
/// instruction is the only branch in it).
pt_config makeConfig(llvm::ArrayRef<uint8_t> bytes, const CpuIdentity &cpu,
                     const PtTimingConfig &timing);

/// Every PSB packet of a buffer, in order, and where a decode synced at
/// each one starts (docs/decoder.md, "PSB pieces").
struct PsbTable {
  std::vector<uint64_t> offsets;
  /// Per PSB: its PSB+ holds a FUP, i.e. tracing is on there and a sync
  /// starts at the FUP's address. Without one, tracing is off and a sync
  /// starts disabled.
  std::vector<bool> tracing;
  /// Per PSB: a decode that crossed it can stop exactly where a sync at it
  /// starts, so a piece may start there. True when tracing is off, or when
  /// the PSB+ also holds MODE.Exec, the status update libipt binds to the
  /// FUP's address (and ends the block at); false right after an OVF
  /// (PADs aside): libipt reads on into the PSB+ to learn where the
  /// overflow ends (pt_qry_find_ovf_fup) and delivers the overflow after
  /// that PSB+'s status updates, so a run that stopped there would drop it.
  std::vector<bool> joinable;
  /// Per PSB: the TSC its PSB+ holds (bits 55:0), 0 without one.
  std::vector<uint64_t> tsc;
};

/// The PSB table of the buffer `config` names; empty when libipt cannot
/// allocate a packet decoder or the buffer holds no PSB.
PsbTable findPsbs(const pt_config &config);

/// Whether the buffer holds a TSC packet. Without one, libipt has no time to
/// give ("-pte_no_time if there has not been a TSC packet", pt_blk_time), so
/// every item's time is 0. True when the scan cannot run.
bool hasTscPacket(const pt_config &config);

} // namespace magic_trace::decode_detail

#endif
