//===- PsbParallel.cpp - Scheduling PSB pieces and stitching them ---------===//
//
// SnapshotDecoder::decode: how a thread's buffer is cut into pieces at PSBs
// (pieceStarts), decoded on several threads (decodePieces; one piece streams
// as it is decoded), or in one run beside the caller (decodeOneRunAlongside,
// decodeThreadOverlapped), and how the pieces are joined in order by
// following their handoffs (stitch). Each piece is a PieceDecoder's; both
// ways use the whole buffer as libipt's trace, so read-ahead across a
// boundary behaves the same. docs/decoder.md explains why they agree.
//
//===----------------------------------------------------------------------===//
#include "PieceDecoder.h"
#include "PsbTable.h"
#include "StartQuirk.h"

#include "llvm/Support/Threading.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

using namespace llvm;

namespace magic_trace {
namespace {

using decode_detail::hasTscPacket;
using decode_detail::ImageTimeline;
using decode_detail::ItemStream;
using decode_detail::makeConfig;
using decode_detail::Piece;
using decode_detail::PieceDecoder;
using decode_detail::PsbTable;

/// Carries the batches of a buffer decoded in one run from the thread
/// running libipt to the thread that finishes them (decodeThreadOverlapped).
/// The batches move: the decode thread gets the storage
/// of a finished batch back, so items are neither copied nor written to
/// fresh pages. At most kQueued batches wait.
class BatchQueue {
public:
  explicit BatchQueue(size_t batchItems) : batchItems(batchItems) {}

  /// Takes `piece`'s items and errors, waiting while kQueued batches wait;
  /// leaves `piece` empty, with room for a batch unless it is the `last`.
  void push(Piece &piece, bool last = false) {
    Piece batch;
    batch.items.swap(piece.items);
    batch.errors.swap(piece.errors);
    std::unique_lock<std::mutex> hold(lock);
    changed.wait(hold, [&] { return batches.size() < kQueued; });
    batches.push_back(std::move(batch));
    if (!spare.empty()) {
      piece.items.swap(spare.back());
      spare.pop_back();
    }
    changed.notify_all();
    hold.unlock();
    if (!last)
      piece.items.reserve(batchItems);
  }

  /// No more batches will come.
  void close() {
    std::lock_guard<std::mutex> hold(lock);
    closed = true;
    changed.notify_all();
  }

  /// The next batch into `out`; false once close() was called and every
  /// batch was taken.
  bool pop(Piece &out) {
    std::unique_lock<std::mutex> hold(lock);
    changed.wait(hold, [&] { return !batches.empty() || closed; });
    if (batches.empty())
      return false;
    out = std::move(batches.front());
    batches.pop_front();
    changed.notify_all();
    return true;
  }

  /// Gives a consumed batch's storage back to the decode thread.
  void recycle(Piece &consumed) {
    consumed.items.clear();
    std::lock_guard<std::mutex> hold(lock);
    if (spare.size() < kQueued)
      spare.push_back(std::move(consumed.items));
    consumed.items = {};
  }

private:
  static constexpr size_t kQueued = 4;
  size_t batchItems;
  std::mutex lock;
  std::condition_variable changed;
  std::deque<Piece> batches;
  std::vector<std::vector<TraceItem>> spare;
  bool closed = false;
};

unsigned decodeThreads(const DecodeOptions &options) {
  if (options.threads)
    return options.threads;
  return std::max(1u, llvm::hardware_concurrency().compute_thread_count());
}

/// PSB indices where parallel pieces start: about four pieces per decode
/// thread, none smaller than options.minChunkBytes.
std::vector<size_t> pieceStarts(const PsbTable &table, size_t first,
                                uint64_t bufferSize, unsigned threads,
                                const DecodeOptions &options) {
  ArrayRef<uint64_t> psbs = table.offsets;
  std::vector<size_t> starts;
  if (first >= psbs.size())
    return starts;
  starts.push_back(first);
  if (threads <= 1)
    return starts;
  uint64_t target = std::max<uint64_t>(
      options.minChunkBytes, (bufferSize - psbs[first]) / (threads * 4));
  // Only where a run that crossed the PSB stops (PsbTable::joinable).
  for (size_t i = first + 1; i < psbs.size(); ++i)
    if (table.joinable[i] && psbs[i] - psbs[starts.back()] >= target)
      starts.push_back(i);
  return starts;
}

/// Where the pieces of a buffer start (PSB indices, ascending), and where
/// each must hand off: at the next piece's start.
struct PieceSchedule {
  std::vector<size_t> starts;
  size_t psbCount = 0;

