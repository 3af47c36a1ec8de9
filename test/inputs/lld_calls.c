// A program linked by lld (test/inputs/CMakeLists.txt adds -fuse-ld=lld):
// its executable segment's file offset and address differ (LOAD 0x...620
// vaddr 0x...1620), as in LLVM's own tools. main calls middle calls leaf.
#include <stdio.h>

__attribute__((noinline)) int leaf(int x) {
  asm volatile("" ::"r"(x) : "memory");
  return x * 3;
}

__attribute__((noinline)) int middle(int x) { return leaf(x + 1) + 1; }

int main(int argc, char **argv) {
  (void)argv;
  int sum = 0;
  for (int i = 0; i < 3; ++i)
    sum += middle(argc + i);
  printf("%d\n", sum);
  return 0;
}
