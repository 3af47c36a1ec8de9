//===- BlockDecoder.cpp - libipt block decoder, PSB-parallel --------------===//
//
// One loop (PieceDecoder::decodeFrom) decodes a buffer from a PSB onwards,
// re-anchoring libipt at every PSB it crosses (pt_blk_sync_set), so each PSB
// segment is decoded from its own PSB+ state. Serial decoding is that loop
// over the whole buffer. Parallel decoding runs
// it from several PSBs at once, each run stopping ("handing off") when it
// reaches a PSB that another run started at; the stitcher concatenates the
// runs. Both use the whole buffer as libipt's trace, so read-ahead across a
// boundary behaves the same. docs/decoder.md explains why the two agree.
//
//===----------------------------------------------------------------------===//
#include "Image.h"
#include "ItemStream.h"
#include "LibiptError.h"
#include "StartQuirk.h"

#include "magic_trace/InsnClassifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/mman.h>

using namespace llvm;

namespace magic_trace {

namespace {

using decode_detail::ItemStream;
using decode_detail::Piece;
using decode_detail::setRawTsc;

struct BlockDecoderDeleter {
  void operator()(pt_block_decoder *decoder) const {
    pt_blk_free_decoder(decoder);
  }
};
using BlockDecoderHandle =
    std::unique_ptr<pt_block_decoder, BlockDecoderDeleter>;

struct PacketDecoderDeleter {
  void operator()(pt_packet_decoder *decoder) const {
    pt_pkt_free_decoder(decoder);
  }
};

/// libipt's configuration for one thread's bytes: CPU errata, timing, and
/// blocks that end after every call and jump (so each Block's last
/// instruction is the only branch in it).
pt_config makeConfig(ArrayRef<uint8_t> bytes, const CpuIdentity &cpu,
                     const PtTimingConfig &timing) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t *>(bytes.data());
  config.end = const_cast<uint8_t *>(bytes.data() + bytes.size());
  // checkCpu() has accepted `cpu`: an Intel CPU, or "none" (no errata, on
  // the user's word).
  if (cpu.vendor == "GenuineIntel") {
    config.cpu.vendor = pcv_intel;
    config.cpu.family = static_cast<uint16_t>(cpu.family);
    config.cpu.model = static_cast<uint8_t>(cpu.model);
    config.cpu.stepping = static_cast<uint8_t>(cpu.stepping);
    if (pt_cpu_errata(&config.errata, &config.cpu) < 0)
      config.errata = pt_errata();
  }
  config.mtc_freq = timing.mtcFreq;
  config.nom_freq = timing.nomFreq;
  config.cpuid_0x15_eax = timing.cpuid15Eax;
  config.cpuid_0x15_ebx = timing.cpuid15Ebx;
  config.flags.variant.block.end_on_call = 1;
  config.flags.variant.block.end_on_jump = 1;
  return config;
}

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
  /// FUP's address (and ends the block at).
  std::vector<bool> joinable;
};

/// Reads the PSB+ at the packet decoder's position (a PSB) up to its
/// PSBEND. Returns (has FUP, has MODE.Exec).
std::pair<bool, bool> readPsbPlus(pt_packet_decoder *packets) {
  bool fup = false, execMode = false;
  pt_packet packet;
  // The PSB itself, then the header packets; anything else ends the PSB+
  // (a damaged one: libipt resyncs past it).
  for (int count = 0; count < 64; ++count) {
    if (pt_pkt_next(packets, &packet, sizeof(packet)) < 0)
      break;
    if (packet.type == ppt_psbend || (count > 0 && packet.type == ppt_psb))
      break;
    if (packet.type == ppt_fup)
      fup = true;
    else if (packet.type == ppt_mode && packet.payload.mode.leaf == pt_mol_exec)
      execMode = true;
  }
  return {fup, execMode};
}

