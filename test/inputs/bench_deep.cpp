// Benchmark load for scripts/bench.sh: deep recursive call chains (20 to 40
// frames), functions inlined into every level (DWARF inlined subroutines),
// virtual calls and a tail call, for argv[1] rounds; the trace ends at
// stop_here().
#include <cstdlib>

extern "C" __attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

static inline __attribute__((always_inline)) int mix(int x, int y) {
  return (x * 31) ^ (y + 7);
}

static inline __attribute__((always_inline)) int fold(int x, int depth) {
  return mix(x, depth) + mix(depth, x >> 3);
}

struct Op {
  virtual ~Op() = default;
  virtual int apply(int x) const = 0;
};
struct AddOp : Op {
  int k;
  explicit AddOp(int k) : k(k) {}
  int apply(int x) const override { return fold(x, k); }
};
struct MulOp : Op {
  int k;
  explicit MulOp(int k) : k(k) {}
  int apply(int x) const override { return mix(x * k, k); }
};

__attribute__((noinline)) int leaf(int x) { return fold(x, x & 15); }

__attribute__((noinline)) int finish(int x) { return leaf(x) + 1; }
// A call in tail position: a jmp at -O2.
__attribute__((noinline)) int tailToFinish(int x) { return finish(x * 3); }

__attribute__((noinline)) int descend(const Op *const *ops, int depth, int x) {
  if (depth == 0)
    return tailToFinish(x);
  int value = descend(ops, depth - 1, fold(x, depth));
  if (depth % 4 == 0)
    value += ops[depth % 3]->apply(value);
  return value;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100;
  AddOp add(5);
  MulOp mul(3);
  AddOp add2(9);
  const Op *ops[] = {&add, &mul, &add2};
  int total = 0;
  for (int i = 0; i < rounds; i++)
    total += descend(ops, 20 + i % 21, i);
  stop_here(total);
  return 0;
}
