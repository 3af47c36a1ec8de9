// Benchmark load for the emulator: calls, returns, conditional branches and
// a little libc, for as long as asked (argv[1] rounds).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) int fib(int n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1000;
  char buffer[64];
  int total = 0;
  for (int i = 0; i < rounds; i++) {
    total += fib(10 + i % 5);
    snprintf(buffer, sizeof(buffer), "round %d", i);
    total += (int)strlen(buffer);
  }
  stop_here(total);
  return 0;
}
