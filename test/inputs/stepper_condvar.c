// A thread blocked on a futex: the worker waits on a condition variable
// until main, after a pause and its own work (main_work twice), says go;
// the worker then calls woken.
#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int go;

__attribute__((noinline)) int main_work(int x) { return x * 3 + 1; }

__attribute__((noinline)) void waiting(void) { asm volatile("" ::: "memory"); }

__attribute__((noinline)) void woken(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static void *worker(void *arg) {
  (void)arg;
  waiting();
  pthread_mutex_lock(&lock);
  while (!go)
    pthread_cond_wait(&changed, &lock);
  pthread_mutex_unlock(&lock);
  woken(go);
  return 0;
}

int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, 0, worker, 0) != 0)
    return 1;
  usleep(600000);
  int value = main_work(main_work(1));
  pthread_mutex_lock(&lock);
  go = value;
  pthread_cond_signal(&changed);
  pthread_mutex_unlock(&lock);
  pthread_join(thread, 0);
  return 0;
}
