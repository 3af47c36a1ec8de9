//===- ModelBuilder.cpp - Decoded items + symbols -> segments -------------===//
//
// One pass over a thread's items keeps a stack of open frames and appends
// frames to the current segment in creation order, which is pre-order except
// for one case: a return into a frame never seen makes that frame (with its
// inline chain) the parent of everything before it. Such "outer chains" are
// kept aside and put in front when the segment closes (the latest chain is
// outermost), in one pass. docs/model.md lists the rules.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/ModelBuilder.h"

#include "magic_trace/Interpolation.h"

#include "ModelInternal.h"
#include "RangeSites.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <memory>
#include <new>
#include <optional>

using namespace magic_trace;
using namespace magic_trace::model;

namespace {

/// How control reached the first instruction of a block.
enum class Transfer : uint8_t {
  Start,   ///< First instruction of a segment.
  Call,    ///< The previous block ended with a call.
  Return,  ///< ... with a return.
  Jump,    ///< ... with a jump, a conditional branch, or fell through.
  Unknown, ///< ... with a syscall, far transfer, or tracing was off.
};

Transfer transferAfter(BranchClass last) {
  switch (last) {
  case BranchClass::DirectCall:
  case BranchClass::IndirectCall:
    return Transfer::Call;
  case BranchClass::Return:
    return Transfer::Return;
  case BranchClass::Other:
  case BranchClass::CondBranch:
  case BranchClass::DirectJump:
  case BranchClass::IndirectJump:
    return Transfer::Jump;
  case BranchClass::Syscall:
  case BranchClass::FarTransfer:
  case BranchClass::Unknown:
    return Transfer::Unknown;
  }
  return Transfer::Unknown;
}

/// One open frame on the builder's stack. Two inlined frames are the same
/// instance when their function and call site (file, line in the caller)
/// agree, and so do the levels above them: when their chain nodes are equal.
struct OpenFrame {
  uint32_t frame = 0; ///< Index in the segment's creation-order frames.
  /// Stack index of the physical frame this one is (itself) or is inlined
  /// into: topPhysical() without a walk down the inline chain.
  uint32_t physical = 0;
  uint64_t entry = 0; ///< Physical: the function's entry, 0 if unknown.
  /// Physical: the address its call pushed (the instruction after the call),
  /// where its return goes; 0 when unknown (an inferred frame, or a block
  /// stream without instruction sizes).
  uint64_t returnAddress = 0;
  /// Physical, entered by a jump: the entry of the function it replaced (a
  /// hot part, when this is its cold part), or 0.
  uint64_t replacedEntry = 0;
  StringId function = 0; ///< Physical: the function's name.
  /// Inlined: its chain from the physical frame (RangeSites' trie, never
  /// 0); 0 for a physical frame.
  ChainNode chain = 0;

  bool inlined() const { return chain != 0; }
};

bool samePhysical(const OpenFrame &open, const RangeInfo &range) {
  if (open.entry != 0 && range.functionEntry != 0)
    return open.entry == range.functionEntry;
  return open.function == range.function;
}

class SegmentBuilder {
public:
  SegmentBuilder(ThreadModel &model, std::vector<SegmentFacts> &facts,
                 SymbolLookup lookup, StringTable &strings,
                 std::mutex *stringsLock)
      : model(model), facts(facts), ranges(lookup, model.sites),
        strings(strings), stringsLock(stringsLock) {
    syscallName = intern("[syscall]");
    untracedName = intern("[untraced]");
    overflowName = intern("[overflow]");
  }

  /// Takes the next items. An item is handled when the one after it
  /// arrives (a block's end time is the next item's time).
  void consume(llvm::ArrayRef<TraceItem> items,
               llvm::ArrayRef<DecodeError> newErrors);
  /// Handles the last item and closes the open segment and gap.
  void finish();
  uint64_t instructions() const { return instructionCount; }

private:
  /// Handles `item`; `next` is the item after it, or null at the end.
  void handle(const TraceItem &item, const TraceItem *next);

  // Item handlers.
  void onBlock(const TraceItem &block, const TraceItem *next);
  void onDisable(const TraceItem &item, bool last);
  void onEnable(const TraceItem &item);
  void onLoss(const TraceItem &item);

