// A minimal program: main calls a small function chain and printf.
#include <stdio.h>

__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }

__attribute__((noinline)) int middle(int x) { return leaf(x) + leaf(x + 1); }

int main(int argc, char **argv) {
  (void)argv;
  int total = 0;
  for (int i = 0; i < 4; i++)
    total += middle(i + argc);
  printf("total %d\n", total);
  return 0;
}
