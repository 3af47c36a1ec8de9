//===- ExecutedCode.cpp - A kept window's instructions, by symbol range ---===//
#include "ExecutedCode.h"
#include "ViewSupport.h"

#include "magic_trace/CodeHistory.h"
#include "magic_trace/Pipeline.h"

#include <deque>

using namespace llvm;

namespace magic_trace::views {

StringRef withoutParameters(StringRef name) {
  if (name.starts_with("[") || !name.contains('('))
    return name;
  // The parameter list is the last balanced "(...)"; what follows it is
  // qualifiers (" const", " &&").
  size_t close = name.rfind(')');
  int depth = 0;
  for (size_t i = close + 1; i-- > 0;) {
    if (name[i] == ')')
      ++depth;
    else if (name[i] == '(' && --depth == 0)
      return i == 0 ? name : name.take_front(i);
  }
  return name;
}

bool namesFunction(StringRef query, StringRef name) {
  return name == query || withoutParameters(name) == query;
}

namespace {

/// One thread's items, walked block by block. A block's time runs to the
/// next item's (any kind: they are all timed), so each block waits for
/// the item after it.
class RunSink : public ItemSink {
public:
  RunSink(Symbolizer &symbols, InstructionWalker &walker, RunVisitor &visitor,
          uint64_t windowStart, uint64_t threadEnd, uint64_t &unwalked)
      : symbols(symbols), walker(walker), visitor(visitor),
        windowStart(windowStart), threadEnd(threadEnd), unwalked(unwalked) {}

  void consume(ArrayRef<TraceItem> items, ArrayRef<DecodeError>) override {
    for (const TraceItem &item : items) {
      if (pending) {
        finishBlock(*pending, item.timeNs);
        pending.reset();
      }
      // After the block before it: an Image item changes the code of the
      // blocks that follow.
      if (Error error = walker.follow(item)) {
        if (!failure)
          failure = std::move(error);
        else
          consumeError(std::move(error));
      }
      if (item.kind == ItemKind::Block)
        pending = item;
      else if (item.kind == ItemKind::Error || item.kind == ItemKind::Overflow)
        visitor.gap();
    }
  }

  void estimatedRange(uint64_t first, uint64_t count) override {
    estimated.push_back({first, first + count});
  }

  /// The last block runs to the thread's end in the model. Returns the
  /// first error seen (an image libipt could not make).
  Error finish() {
    if (pending)
      finishBlock(*pending, std::max(threadEnd, pending->timeNs));
    pending.reset();
    return failure ? std::move(*failure) : Error::success();
  }

private:
  /// Whether any of instructions [first, end) were timed by the
  /// instruction clock. Asked in ascending order.
  bool anyEstimated(uint64_t first, uint64_t end) {
    while (!estimated.empty() && estimated.front().second <= first)
      estimated.pop_front();
    return !estimated.empty() && estimated.front().first < end;
  }

  void finishBlock(const TraceItem &block, uint64_t endNs) {
    uint64_t n = block.detail;
    uint64_t first = ordinal;
    ordinal += n;
    if (n == 0)
      return;
    uint64_t ns = endNs > block.timeNs ? endNs - block.timeNs : 0;
    auto startOf = [&](uint64_t j) {
      return block.timeNs + shareUpTo(ns, j, n);
    };
    // Instructions that start before the window are not in it.
    uint64_t j = 0;
    if (block.timeNs < windowStart) {
      if (startOf(n - 1) < windowStart)
        return;
      uint64_t low = 0, high = n - 1; // startOf(high) >= windowStart.
      while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        if (startOf(middle) >= windowStart)
          high = middle;
        else
          low = middle + 1;
      }
      j = low;
    }
    uint64_t ip = block.ip;
    for (uint64_t skip = 0; skip < j; ++skip)
      if (!step(ip, block.mode)) {
        unwalked += n - skip;
        return;
      }
    while (j < n) {
      const SymbolRange &range = symbols.lookup(ip);
      CodeRun run;
      run.range = &range;
      run.ip = ip;
      run.mode = block.mode;
      uint64_t count = 0;
      if (ip >= range.begin && block.lastIp < range.end) {
        count = n - j; // The rest of the block is in the range.
      } else {
        do {
          ++count;
          if (j + count == n)
            break;
          if (!step(ip, block.mode)) {
            // Not walkable: the rest goes to this range.
            unwalked += n - j - count;
            count = n - j;
            break;
          }
        } while (ip >= range.begin && ip < range.end);
      }
      run.count = uint32_t(count);
      run.selfNs = shareUpTo(ns, j + count, n) - shareUpTo(ns, j, n);
      run.estimated = anyEstimated(first + j, first + j + count);
      visitor.run(run, walker);
      j += count;
    }
  }

