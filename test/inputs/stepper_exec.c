// exec: main calls before_exec, then runs itself again with an argument
// (which returns at once). never_reached follows a failed exec only.
#include <unistd.h>

__attribute__((noinline)) int before_exec(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

__attribute__((noinline)) void never_reached(void) {
  asm volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc > 1)
    return 0;
  before_exec(argc);
  execl(argv[0], argv[0], "again", (char *)0);
  never_reached();
  return 1;
}
