// A breakpoint hit by another thread while the stepper runs: main works
// (main_step) and then waits for the worker, which calls worker_hit, where
// the test sets a plain breakpoint, and then worker_done.
#include <pthread.h>

static volatile int started;

__attribute__((noinline)) int main_step(int x) { return x + 2; }

__attribute__((noinline)) void worker_hit(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

__attribute__((noinline)) void worker_done(void) {
  asm volatile("" ::: "memory");
}

static void *worker(void *arg) {
  (void)arg;
  while (!started)
    ;
  worker_hit(started);
  worker_done();
  return 0;
}

int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, 0, worker, 0) != 0)
    return 1;
  int value = 0;
  for (int i = 0; i < 3; i++)
    value = main_step(value);
  started = value;
  pthread_join(thread, 0);
  return 0;
}
