// Input for the symbolizer tests: forced inlining three levels deep, static
// inline helpers, templates and namespaces (demangling), a function whose
// symbol is Rust-mangled (v0) to check Rust demangling, and a hot loop.
// Built -O2 -g; CMake also makes sym_inline.nodebug (--strip-debug, symbol
// table only) and sym_inline.stripped (--strip-all) from it.
#include <cstdio>
#include <cstdlib>

namespace shapes {

template <typename T> struct Accum {
  T total{};
  __attribute__((always_inline)) inline void add(T value) {
    total += value * 3 + 1;
  }
};

static inline __attribute__((always_inline)) int square(int x) { return x * x; }

static inline __attribute__((always_inline)) int sumSquares(const int *values,
                                                            int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i)
    sum += square(values[i]) ^ i;
  return sum;
}

int table[64];

/// The hot loop: three levels of inlining inside one physical function.
__attribute__((noinline)) long hotLoop(int n) {
  Accum<long> acc;
  for (int i = 0; i < n; ++i)
    acc.add(sumSquares(table + (i & 31), (i & 15) + 1));
  return acc.total;
}

template <typename T> __attribute__((noinline)) T twice(T value) {
  return value + value;
}

} // namespace shapes

// Rust v0 mangling of `mycrate::worker`, to check Rust demangling.
extern "C" __attribute__((noinline)) int
rustWorker(int x) __asm__("_RNvCs1234_7mycrate6worker");
extern "C" __attribute__((noinline)) int rustWorker(int x) { return x * 7 + 3; }

// Caller and inlined callee on one line: the line table cannot tell them
// apart, only the inlined scope's range can.
// clang-format off
static inline __attribute__((always_inline)) int bump(int x) { return x * x + 1; } __attribute__((noinline)) int oneLine(int x) { return bump(x) * 3 + bump(x + 1); }
// clang-format on

// A tail call: compiled as a jump to another function's entry.
__attribute__((noinline)) long tailCaller(int n) {
  return shapes::hotLoop(n + 1);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  for (int i = 0; i < 64; ++i)
    shapes::table[i] = i * argc;
  long total = shapes::hotLoop(n);
  total += shapes::twice<long>(total) + shapes::twice<int>(n);
  total += rustWorker(n);
  total += tailCaller(n);
  total += oneLine(n);
  printf("%ld\n", total);
  return 0;
}