PsbTable findPsbs(const pt_config &config) {
  PsbTable table;
  std::unique_ptr<pt_packet_decoder, PacketDecoderDeleter> packets(
      pt_pkt_alloc_decoder(&config));
  if (!packets)
    return table;
  while (pt_pkt_sync_forward(packets.get()) >= 0) {
    uint64_t offset = 0;
    if (pt_pkt_get_sync_offset(packets.get(), &offset) < 0)
      break;
    if (!table.offsets.empty() && offset <= table.offsets.back())
      break;
    auto [fup, execMode] = readPsbPlus(packets.get());
    table.offsets.push_back(offset);
    table.tracing.push_back(fup);
    table.joinable.push_back(!fup || execMode);
    // Search on from right after this PSB, whatever the PSB+ held.
    if (pt_pkt_sync_set(packets.get(), offset) < 0)
      break;
  }
  return table;
}

/// Whether the buffer holds a TSC packet. Without one, libipt has no time to
/// give ("-pte_no_time if there has not been a TSC packet", pt_blk_time), so
/// every item's time is 0. True when the scan cannot run.
bool hasTscPacket(const pt_config &config) {
  std::unique_ptr<pt_packet_decoder, PacketDecoderDeleter> packets(
      pt_pkt_alloc_decoder(&config));
  if (!packets)
    return true;
  // After a bad packet, search on from the next PSB.
  while (pt_pkt_sync_forward(packets.get()) >= 0) {
    pt_packet packet;
    while (pt_pkt_next(packets.get(), &packet, sizeof(packet)) >= 0)
      if (packet.type == ppt_tsc)
        return true;
  }
  return false;
}

BranchClass classFromLibipt(pt_insn_class iclass) {
  switch (iclass) {
  case ptic_other:
  case ptic_ptwrite:
    return BranchClass::Other;
  case ptic_cond_jump:
    return BranchClass::CondBranch;
  case ptic_return:
    return BranchClass::Return;
  default:
    // Calls and jumps: direct or indirect is not in iclass; far transfers
    // include SYSCALL; error/unknown need a look at the bytes.
    return BranchClass::Unknown;
  }
}

/// libipt's mode of a block. Unknown (no MODE.Exec yet) is what the
/// decoder assumed: 64-bit.
ExecMode execModeOf(pt_exec_mode mode) {
  switch (mode) {
  case ptem_32bit:
    return ExecMode::Bits32;
  case ptem_16bit:
    return ExecMode::Bits16;
  default:
    return ExecMode::Bits64;
  }
}

constexpr uint64_t kMaxTailInstructions = 1 << 20;

/// Asks for transparent huge pages under a large reserved item buffer:
/// writing the items was dominated by first-touch page faults (one per
/// 4 KiB, dear on a VM); with 2 MiB pages there are 512 times fewer. Only
/// advice: nothing changes if the kernel declines.
void adviseHugePages(std::vector<TraceItem> &items) {
  constexpr uintptr_t hugePage = 2 << 20;
  uintptr_t begin = reinterpret_cast<uintptr_t>(items.data());
  uintptr_t end = begin + items.capacity() * sizeof(TraceItem);
  begin = (begin + hugePage - 1) & ~(hugePage - 1);
  end &= ~(hugePage - 1);
  if (end > begin)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
}

/// Decodes from PSBs of one buffer. Owns one libipt decoder with a private
/// image copy, so several can run on different threads.
class PieceDecoder {
public:
  static Expected<std::unique_ptr<PieceDecoder>>
  create(const pt_config &config, const PtImage &image, const PsbTable &table) {
    std::unique_ptr<PieceDecoder> result(
        new PieceDecoder(image, table, uint64_t(config.end - config.begin)));
    auto copy = image.copy();
    if (!copy)
      return copy.takeError();
    result->imageCopy = std::move(*copy);
    result->decoder.reset(pt_blk_alloc_decoder(&config));
    if (!result->decoder)
      return decode_detail::allocationFailed("a block decoder");
    int status =
        pt_blk_set_image(result->decoder.get(), result->imageCopy.get());
    if (status < 0)
      return decode_detail::libiptBug(status, "libipt rejected the image");
    // Classifiers for 32- and 16-bit code are made when such code shows up.
    auto classifier = InsnClassifier::create(ExecMode::Bits64);
    if (!classifier)
      return classifier.takeError();
    result->classifiers[size_t(ExecMode::Bits64)] = std::move(*classifier);
    return std::move(result);
  }