  // Transfers into a block's first range.
  void enter(const RangeInfo &range, Transfer how, uint64_t address,
             uint64_t time);
  void enterByReturn(const RangeInfo &range, uint64_t address, uint64_t time);
  void enterByJump(const RangeInfo &range, uint64_t address, uint64_t time,
                   bool indirect);
  void enterUnknown(const RangeInfo &range, uint64_t time);

  // Stack primitives. A frame id is its index in `frames`, or OuterTag |
  // its index in `outerFrames` (an outer chain frame, see inferParent).
  static constexpr uint32_t OuterTag = 0x80000000u;
  void setEndAt(uint32_t id, uint64_t time) {
    if (id & OuterTag)
      outerFrames[id & ~OuterTag].end = time;
    else
      frames.setEnd(id, time);
  }
  bool inferredAt(uint32_t id) const {
    return id & OuterTag ? outerFrames[id & ~OuterTag].inferred
                         : frames.inferredAt(id);
  }
  void setParentAt(uint32_t id, uint32_t parent) {
    if (id & OuterTag)
      outerFrames[id & ~OuterTag].parent = parent;
    else
      frames.setParent(id, parent);
  }
  void setOpenAt(uint32_t id) {
    if (id & OuterTag)
      outerFrames[id & ~OuterTag].open = true;
    else
      frames.setOpen(id, true);
  }
  /// Appends `frame` as a child of the stack's top (or a root); its id. Per
  /// frame pushed: inline, with roots and outer chains out of line.
  __attribute__((always_inline)) uint32_t newFrame(Frame frame, bool outer) {
    frame.parent = stack.empty() ? Frame::NoParent : stack.back().frame;
    if (outer || frame.parent == Frame::NoParent)
      return newRootOrOuter(frame, outer);
    uint32_t id = uint32_t(frames.size());
    frames.push_back(frame);
    return id;
  }
  uint32_t newRootOrOuter(const Frame &frame, bool outer);
  /// newFrame for a call or inlined frame that begins (and so far ends) at
  /// `time`, written in place field by field: a Frame built on the stack
  /// and then copied made every append wait for its own parent's and bits'
  /// stores (a failed store-to-load forward).
  __attribute__((always_inline)) uint32_t newFrameAt(uint64_t time, SiteId site,
                                                     bool inferred,
                                                     bool outer) {
    uint32_t parent = stack.empty() ? Frame::NoParent : stack.back().frame;
    if (outer || parent == Frame::NoParent) {
      Frame frame;
      frame.site = site;
      frame.begin = frame.end = time;
      frame.inferred = inferred;
      return newFrame(frame, outer);
    }
    uint32_t id = uint32_t(frames.size());
    frames.pushAt(time, parent, site, inferred);
    return id;
  }
  /// `callTarget`: the address a call entered it at (0: not by a call).
  void pushPhysical(const RangeInfo &range, uint64_t time, bool inferred,
                    bool outer = false, uint64_t returnAddress = 0,
                    uint64_t callTarget = 0);
  SiteId unknownEntrySite(const RangeInfo &range, uint64_t entry);
  __attribute__((always_inline)) void pushInlined(const RangeInfo &range,
                                                  size_t from, uint64_t time,
                                                  bool inferred,
                                                  bool outer = false);
  void popTo(size_t depth, uint64_t time);
  void popCallees(size_t physical, uint64_t time);
  size_t topPhysical() const;
  size_t findPhysical(const RangeInfo &range, size_t below) const;
  size_t findReturnAddress(uint64_t address) const;
  void syncInlined(const RangeInfo &range, uint64_t time) {
    if (!inSync(range))
      resyncInlined(range, time);
  }
  void resyncInlined(const RangeInfo &range, uint64_t time);
  /// The top physical frame's inlined frames are `range`'s chain already
  /// (syncInlined has nothing to do).
  bool inSync(const RangeInfo &range) const {
    size_t physical = topPhysical();
    return stack.size() - physical == range.levels &&
           stack.back().chain == ranges.chain(range, range.levels - 1);
  }
  void replaceTop(const RangeInfo &range, uint64_t time);
  void inferParent(const RangeInfo &range, uint64_t time);

  // Segments.
  void startSegment(uint64_t time);
  void closeSpan(uint64_t time);
  void closeSegment(uint64_t time, bool gapFollows);
  void finishGap(uint64_t time);
  void placeOuterChains();

