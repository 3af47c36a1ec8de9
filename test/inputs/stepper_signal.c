// A signal handler: main waits in pause() until SIGALRM (alarm, 1 s; LLDB
// passes it without stopping) runs on_alarm, which calls in_handler; back
// from the handler, main calls after_signal. Linked with -z now
// (CMakeLists.txt): no lazy binding between main and pause.
#include <signal.h>
#include <unistd.h>

static volatile sig_atomic_t hits;

__attribute__((noinline)) void in_handler(int signal) { hits += signal; }

static void on_alarm(int signal) { in_handler(signal); }

__attribute__((noinline)) void after_signal(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

int main(void) {
  struct sigaction action = {0};
  action.sa_handler = on_alarm;
  sigaction(SIGALRM, &action, 0);
  alarm(1);
  pause();
  after_signal(hits);
  return 0;
}
