//===- PodVector.h - A vector of trivially copyable values ------*- C++ -*-===//
//
// The model's frame arrays hold tens of millions of elements. std::vector
// grows by allocating a new block and copying into it, which touches (and
// page-faults) twice the memory; PodVector grows and shrinks with realloc,
// which for large blocks remaps pages instead of copying them, and can give
// back its slack exactly (shrinkToFit) without a copy. Appending to a large
// array populates its pages a window at a time instead of faulting on each.
//
// Arrays of 8 MiB and more are mapped by themselves, 2 MiB aligned, and ask
// for transparent huge pages (Debian leaves them to madvise): on a VM a
// 4 KiB fault costs microseconds, and the model's frames of a 10 M-slice
// window touched 240 MB through 60,000 of them. They grow by moving their
// pages (mremap) to a new aligned mapping, so huge pages stay whole.
//
// Pages such an array gives back (freed, shrunk) go to a bounded pool, and
// the next array to grow takes them (mremap again, no copy). On a VM whose
// balloon takes back the guest's free pages within seconds, a page the
// process freed and maps again later costs as much as a new one (1-2 ms a
// MB to populate, measured); a debugging session that frees an old
// snapshot's model and decodes a new one reuses the old pages instead.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PODVECTOR_H
#define MAGIC_TRACE_PODVECTOR_H

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <type_traits>

#include <sys/mman.h>

