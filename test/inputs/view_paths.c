// Input for the views (report --annotate, --top, diff): rounds alternate a
// fast path and a slow path, each ending at round_done(), with recursion
// (depth_sum), an inlined helper (mix), a data-dependent branch (classify).
// Round r takes the slow path when r is odd: slow_path() calls slow_step()
// kSlowSteps times, fast_path() calls nothing. So between the snapshot at
// round_done(0) and the one at round_done(1) slow_step() gains exactly
// kSlowSteps calls.
enum { kRounds = 4, kSlowSteps = 25, kValues = 48 };

static int values[kValues];

__attribute__((noinline)) void round_done(int round, int value) {
  asm volatile("" ::"r"(round), "r"(value) : "memory");
}

// Inlined into its callers at -O2 (DWARF inlined-subroutine entries).
static inline __attribute__((always_inline)) int mix(int x) {
  return (x * 2654435761u) >> 7;
}

// Two calls per level: one at least stays a call (one alone would become
// a loop at -O2).
__attribute__((noinline)) int depth_sum(int n) {
  return n < 2 ? n : depth_sum(n - 1) + depth_sum(n - 2);
}

// The branch goes one way or the other as the values say.
__attribute__((noinline)) int classify(const int *data, int n) {
  int odd = 0, even = 0;
  for (int i = 0; i < n; ++i) {
    if (data[i] & 1)
      odd += mix(data[i]);
    else
      even += data[i] >> 1;
  }
  return odd - even;
}

__attribute__((noinline)) int fast_path(int x) { return mix(x) + 1; }

// A recurrence no closed form replaces: the slow path's time is here.
__attribute__((noinline)) int slow_step(int x) {
  unsigned total = 0;
  for (int i = 0; i < 16; ++i)
    total = total * 31 + (unsigned)(x ^ i);
  return (int)total;
}

__attribute__((noinline)) int slow_path(int x) {
  int total = 0;
  for (int i = 0; i < kSlowSteps; ++i)
    total += slow_step(x + i);
  return total;
}

__attribute__((noinline)) int round_of(int round, int x) {
  int value = classify(values, kValues) + depth_sum(x + 3);
  if (round & 1)
    return value + slow_path(x);
  return value + fast_path(x);
}

int main(int argc, char **argv) {
  (void)argv;
  volatile int seed = argc;
  for (int i = 0; i < kValues; ++i)
    values[i] = (i * 7 + seed * 13) % 10;
  for (int round = 0; round < kRounds; ++round)
    round_done(round, round_of(round, seed));
  return 0;
}
