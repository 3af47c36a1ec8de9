// A second thread: the emulator follows it (PTRACE_O_TRACECLONE) with its
// own PT buffer. The worker does a little work and ends; main joins it.
#include <pthread.h>
#include <unistd.h>

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

__attribute__((noinline)) int work(int n) {
  int total = 0;
  for (int i = 0; i < n; i++)
    total += i * i;
  return total;
}

// A start point the worker reaches only after main surely waits in
// pthread_join (lit: --start late_start).
__attribute__((noinline)) int late_start(int n) { return work(n); }

static void *worker(void *arg) {
  int *out = arg;
  *out = work(20);
  // Time for main, single-stepped meanwhile, to reach pthread_join: 50 ms
  // was once too little with four busy processes on two cores.
  usleep(250000);
  *out += late_start(3);
  return 0;
}

int main(int argc, char **argv) {
  (void)argv;
  int result = 0;
  pthread_t thread;
  if (pthread_create(&thread, 0, worker, &result) != 0)
    return 1;
  pthread_join(thread, 0);
  stop_here(result + work(argc));
  return 0;
}