namespace magic_trace {
namespace podvector_detail {

constexpr size_t HugePage = size_t(2) << 20;
/// Blocks of at least this many bytes are mapped by themselves.
constexpr size_t MappedFrom = 4 * HugePage;

inline bool mapped(size_t bytes) { return bytes >= MappedFrom; }

/// madvise's MADV_POPULATE_WRITE (Linux 5.14; older kernels fail it with
/// EINVAL), where the C library's headers do not name it yet.
#ifdef MADV_POPULATE_WRITE
constexpr int PopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int PopulateWrite = 23;
#endif
inline size_t mappedSize(size_t bytes) {
  return (bytes + HugePage - 1) & ~(HugePage - 1);
}

/// Moves pooled pages to [at, at + bytes) (HugePage aligned, a new
/// mapping's untouched range); returns how many bytes from `at` it filled.
size_t takePooledPages(void *at, size_t bytes);
/// Keeps [block, block + bytes) (HugePage aligned) in the pool, as far as
/// its first `present` bytes have pages (the rest is unmapped: pooling it
/// would hold nothing), and unmaps what the pool's limit has no room for.
void poolPages(void *block, size_t bytes, size_t present);

/// A new mapping of `bytes` (a multiple of HugePage) at a HugePage
/// boundary, advised for huge pages; nullptr when there is no memory.
inline void *reserveAligned(size_t bytes) {
  size_t extra = bytes + HugePage;
  void *raw = mmap(nullptr, extra, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return nullptr;
  uintptr_t first = reinterpret_cast<uintptr_t>(raw);
  uintptr_t start = (first + HugePage - 1) & ~(HugePage - 1);
  if (start > first)
    munmap(raw, start - first);
  uintptr_t end = start + bytes, last = first + extra;
  if (last > end)
    munmap(reinterpret_cast<void *>(end), last - end);
  madvise(reinterpret_cast<void *>(start), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void *>(start);
}

/// reserveAligned, its pages taken from the pool as far as it has them.
inline void *mapAligned(size_t bytes) {
  void *block = reserveAligned(bytes);
  if (block)
    takePooledPages(block, bytes);
  return block;
}

/// Resizes `block` (`oldBytes` of capacity, nullptr when 0) to `newBytes`
/// (> 0), keeping its first `usedBytes`: realloc below MappedFrom, else
/// an aligned mapping. Pages may be present in its first `presentBytes`
/// only. Returns nullptr when there is no memory (the block is then
/// unchanged).
inline void *resize(void *block, size_t oldBytes, size_t newBytes,
                    size_t usedBytes, size_t presentBytes) {
  bool wasMapped = mapped(oldBytes), isMapped = mapped(newBytes);
  if (!wasMapped && !isMapped)
    return std::realloc(block, newBytes);
  if (!isMapped) {
    void *small = std::malloc(newBytes);
    if (!small)
      return nullptr;
    std::memcpy(small, block, std::min(usedBytes, newBytes));
    poolPages(block, mappedSize(oldBytes), presentBytes);
    return small;
  }
  size_t size = mappedSize(newBytes);
  if (!wasMapped) {
    void *grown = mapAligned(size);
    if (!grown)
      return nullptr;
    if (usedBytes)
      std::memcpy(grown, block, usedBytes);
    std::free(block);
    return grown;
  }
  size_t had = mappedSize(oldBytes);
  if (size == had)
    return block;
  if (size < had) {
    poolPages(static_cast<char *>(block) + size, had - size,
              presentBytes > size ? presentBytes - size : 0);
    return block;
  }
  // In place when the addresses after it are free, else its pages move to
  // a new aligned mapping (no copy; the huge pages stay whole). The new
  // range takes pooled pages.
  if (mremap(block, had, size, 0) != MAP_FAILED) {
    madvise(block, size, MADV_HUGEPAGE);
    takePooledPages(static_cast<char *>(block) + had, size - had);
    return block;
  }
  void *grown = reserveAligned(size);
  if (!grown)
    return nullptr;
  if (mremap(block, had, had, MREMAP_MAYMOVE | MREMAP_FIXED, grown) ==
      MAP_FAILED) {
    std::memcpy(grown, block, usedBytes);
    munmap(block, had);
  }
  takePooledPages(static_cast<char *>(grown) + had, size - had);
  return grown;
}

/// Frees `block` (`bytes` of capacity, pages in its first `presentBytes`).
inline void release(void *block, size_t bytes, size_t presentBytes) {
  if (mapped(bytes))
    poolPages(block, mappedSize(bytes), presentBytes);
  else
    std::free(block);
}

} // namespace podvector_detail

/// The most bytes of pages the large arrays' pool keeps for reuse (256 MiB
/// unless set; 0 turns it off). Lowering it unmaps what is over it.
void setPagePoolLimit(size_t bytes);
/// Bytes of pages the pool holds now.
size_t pagePoolBytes();
/// Adds up to `bytes` of new pages to the pool (as far as its limit
/// allows), on a thread of its own, 8 MiB at a time, until done or
/// stopPagePoolFill(); a later call stops the earlier one first. A debugging
/// session calls it once a decode is done, while its snapshot is written on
/// one core, so that the next decode's model takes pages instead of waiting
/// for the kernel to zero new ones (1-2 ms a MB on a VM whose balloon took
/// the free ones back).
void fillPagePool(size_t bytes);
/// Stops fillPagePool()'s thread and waits for it: at most the 8 MiB it is
/// populating.
void stopPagePoolFill();

/// A std::vector subset for trivially copyable T (elements move with
/// memcpy/realloc). Out of memory ends the process through LLVM's bad-alloc
/// handler, as std::vector's would through bad_alloc.
template <typename T> class PodVector {
  static_assert(std::is_trivially_copyable_v<T>,
                "PodVector moves elements with memcpy");

public:
  using value_type = T;
  using iterator = T *;
  using const_iterator = const T *;
  using reverse_iterator = std::reverse_iterator<T *>;
  using const_reverse_iterator = std::reverse_iterator<const T *>;

  PodVector() = default;
  PodVector(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
  }
  PodVector(const PodVector &other) { assign(other.begin(), other.end()); }
  PodVector(PodVector &&other) noexcept
      : elements(other.elements), count(other.count), room(other.room),
        populated(other.populated) {
    other.elements = nullptr;
    other.count = other.room = other.populated = 0;
  }
  PodVector &operator=(const PodVector &other) {
    if (this != &other)
      assign(other.begin(), other.end());
    return *this;
  }
  PodVector &operator=(PodVector &&other) noexcept {
    if (this != &other) {
      podvector_detail::release(elements, room * sizeof(T), presentBytes());
      elements = other.elements;
      count = other.count;
      room = other.room;
      populated = other.populated;
      other.elements = nullptr;
      other.count = other.room = other.populated = 0;
    }
    return *this;
  }
  ~PodVector() {
    podvector_detail::release(elements, room * sizeof(T), presentBytes());
  }

  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  size_t capacity() const { return room; }
  T *data() { return elements; }
  const T *data() const { return elements; }

  T &operator[](size_t i) { return elements[i]; }
  const T &operator[](size_t i) const { return elements[i]; }
  T &front() { return elements[0]; }
  const T &front() const { return elements[0]; }
  T &back() { return elements[count - 1]; }
  const T &back() const { return elements[count - 1]; }

  iterator begin() { return elements; }
  iterator end() { return elements + count; }
  const_iterator begin() const { return elements; }
  const_iterator end() const { return elements + count; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const {
    return const_reverse_iterator(end());
  }
  const_reverse_iterator rend() const {
    return const_reverse_iterator(begin());
  }

  void push_back(const T &value) {
    if (count == room) {
      // `value` may live in this array: copy it before moving the array.
      T copy = value;
      reallocate(room < 8 ? 8 : room * 2);
      elements[count++] = copy;
      return;
    }
    elements[count++] = value;
    if (count >= populated)
      populateAhead();
  }
  /// Appends `n` elements left as they were (the caller writes each one),
  /// growing as push_back does; returns the first of them.
  T *appendUninitialized(size_t n) {
    if (room - count < n)
      reallocate(std::max(room < 8 ? size_t(8) : room * 2, count + n));
    T *first = elements + count;
    count += n;
    if (count >= populated)
      populateAhead();
    return first;
  }
  void pop_back() { --count; }
  void clear() { count = 0; }

  /// Makes room for exactly `wanted` elements (never less than size()).
  void reserve(size_t wanted) {
    if (wanted > room)
      reallocate(wanted);
  }
  /// New elements are value-initialized (T's default member initializers).
  void resize(size_t wanted) { resize(wanted, T{}); }
  void resize(size_t wanted, const T &value) {
    if (wanted > room)
      reallocate(wanted);
    for (size_t i = count; i < wanted; ++i)
      elements[i] = value;
    count = wanted;
  }
  template <typename It> void assign(It first, It last) {
    size_t wanted = size_t(std::distance(first, last));
    if (wanted > room)
      reallocate(wanted);
    count = 0;
    for (; first != last; ++first)
      elements[count++] = *first;
  }
  /// Gives back the capacity beyond size() + `spare` (realloc in place).
  void shrinkToFit(size_t spare = 0) {
    if (room > count + spare)
      reallocate(count + spare);
  }

  /// Moves elements [from, size()) to start at `to` (either direction),
  /// growing or shrinking the array by to - from; the elements in between
  /// a grown gap are left as they were (callers overwrite them).
  void shift(size_t from, size_t to) {
    size_t moved = count - from;
    size_t wanted = to + moved;
    if (wanted > room)
      reallocate(wanted);
    if (moved)
      std::memmove(static_cast<void *>(elements + to), elements + from,
                   moved * sizeof(T));
    count = wanted;
  }

private:
  // The growth paths stay out of line, so that push_back's common case (a
  // store and two compares) inlines into the model builder's frame appends.
  __attribute__((noinline)) void reallocate(size_t wanted) {
    if (wanted == 0) {
      podvector_detail::release(elements, room * sizeof(T), presentBytes());
      elements = nullptr;
      room = count = populated = 0;
      return;
    }
    void *grown =
        wanted > SIZE_MAX / sizeof(T)
            ? nullptr
            : podvector_detail::resize(static_cast<void *>(elements),
                                       room * sizeof(T), wanted * sizeof(T),
                                       count * sizeof(T), presentBytes());
    if (!grown)
      llvm::report_bad_alloc_error("out of memory growing a magic-trace model");
    elements = static_cast<T *>(grown);
    room = wanted;
    populated = std::min(count, room);
    populateAhead();
  }

  /// The bytes from the start that may have pages: those populated ahead
  /// or written.
  size_t presentBytes() const { return std::max(populated, count) * sizeof(T); }

  /// Fills the page tables for the next 1 MiB of a large array in one call
  /// (MADV_POPULATE_WRITE, Linux 5.14; older kernels ignore it): one page
  /// fault per 4 KiB, dear on a VM, dominated appending frames.
  __attribute__((noinline)) void populateAhead() {
    constexpr size_t Window = 1u << 20;
    size_t bytes = room * sizeof(T);
    if (bytes < 4 * Window) {
      populated = room;
      return;
    }
    // A mapped block's windows are whole huge pages, 8 MiB at a time.
    bool huge = podvector_detail::mapped(bytes);
    uintptr_t align = huge ? podvector_detail::HugePage : 4096;
    size_t step = (huge ? 8 * Window : Window) / sizeof(T);
    uintptr_t begin = reinterpret_cast<uintptr_t>(elements + populated);
    size_t next = std::min(room, populated + step);
    uintptr_t end = reinterpret_cast<uintptr_t>(elements + next);
    if (huge) {
      begin &= ~(align - 1);
      end = (end + align - 1) & ~(align - 1);
    } else {
      begin = (begin + align - 1) & ~(align - 1);
      end &= ~(align - 1);
    }
    if (end > begin)
      madvise(reinterpret_cast<void *>(begin), end - begin,
              podvector_detail::PopulateWrite);
    populated = next;
  }

  T *elements = nullptr;
  size_t count = 0;
  size_t room = 0;
  size_t populated = 0; ///< Elements whose pages are known to be present.
};

} // namespace magic_trace

#endif
