// A busy program (issue 49, docs/user-guide.md "Big snapshots"): WORKERS
// threads (default 8) spin in small call-heavy functions until the end, and
// the main thread calls checkpoint() every PERIOD_MS milliseconds (default
// 300), ROUNDS times (default 16), then stops them. Every snapshot at
// checkpoint() finds every ring full. With LOOPS above 0, each leaf call
// loops LOOPS times instead: as busy, with fewer calls per byte of trace
// (scripts/bench-window.sh).
//   busy_threads [ROUNDS [WORKERS [PERIOD_MS [LOOPS]]]]
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

enum { kMaxWorkers = 64 };

static atomic_int stopping;

__attribute__((noinline)) uint32_t leaf(uint32_t x) {
  return x * 2654435761u ^ (x >> 7);
}

__attribute__((noinline)) uint32_t middle(uint32_t x) {
  return leaf(x) + leaf(x + 1);
}

__attribute__((noinline)) uint32_t top(uint32_t x) {
  return middle(x) ^ middle(x * 3);
}

static void *worker(void *arg) {
  uint32_t x = (uint32_t)(uintptr_t)arg;
  while (!atomic_load_explicit(&stopping, memory_order_relaxed))
    x = top(x);
  return (void *)(uintptr_t)x;
}

static int loops;

__attribute__((noinline)) uint32_t loopingLeaf(uint32_t x) {
  for (int i = 0; i < loops; i++)
    x = x * 2654435761u ^ (x >> 7);
  return x;
}

__attribute__((noinline)) uint32_t loopingTop(uint32_t x) {
  return loopingLeaf(x) + loopingLeaf(x ^ 0x5bd1e995u);
}

static void *loopingWorker(void *arg) {
  uint32_t x = (uint32_t)(uintptr_t)arg;
  while (!atomic_load_explicit(&stopping, memory_order_relaxed))
    x = loopingTop(x);
  return (void *)(uintptr_t)x;
}

__attribute__((noinline)) void checkpoint(int round) {
  asm volatile("" ::"r"(round) : "memory");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 16;
  int workers = argc > 2 ? atoi(argv[2]) : 8;
  int periodMs = argc > 3 ? atoi(argv[3]) : 300;
  loops = argc > 4 ? atoi(argv[4]) : 0;
  if (workers < 0 || workers > kMaxWorkers || loops < 0)
    return 2;
  pthread_t threads[kMaxWorkers];
  for (int i = 0; i < workers; i++)
    if (pthread_create(&threads[i], 0, loops ? loopingWorker : worker,
                       (void *)(uintptr_t)(i + 1)))
      return 1;
  struct timespec period = {periodMs / 1000, (periodMs % 1000) * 1000000L};
  for (int round = 1; round <= rounds; round++) {
    nanosleep(&period, 0);
    checkpoint(round);
  }
  atomic_store(&stopping, 1);
  for (int i = 0; i < workers; i++)
    pthread_join(threads[i], 0);
  return 0;
}
