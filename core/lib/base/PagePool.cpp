//===- PagePool.cpp - Pages large PodVectors gave back, for reuse ---------===//
//
// Pieces of huge-page aligned anonymous memory whose pages are present, as
// far as the arrays that gave them knew (PodVector.h). Taking them moves their
// page tables (mremap): reused memory costs neither a copy nor a new page. The
// newest pieces are taken first; over the limit the oldest are unmapped.
//
//===----------------------------------------------------------------------===//

#include "magic_trace/PodVector.h"

#include <mutex>
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

} // namespace

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
