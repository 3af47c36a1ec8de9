// A long session's program: each round computes fib(20) and then calls
// tick(), a recorder trigger's place; milestone() is called after round 100
// and after the last (argv[1] rounds, default 1000), where a test stops to
// measure the debugger.
#include <stdlib.h>

__attribute__((noinline)) int fib(int n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) void tick(int round) {
  asm volatile("" ::"r"(round) : "memory");
}

__attribute__((noinline)) void milestone(int round) {
  asm volatile("" ::"r"(round) : "memory");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  int sum = 0;
  for (int round = 1; round <= rounds; ++round) {
    sum += fib(20);
    tick(round);
    if (round == 100)
      milestone(round);
  }
  milestone(rounds);
  return sum == 0;
}
