//===- PieceDecoder.h - libipt's block decoder over PSB pieces --*- C++ -*-===//
//
// Internal to core/lib/decode/. A PieceDecoder decodes a buffer from one of
// its PSBs onwards with libipt's block decoder, re-anchoring libipt at every
// PSB it crosses (pt_blk_sync_set), so each PSB segment is decoded from its
// own PSB+ state, and stops ("hands off") at a boundary PSB another piece
// starts at. Its loop has three parts, as LLDB's intel-pt decoder has: event
// processing (drainEvents), block decoding (nextBlock), and resync after an
// error (resyncAfterError). PsbParallel.cpp schedules the pieces and stitches
// them; docs/decoder.md explains why pieces and a serial decode agree.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_DECODE_PIECEDECODER_H
#define MAGIC_TRACE_DECODE_PIECEDECODER_H

#include "Image.h"
#include "ImageTimeline.h"
#include "ItemStream.h"
#include "PsbTable.h"

#include "magic_trace/InsnClassifier.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace magic_trace::decode_detail {

struct BlockDecoderDeleter {
  void operator()(pt_block_decoder *decoder) const {
    pt_blk_free_decoder(decoder);
  }
};
using BlockDecoderHandle =
    std::unique_ptr<pt_block_decoder, BlockDecoderDeleter>;

/// One InsnClassifier per execution mode, each made on first use (code of
/// 32- and 16-bit mode is rare). The decoder's and expandInstructions' one
/// cache of classifiers.
class ModeClassifiers {
public:
  /// The classifier for code of `mode`. Errors: LLVM cannot decode that
  /// mode (InsnClassifier::create's).
  llvm::Expected<const InsnClassifier *> forMode(ExecMode mode);

private:
  std::unique_ptr<InsnClassifier> byMode[3]; ///< By ExecMode.
};

/// Asks for transparent huge pages under a large reserved item buffer:
/// writing the items was dominated by first-touch page faults (one per
/// 4 KiB, dear on a VM); with 2 MiB pages there are 512 times fewer. Only
/// advice: nothing changes if the kernel declines.
void adviseHugePages(std::vector<TraceItem> &items);

/// PieceDecoder::Options (outside the class so that create() can default
/// it).
struct PieceDecoderOptions {
  /// Called with the piece whenever it holds batchItems items, to take them
  /// (and its errors) away; only for a piece decoded in order, whose items
  /// are final as they come. Empty: the piece keeps every item.
  std::function<void(Piece &)> flush;
  size_t batchItems = 1;
  /// Only count instructions (instructionsSeen): no items, no errors, no
  /// classification. rawBlockDecodeLoop, the benchmarks' baseline, is the
  /// same loop so.
  bool countOnly = false;
  /// DecodeOptions::cancel.
  const std::atomic<bool> *cancel = nullptr;
};

/// Decodes from PSBs of one buffer. Owns one libipt decoder with a private
/// image copy, so several can run on different threads.
class PieceDecoder {
public:
  using Options = PieceDecoderOptions;

  /// A decoder over the buffer `config` names (the bytes of `trace`, whose
  /// image marks it reads), whose PSBs `table` lists. `timeline`, `trace`
  /// and `table` must outlive it. Errors: libipt cannot allocate the decoder
  /// or copy the image, or rejects the image (LibiptError); LLVM has no x86
  /// disassembler.
  static llvm::Expected<std::unique_ptr<PieceDecoder>>
  create(const pt_config &config, const ImageTimeline &timeline,
         const ThreadTrace &trace, const PsbTable &table, Options options = {});

  /// Decodes from PSB `start` until the end of the buffer, or until a PSB
  /// at index >= `boundary` is reached (the piece then hands off there).
  Piece decodeFrom(size_t start, size_t boundary);

