// Eight workers and main, each running calls, returns and loops for about
// 1.2 million instructions (argv[1] rounds of 5000 by default; 1000 is about
// 240,000), for per-CPU perf.data from our writer
// (magic-trace-perfdata --per-cpu): nine threads to lay onto a few virtual
// CPUs. The workers start together and end before main stops at stop_here.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum { kWorkers = 8 };

__attribute__((noinline)) void stop_here(uint64_t value) {
  asm volatile("" ::"r"(value) : "memory");
}

__attribute__((noinline)) uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  return x ^ (x >> 29);
}

// Recursion gives deep call stacks and runs of compressed returns.
__attribute__((noinline)) uint64_t walk(uint64_t x, int depth) {
  if (depth == 0)
    return mix(x);
  uint64_t left = walk(x * 3 + 1, depth - 1);
  if (left & 1)
    return left + walk(left, depth - 2 > 0 ? depth - 2 : 0);
  return left;
}

static int rounds = 5000;

static void *worker(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg, total = 0;
  for (int round = 0; round < rounds; round++)
    total += walk(seed + round, 6);
  return (void *)(uintptr_t)total;
}

int main(int argc, char **argv) {
  if (argc > 1)
    rounds = atoi(argv[1]);
  pthread_t threads[kWorkers];
  for (uintptr_t i = 0; i < kWorkers; i++)
    if (pthread_create(&threads[i], 0, worker, (void *)(i + 1)) != 0)
      return 1;
  uint64_t total = (uint64_t)(uintptr_t)worker((void *)100);
  for (int i = 0; i < kWorkers; i++) {
    void *result;
    pthread_join(threads[i], &result);
    total += (uint64_t)(uintptr_t)result;
  }
  stop_here(total);
  return 0;
}