  /// Called with the piece whenever it holds batchItems items, to take
  /// them (and its errors) away; only for a piece decoded in order, whose
  /// items are final as they come.
  std::function<void(Piece &)> flush;
  size_t batchItems = 1;

  /// Decodes from PSB `start` until the end of the buffer, or until a PSB
  /// at index >= `boundary` is reached (the piece then hands off there).
  Piece decodeFrom(size_t start, size_t boundary) {
    Piece piece;
    piece.handoff = psbs.size();
    if (flush) {
      piece.items.reserve(batchItems);
    } else {
      // About 1.5 items per PT byte in practice (a TNT byte holds up to six
      // branches). Reserving only claims address space; pages are touched
      // as items arrive, and no reallocation copies them (which dominated
      // the benchmark on a VM where page faults are dear).
      uint64_t end = boundary < psbs.size() ? psbs[boundary] : bufferSize;
      piece.items.reserve((end - psbs[start]) * 2);
      adviseHugePages(piece.items);
    }
    size_t index = start;
    while (index < psbs.size()) {
      if (index >= boundary) {
        piece.handoff = index;
        return piece;
      }
      int status = pt_blk_sync_set(decoder.get(), psbs[index]);
      // A PSB+ the end of the buffer cuts short holds no control flow:
      // the trace ends there, as a continuous decode's would.
      if (status == -pte_eos) {
        ++index;
        continue;
      }
      if (status < 0) {
        addError(piece, psbs[index], status, 0);
        ++index;
        continue;
      }
      std::optional<size_t> next = run(piece, status, index, boundary);
      if (!next)
        return piece;
      // Always forward, even if libipt could not say where it failed.
      index = std::max(*next, index + 1);
    }
    return piece;
  }

private:
  PieceDecoder(const PtImage &image, const PsbTable &table, uint64_t bufferSize)
      : image(image), table(table), psbs(table.offsets),
        bufferSize(bufferSize) {}

  /// Index of the last PSB at or before `offset`.
  size_t psbIndexAt(uint64_t offset) const {
    auto next = std::upper_bound(psbs.begin(), psbs.end(), offset);
    return next == psbs.begin() ? 0 : size_t(next - psbs.begin()) - 1;
  }

  uint64_t currentOffset() const {
    uint64_t offset = 0;
    if (pt_blk_get_offset(decoder.get(), &offset) < 0)
      return 0;
    return offset;
  }

  uint64_t currentTsc() const {
    uint64_t tsc = 0;
    // -pte_no_time: no TSC yet; the relative time is of no use to us.
    if (pt_blk_time(decoder.get(), &tsc, nullptr, nullptr) < 0)
      return 0;
    return tsc;
  }

  void maybeFlush(Piece &piece) {
    if (flush && piece.items.size() >= batchItems)
      flush(piece);
  }

  void addError(Piece &piece, uint64_t offset, int status, uint64_t ip) {
    TraceItem item;
    item.kind = ItemKind::Error;
    item.ip = ip;
    setRawTsc(item, currentTsc());
    item.detail = static_cast<uint32_t>(piece.errors.size());
    piece.items.push_back(item);
    piece.errors.push_back({offset, status, ip, libiptStatusText(status)});
    maybeFlush(piece);
  }

  void addEvent(Piece &piece, ItemKind kind, uint64_t ip, uint64_t tsc) {
    TraceItem item;
    item.kind = kind;
    item.ip = ip;
    setRawTsc(item, tsc);
    piece.items.push_back(item);
    maybeFlush(piece);
  }