  ThreadModel &model;
  std::vector<SegmentFacts> &facts;
  RangeSites ranges;
  std::vector<DecodeError> errors;  ///< Every error so far, by index.
  std::optional<TraceItem> pending; ///< The item awaiting its successor.
  uint64_t instructionCount = 0;
  StringId intern(llvm::StringRef text) {
    if (!stringsLock)
      return strings.intern(text);
    std::lock_guard<std::mutex> hold(*stringsLock);
    return strings.intern(text);
  }

  StringTable &strings;
  std::mutex *stringsLock;
  StringId syscallName = 0, untracedName = 0, overflowName = 0;
  /// Sites of unknown code by the entry a call named (unknownEntrySite).
  llvm::DenseMap<uint64_t, SiteId> unknownEntries;

  // The open segment (frames in creation order), if any.
  bool inSegment = false;
  FrameList frames;
  std::vector<uint32_t> roots; ///< Frames without a parent, creation order.
  PodVector<OpenFrame> stack;
  /// Frames of the outer chains, and where each chain starts in it.
  PodVector<Frame> outerFrames;
  std::vector<uint32_t> outerChains;
  uint64_t segmentStart = 0;
  uint32_t inferredCount = 0;
  Transfer nextTransfer = Transfer::Start;
  BranchClass lastClass = BranchClass::Other;
  /// Frame ids of the start chain and where their returns went.
  std::vector<std::pair<uint32_t, uint64_t>> startReturns;
  /// After a block that ended in a call: the call's return address (0 when
  /// the instruction's size is unknown).
  uint64_t callReturnAddress = 0;
  uint32_t openSpan = NoFrame; ///< [syscall]/[untraced] awaiting its end.
  uint64_t lastTime = 0;