  size_t boundaryAfter(size_t start) const {
    auto next = std::upper_bound(starts.begin(), starts.end(), start);
    return next == starts.end() ? psbCount : *next;
  }
};

/// Decodes every piece of `schedule`, on up to `threads` workers, each with
/// a PieceDecoder of its own. One piece (one worker) streams into `stream`
/// as it is decoded; parallel pieces are held for stitch() to join in
/// order. Errors: every worker's failure to make its decoder, joined.
Expected<std::vector<Piece>>
decodePieces(const pt_config &config, const ImageTimeline &timeline,
             const ThreadTrace &trace, const PsbTable &table,
             const PieceSchedule &schedule, unsigned threads,
             const DecodeOptions &options, ItemStream &stream) {
  const std::vector<size_t> &starts = schedule.starts;
  std::vector<Piece> pieces(starts.size());
  std::vector<Error> failures;
  std::atomic<size_t> nextPiece{0};
  std::mutex failureLock;
  PieceDecoder::Options pieceOptions;
  pieceOptions.cancel = options.cancel;
  if (starts.size() == 1) {
    pieceOptions.flush = [&](Piece &piece) { stream.append(piece); };
    pieceOptions.batchItems = std::max<size_t>(1, options.batchItems);
  }
  auto worker = [&] {
    auto decoder =
        PieceDecoder::create(config, timeline, trace, table, pieceOptions);
    if (!decoder) {
      std::lock_guard<std::mutex> lock(failureLock);
      failures.push_back(decoder.takeError());
      return;
    }
    for (size_t i = nextPiece++; i < starts.size(); i = nextPiece++)
      pieces[i] =
          (*decoder)->decodeFrom(starts[i], schedule.boundaryAfter(starts[i]));
  };
  unsigned workers = std::min<unsigned>(threads, starts.size());
  if (workers <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < workers; ++i)
      pool.emplace_back(worker);
    for (std::thread &thread : pool)
      thread.join();
  }
  if (failures.empty())
    return std::move(pieces);
  Error all = Error::success();
  for (Error &failure : failures)
    all = joinErrors(std::move(all), std::move(failure));
  return std::move(all);
}

/// Joins the pieces into `stream` in order by following their handoffs. A
/// handoff to a PSB no piece started at (its PSB+ had no status update to
/// stop at) is decoded here, serially. Errors: those of
/// PieceDecoder::create.
Error stitch(const pt_config &config, const ImageTimeline &timeline,
             const ThreadTrace &trace, const PsbTable &table,
             const PieceSchedule &schedule, std::vector<Piece> &pieces,
             ItemStream &stream, DecodeStats &stats) {
  const std::vector<size_t> &starts = schedule.starts;
  std::unique_ptr<PieceDecoder> stragglers;
  size_t index = starts.empty() ? schedule.psbCount : starts.front();
  while (index < schedule.psbCount) {
    auto start = std::lower_bound(starts.begin(), starts.end(), index);
    Piece extra;
    Piece *piece = nullptr;
    if (start != starts.end() && *start == index) {
      piece = &pieces[start - starts.begin()];
    } else {
      if (!stragglers) {
        auto decoder = PieceDecoder::create(config, timeline, trace, table);
        if (!decoder)
          return decoder.takeError();
        stragglers = std::move(*decoder);
      }
      extra = stragglers->decodeFrom(index, schedule.boundaryAfter(index));
      piece = &extra;
      ++stats.chunks;
    }
    if (piece->handoff < schedule.psbCount)
      ++stats.handoffs;
    stream.append(*piece);
    index = std::max(piece->handoff, index + 1);
    // Each piece's items are no longer needed once in the stream.
    *piece = Piece();
  }
  return Error::success();
}

/// decodeThreadOverlapped: the buffer decoded in one run on a thread of its
/// own, its batches finished by `stream` on the caller's.
Expected<uint64_t>
decodeOneRunAlongside(const pt_config &config, const ImageTimeline &timeline,
                      const ThreadTrace &trace, const PsbTable &table,
                      size_t first, const DecodeOptions &options,
                      ItemStream &stream, DecodeStats &stats) {
  size_t batch = std::max<size_t>(1, options.batchItems);
  BatchQueue queue(batch);
  PieceDecoder::Options pieceOptions;
  pieceOptions.cancel = options.cancel;
  pieceOptions.flush = [&](Piece &piece) { queue.push(piece); };
  pieceOptions.batchItems = batch;
  auto decoder =
      PieceDecoder::create(config, timeline, trace, table, pieceOptions);
  if (!decoder)
    return decoder.takeError();
  std::thread decoding([&] {
    // From the first PSB to the end: a run that streams never hands off.
    Piece last = (*decoder)->decodeFrom(first, table.offsets.size());
    queue.push(last, /*last=*/true);
    queue.close();
  });
  Piece piece;
  while (queue.pop(piece)) {
    stream.append(piece);
    queue.recycle(piece);
  }
  decoding.join();
  stats.chunks += 1;
  return stream.finish();
}

} // namespace