  /// The classifier for code of `mode`, made on first use; null if LLVM
  /// cannot decode that mode.
  const InsnClassifier *classifierFor(ExecMode mode) {
    std::unique_ptr<InsnClassifier> &slot = classifiers[size_t(mode)];
    if (!slot) {
      auto created = InsnClassifier::create(mode);
      if (!created) {
        consumeError(created.takeError());
        return nullptr;
      }
      slot = std::move(*created);
    }
    return slot.get();
  }

  /// The class of a block's last instruction and, when the bytes had to be
  /// read (calls and jumps), its size (0 when not known).
  struct LastInsn {
    BranchClass branch = BranchClass::Unknown;
    uint8_t size = 0;
  };

  LastInsn classifyLast(const pt_block &block, ExecMode mode) {
    BranchClass known = classFromLibipt(block.iclass);
    if (known != BranchClass::Unknown)
      return {known, 0};
    // The same address in two modes is two instructions; the cache is for
    // the common case, 64-bit code.
    bool cacheable = mode == ExecMode::Bits64;
    auto cached = cacheable ? classes.find(block.end_ip) : classes.end();
    if (cached != classes.end())
      return cached->second;
    uint8_t bytes[16] = {};
    size_t size = 0;
    if (block.truncated) {
      size = block.size;
      std::copy(block.raw, block.raw + block.size, bytes);
    } else {
      size = image.read(block.end_ip, block.isid, bytes, 15);
    }
    LastInsn result;
    const InsnClassifier *classifier = classifierFor(mode);
    if (!classifier)
      return result;
    auto insn =
        classifier->classify(ArrayRef<uint8_t>(bytes, size), block.end_ip);
    if (insn)
      result = {insn->branch, insn->size};
    else
      consumeError(insn.takeError());
    if (cacheable)
      classes[block.end_ip] = result;
    return result;
  }

  /// Events that are data. Status updates (PSB+ contents) are not: they
  /// only mark where a PSB was crossed, which the caller checks first.
  void addLibiptEvent(Piece &piece, const pt_event &event) {
    uint64_t tsc = currentTsc();
    switch (event.type) {
    case ptev_enabled:
      addEvent(piece, ItemKind::Enable, event.variant.enabled.ip, tsc);
      break;
    case ptev_disabled:
      addEvent(piece, ItemKind::Disable,
               event.ip_suppressed ? 0 : event.variant.disabled.ip, tsc);
      break;
    case ptev_async_disabled:
      addEvent(piece, ItemKind::Disable, event.variant.async_disabled.at, tsc);
      break;
    case ptev_overflow:
      addEvent(piece, ItemKind::Overflow,
               event.ip_suppressed ? 0 : event.variant.overflow.ip, tsc);
      break;
    default:
      // async_branch, exec_mode, paging, tsx, cbr, tick, ...: the blocks
      // already show their effect on control flow.
      break;
    }
  }

  /// The PSB whose PSB+ holds status update `event`, if the decode stands
  /// exactly where a sync at that PSB would start and it is not the PSB
  /// this run synced at. The invariant (docs/decoder.md, "PSB pieces"): a
  /// run stops only at a PSB whose PSB+ it has just crossed, at the point a
  /// sync there starts, so the run from there repeats nothing and skips
  /// nothing.
  ///  - Which PSB: libipt delivers a PSB+'s status updates while its query
  ///    decoder sits at that PSB+'s PSBEND, so the offset names it, for
  ///    every update of the group, whatever their order.
  ///  - Where: with tracing off there (no FUP) nothing runs between the
  ///    PSB+ and the next TIP.PGE, so any of its updates will do. With
  ///    tracing on, a sync starts at the FUP's address, and the one update
  ///    bound to it is MODE.Exec: updates before it (PIP, VMCS, CBR) come
  ///    while earlier instructions are still to run, updates after it come
  ///    at the same address but are not needed.
  std::optional<size_t> crossedPsb(const pt_event &event, size_t syncedIndex) {
    size_t index = psbIndexAt(currentOffset());
    if (index <= syncedIndex || !table.joinable[index])
      return std::nullopt;
    if (table.tracing[index] && event.type != ptev_exec_mode)
      return std::nullopt;
    return index;
  }

