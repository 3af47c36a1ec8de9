//===- PodVector.h - A vector of trivially copyable values ------*- C++ -*-===//
//
// The model's frame arrays hold tens of millions of elements. std::vector
// grows by allocating a new block and copying into it, which touches (and
// page-faults) twice the memory; PodVector grows and shrinks with realloc,
// which for large blocks remaps pages instead of copying them, and can give
// back its slack exactly (shrinkToFit) without a copy. Appending to a large
// array populates its pages a window at a time instead of faulting on each.
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
      : elements(other.elements), count(other.count), room(other.room) {
    other.elements = nullptr;
    other.count = other.room = 0;
  }
  PodVector &operator=(const PodVector &other) {
    if (this != &other)
      assign(other.begin(), other.end());
    return *this;
  }
  PodVector &operator=(PodVector &&other) noexcept {
    if (this != &other) {
      std::free(elements);
      elements = other.elements;
      count = other.count;
      room = other.room;
      other.elements = nullptr;
      other.count = other.room = 0;
    }
    return *this;
  }
  ~PodVector() { std::free(elements); }

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
      std::free(elements);
      elements = nullptr;
      room = 0;
      return;
    }
    void *grown =
        wanted > SIZE_MAX / sizeof(T)
            ? nullptr
            : std::realloc(static_cast<void *>(elements), wanted * sizeof(T));
    if (!grown)
      llvm::report_bad_alloc_error("out of memory growing a magic-trace model");
    elements = static_cast<T *>(grown);
    room = wanted;
    populated = count;
    populateAhead();
  }

  /// Fills the page tables for the next 1 MiB of a large array in one call
  /// (MADV_POPULATE_WRITE, Linux 5.14; older kernels ignore it): one page
  /// fault per 4 KiB, dear on a VM, dominated appending frames.
  __attribute__((noinline)) void populateAhead() {
#ifdef MADV_POPULATE_WRITE
    constexpr int PopulateWrite = MADV_POPULATE_WRITE;
#else
    constexpr int PopulateWrite = 23;
#endif
    constexpr size_t Window = 1u << 20;
    if (room * sizeof(T) < 4 * Window) {
      populated = room;
      return;
    }
    uintptr_t page = 4096;
    uintptr_t begin = reinterpret_cast<uintptr_t>(elements + populated);
    begin = (begin + page - 1) & ~(page - 1);
    size_t next = std::min(room, populated + Window / sizeof(T));
    uintptr_t end = reinterpret_cast<uintptr_t>(elements + next) & ~(page - 1);
    if (end > begin)
      madvise(reinterpret_cast<void *>(begin), end - begin, PopulateWrite);
    populated = next;
  }

  T *elements = nullptr;
  size_t count = 0;
  size_t room = 0;
  size_t populated = 0; ///< Elements whose pages are known to be present.
};

} // namespace magic_trace

#endif