  /// The instructions of every block decoded so far.
  uint64_t instructionsSeen() const { return instructions; }

private:
  /// The class of a block's last instruction and, when the bytes had to be
  /// read (calls and jumps), its size (0 when not known).
  struct LastInsn {
    BranchClass branch = BranchClass::Unknown;
    uint8_t size = 0;
  };

  /// One run from a sync at PSB `syncedIndex` to its end.
  struct Run {
    size_t syncedIndex = 0;
    size_t boundary = 0;
    uint64_t lastIp = 0; ///< Of the last block decoded, for errors.
    /// Instructions decoded after the last packet (pts_eos).
    uint64_t tailInstructions = 0;
  };

  /// How a run ends: resyncing at PSB `resyncAt`, or not at all (nullopt:
  /// the end of the trace, or a handoff that piece.handoff names).
  struct RunEnd {
    std::optional<size_t> resyncAt;
  };

  PieceDecoder(const ImageTimeline &timeline, const ThreadTrace &trace,
               const PsbTable &table, uint64_t bufferSize, Options options)
      : timeline(timeline), trace(trace), table(table), psbs(table.offsets),
        bufferSize(bufferSize), options(std::move(options)) {}

  /// The code of `newSeq` from here on: its image, its reader. Returns
  /// false (with an error item) when libipt cannot make the image.
  bool useSeq(Piece &piece, uint64_t newSeq);
  /// The seq of PSB `index` (ImageTimeline::seqAt).
  uint64_t seqOfPsb(size_t index) const;

  std::optional<size_t> run(Piece &piece, int status, const Run &start);
  std::optional<RunEnd> drainEvents(Piece &piece, int &status, Run &run);
  std::optional<RunEnd> nextBlock(Piece &piece, int &status, Run &run);
  std::optional<size_t> resyncAfterError(Piece &piece, int status,
                                         const Run &run);
  std::optional<size_t> crossedPsb(const pt_event &event, size_t syncedIndex);
  void addLibiptEvent(Piece &piece, const pt_event &event);
  void addBlock(Piece &piece, const pt_block &block, uint64_t tsc);
  /// An Error item; `skipped` PT bytes are not decoded because of it
  /// (DecodeError::skippedBytes).
  void addError(Piece &piece, uint64_t offset, int status, uint64_t ip,
                uint64_t skipped = 0);
  void addEvent(Piece &piece, ItemKind kind, uint64_t ip, uint64_t tsc);
  /// Moves to a later seq when a change with a time was passed (perf).
  void followTimedChanges(Piece &piece);
  LastInsn classifyLast(const pt_block &block, ExecMode mode);
  void maybeFlush(Piece &piece);
  size_t psbIndexAt(uint64_t offset) const;
  uint64_t currentOffset() const;
  uint64_t currentTsc() const;

  const ImageTimeline &timeline;
  const ThreadTrace &trace;
  const PsbTable &table;
  llvm::ArrayRef<uint64_t> psbs;
  uint64_t bufferSize;
  Options options;
  /// The code's seq, the image of its files and this decoder's copy of it.
  uint64_t seq = 0;
  const PtImage *image = nullptr;
  PtImageHandle imageCopy;
  /// Reads code outside files as of `seq` (the copy's callback).
  ReadMemoryFn reader;
  ImageTimeline::ReadCache readCache;
  BlockDecoderHandle decoder;
  ModeClassifiers classifiers;
  /// Last-instruction classes of 64-bit code by address: of file code, and
  /// of code outside files at `seq` (cleared when it changes).
  llvm::DenseMap<uint64_t, LastInsn> classes;
  llvm::DenseMap<uint64_t, LastInsn> outsideClasses;
  uint64_t instructions = 0;
  /// Blocks since the cancel flag was last looked at.
  unsigned sinceCancelCheck = 0;
  bool cancelled() {
    if (!options.cancel || ++sinceCancelCheck < 4096)
      return false;
    sinceCancelCheck = 0;
    return options.cancel->load(std::memory_order_relaxed);
  }
};

} // namespace magic_trace::decode_detail

#endif