  /// Decodes after a successful sync at PSB `syncedIndex`. Returns the PSB
  /// index to resync at (after an error, or at the next PSB crossed), or
  /// nullopt at the end of the trace or at a handoff (piece.handoff says
  /// where).
  std::optional<size_t> run(Piece &piece, int status, size_t syncedIndex,
                            size_t boundary) {
    uint64_t lastIp = 0;
    // After the last packet libipt still follows code that needs no trace;
    // on garbage that can be an endless direct-jump loop.
    uint64_t tailInstructions = 0;
    for (;;) {
      while (status >= 0 && (status & pts_event_pending)) {
        pt_event event;
        status = pt_blk_event(decoder.get(), &event, sizeof(event));
        if (status < 0)
          break;
        if (event.status_update) {
          std::optional<size_t> crossed = crossedPsb(event, syncedIndex);
          if (!crossed)
            continue;
          if (*crossed >= boundary) {
            piece.handoff = *crossed;
            return std::nullopt;
          }
          // Every PSB segment is decoded from its own PSB's state, serial
          // or not: libipt's time calibration (MTC/CYC) would otherwise
          // carry over from the previous segment, and a piece that starts
          // here cannot know it. So resync here, as a piece would.
          return *crossed;
        }
        addLibiptEvent(piece, event);
      }
      if (status >= 0) {
        pt_block block;
        uint64_t tsc = currentTsc();
        status = pt_blk_next(decoder.get(), &block, sizeof(block));
        if (block.ninsn) {
          TraceItem item;
          item.kind = ItemKind::Block;
          item.ip = block.ip;
          item.lastIp = block.end_ip;
          item.detail = block.ninsn;
          setRawTsc(item, tsc);
          item.mode = execModeOf(block.mode);
          LastInsn last = classifyLast(block, item.mode);
          item.lastClass = last.branch;
          item.lastSize = last.size;
          piece.items.push_back(item);
          maybeFlush(piece);
          lastIp = block.end_ip;
        }
        if (status >= 0 && (status & pts_eos)) {
          tailInstructions += block.ninsn;
          if (tailInstructions > kMaxTailInstructions)
            return std::nullopt;
        }
        if (status >= 0)
          continue;
        // Nothing decoded: the failure is at the block's start, e.g. the
        // address no module maps.
        if (!block.ninsn && block.ip)
          lastIp = block.ip;
      }
      if (status == -pte_eos)
        return std::nullopt;
      uint64_t offset = currentOffset();
      addError(piece, offset, status, lastIp);
      // Resync at the first PSB after the failure.
      size_t next = psbIndexAt(offset) + 1;
      if (next < psbs.size() && psbs[next] <= offset)
        ++next;
      if (next >= boundary && next < psbs.size()) {
        piece.handoff = next;
        return std::nullopt;
      }
      return next;
    }
  }

  const PtImage &image;
  const PsbTable &table;
  ArrayRef<uint64_t> psbs;
  uint64_t bufferSize;
  PtImageHandle imageCopy;
  BlockDecoderHandle decoder;
  /// By ExecMode; null until code of that mode is decoded.
  std::unique_ptr<InsnClassifier> classifiers[3];
  DenseMap<uint64_t, LastInsn> classes;
};

