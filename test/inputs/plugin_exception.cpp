// C++ exceptions and virtual calls for the plugin's session test. The first
// round warms libgcc's unwinder caches untraced; the traced second round
// throws from a virtual call (Thrower::run -> mayThrow) and catches in
// second_round, then calls stop_here.
#include <stdexcept>

extern "C" __attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

__attribute__((noinline)) int mayThrow(int x) {
  if (x > 0)
    throw std::runtime_error("positive");
  return -x;
}

struct Task {
  virtual ~Task() = default;
  virtual int run(int x) = 0;
};
struct Thrower : Task {
  int run(int x) override { return mayThrow(x) + 1; }
};

__attribute__((noinline)) int round(Task &task, int x) {
  try {
    return task.run(x);
  } catch (const std::runtime_error &) {
    return 42;
  }
}

__attribute__((noinline)) int first_round(Task &task, int x) {
  return round(task, x);
}

__attribute__((noinline)) int second_round(Task &task, int x) {
  return round(task, x);
}

int main(int argc, char **argv) {
  (void)argv;
  Thrower thrower;
  Task *volatile task = &thrower;
  int total = first_round(*task, argc);
  total += second_round(*task, argc);
  stop_here(total);
  return total == 84 ? 0 : 1;
}
