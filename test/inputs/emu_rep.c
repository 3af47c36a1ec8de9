// A REP string instruction: single-stepping traps once per iteration at the
// same IP, but it is one executed instruction (and one in the PT decode).
#include <stddef.h>

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

__attribute__((noinline)) void copyBytes(char *dst, const char *src, size_t n) {
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

int main(int argc, char **argv) {
  (void)argv;
  char src[64], dst[64];
  for (int i = 0; i < 64; i++)
    src[i] = (char)(i * argc);
  copyBytes(dst, src, sizeof(dst));
  stop_here(dst[63]);
  return 0;
}
