// Control flow the emulator must encode: inlined functions, recursion, a
// switch compiled to a jump table, a call through a function pointer,
// virtual calls and a tail call. The trace ends at stop_here().
#include <cstdio>

extern "C" __attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

// Inlined into its callers at -O2 (DWARF inlined-subroutine entries).
static inline __attribute__((always_inline)) int square(int x) { return x * x; }

__attribute__((noinline)) int fib(int n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

// Dense cases: clang emits an indirect jump through a table.
__attribute__((noinline)) int dispatch(int op, int x) {
  switch (op) {
  case 0:
    return x + 1;
  case 1:
    return x * 7;
  case 2:
    return x - 3;
  case 3:
    return x ^ 0x55;
  case 4:
    return x << 2;
  case 5:
    return square(x);
  case 6:
    return x / 3;
  default:
    return -x;
  }
}

__attribute__((noinline)) int twice(int x) { return 2 * x; }
__attribute__((noinline)) int thrice(int x) { return 3 * x; }

struct Shape {
  virtual ~Shape() = default;
  virtual int area() const = 0;
};
struct Rect : Shape {
  int w, h;
  Rect(int w, int h) : w(w), h(h) {}
  int area() const override { return w * h; }
};
struct Square : Shape {
  int s;
  explicit Square(int s) : s(s) {}
  int area() const override { return square(s); }
};

__attribute__((noinline)) int sumAreas(Shape *const *shapes, int n) {
  int total = 0;
  for (int i = 0; i < n; i++)
    total += shapes[i]->area();
  return total;
}

__attribute__((noinline)) int callee(int x) { return x + 11; }
// A call in tail position: clang turns it into a jmp.
__attribute__((noinline)) int tailCaller(int x) { return callee(x * 5); }

int main(int argc, char **argv) {
  (void)argv;
  volatile int seed = argc;
  int total = fib(7 + seed);
  for (int op = 0; op < 8; op++)
    total += dispatch(op, seed + op);
  int (*volatile fn)(int) = seed > 5 ? thrice : twice;
  total += fn(total);
  Rect r(seed, 4);
  Square s(seed + 2);
  Shape *shapes[] = {&r, &s, &r};
  total += sumAreas(shapes, 3);
  total += tailCaller(seed);
  total += square(seed + 3);
  stop_here(total);
  return total == 12345;
}
