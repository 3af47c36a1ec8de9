// A signal handler: raise() delivers SIGUSR1 on the way out of the kernel,
// so the handler runs (an asynchronous transfer: FUP + TIP.PGD, TIP.PGE at
// the handler) and returns through rt_sigreturn.
#include <signal.h>

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static volatile sig_atomic_t hits;

static void onSignal(int signal) { hits += signal; }

int main(int argc, char **argv) {
  (void)argv;
  struct sigaction action = {0};
  action.sa_handler = onSignal;
  sigaction(SIGUSR1, &action, 0);
  raise(SIGUSR1);
  stop_here(hits + argc);
  return 0;
}