/// Collects a thread's items into a ThreadDecode (decodeSnapshot).
class CollectSink : public ItemSink {
public:
  CollectSink(ThreadDecode &out, uint64_t bufferBytes) : out(out) {
    // About 1.5 items per PT byte (see decodeFrom).
    out.items.reserve(bufferBytes * 2);
    adviseHugePages(out.items);
  }
  void consume(ArrayRef<TraceItem> items,
               ArrayRef<DecodeError> errors) override {
    out.items.insert(out.items.end(), items.begin(), items.end());
    out.errors.insert(out.errors.end(), errors.begin(), errors.end());
  }
  void timesEstimated(uint64_t instructions) override {
    out.estimatedInstructions = instructions;
  }

private:
  ThreadDecode &out;
};

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
std::vector<size_t> pieceStarts(const PsbTable &table, uint64_t bufferSize,
                                unsigned threads,
                                const DecodeOptions &options) {
  ArrayRef<uint64_t> psbs = table.offsets;
  std::vector<size_t> starts;
  if (psbs.empty())
    return starts;
  starts.push_back(0);
  if (threads <= 1)
    return starts;
  uint64_t target =
      std::max<uint64_t>(options.minChunkBytes, bufferSize / (threads * 4));
  // Only where a run that crossed the PSB stops (PsbTable::joinable).
  for (size_t i = 1; i < psbs.size(); ++i)
    if (table.joinable[i] && psbs[i] - psbs[starts.back()] >= target)
      starts.push_back(i);
  return starts;
}

} // namespace

Expected<std::unique_ptr<SnapshotDecoder>>
SnapshotDecoder::create(const Snapshot &snapshot,
                        const DecodeOptions &options) {
  if (Error error = checkCpu(snapshot.cpu))
    return std::move(error);
  std::unique_ptr<SnapshotDecoder> decoder(
      new SnapshotDecoder(snapshot, options));
  auto image = PtImage::build(snapshot.modules, options.readMemory,
                              decoder->moduleStatus);
  if (!image)
    return image.takeError();
  decoder->image = std::move(*image);
  decoder->quirkFree.resize(snapshot.threads.size());
  for (size_t i = 0; i < snapshot.threads.size(); ++i)
    if (!options.onlyTid || snapshot.threads[i].tid == options.onlyTid) {
      decoder->selectedThreads.push_back(i);
      decoder->quirkFree[i] =
          decode_detail::padEmptyEnablePairs(snapshot.threads[i].bytes);
    }
  if (options.onlyTid && decoder->selectedThreads.empty())
    return createStringError("no thread " + std::to_string(options.onlyTid) +
                             " in the snapshot (leave out --tid to decode "
                             "every thread)");
  return std::move(decoder);
}

