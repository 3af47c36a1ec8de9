//===- InsnLoop.cpp - ptxed's instruction decode loop ---------------------===//
//
// Mirrors decode_insn() and drain_events_insn() of libipt 2.0's ptxed, minus
// the printing: the same calls in the same order, the same rules for when an
// instruction counts and when to resync or stop.
//
//===----------------------------------------------------------------------===//
#include "InsnLoop.h"

#include <memory>

using namespace llvm;

namespace ref_decode {

namespace {

struct InsnDecoderDeleter {
  void operator()(pt_insn_decoder *decoder) const {
    pt_insn_free_decoder(decoder);
  }
};
using InsnDecoderPtr = std::unique_ptr<pt_insn_decoder, InsnDecoderDeleter>;

/// One thread's decode: owns the decoder, fills the result.
class InsnLoop {
public:
  InsnLoop(InsnDecoderPtr decoder, bool keepAddresses)
      : decoder(std::move(decoder)), keepAddresses(keepAddresses) {}

  /// The outer loop: sync, decode until an error, record it, resync.
  void run();

  LoopResult takeResult() { return std::move(result); }

private:
  /// Decodes from a sync point until a negative status, which it returns
  /// (-pte_eos at the end of the trace).
  int decodeUntilError(int status);

  /// Consumes pending events; returns the last status.
  int drainEvents(int status);

  void recordInstruction(const pt_insn &insn);
  void recordError(int status);

  InsnDecoderPtr decoder;
  bool keepAddresses;
  LoopResult result;
};

void InsnLoop::run() {
  uint64_t lastSync = 0;
  for (;;) {
    int status = pt_insn_sync_forward(decoder.get());
    if (status < 0) {
      if (status == -pte_eos)
        return;
      recordError(status);
      // Stop when a resync makes no progress: it never will.
      uint64_t offset = 0;
      if (pt_insn_get_offset(decoder.get(), &offset) < 0 || offset <= lastSync)
        return;
      lastSync = offset;
      continue;
    }
    status = decodeUntilError(status);
    if (status == -pte_eos)
      return;
    recordError(status);
  }
}

int InsnLoop::decodeUntilError(int status) {
  for (;;) {
    status = drainEvents(status);
    if (status < 0)
      return status;
    if (status & pts_eos)
      return -pte_eos;
    pt_insn insn;
    status = pt_insn_next(decoder.get(), &insn, sizeof(insn));
    if (status < 0) {
      // libipt may have decoded the instruction before failing to proceed.
      if (insn.iclass != ptic_error)
        recordInstruction(insn);
      return status;
    }
    recordInstruction(insn);
  }
}

int InsnLoop::drainEvents(int status) {
  while (status & pts_event_pending) {
    pt_event event;
    status = pt_insn_event(decoder.get(), &event, sizeof(event));
    if (status < 0)
      return status;
  }
  return status;
}

void InsnLoop::recordInstruction(const pt_insn &insn) {
  ++result.instructions;
  if (keepAddresses)
    result.addresses.push_back(insn.ip);
}

void InsnLoop::recordError(int status) {
  LoopError error;
  error.position = result.instructions;
  uint64_t offset = 0;
  if (pt_insn_get_offset(decoder.get(), &offset) >= 0)
    error.offset = offset;
  error.message = pt_errstr(pt_errcode(status));
  result.errors.push_back(std::move(error));
}

} // namespace

Expected<LoopResult> decodeInstructions(ArrayRef<uint8_t> trace,
                                        const pt_config &config,
                                        pt_image *image, bool keepAddresses) {
  if (trace.empty())
    return LoopResult();
  pt_config threadConfig = config;
  // libipt only reads the buffer; its config simply has no const.
  threadConfig.begin = const_cast<uint8_t *>(trace.data());
  threadConfig.end = threadConfig.begin + trace.size();
  InsnDecoderPtr decoder(pt_insn_alloc_decoder(&threadConfig));
  if (!decoder)
    return createStringError("libipt could not allocate an instruction "
                             "decoder");
  int status = pt_insn_set_image(decoder.get(), image);
  if (status < 0)
    return createStringError(Twine("libipt could not set the image: ") +
                             pt_errstr(pt_errcode(status)));
  InsnLoop loop(std::move(decoder), keepAddresses);
  loop.run();
  return loop.takeResult();
}

} // namespace ref_decode
