//===- PieceDecoder.cpp - libipt's block decoder over PSB pieces ----------===//
//
// The one sync loop of the decoder (PieceDecoder.h): decodeFrom syncs at
// each PSB in turn; run() alternates event processing and block decoding
// until the trace ends, a PSB is crossed, or an error makes it resync.
//
//===----------------------------------------------------------------------===//
#include "PieceDecoder.h"

#include "LibiptError.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

#include <sys/mman.h>

using namespace llvm;

namespace magic_trace::decode_detail {
namespace {

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

/// After the last packet libipt still follows code that needs no trace; on
/// garbage that can be an endless direct-jump loop. A run stops after this
/// many such instructions.
constexpr uint64_t kMaxTailInstructions = 1 << 20;

} // namespace

Expected<const InsnClassifier *> ModeClassifiers::forMode(ExecMode mode) {
  std::unique_ptr<InsnClassifier> &slot = byMode[size_t(mode)];
  if (!slot) {
    auto created = InsnClassifier::create(mode);
    if (!created)
      return created.takeError();
    slot = std::move(*created);
  }
  return slot.get();
}

void adviseHugePages(std::vector<TraceItem> &items) {
  constexpr uintptr_t hugePage = 2 << 20;
  uintptr_t begin = reinterpret_cast<uintptr_t>(items.data());
  uintptr_t end = begin + items.capacity() * sizeof(TraceItem);
  begin = (begin + hugePage - 1) & ~(hugePage - 1);
  end &= ~(hugePage - 1);
  if (end > begin)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
}

Expected<std::unique_ptr<PieceDecoder>>
PieceDecoder::create(const pt_config &config, const ImageTimeline &timeline,
                     const ThreadTrace &trace, const PsbTable &table,
                     Options options) {
  std::unique_ptr<PieceDecoder> result(new PieceDecoder(
      timeline, trace, table, uint64_t(config.end - config.begin),
      std::move(options)));
  PieceDecoder &piece = *result;
  if (timeline.versioned())
    piece.reader = [&piece](uint64_t address, uint8_t *buffer, size_t size) {
      return piece.timeline.read(address, piece.seq, buffer, size,
                                 &piece.readCache);
    };
  auto image = timeline.imageAt(0);
  if (!image)
    return image.takeError();
  piece.image = *image;
  auto copy = piece.image->copy(piece.reader ? &piece.reader : nullptr);
  if (!copy)
    return copy.takeError();
  piece.imageCopy = std::move(*copy);
  piece.decoder.reset(pt_blk_alloc_decoder(&config));
  if (!piece.decoder)
    return allocationFailed("a block decoder");
  int status = pt_blk_set_image(piece.decoder.get(), piece.imageCopy.get());
  if (status < 0)
    return libiptBug(status, "libipt rejected the image");
  // Classifiers for 32- and 16-bit code are made when such code shows up;
  // the one for 64-bit code now, so that a missing disassembler fails here.
  if (!piece.options.countOnly)
    if (auto classifier = piece.classifiers.forMode(ExecMode::Bits64);
        !classifier)
      return classifier.takeError();
  return std::move(result);
}

uint64_t PieceDecoder::seqOfPsb(size_t index) const {
  return timeline.seqAt(trace, psbs[index], table.tsc[index]);
}

bool PieceDecoder::useSeq(Piece &piece, uint64_t newSeq) {
  seq = newSeq;
  outsideClasses.clear();
  Expected<const PtImage *> next = timeline.imageAt(newSeq);
  if (next && *next != image) {
    Expected<PtImageHandle> copy = (*next)->copy(&reader);
    if (!copy) {
      consumeError(copy.takeError());
    } else if (pt_blk_set_image(decoder.get(), copy->get()) >= 0) {
      // The decoder's section cache is validated against the image at each
      // read, so the old copy can go.
      image = *next;
      imageCopy = std::move(*copy);
      return true;
    }
  } else if (next) {
    return true;
  } else {
    consumeError(next.takeError());
  }
  addError(piece, currentOffset(), -pte_nomem, 0);
  return false;
}

Piece PieceDecoder::decodeFrom(size_t start, size_t boundary) {
  Piece piece;
  piece.handoff = psbs.size();
  if (options.flush) {
    piece.items.reserve(options.batchItems);
  } else if (!options.countOnly) {
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
    if (options.cancel && options.cancel->load(std::memory_order_relaxed))
      return piece;
    if (index >= boundary) {
      piece.handoff = index;
      return piece;
    }
    // The code of this PSB's moment (ImageTimeline.h), switched before
    // the sync so that nothing is read from the old one.
    uint64_t psbSeq = timeline.versioned() ? seqOfPsb(index) : 0;
    if (psbSeq != seq && !useSeq(piece, psbSeq)) {
      ++index;
      continue;
    }
    int status = pt_blk_sync_set(decoder.get(), psbs[index]);
    // A PSB+ the end of the buffer cuts short holds no control flow:
    // the trace ends there, as a continuous decode's would.
    if (status == -pte_eos) {
      ++index;
      continue;
    }
    if (status < 0) {
      addError(piece, psbs[index], status, 0,
               (index + 1 < psbs.size() ? psbs[index + 1] : bufferSize) -
                   psbs[index]);
      ++index;
      continue;
    }
    // An Image item wherever the seq differs from the PSB before (and at
    // the first PSB), whichever piece decodes it: the stream says the
    // same however it was cut.
    if (timeline.versioned() && !options.countOnly &&
        (index == 0 || seqOfPsb(index - 1) != psbSeq))
      addEvent(piece, ItemKind::Image, psbSeq, currentTsc());
    std::optional<size_t> next = run(piece, status, {index, boundary});
    if (!next)
      return piece;
    // Always forward, even if libipt could not say where it failed.
    index = std::max(*next, index + 1);
  }
  return piece;
}

/// Decodes after a successful sync at PSB `start.syncedIndex`. Returns the
/// PSB index to resync at (after an error, or at the next PSB crossed), or
/// nullopt at the end of the trace or at a handoff (piece.handoff says
/// where).
std::optional<size_t> PieceDecoder::run(Piece &piece, int status,
                                        const Run &start) {
  Run run = start;
  for (;;) {
    if (std::optional<RunEnd> end = drainEvents(piece, status, run))
      return end->resyncAt;
    if (status >= 0) {
      if (std::optional<RunEnd> end = nextBlock(piece, status, run))
        return end->resyncAt;
      if (status >= 0)
        continue;
    }
    if (status == -pte_eos)
      return std::nullopt;
    return resyncAfterError(piece, status, run);
  }
}

/// Event processing: takes the events libipt has pending. A status update
/// (PSB+ contents) only marks where a PSB was crossed: the run ends there,
/// as a handoff or to resync. Other events that are data become items.
std::optional<PieceDecoder::RunEnd>
PieceDecoder::drainEvents(Piece &piece, int &status, Run &run) {
  while (status >= 0 && (status & pts_event_pending)) {
    pt_event event;
    status = pt_blk_event(decoder.get(), &event, sizeof(event));
    if (status < 0)
      break;
    if (!event.status_update) {
      addLibiptEvent(piece, event);
      continue;
    }
    std::optional<size_t> crossed = crossedPsb(event, run.syncedIndex);
    if (!crossed)
      continue;
    if (*crossed >= run.boundary) {
      piece.handoff = *crossed;
      return RunEnd{std::nullopt};
    }
    // Every PSB segment is decoded from its own PSB's state, serial or
    // not: libipt's time calibration (MTC/CYC) would otherwise carry over
    // from the previous segment, and a piece that starts here cannot know
    // it. So resync here, as a piece would.
    return RunEnd{*crossed};
  }
  return std::nullopt;
}

/// Block decoding: the next block, as an item. Past the last packet
/// (pts_eos) libipt still follows code that needs no trace; the run ends
/// after kMaxTailInstructions of it.
std::optional<PieceDecoder::RunEnd>
PieceDecoder::nextBlock(Piece &piece, int &status, Run &run) {
  pt_block block;
  uint64_t tsc = options.countOnly ? 0 : currentTsc();
  if (timeline.hasTimedChanges())
    followTimedChanges(piece);
  if (cancelled())
    return RunEnd{std::nullopt};
  status = pt_blk_next(decoder.get(), &block, sizeof(block));
  instructions += block.ninsn;
  if (block.ninsn) {
    if (!options.countOnly)
      addBlock(piece, block, tsc);
    run.lastIp = block.end_ip;
  }
  if (status >= 0 && (status & pts_eos)) {
    run.tailInstructions += block.ninsn;
    if (run.tailInstructions > kMaxTailInstructions)
      return RunEnd{std::nullopt};
  }
  // Nothing decoded: the failure is at the block's start, e.g. the address
  // no module maps.
  if (status < 0 && !block.ninsn && block.ip)
    run.lastIp = block.ip;
  return std::nullopt;
}

/// Resync: an error item where libipt failed, then the first PSB after the
/// failure (a handoff if that is at or past the boundary).
std::optional<size_t> PieceDecoder::resyncAfterError(Piece &piece, int status,
                                                     const Run &run) {
  uint64_t offset = currentOffset();
  size_t next = psbIndexAt(offset) + 1;
  if (next < psbs.size() && psbs[next] <= offset)
    ++next;
  uint64_t resume = next < psbs.size() ? psbs[next] : bufferSize;
  addError(piece, offset, status, run.lastIp,
           resume > offset ? resume - offset : 0);
  if (next >= run.boundary && next < psbs.size()) {
    piece.handoff = next;
    return std::nullopt;
  }
  return next;
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
std::optional<size_t> PieceDecoder::crossedPsb(const pt_event &event,
                                               size_t syncedIndex) {
  size_t index = psbIndexAt(currentOffset());
  if (index <= syncedIndex || !table.joinable[index])
    return std::nullopt;
  if (table.tracing[index] && event.type != ptev_exec_mode)
    return std::nullopt;
  return index;
}

/// Events that are data; what each means to the user.
void PieceDecoder::addLibiptEvent(Piece &piece, const pt_event &event) {
  if (options.countOnly)
    return;
  uint64_t tsc = currentTsc();
  switch (event.type) {
  case ptev_enabled: // Tracing (re)starts: a gap ends.
    addEvent(piece, ItemKind::Enable, event.variant.enabled.ip, tsc);
    break;
  case ptev_disabled: // Tracing stops where it says (a filter, the kernel).
    addEvent(piece, ItemKind::Disable,
             event.ip_suppressed ? 0 : event.variant.disabled.ip, tsc);
    break;
  case ptev_async_disabled: // Stops at an interrupt or a VM exit.
    addEvent(piece, ItemKind::Disable, event.variant.async_disabled.at, tsc);
    break;
  case ptev_overflow: // The CPU lost packets: a marked gap.
    addEvent(piece, ItemKind::Overflow,
             event.ip_suppressed ? 0 : event.variant.overflow.ip, tsc);
    break;
  default:
    // async_branch, exec_mode, paging, tsx, cbr, tick, ...: the blocks
    // already show their effect on control flow.
    break;
  }
}

/// A change with a time (perf's MMAP2, a jitdump load) takes effect at the
/// first block whose time is at or after it: perf's rule ("Time orders
/// everything", docs/architecture.md). The trace's times come from its timing
/// packets, so a change between two of them waits for the next.
void PieceDecoder::followTimedChanges(Piece &piece) {
  uint64_t tsc = currentTsc();
  uint64_t timedSeq = timeline.seqAtTime(tsc);
  if (timedSeq <= seq)
    return;
  if (useSeq(piece, timedSeq) && !options.countOnly)
    addEvent(piece, ItemKind::Image, timedSeq, tsc);
}

void PieceDecoder::addBlock(Piece &piece, const pt_block &block, uint64_t tsc) {
  ExecMode mode = execModeOf(block.mode);
  LastInsn last = classifyLast(block, mode);
  // Written in place, field by field: an item built on the stack and then
  // copied 16 bytes at a time waited for its own byte-sized stores (a
  // failed store-to-load forward) on every block.
  TraceItem &item = piece.items.emplace_back();
  item.kind = ItemKind::Block;
  item.ip = block.ip;
  item.lastIp = block.end_ip;
  item.detail = block.ninsn;
  setRawTsc(item, tsc);
  item.mode = mode;
  item.lastClass = last.branch;
  item.lastSize = last.size;
  maybeFlush(piece);
}

void PieceDecoder::addError(Piece &piece, uint64_t offset, int status,
                            uint64_t ip, uint64_t skipped) {
  if (options.countOnly)
    return;
  TraceItem item;
  item.kind = ItemKind::Error;
  item.ip = ip;
  setRawTsc(item, currentTsc());
  item.detail = static_cast<uint32_t>(piece.errors.size());
  piece.items.push_back(item);
  // With a code history, a gap where no code was had says what is missing.
  std::string text = timeline.versioned() && status == -pte_nomap && ip
                         ? timeline.explainMissing(ip, seq)
                         : libiptStatusText(status);
  piece.errors.push_back({offset, status, ip, std::move(text), skipped});
  maybeFlush(piece);
}

void PieceDecoder::addEvent(Piece &piece, ItemKind kind, uint64_t ip,
                            uint64_t tsc) {
  TraceItem item;
  item.kind = kind;
  item.ip = ip;
  setRawTsc(item, tsc);
  piece.items.push_back(item);
  maybeFlush(piece);
}

PieceDecoder::LastInsn PieceDecoder::classifyLast(const pt_block &block,
                                                  ExecMode mode) {
  BranchClass known = classFromLibipt(block.iclass);
  if (known != BranchClass::Unknown)
    return {known, 0};
  // The same address in two modes is two instructions; the cache is for
  // the common case, 64-bit code. Code outside files may change with the
  // seq: its cache is cleared when the seq does.
  bool cacheable = mode == ExecMode::Bits64;
  auto &cache = block.isid > 0 ? classes : outsideClasses;
  auto cached = cacheable ? cache.find(block.end_ip) : cache.end();
  if (cached != cache.end())
    return cached->second;
  uint8_t bytes[16] = {};
  size_t size = 0;
  if (block.truncated) {
    size = block.size;
    std::copy(block.raw, block.raw + block.size, bytes);
  } else {
    size = image->read(block.end_ip, block.isid, bytes, 15,
                       reader ? &reader : nullptr);
  }
  LastInsn result;
  Expected<const InsnClassifier *> classifier = classifiers.forMode(mode);
  if (!classifier) {
    consumeError(classifier.takeError());
    return result;
  }
  auto insn =
      (*classifier)->classify(ArrayRef<uint8_t>(bytes, size), block.end_ip);
  if (insn)
    result = {insn->branch, insn->size};
  else
    consumeError(insn.takeError());
  if (cacheable)
    cache[block.end_ip] = result;
  return result;
}

void PieceDecoder::maybeFlush(Piece &piece) {
  if (options.flush && piece.items.size() >= options.batchItems)
    options.flush(piece);
}

/// Index of the last PSB at or before `offset`.
size_t PieceDecoder::psbIndexAt(uint64_t offset) const {
  auto next = std::upper_bound(psbs.begin(), psbs.end(), offset);
  return next == psbs.begin() ? 0 : size_t(next - psbs.begin()) - 1;
}

uint64_t PieceDecoder::currentOffset() const {
  uint64_t offset = 0;
  if (pt_blk_get_offset(decoder.get(), &offset) < 0)
    return 0;
  return offset;
}

uint64_t PieceDecoder::currentTsc() const {
  uint64_t tsc = 0;
  // -pte_no_time: no TSC yet; the relative time is of no use to us.
  if (pt_blk_time(decoder.get(), &tsc, nullptr, nullptr) < 0)
    return 0;
  return tsc;
}

} // namespace magic_trace::decode_detail
