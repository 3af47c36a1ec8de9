//===- PagePool.cpp - Pages large PodVectors gave back, for reuse ---------===//
//
// Pieces of huge-page aligned anonymous memory whose pages are present, as
// far as the arrays that gave them knew (PodVector.h). Taking them moves their
// page tables (mremap): reused memory costs neither a copy nor a new page. The
// newest pieces are taken first; over the limit the oldest are unmapped.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/PodVector.h"

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace magic_trace {
namespace {

struct Piece {
  char *begin;
  size_t bytes;
};

struct Pool {
  std::mutex lock;
  /// Told when pages are taken or the limit changes (PagePoolReserve).
  std::condition_variable changed;
  std::vector<Piece> pieces;
  size_t bytes = 0;
  /// `bytes` != 0, for poolHasPages() without the lock.
  std::atomic<bool> holding{false};
  size_t limit = size_t(256) << 20;

  /// Unmaps the oldest pieces until the pool holds at most `most` bytes.
  void trimTo(size_t most) {
    size_t drop = 0;
    for (; drop < pieces.size() && bytes > most; ++drop) {
      munmap(pieces[drop].begin, pieces[drop].bytes);
      bytes -= pieces[drop].bytes;
    }
    pieces.erase(pieces.begin(), pieces.begin() + drop);
    holding = bytes != 0;
  }
};

Pool &pool() {
  // Never destroyed: arrays freed by other static destructors may still
  // come here at exit.
  static Pool *thePool = new Pool;
  return *thePool;
}

/// fillPagePool()'s thread.
struct Filler {
  std::mutex lock; ///< Held while it is started or stopped.
  std::thread thread;
  std::atomic<bool> stop{false};

  void halt() {
    stop = true;
    if (thread.joinable())
      thread.join();
  }
};

Filler &filler() {
  // Never destroyed, like the pool: a thread still filling at exit must
  // not meet a destroyed std::thread (which would end the process).
  static Filler *theFiller = new Filler;
  return *theFiller;
}

/// What the pool's fillers add at a time: 8 MiB.
constexpr size_t FillPiece = 4 * podvector_detail::HugePage;

/// Maps and populates FillPiece bytes and pools them; false when there is
/// no memory.
bool addFillPiece() {
  void *block = podvector_detail::reserveAligned(FillPiece);
  if (!block)
    return false;
  // Before Linux 5.14 there is no populating: a write to each page.
  // Any other failure (no memory): stop.
  if (madvise(block, FillPiece, podvector_detail::PopulateWrite) != 0) {
    if (errno != EINVAL) {
      munmap(block, FillPiece);
      return false;
    }
    for (size_t at = 0; at < FillPiece; at += 4096)
      static_cast<volatile char *>(block)[at] = 0;
  }
  podvector_detail::poolPages(block, FillPiece, FillPiece);
  return true;
}

/// Populates new pages for the pool, 8 MiB at a time, until it has added
/// `bytes`, the pool is at its limit, or `stop`.
void fill(size_t bytes, const std::atomic<bool> &stop) {
  for (size_t added = 0; added + FillPiece <= bytes && !stop;
       added += FillPiece) {
    {
      Pool &p = pool();
      std::lock_guard<std::mutex> hold(p.lock);
      if (p.bytes + FillPiece > p.limit)
        return;
    }
    if (!addFillPiece())
      return;
  }
}

} // namespace

void fillPagePool(size_t bytes) {
  Filler &f = filler();
  std::lock_guard<std::mutex> hold(f.lock);
  f.halt();
  if (bytes == 0)
    return;
  f.stop = false;
  f.thread = std::thread(fill, bytes, std::cref(f.stop));
}

void stopPagePoolFill() {
  Filler &f = filler();
  std::lock_guard<std::mutex> hold(f.lock);
  f.halt();
}

struct PagePoolReserve::State {
  size_t bytes;
  bool stop = false; ///< Under the pool's lock.
  size_t added = 0;  ///< Bytes the thread pooled.
  size_t before = 0; ///< The pool's bytes when the reserve began.
  std::thread thread;

  /// The thread: tops the pool up to `bytes` whenever arrays take from it.
  void keep() {
    Pool &p = pool();
    std::unique_lock<std::mutex> hold(p.lock);
    while (!stop) {
      if (p.bytes >= bytes || p.bytes + FillPiece > p.limit) {
        p.changed.wait(hold);
        continue;
      }
      hold.unlock();
      bool pooled = addFillPiece();
      hold.lock();
      if (!pooled)
        return;
      added += FillPiece;
    }
  }
};

PagePoolReserve::PagePoolReserve(size_t bytes) : state(new State) {
  state->bytes = bytes;
  state->before = pagePoolBytes();
  state->thread = std::thread([s = state] { s->keep(); });
}

PagePoolReserve::~PagePoolReserve() {
  Pool &p = pool();
  {
    std::lock_guard<std::mutex> hold(p.lock);
    state->stop = true;
  }
  p.changed.notify_all();
  state->thread.join();
  {
    // What is over the pool's bytes at the start, up to what the thread
    // added, no array took.
    std::lock_guard<std::mutex> hold(p.lock);
    size_t over = p.bytes > state->before ? p.bytes - state->before : 0;
    p.trimTo(p.bytes - std::min(over, state->added));
  }
  delete state;
}

namespace podvector_detail {

size_t takePooledPages(void *at, size_t bytes) {
  Pool &p = pool();
  std::lock_guard<std::mutex> hold(p.lock);
  char *to = static_cast<char *>(at);
  size_t filled = 0;
  while (filled < bytes && !p.pieces.empty()) {
    Piece &piece = p.pieces.back();
    size_t moved = std::min(piece.bytes, bytes - filled);
    void *done = mremap(piece.begin, moved, moved,
                        MREMAP_MAYMOVE | MREMAP_FIXED, to + filled);
    if (done == MAP_FAILED) {
      // Out of mappings, for example: the rest comes from the kernel.
      munmap(piece.begin, piece.bytes);
      p.bytes -= piece.bytes;
      p.pieces.pop_back();
      break;
    }
    filled += moved;
    p.bytes -= moved;
    piece.begin += moved;
    piece.bytes -= moved;
    if (piece.bytes == 0)
      p.pieces.pop_back();
  }
  p.holding = p.bytes != 0;
  if (filled)
    p.changed.notify_all();
  return filled;
}

bool poolHasPages() { return pool().holding.load(std::memory_order_relaxed); }

void takeAbsentPooledPages(char *begin, char *end) {
  for (char *at = begin; at < end; at += HugePage) {
    // A huge page whose first page is present was populated or written
    // already: it keeps its pages.
    unsigned char present = 0;
    if (mincore(at, 4096, &present) != 0 || (present & 1))
      continue;
    if (takePooledPages(at, HugePage) < HugePage)
      return; // The pool is empty.
  }
}

void poolPages(void *block, size_t bytes, size_t present) {
  size_t kept = std::min(bytes, mappedSize(present));
  if (kept < bytes)
    munmap(static_cast<char *>(block) + kept, bytes - kept);
  bytes = kept;
  if (bytes == 0)
    return;
  Pool &p = pool();
  std::lock_guard<std::mutex> hold(p.lock);
  if (bytes > p.limit) {
    munmap(block, bytes);
    return;
  }
  p.trimTo(p.limit - bytes);
  p.pieces.push_back({static_cast<char *>(block), bytes});
  p.bytes += bytes;
  p.holding = true;
}

} // namespace podvector_detail

void setPagePoolLimit(size_t bytes) {
  Pool &p = pool();
  {
    std::lock_guard<std::mutex> hold(p.lock);
    p.limit = bytes;
    p.trimTo(bytes);
  }
  p.changed.notify_all();
}

size_t pagePoolBytes() {
  Pool &p = pool();
  std::lock_guard<std::mutex> hold(p.lock);
  return p.bytes;
}

} // namespace magic_trace