  // A loss seen since the last segment closed.
  bool gapPending = false;
  uint64_t gapBegin = 0;
  StringId gapName = 0;
  std::string gapReason;
};

void SegmentBuilder::consume(llvm::ArrayRef<TraceItem> items,
                             llvm::ArrayRef<DecodeError> newErrors) {
  errors.insert(errors.end(), newErrors.begin(), newErrors.end());
  if (items.empty())
    return;
  if (pending)
    handle(*pending, &items.front());
  // Each item but the last has its successor in the batch: no copy.
  for (size_t i = 0; i + 1 < items.size(); ++i)
    handle(items[i], &items[i + 1]);
  pending = items.back();
}

void SegmentBuilder::handle(const TraceItem &item, const TraceItem *next) {
  // Times are monotonic per thread by contract; clamp so a bad input can
  // never produce a frame that ends before it begins.
  lastTime = std::max(lastTime, item.timeNs);
  switch (item.kind) {
  case ItemKind::Block:
    instructionCount += item.detail;
    onBlock(item, next);
    break;
  case ItemKind::Disable:
    onDisable(item, /*last=*/!next);
    break;
  case ItemKind::Enable:
    onEnable(item);
    break;
  case ItemKind::Overflow:
  case ItemKind::Error:
    onLoss(item);
    break;
  case ItemKind::Image:
    // Which code ran changes nothing in the call structure; names come
    // from the modules over the whole history (modulesOverTime).
    break;
  }
}

void SegmentBuilder::finish() {
  if (pending)
    handle(*pending, nullptr);
  pending.reset();
  if (inSegment)
    closeSegment(lastTime, /*gapFollows=*/false);
  if (gapPending)
    finishGap(lastTime);
}

void SegmentBuilder::onBlock(const TraceItem &block, const TraceItem *next) {
  uint64_t begin = lastTime;
  // Time of the first instruction after the block: the next item's time.
  uint64_t after = begin;
  if (next)
    after = std::max(begin, next->timeNs);
  if (!inSegment)
    startSegment(begin);
  closeSpan(begin);
  if (block.lastIp < block.ip || block.detail == 0)
    return; // An empty block: nothing ran.

  // Times inside the block are interpolated by address: PT timing packets
  // give no finer resolution than the block.
  uint64_t bytes = block.lastIp - block.ip + 1;
  auto timeAt = [&](uint64_t address) {
    return begin + shareOf(after - begin, address - block.ip, bytes);
  };

  uint64_t address = block.ip;
  const RangeInfo *range = &ranges.lookup(address);
  bool first = true;
  while (true) {
    if (range->levels == 0) {
      // The lookup contract gives every range a frame; a fake that does not
      // still must not crash the debugger.
    } else if (first || stack.empty()) {
      enter(*range, stack.empty() ? Transfer::Start : nextTransfer, address,
            first ? begin : timeAt(address));
    } else if (!samePhysical(stack[topPhysical()], *range)) {
      // Fell through into another function inside one block.
      enterByJump(*range, address, timeAt(address), /*indirect=*/false);
    } else if (!inSync(*range)) {
      resyncInlined(*range, timeAt(address));
    }
    first = false;
    if (range->end <= address || range->end > block.lastIp)
      break;
    address = range->end;
    range = &ranges.after(*range);
  }
  lastClass = block.lastClass;
  nextTransfer = transferAfter(block.lastClass);
  callReturnAddress = nextTransfer == Transfer::Call && block.lastSize
                          ? block.lastIp + block.lastSize
                          : 0;
  if (nextTransfer == Transfer::Call)
    ++model.calls;
}

void SegmentBuilder::onDisable(const TraceItem &item, bool last) {
  if (!inSegment || stack.empty() || openSpan != NoFrame)
    return;
  // Where tracing resumes is known only from the next block.
  nextTransfer = Transfer::Unknown;
  // The recorder ends every snapshot with a disable (FUP + TIP.PGD) so that
  // decoders stop exactly there: with nothing after it, no time passed with
  // tracing off, and a 0 ns span would only hide the innermost frame.
  if (last)
    return;
  Frame span;
  span.begin = span.end = lastTime;
  bool syscall = lastClass == BranchClass::Syscall;
  FrameSite site;
  site.address = item.ip;
  site.name = syscall ? syscallName : untracedName;
  site.kind = syscall ? FrameKind::Syscall : FrameKind::Untraced;
  span.site = model.sites.intern(site);
  openSpan = newFrame(span, /*outer=*/false);
}

void SegmentBuilder::onEnable(const TraceItem &) {
  closeSpan(lastTime);
  if (inSegment && nextTransfer != Transfer::Start)
    nextTransfer = Transfer::Unknown;
}

void SegmentBuilder::onLoss(const TraceItem &item) {
  ++model.errors;
  std::string reason = "overflow";
  StringId name = overflowName;
  if (item.kind == ItemKind::Error) {
    llvm::StringRef message = "unknown error";
    if (item.detail < errors.size()) {
      message = errors[item.detail].message;
      model.undecodedBytes += errors[item.detail].skippedBytes;
    }
    if (model.firstError.empty())
      model.firstError = message.str();
    reason = ("decode error: " + message).str();
    name = intern("[" + reason + "]");
  }
  if (inSegment) {
    closeSegment(lastTime, /*gapFollows=*/true);
  } else if (gapPending) {
    // Consecutive losses with nothing decoded between them: one gap.
    return;
  }
  gapPending = true;
  gapBegin = lastTime;
  gapName = name;
  gapReason = std::move(reason);
}

void SegmentBuilder::enter(const RangeInfo &range, Transfer how,
                           uint64_t address, uint64_t time) {
  switch (how) {
  case Transfer::Start:
    pushPhysical(range, time, /*inferred=*/true);
    return;
  case Transfer::Call:
    // A call to the next instruction (the PIC idiom for reading the IP)
    // pushes a frame but no return address: nothing returns to it (the
    // SDM's RET-compression rules leave such calls out too).
    pushPhysical(range, time, /*inferred=*/false, /*outer=*/false,
                 address == callReturnAddress ? 0 : callReturnAddress, address);
    return;
  case Transfer::Return:
    enterByReturn(range, address, time);
    return;
  case Transfer::Jump:
    // Most blocks: a jump inside the function (enterByJump's first case).
    if (samePhysical(stack[topPhysical()], range)) {
      syncInlined(range, time);
      return;
    }
    enterByJump(range, address, time, lastClass == BranchClass::IndirectJump);
    return;
  case Transfer::Unknown:
    enterUnknown(range, time);
    return;
  }
}

void SegmentBuilder::enterByReturn(const RangeInfo &range, uint64_t address,
                                   uint64_t time) {
  // A return to X ends the nearest frame whose call pushed X, and every
  // frame above it: the trace alone says where it goes, whatever the
  // symbols (stripped code, or a caller known only by a page of it).
  size_t pushed = findReturnAddress(address);
  // An inferred frame's call came before the segment: where it returns is
  // what the previous segment's frame must have pushed to be the same
  // activation (stitching).
  const OpenFrame &returning = stack[topPhysical()];
  if (returning.returnAddress == 0 && inferredAt(returning.frame))
    startReturns.push_back({returning.frame, address});
  if (pushed != SIZE_MAX && pushed > 0) {
    popTo(pushed, time);
    syncInlined(range, time);
    return;
  }
  // No open frame pushed X: X is inside a function on the stack that is
  // not at a return address (C++ unwinding's return to a landing pad,
  // __builtin_eh_return; a longjmp that ends in a return), so unwind to
  // the nearest frame of that function below the returning one.
  size_t top = topPhysical();
  size_t target = findPhysical(range, top);
  if (target != SIZE_MAX) {
    popCallees(target, time);
    syncInlined(range, time);
    return;
  }
  inferParent(range, time);
}

void SegmentBuilder::enterByJump(const RangeInfo &range, uint64_t address,
                                 uint64_t time, bool indirect) {
  size_t top = topPhysical();
  if (samePhysical(stack[top], range)) {
    syncInlined(range, time);
    return;
  }
  if (address == range.functionEntry) {
    replaceTop(range, time); // Tail call.
    return;
  }
  // Into the middle of another function without a call or return: longjmp
  // or an exception landing pad, so unwind to it if it is on the stack.
  size_t target = findPhysical(range, top);
  if (target != SIZE_MAX) {
    popCallees(target, time);
    syncInlined(range, time);
    return;
  }
  // Not on the stack: an indirect jump there (the unwinder's to a landing
  // pad, longjmp's) goes to a caller from before the segment, which is the
  // parent of everything so far, as for a return (a gap or the ring's start
  // hid its call). A direct one goes to another entry of a multi-entry
  // function (glibc's __mempcpy_* into __memmove_*) or a cold part, and
  // any jump back into the function the frame replaced (a cold part's
  // computed goto into its hot part, as in CPython's eval loop): the frame
  // is replaced.
  if (indirect && !range.unknown &&
      (range.functionEntry == 0 ||
       range.functionEntry != stack[top].replacedEntry)) {
    inferParent(range, time);
    return;
  }
  replaceTop(range, time);
}

void SegmentBuilder::enterUnknown(const RangeInfo &range, uint64_t time) {
  // After a syscall or an untraced stretch: usually the same function; a
  // frame on the stack means untraced code returned into it; anything else
  // is kept as a callee, since dropping the caller would lose information.
  size_t top = topPhysical();
  if (samePhysical(stack[top], range)) {
    syncInlined(range, time);
    return;
  }
  size_t target = findPhysical(range, top);
  if (target != SIZE_MAX) {
    popCallees(target, time);
    syncInlined(range, time);
    return;
  }
  pushPhysical(range, time, /*inferred=*/false);
}

uint32_t SegmentBuilder::newRootOrOuter(const Frame &frame, bool outer) {
  uint32_t id;
  if (outer) {
    id = OuterTag | uint32_t(outerFrames.size());
    outerFrames.push_back(frame);
  } else {
    id = uint32_t(frames.size());
    frames.push_back(frame);
  }
  if (frame.parent == Frame::NoParent)
    roots.push_back(id);
  return id;
}

/// Code no symbol, DWARF or FDE covers is one range, so its name is one for
/// every function in it: a real-hardware trace of a stripped image
/// (../shared/realpt/mruby) showed 333 call targets under one name. A call
/// says where a function begins, so a frame a call enters there is named by
/// its entry, as .eh_frame's functions are: "module+0xENTRY" (the file
/// address), "[jit 0xENTRY]" in code outside files the code history holds,
/// or "[unknown @ 0xENTRY]" outside every module. Identity (the
/// open frame's function) stays the range's: the same rules as before.
SiteId SegmentBuilder::unknownEntrySite(const RangeInfo &range,
                                        uint64_t entry) {
  auto [found, added] = unknownEntries.try_emplace(entry, 0);
  if (!added)
    return found->second;
  const SymbolRange &symbols = *range.range;
  std::string name;
  {
    std::unique_lock<std::mutex> hold;
    if (stringsLock)
      hold = std::unique_lock<std::mutex>(*stringsLock);
    llvm::StringRef module =
        symbols.module ? strings.get(symbols.module) : llvm::StringRef();
    if (module.empty())
      name = "[unknown @ 0x" + llvm::utohexstr(entry, true) + "]";
    else if (module == "[jit]") // Code the history has, no file or name.
      name = "[jit 0x" + llvm::utohexstr(entry, true) + "]";
    else
      name = llvm::sys::path::filename(module).str() + "+0x" +
             llvm::utohexstr(entry - symbols.fileBias, true);
  }
  FrameSite site = siteForRange(symbols, 0);
  site.name = intern(name);
  site.address = entry;
  return found->second = model.sites.intern(site);
}

void SegmentBuilder::pushPhysical(const RangeInfo &range, uint64_t time,
                                  bool inferred, bool outer,
                                  uint64_t returnAddress, uint64_t callTarget) {
  SiteId site = range.unknown && callTarget != 0
                    ? unknownEntrySite(range, callTarget)
                    : ranges.site(range, 0);
  inferredCount += inferred;
  OpenFrame open;
  open.frame = newFrameAt(time, site, inferred, outer);
  open.physical = uint32_t(stack.size());
  open.entry = range.functionEntry;
  open.function = range.function;
  open.returnAddress = returnAddress;
  stack.push_back(open);
  pushInlined(range, 1, time, inferred, outer);
}

void SegmentBuilder::pushInlined(const RangeInfo &range, size_t from,
                                 uint64_t time, bool inferred, bool outer) {
  for (size_t level = from; level < range.levels; ++level) {
    inferredCount += inferred;
    OpenFrame open;
    open.frame = newFrameAt(time, ranges.site(range, level), inferred, outer);
    // Inlined frames sit right above their physical frame (or its other
    // inlined frames): the stack is never empty here.
    open.physical = stack.back().physical;
    open.chain = ranges.chain(range, level);
    stack.push_back(open);
  }
}

void SegmentBuilder::popTo(size_t depth, uint64_t time) {
  while (stack.size() > depth) {
    setEndAt(stack.back().frame, time);
    stack.pop_back();
  }
}

/// Pops the physical frames called from stack index `physical` (keeping its
/// inlined frames, which syncInlined then reconciles with the target).
void SegmentBuilder::popCallees(size_t physical, uint64_t time) {
  size_t depth = physical + 1;
  while (depth < stack.size() && stack[depth].inlined())
    ++depth;
  popTo(depth, time);
}

size_t SegmentBuilder::topPhysical() const { return stack.back().physical; }

/// The nearest physical frame of `range`'s function strictly below stack
/// index `below`, or SIZE_MAX.
size_t SegmentBuilder::findPhysical(const RangeInfo &range,
                                    size_t below) const {
  for (size_t i = below; i-- > 0;)
    if (!stack[i].inlined() && samePhysical(stack[i], range))
      return i;
  return SIZE_MAX;
}

/// The stack index of the nearest physical frame whose call pushed
/// `address`, or SIZE_MAX.
size_t SegmentBuilder::findReturnAddress(uint64_t address) const {
  if (address == 0)
    return SIZE_MAX;
  for (size_t i = stack.size(); i-- > 0;)
    if (!stack[i].inlined() && stack[i].returnAddress == address)
      return i;
  return SIZE_MAX;
}

/// The top physical frame is `range`'s function: make the inlined frames
/// above it follow `range`'s inline chain (syncInlined, when they do not).
void SegmentBuilder::resyncInlined(const RangeInfo &range, uint64_t time) {
  size_t physical = topPhysical();
  size_t level = 1;
  while (physical + level < stack.size() && level < range.levels &&
         stack[physical + level].chain == ranges.chain(range, level))
    ++level;
  popTo(physical + level, time);
  // pushInlined(range, level, time, false) for the levels left, with room
  // made once: each frame is the child of the one before, and none is
  // inferred, a root or in an outer chain.
  if (level >= range.levels)
    return;
  size_t count = range.levels - level;
  uint32_t id = uint32_t(frames.size());
  uint32_t parent = stack.back().frame;
  uint32_t physicalIndex = stack.back().physical;
  OpenFrame *open = stack.appendUninitialized(count);
  for (size_t k = 0; k < count; ++k, ++level) {
    frames.pushAt(time, parent, ranges.site(range, level), false);
    OpenFrame inlined;
    inlined.frame = parent = id + uint32_t(k);
    inlined.physical = physicalIndex;
    inlined.chain = ranges.chain(range, level);
    open[k] = inlined;
  }
}

/// Ends the top physical frame (and its inlined frames) and starts `range`'s
/// function in its place, under the same parent.
void SegmentBuilder::replaceTop(const RangeInfo &range, uint64_t time) {
  // A tail call returns where the frame it replaces would have.
  size_t top = topPhysical();
  uint64_t returnAddress = stack[top].returnAddress;
  uint64_t replaced = stack[top].entry;
  popTo(top, time);
  pushPhysical(range, time, /*inferred=*/false, /*outer=*/false, returnAddress);
  stack[topPhysical()].replacedEntry = replaced;
}

/// A return into a function not on the stack: it called the outermost open
/// frame before the segment began. Create it (and its inline chain) as the
/// parent of everything so far, starting at the segment start.
void SegmentBuilder::inferParent(const RangeInfo &range, uint64_t time) {
  popTo(0, time);
  std::vector<uint32_t> oldRoots;
  oldRoots.swap(roots);
  outerChains.push_back(uint32_t(outerFrames.size()));
  pushPhysical(range, segmentStart, /*inferred=*/true, /*outer=*/true);
  uint32_t innermost = stack.back().frame;
  for (uint32_t root : oldRoots)
    setParentAt(root, innermost);
}

void SegmentBuilder::startSegment(uint64_t time) {
  if (gapPending)
    finishGap(time);
  inSegment = true;
  segmentStart = time;
  frames.clear();
  frames.setBase(time);
  roots.clear();
  stack.clear();
  outerFrames.clear();
  outerChains.clear();
  inferredCount = 0;
  nextTransfer = Transfer::Start;
  callReturnAddress = 0;
  startReturns.clear();
  lastClass = BranchClass::Other;
  openSpan = NoFrame;
  Segment segment;
  segment.begin = segment.end = time;
  // Empty unless a loss came before; a loss before the first segment is
  // kept here too, so that nothing is dropped silently.
  segment.gapReason = std::move(gapReason);
  gapReason.clear();
  model.segments.push_back(std::move(segment));
  facts.emplace_back();
}

void SegmentBuilder::closeSpan(uint64_t time) {
  if (openSpan == NoFrame)
    return;
  setEndAt(openSpan, time);
  openSpan = NoFrame;
}

/// Frames still open end at `time`, the first instant nothing is known.
void SegmentBuilder::closeSegment(uint64_t time, bool gapFollows) {
  closeSpan(time);
  SegmentFacts &fact = facts.back();
  fact.endStack.clear();
  fact.endReturns.clear();
  for (const OpenFrame &open : stack) {
    fact.endStack.push_back(open.frame);
    fact.endReturns.push_back(open.returnAddress);
    setOpenAt(open.frame);
  }
  fact.startReturns = std::move(startReturns);
  startReturns.clear();
  popTo(0, time);
  placeOuterChains();
  Segment &segment = model.segments.back();
  segment.end = time;
  // Exactly sized (the model is most of the memory a snapshot keeps), with
  // room for the gap span a loss adds next; realloc shrinks in place.
  frames.shrinkToFit(gapFollows ? 1 : 0);
  segment.frames = std::move(frames);
  fact.startDepth = inferredCount;
  fact.lastClass = lastClass;
  frames = {};
  inSegment = false;
}

/// The time between a loss and the next decoded instruction becomes a span
/// closing the previous segment (or nothing when no segment came before).
void SegmentBuilder::finishGap(uint64_t time) {
  gapPending = false;
  if (model.segments.empty())
    return; // Lost before anything was decoded; kept as gapReason only.
  Segment &segment = model.segments.back();
  Frame span;
  span.begin = std::min(gapBegin, time);
  span.end = time;
  FrameSite site;
  site.name = gapName;
  site.kind = FrameKind::DecodeError;
  span.site = model.sites.intern(site);
  facts.back().gapFrame = uint32_t(segment.frames.size());
  segment.frames.push_back(span);
  segment.end = std::max(segment.end, time);
}

/// Puts the outer chains in front of the creation-order frames, the latest
/// chain first (each is the parent of everything before it), and turns every
/// frame id into its final index: one pass, in place.
void SegmentBuilder::placeOuterChains() {
  uint32_t outer = uint32_t(outerFrames.size());
  if (outer == 0)
    return;
  std::vector<uint32_t> position(outer);
  uint32_t next = 0;
  for (size_t chain = outerChains.size(); chain-- > 0;) {
    uint32_t end =
        chain + 1 < outerChains.size() ? outerChains[chain + 1] : outer;
    for (uint32_t i = outerChains[chain]; i < end; ++i)
      position[i] = next++;
  }
  auto finalIndex = [&](uint32_t id) {
    if (id == Frame::NoParent)
      return id;
    return id & OuterTag ? position[id & ~OuterTag] : id + outer;
  };
  // The creation-order frames' parents among them move with them; the
  // others are roots or outer chain frames.
  frames.shift(0, outer, finalIndex);
  for (uint32_t i = 0; i < outer; ++i) {
    Frame frame = outerFrames[i];
    frame.parent = finalIndex(frame.parent);
    frames.set(position[i], frame);
  }
  for (uint32_t &open : facts.back().endStack)
    open = finalIndex(open);
  for (auto &returned : facts.back().startReturns)
    returned.first = finalIndex(returned.first);
  outerFrames = {};
}

} // namespace

