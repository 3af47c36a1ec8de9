// A thread blocked in read(): main waits for a byte on a pipe that the
// worker writes after a pause and a little work (produce). main calls
// waiting_for_message just before the read; stopped in produce, main is
// inside its read syscall.
#include <pthread.h>
#include <unistd.h>

static int fds[2];

__attribute__((noinline)) int produce(int x) { return x * 7 + 3; }

__attribute__((noinline)) void waiting_for_message(void) {
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void got_message(int byte) {
  asm volatile("" ::"r"(byte) : "memory");
}

static void *writer(void *arg) {
  (void)arg;
  usleep(600000);
  char byte = (char)produce(produce(1));
  write(fds[1], &byte, 1);
  return 0;
}

int main(void) {
  pthread_t thread;
  if (pipe(fds) != 0 || pthread_create(&thread, 0, writer, 0) != 0)
    return 1;
  char byte = 0;
  waiting_for_message();
  if (read(fds[0], &byte, 1) != 1)
    return 1;
  got_message(byte);
  pthread_join(thread, 0);
  return 0;
}
