//===- Parallel.h - Independent work items on a few threads -----*- C++ -*-===//
//
// The stages after the decode (the window's search and cut, the checks and
// the writers) walk each thread's model on its own: they run one model per
// worker, the caller being one of them; the window's search and the checks
// split a thread of a million frames or more into runs of frames.
//
//===----------------------------------------------------------------------===//
#ifndef MAGIC_TRACE_PARALLEL_H
#define MAGIC_TRACE_PARALLEL_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace magic_trace {

/// Calls `work(i)` once for each i in [0, count), on up to `workers`
/// threads (the caller's among them), in no particular order; returns when
/// all are done. Where no thread can be started, the caller does all of it.
template <typename Work>
void forEachParallel(size_t count, unsigned workers, Work work) {
  std::atomic<size_t> next{0};
  auto loop = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;)
      work(i);
  };
  std::vector<std::thread> pool;
  size_t helpers =
      std::min<size_t>(workers ? workers - 1 : 0, count ? count - 1 : 0);
  for (size_t i = 0; i < helpers; ++i) {
    try {
      pool.emplace_back(loop);
    } catch (const std::system_error &) {
      break;
    }
  }
  loop();
  for (std::thread &thread : pool)
    thread.join();
}

/// The cores of this machine (at least 1).
inline unsigned machineCores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace magic_trace

#endif