FrameSite model::siteForRange(const SymbolRange &range, size_t level) {
  const SymbolFrame &symbol = range.frames[level];
  FrameSite site;
  site.name = symbol.function;
  site.file = symbol.file;
  site.line = symbol.line;
  if (level > 0) {
    site.address = range.begin;
    site.kind = FrameKind::Inlined;
    return site;
  }
  site.address = range.functionEntry ? range.functionEntry : range.begin;
  site.kind = range.unknown ? FrameKind::Unknown : FrameKind::Physical;
  return site;
}

struct magic_trace::ThreadModelBuilder::State {
  State(uint64_t tid, SymbolLookup lookup, StringTable &strings,
        std::mutex *stringsLock)
      : lookup(lookup), segments(model, facts, lookup, strings, stringsLock) {
    model.tid = tid;
  }

  ThreadModel model;
  std::vector<SegmentFacts> facts;
  SymbolLookup lookup;
  SegmentBuilder segments;
};

magic_trace::ThreadModelBuilder::ThreadModelBuilder(uint64_t tid,
                                                    SymbolLookup lookup,
                                                    StringTable &strings,
                                                    std::mutex *stringsLock)
    : state(std::make_unique<State>(tid, lookup, strings, stringsLock)) {}

magic_trace::ThreadModelBuilder::~ThreadModelBuilder() = default;

