// setjmp/longjmp: longjmp returns to setjmp's caller through an indirect
// jump, skipping the frames in between.
#include <setjmp.h>

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static jmp_buf env;

__attribute__((noinline)) void deep(int depth) {
  if (depth == 0)
    longjmp(env, 7);
  deep(depth - 1);
  asm volatile("" ::: "memory"); // keep the recursion a real call
}

int main(int argc, char **argv) {
  (void)argv;
  volatile int result = 0;
  int code = setjmp(env);
  if (code == 0)
    deep(3 + argc);
  else
    result = code;
  stop_here(result);
  return 0;
}
