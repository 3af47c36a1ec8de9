// A thread in sleep(2) while main waits for it in pthread_join: for two
// seconds no thread can run; then the worker calls after_sleep. main calls
// main_waits just before the join.
#include <pthread.h>
#include <unistd.h>

__attribute__((noinline)) void before_sleep(void) {
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void main_waits(void) {
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void after_sleep(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static void *worker(void *arg) {
  (void)arg;
  before_sleep();
  unsigned left = sleep(2);
  after_sleep((int)left);
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
