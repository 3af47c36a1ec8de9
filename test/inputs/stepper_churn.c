// Threads created and exiting during the run: main starts three workers
// one after another, each calls churn_work once and ends, main joins each,
// then calls churn_done.
#include <pthread.h>

__attribute__((noinline)) int churn_work(int x) { return x * x + 1; }

__attribute__((noinline)) void churn_done(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static void *worker(void *arg) {
  *(int *)arg = churn_work(*(int *)arg);
  return 0;
}

int main(void) {
  int total = 0;
  for (int i = 0; i < 3; i++) {
    int value = i;
    pthread_t thread;
    if (pthread_create(&thread, 0, worker, &value) != 0)
      return 1;
    pthread_join(thread, 0);
    total += value;
  }
  churn_done(total);
  return 0;
}
