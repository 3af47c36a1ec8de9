// A C++ exception thrown and caught: the unwinder in libgcc_s walks the
// stack (indirect jumps and returns that do not match calls).
#include <cstdio>
#include <stdexcept>

extern "C" __attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

__attribute__((noinline)) int mayThrow(int x) {
  if (x > 0)
    throw std::runtime_error("positive");
  return -x;
}

__attribute__((noinline)) int middle(int x) { return mayThrow(x) + 1; }

int main(int argc, char **argv) {
  (void)argv;
  int result = 0;
  try {
    result = middle(argc);
  } catch (const std::runtime_error &e) {
    result = 42;
  }
  stop_here(result);
  return result == 42 ? 0 : 1;
}
