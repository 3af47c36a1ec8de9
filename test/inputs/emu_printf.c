// printf into libc (a shared library mapped before main): the trace leaves
// the executable through the PLT and runs vfprintf and write(2).
#include <stdio.h>

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

int main(int argc, char **argv) {
  (void)argv;
  int n = printf("emu_printf: %d %s\n", argc * 21, "hello");
  fflush(stdout);
  stop_here(n);
  return 0;
}
