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
  std::vector<Piece> pieces;
  size_t bytes = 0;
  size_t limit = size_t(256) << 20;

  /// Unmaps the oldest pieces until the pool holds at most `most` bytes.
  void trimTo(size_t most) {
    size_t drop = 0;
    for (; drop < pieces.size() && bytes > most; ++drop) {
      munmap(pieces[drop].begin, pieces[drop].bytes);
      bytes -= pieces[drop].bytes;
    }
    pieces.erase(pieces.begin(), pieces.begin() + drop);
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

/// Populates new pages for the pool, 8 MiB at a time, until it has added
/// `bytes`, the pool is at its limit, or `stop`.
void fill(size_t bytes, const std::atomic<bool> &stop) {
  constexpr size_t Piece = 4 * podvector_detail::HugePage;
  for (size_t added = 0; added + Piece <= bytes && !stop; added += Piece) {
    {
      Pool &p = pool();
      std::lock_guard<std::mutex> hold(p.lock);
      if (p.bytes + Piece > p.limit)
        return;
    }
    void *block = podvector_detail::reserveAligned(Piece);
    if (!block)
      return;
    // Before Linux 5.14 there is no populating: a write to each page.
    // Any other failure (no memory): stop.
    if (madvise(block, Piece, podvector_detail::PopulateWrite) != 0) {
      if (errno != EINVAL) {
        munmap(block, Piece);
        return;
      }
      for (size_t at = 0; at < Piece; at += 4096)
        static_cast<volatile char *>(block)[at] = 0;
    }
    podvector_detail::poolPages(block, Piece, Piece);
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
  return filled;
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
}

} // namespace podvector_detail

void setPagePoolLimit(size_t bytes) {
  Pool &p = pool();
  std::lock_guard<std::mutex> hold(p.lock);
  p.limit = bytes;
  p.trimTo(bytes);
}

size_t pagePoolBytes() {
  Pool &p = pool();
  std::lock_guard<std::mutex> hold(p.lock);
  return p.bytes;
}

} // namespace magic_trace
