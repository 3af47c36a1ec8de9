// Asynchronous signals in the middle of computation: SIGALRM from an
// interval timer lands between any two blocks (after a conditional branch,
// a return, an indirect call), and a SIGSEGV handler recovers from a fault
// inside a block with siglongjmp. The QEMU recorder must encode every
// delivery it can tie to its interrupted instruction and mark the rest as a
// loss (docs/qemu.md, "Signals").
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/time.h>

static volatile sig_atomic_t ticks;
static sigjmp_buf recover;

static void onAlarm(int signal) { ticks += signal > 0; }

static void onFault(int signal) { siglongjmp(recover, signal); }

__attribute__((noinline)) static uint64_t step(uint64_t x) {
  return x & 1 ? 3 * x + 1 : x / 2;
}

__attribute__((noinline)) static uint64_t (*pick(uint64_t x))(uint64_t) {
  return x % 7 == 0 ? 0 : step;
}

__attribute__((noinline)) void stop_here(uint64_t value) {
  asm volatile("" ::"r"(value) : "memory");
}

int main(int argc, char **argv) {
  (void)argv;
  struct sigaction action = {0};
  action.sa_handler = onAlarm;
  sigaction(SIGALRM, &action, 0);
  action.sa_handler = onFault;
  action.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &action, 0);
  struct itimerval timer = {{0, 500}, {0, 500}};
  setitimer(ITIMER_REAL, &timer, 0);

  uint64_t sum = 0, faults = 0;
  for (uint64_t n = 1; ticks < 50 && n < 20000000; ++n) {
    uint64_t x = n;
    while (x != 1) {
      uint64_t (*next)(uint64_t) = pick(x);
      x = next ? next(x) : x / 7;
      ++sum;
    }
    if (n % 200 == 0 && sigsetjmp(recover, 1) == 0) {
      volatile int *null = (volatile int *)(uintptr_t)(argc - 1);
      sum += *null; // Faults: SIGSEGV, recovered above.
    } else if (n % 200 == 0) {
      ++faults;
    }
  }
  timer.it_value.tv_usec = timer.it_interval.tv_usec = 0;
  setitimer(ITIMER_REAL, &timer, 0);
  stop_here(sum + faults);
  return 0;
}
