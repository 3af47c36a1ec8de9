//===- InsnLoop.h - ptxed's instruction decode loop ------------*- C++ -*-===//
//
// The continuous libipt instruction-flow decode of libipt's ptxed
// (--insn-decoder): pt_insn_sync_forward, then pt_insn_next until the end,
// draining pending events with pt_insn_event before each pt_insn_next. An
// instruction that pt_insn_next reports together with an error still counts
// when libipt decoded it (iclass is not ptic_error), as in ptxed. After an
// error the loop records it and resyncs with pt_insn_sync_forward; a sync
// error that makes no progress ends the thread; -pte_eos ends it cleanly.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_REF_DECODE_INSNLOOP_H
#define MAGIC_TRACE_REF_DECODE_INSNLOOP_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <intel-pt.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ref_decode {

/// A decode error at its place in the instruction stream.
struct LoopError {
  uint64_t position = 0;          ///< Instructions decoded before it.
  std::optional<uint64_t> offset; ///< Trace offset, when libipt knows it.
  std::string message;            ///< pt_errstr of the status.
};

/// What one thread's decode produced.
struct LoopResult {
  uint64_t instructions = 0;
  std::vector<uint64_t> addresses; ///< Empty when addresses are not kept.
  std::vector<LoopError> errors;
};

/// Decodes `trace` with `config` (cpu and errata set; begin/end are filled in
/// here) against `image`. Keeps every address when `keepAddresses`. Fails
/// only when libipt cannot allocate or configure the decoder.
llvm::Expected<LoopResult> decodeInstructions(llvm::ArrayRef<uint8_t> trace,
                                              const pt_config &config,
                                              pt_image *image,
                                              bool keepAddresses);

} // namespace ref_decode

#endif