Expected<uint64_t> SnapshotDecoder::decode(size_t threadIndex, ItemSink &sink,
                                           DecodeStats &stats, bool overlap,
                                           size_t fromPsb) const {
  const ThreadTrace &trace = snapshot.threads[threadIndex];
  ArrayRef<uint8_t> bytes = trace.bytes;
  if (bytes.empty())
    return 0;
  const PsbTable &table = tables[threadIndex];
  if (table.offsets.empty()) {
    TraceItem item;
    item.kind = ItemKind::Error;
    DecodeError error{0, -pte_nosync, 0,
                      "no PSB packet in " + std::to_string(bytes.size()) +
                          " bytes (the buffer holds no point to start "
                          "decoding; record a larger buffer)"};
    sink.consume(item, error);
    return 0;
  }
  fromPsb = std::min(fromPsb, table.offsets.size() - 1);
  stats.psbs += table.offsets.size() - fromPsb;
  // The bytes decoded, less any PGE/PGD pair in which nothing ran (padded
  // out: the offsets of its PSBs and image marks stay).
  std::vector<uint8_t> quirkFree =
      decode_detail::padEmptyEnablePairs(bytes, table.offsets[fromPsb]);
  if (!quirkFree.empty())
    bytes = quirkFree;
  pt_config config = makeConfig(bytes, snapshot.cpu, snapshot.timing);

  ItemStream stream(sink, snapshot.time, options.batchItems,
                    [&config] { return hasTscPacket(config); });
  if (overlap)
    return decodeOneRunAlongside(config, *timeline, trace, table, fromPsb,
                                 options, stream, stats);
  unsigned threads = decodeThreads(options);
  PieceSchedule schedule{
      pieceStarts(table, fromPsb, bytes.size(), threads, options),
      table.offsets.size()};
  Expected<std::vector<Piece>> pieces = decodePieces(
      config, *timeline, trace, table, schedule, threads, options, stream);
  if (!pieces)
    return pieces.takeError();
  stats.chunks += pieces->size();
  if (Error error = stitch(config, *timeline, trace, table, schedule, *pieces,
                           stream, stats))
    return std::move(error);
  return stream.finish();
}

} // namespace magic_trace
