// Issue 16's hang: a worker thread does the work while main waits in
// pthread_join (main_waits is called just before). The worker sleeps first,
// so that when it reaches worker_begin main is surely inside its futex
// syscall.
#include <pthread.h>
#include <unistd.h>

__attribute__((noinline)) int worker_step(int x) { return x * 5 + 1; }

__attribute__((noinline)) void worker_begin(void) {
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void main_waits(void) {
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void worker_done(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static void *worker(void *arg) {
  (void)arg;
  usleep(100000);
  worker_begin();
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
  main_waits();
  pthread_join(thread, 0);
  return 0;
}