void magic_trace::ThreadModelBuilder::consume(
    llvm::ArrayRef<TraceItem> items, llvm::ArrayRef<DecodeError> errors) {
  state->segments.consume(items, errors);
}

void magic_trace::ThreadModelBuilder::timesEstimated(uint64_t instructions) {
  state->model.estimatedInstructions = instructions;
}

ThreadModel magic_trace::ThreadModelBuilder::finish(const ThreadStop *stop,
                                                    const ModelOptions &options,
                                                    ModelStats *stats) {
  state->segments.finish();
  ThreadModel &model = state->model;
  std::vector<SegmentFacts> &facts = state->facts;
  model.instructions = state->segments.instructions();

  ModelStats local;
  ModelStats &counters = stats ? *stats : local;
  for (const SegmentFacts &fact : facts)
    counters.gaps += fact.gapFrame != NoFrame;
  if (options.stitch)
    stitchSegments(model, facts, counters);
  if (options.anchor && stop && !stop->frames.empty() &&
      !model.segments.empty())
    anchorToStop(model, facts, *stop, state->lookup, counters);

  // Stitching and anchoring may have grown a segment past its size.
  for (size_t k = 0; k < model.segments.size(); ++k) {
    Segment &segment = model.segments[k];
    segment.frames.shrinkToFit();
    segment.continuedFrames =
        segment.stitchedToPrevious ? facts[k].continued : 0;
  }
  counters.segments += model.segments.size();
  for (const Segment &segment : model.segments) {
    counters.frames += segment.frames.size();
    // Inferred frames are the segment's leading chain (the start chain, the
    // parents rule 3 inferred, stitching's and anchoring's outer frames, all
    // put in front): counted there, not by a pass over every frame.
    uint64_t prefix = 0;
    while (prefix < segment.frames.size() && segment.frames.inferredAt(prefix))
      ++prefix;
    counters.inferredFrames += prefix;
  }
  counters.modelBytes += threadModelBytes(model);
  return std::move(model);
}