namespace {

/// decodeThreadOverlapped: the buffer decoded in one run on a thread of its
/// own, its batches finished by `stream` on the caller's.
Expected<uint64_t>
decodeOneRunAlongside(const pt_config &config, const PtImage &image,
                      const PsbTable &table, const DecodeOptions &options,
                      ItemStream &stream, DecodeStats &stats) {
  auto decoder = PieceDecoder::create(config, image, table);
  if (!decoder)
    return decoder.takeError();
  size_t batch = std::max<size_t>(1, options.batchItems);
  BatchQueue queue(batch);
  (*decoder)->flush = [&](Piece &piece) { queue.push(piece); };
  (*decoder)->batchItems = batch;
  std::thread decoding([&] {
    // From the first PSB to the end: a run that streams never hands off.
    Piece last = (*decoder)->decodeFrom(0, table.offsets.size());
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

SnapshotDecoder::SnapshotDecoder(const Snapshot &snapshot,
                                 const DecodeOptions &options)
    : snapshot(snapshot), options(options) {}

SnapshotDecoder::~SnapshotDecoder() = default;

Expected<uint64_t> SnapshotDecoder::decodeThread(size_t threadIndex,
                                                 ItemSink &sink,
                                                 DecodeStats &stats) const {
  return decode(threadIndex, sink, stats, /*overlap=*/false);
}

Expected<uint64_t>
SnapshotDecoder::decodeThreadOverlapped(size_t threadIndex, ItemSink &sink,
                                        DecodeStats &stats) const {
  return decode(threadIndex, sink, stats, /*overlap=*/true);
}

Expected<uint64_t> SnapshotDecoder::decode(size_t threadIndex, ItemSink &sink,
                                           DecodeStats &stats,
                                           bool overlap) const {
  // The thread's bytes, less any PGE/PGD pair in which nothing ran.
  ArrayRef<uint8_t> bytes =
      quirkFree[threadIndex].empty()
          ? ArrayRef<uint8_t>(snapshot.threads[threadIndex].bytes)
          : ArrayRef<uint8_t>(quirkFree[threadIndex]);
  if (bytes.empty())
    return 0;
  pt_config config = makeConfig(bytes, snapshot.cpu, snapshot.timing);
  PsbTable table = findPsbs(config);
  ArrayRef<uint64_t> psbs = table.offsets;
  stats.psbs += psbs.size();
  if (psbs.empty()) {
    TraceItem item;
    item.kind = ItemKind::Error;
    DecodeError error{0, -pte_nosync, 0,
                      "no PSB packet in " + std::to_string(bytes.size()) +
                          " bytes (the buffer holds no point to start "
                          "decoding; record a larger buffer)"};
    sink.consume(item, error);
    return 0;
  }

  ItemStream stream(sink, snapshot.time, options.batchItems,
                    [&config] { return hasTscPacket(config); });
  if (overlap)
    return decodeOneRunAlongside(config, *image, table, options, stream, stats);
  unsigned threads = decodeThreads(options);
  std::vector<size_t> starts =
      pieceStarts(table, bytes.size(), threads, options);
  std::vector<Piece> pieces(starts.size());
  std::vector<Error> failures;
  auto boundaryAfter = [&](size_t start) {
    auto next = std::upper_bound(starts.begin(), starts.end(), start);
    return next == starts.end() ? psbs.size() : *next;
  };

  // Decode every piece, on up to `threads` workers. One piece (one worker)
  // streams into `stream` as it is decoded; parallel pieces are held until
  // the stitcher below joins them in order.
  std::atomic<size_t> nextPiece{0};
  std::mutex failureLock;
  bool streaming = starts.size() == 1;
  auto worker = [&] {
    auto decoder = PieceDecoder::create(config, *image, table);
    if (!decoder) {
      std::lock_guard<std::mutex> lock(failureLock);
      failures.push_back(decoder.takeError());
      return;
    }
    if (streaming) {
      (*decoder)->flush = [&](Piece &piece) { stream.append(piece); };
      (*decoder)->batchItems = std::max<size_t>(1, options.batchItems);
    }
    for (size_t i = nextPiece++; i < starts.size(); i = nextPiece++)
      pieces[i] = (*decoder)->decodeFrom(starts[i], boundaryAfter(starts[i]));
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
  if (!failures.empty()) {
    Error all = Error::success();
    for (Error &failure : failures)
      all = joinErrors(std::move(all), std::move(failure));
    return std::move(all);
  }
  stats.chunks += pieces.size();

  // Stitch: follow handoffs. A handoff to a PSB no piece started at (its
  // PSB+ had no status update to stop at) is decoded here, serially.
  std::unique_ptr<PieceDecoder> stragglers;
  size_t index = 0;
  while (index < psbs.size()) {
    auto start = std::lower_bound(starts.begin(), starts.end(), index);
    Piece extra;
    Piece *piece = nullptr;
    if (start != starts.end() && *start == index) {
      piece = &pieces[start - starts.begin()];
    } else {
      if (!stragglers) {
        auto decoder = PieceDecoder::create(config, *image, table);
        if (!decoder)
          return decoder.takeError();
        stragglers = std::move(*decoder);
      }
      extra = stragglers->decodeFrom(index, boundaryAfter(index));
      piece = &extra;
      ++stats.chunks;
    }
    if (piece->handoff < psbs.size())
      ++stats.handoffs;
    stream.append(*piece);
    index = std::max(piece->handoff, index + 1);
    // Each piece's items are no longer needed once in the stream.
    *piece = Piece();
  }
  return stream.finish();
}

Expected<DecodeResult> decodeSnapshot(const Snapshot &snapshot,
                                      const DecodeOptions &options) {
  auto decoder = SnapshotDecoder::create(snapshot, options);
  if (!decoder)
    return decoder.takeError();
  DecodeResult result;
  result.modules = (*decoder)->modules();
  for (size_t index : (*decoder)->selected()) {
    const ThreadTrace &trace = snapshot.threads[index];
    ThreadDecode out;
    out.tid = trace.tid;
    CollectSink sink(out, trace.bytes.size());
    auto instructions = (*decoder)->decodeThread(index, sink, result.stats);
    if (!instructions)
      return instructions.takeError();
    out.instructions = *instructions;
    result.threads.push_back(std::move(out));
  }
  return result;
}

Expected<std::vector<uint64_t>>
expandInstructions(const Snapshot &snapshot, const ThreadDecode &decode,
                   const DecodeOptions &options) {
  std::vector<ModuleImageStatus> ignored;
  auto image = PtImage::build(snapshot.modules, options.readMemory, ignored);
  if (!image)
    return image.takeError();
  // One classifier and one size cache per execution mode.
  std::unique_ptr<InsnClassifier> classifiers[3];
  DenseMap<uint64_t, uint8_t> sizes[3];
  std::vector<uint64_t> addresses;
  addresses.reserve(decode.instructions);
  for (const TraceItem &item : decode.items) {
    if (item.kind != ItemKind::Block)
      continue;
    size_t mode = size_t(item.mode);
    uint64_t ip = item.ip;
    for (uint32_t i = 0; i < item.detail; ++i) {
      addresses.push_back(ip);
      if (i + 1 == item.detail)
        break;
      auto &size = sizes[mode][ip];
      if (!size) {
        if (!classifiers[mode]) {
          auto created = InsnClassifier::create(item.mode);
          if (!created)
            return created.takeError();
          classifiers[mode] = std::move(*created);
        }
        uint8_t bytes[16] = {};
        size_t got = (*image)->read(ip, 0, bytes, 15);
        auto insn =
            classifiers[mode]->classify(ArrayRef<uint8_t>(bytes, got), ip);
        if (!insn)
          return insn.takeError();
        size = insn->size;
      }
      ip += size;
    }
  }
  return addresses;
}

Expected<uint64_t> rawBlockDecodeLoop(const Snapshot &snapshot,
                                      size_t threadIndex,
                                      const DecodeOptions &options) {
  if (threadIndex >= snapshot.threads.size())
    return createStringError("no thread at index " +
                             std::to_string(threadIndex));
  std::vector<ModuleImageStatus> ignored;
  auto image = PtImage::build(snapshot.modules, options.readMemory, ignored);
  if (!image)
    return image.takeError();
  auto copy = (*image)->copy();
  if (!copy)
    return copy.takeError();
  pt_config config = makeConfig(snapshot.threads[threadIndex].bytes,
                                snapshot.cpu, snapshot.timing);
  BlockDecoderHandle decoder(pt_blk_alloc_decoder(&config));
  if (!decoder)
    return decode_detail::allocationFailed("a block decoder");
  if (int status = pt_blk_set_image(decoder.get(), copy->get()); status < 0)
    return decode_detail::libiptBug(status, "libipt rejected the image");
  uint64_t instructions = 0;
  for (;;) {
    int status = pt_blk_sync_forward(decoder.get());
    if (status < 0)
      break;
    for (;;) {
      while (status >= 0 && (status & pts_event_pending)) {
        pt_event event;
        status = pt_blk_event(decoder.get(), &event, sizeof(event));
      }
      if (status < 0)
        break;
      pt_block block;
      status = pt_blk_next(decoder.get(), &block, sizeof(block));
      instructions += block.ninsn;
      if (status < 0)
        break;
    }
    if (status == -pte_eos)
      break;
  }
  return instructions;
}

} // namespace magic_trace
