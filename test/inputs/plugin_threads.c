// Two threads, the snapshot trigger on the worker: the worker waits for main
// to say go (so it starts its real work while the debugger steps it), then
// calls worker_step three times and worker_done, where the trigger is.
#include <pthread.h>

static volatile int go;

__attribute__((noinline)) int worker_step(int x) { return x * 5 + 1; }

__attribute__((noinline)) void worker_done(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static void *worker(void *arg) {
  (void)arg;
  while (!go)
    ;
  int total = 0;
  for (int i = 0; i < 3; i++)
    total += worker_step(i);
  worker_done(total);
  return 0;
}

int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, 0, worker, 0) != 0)
    return 1;
  go = 1;
  pthread_join(thread, 0);
  return 0;
}