  /// Moves `ip` past its instruction; false when its code cannot be read.
  bool step(uint64_t &ip, ExecMode mode) {
    Expected<uint8_t> size = walker.sizeAt(ip, mode);
    if (!size) {
      consumeError(size.takeError());
      return false;
    }
    ip += *size;
    return true;
  }

  Symbolizer &symbols;
  InstructionWalker &walker;
  RunVisitor &visitor;
  uint64_t windowStart, threadEnd;
  uint64_t &unwalked;
  std::optional<TraceItem> pending;
  /// Instructions of the thread's items so far (estimatedRange's count).
  uint64_t ordinal = 0;
  /// Estimated instructions not yet passed, as [first, end).
  std::deque<std::pair<uint64_t, uint64_t>> estimated;
  std::optional<Error> failure;
};

const ThreadModel *threadOf(const TraceModel &model, uint64_t tid) {
  for (const ThreadModel &thread : model.threads)
    if (thread.tid == tid)
      return &thread;
  return nullptr;
}

} // namespace

Expected<std::unique_ptr<ExecutedCode>>
ExecutedCode::create(const Snapshot &snapshot, SymbolCache *cache) {
  std::unique_ptr<ExecutedCode> code(new ExecutedCode(snapshot));
  DecodeOptions options;
  options.threads = 1; // Streamed: the window's items are never held.
  Expected<std::unique_ptr<SnapshotDecoder>> decoder =
      SnapshotDecoder::create(snapshot, options);
  if (!decoder)
    return decoder.takeError();
  code->decoder = std::move(*decoder);
  Expected<std::unique_ptr<InstructionWalker>> walker =
      InstructionWalker::create(snapshot, options);
  if (!walker)
    return walker.takeError();
  code->walker = std::move(*walker);
  if (cache) {
    code->strings = &cache->strings();
    code->symbolizer.emplace(snapshot.modules, snapshot.code, *cache);
  } else {
    code->symbolizer.emplace(snapshot.modules, snapshot.code, code->ownStrings);
  }
  return std::move(code);
}

ExecutedCode::~ExecutedCode() = default;

Error ExecutedCode::walk(const TraceModel &model, uint64_t onlyTid,
                         RunVisitor &visitor) {
  for (size_t index : decoder->selected()) {
    uint64_t tid = snapshot.threads[index].tid;
    const ThreadModel *thread = threadOf(model, tid);
    if (!thread || (onlyTid && tid != onlyTid))
      continue;
    size_t from =
        thread->windowStart
            ? windowDecodeStart(decoder->psbTimes(index), thread->windowStart)
            : 0;
    TraceItem seq;
    seq.kind = ItemKind::Image;
    seq.ip = decoder->seqAtPsb(index, from);
    if (Error error = walker->follow(seq))
      return error;
    uint64_t end = thread->segments.empty() ? 0 : thread->segments.back().end;
    visitor.beginThread(tid);
    RunSink sink(*symbolizer, *walker, visitor, thread->windowStart, end,
                 unwalkedInstructions);
    DecodeStats stats;
    Expected<uint64_t> decoded =
        decoder->decodeThreadOverlapped(index, sink, stats, from);
    if (!decoded)
      return decoded.takeError();
    if (Error error = sink.finish())
      return error;
  }
  return Error::success();
}

} // namespace magic_trace::views
