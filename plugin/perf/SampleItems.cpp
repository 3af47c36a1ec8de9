//===- SampleItems.cpp - perf's branch samples -> one thread's items ------===//
#include "SampleItems.h"

// perf's header is C and declares the filter's entry points.
extern "C" {
#include <perf/perf_dlfilter.h>
}

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace magic_trace {

namespace {
constexpr size_t ChunkBytes = size_t(2) << 20; // An x86-64 huge page.
constexpr size_t ChunkItems = ChunkBytes / sizeof(TraceItem);
} // namespace

void SampleItems::FreeChunk::operator()(TraceItem *items) const {
  std::free(items);
}

void SampleItems::append(const TraceItem &item) {
  if (chunks.empty() || chunks.back().size == ChunkItems) {
    void *memory = std::aligned_alloc(ChunkBytes, ChunkBytes);
    if (!memory)
      throw std::bad_alloc();
    // A hint: without transparent huge pages the chunk is 512 pages.
    madvise(memory, ChunkBytes, MADV_HUGEPAGE);
    chunks.push_back({std::unique_ptr<TraceItem, FreeChunk>(
                          static_cast<TraceItem *>(memory)),
                      0});
  }
  Chunk &chunk = chunks.back();
  new (chunk.items.get() + chunk.size) TraceItem(item);
  ++chunk.size;
}

void SampleItems::push(ItemKind kind, uint64_t ip, uint64_t timeNs) {
  TraceItem item;
  item.kind = kind;
  item.ip = ip;
  item.timeNs = timeNs;
  append(item);
}

void SampleItems::block(uint64_t lastIp, BranchClass lastClass,
                        uint8_t lastSize) {
  // A branch before the block's start cannot follow it, nor can one a
  // megabyte on (straight-line code is never that long, and the model
  // walks every symbol range between): perf lost the way without saying
  // so. The branch alone is what is known to have run.
  constexpr uint64_t MaxBlockBytes = uint64_t(1) << 20;
  bool follows =
      blockStart && blockStart <= lastIp && lastIp - blockStart < MaxBlockBytes;
  uint64_t first = follows ? blockStart : lastIp;
  TraceItem item;
  item.kind = ItemKind::Block;
  item.ip = first;
  item.lastIp = lastIp;
  item.timeNs = blockStart ? blockTime : lastTime;
  // perf's branch samples carry no instruction count (insn_cnt is for IPC
  // and 0 here), so each block counts as one.
  item.detail = 1;
  item.lastClass = lastClass;
  item.lastSize = lastSize;
  append(item);
  ++blockCount;
}

void SampleItems::add(const BranchSample &sample, const ClassifiedInsn &insn) {
  // Times are monotonic per thread by the items' contract.
  uint64_t time = std::max(lastTime, sample.timeNs);
  lastTime = time;
  uint32_t flags = sample.flags;
  if (flags & PERF_DLFILTER_FLAG_TRACE_BEGIN) {
    // perf's decoder starts a trace anew after an overflow or an error it
    // resynchronized after; only a trace end says tracing stopped for a
    // reason of the program's (a syscall, an interrupt, the filter).
    if (tracing) {
      push(ItemKind::Overflow, sample.addr, time);
      ++lossCount;
    }
    push(ItemKind::Enable, sample.addr, time);
    tracing = true;
    blockStart = sample.addr;
    blockTime = time;
    return;
  }
  if (!tracing) {
    // The first sample taken (after a trace end or the time window's
    // start) is a branch whose block began where no sample says: start at
    // its target.
    push(ItemKind::Enable, sample.addr, time);
    tracing = sample.addr != 0;
    blockStart = sample.addr;
    blockTime = time;
    return;
  }
  if (flags & PERF_DLFILTER_FLAG_ASYNC) {
    // Tracing stopped or moved at ip before its instruction ran (an
    // interrupt's FUP): the block ends before ip. Where control went next
    // is no branch of the program's unless tracing went on.
    bool ends = flags & PERF_DLFILTER_FLAG_TRACE_END;
    if (blockStart && blockStart < sample.ip)
      block(sample.ip - 1, ends ? BranchClass::Other : BranchClass::Unknown, 0);
  } else if (sample.ip) {
    block(sample.ip, insn.branch, insn.size);
  }
  if (flags & PERF_DLFILTER_FLAG_TRACE_END || sample.addr == 0) {
    // Where an interrupt stopped tracing (its FUP) is the Disable's ip, as
    // libipt's async disable says; a syscall's TIP.PGD has no user IP.
    push(ItemKind::Disable, flags & PERF_DLFILTER_FLAG_ASYNC ? sample.ip : 0,
         time);
    tracing = false;
    blockStart = 0;
    return;
  }
  blockStart = sample.addr;
  blockTime = time;
}

void SampleItems::skip() {
  tracing = false;
  blockStart = 0;
}

void SampleItems::feed(ItemSink &sink) {
  for (Chunk &chunk : chunks) {
    sink.consume(llvm::ArrayRef<TraceItem>(chunk.items.get(), chunk.size), {});
    chunk.items.reset();
  }
  chunks.clear();
}

} // namespace magic_trace
