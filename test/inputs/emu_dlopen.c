// A library loaded with dlopen after tracing started (argv[1] is its path):
// its code is only known once the module list is refreshed after mmap.
#include <dlfcn.h>
#include <stdio.h>

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  void *handle = dlopen(argv[1], RTLD_NOW);
  if (!handle) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*plugin)(int) = (int (*)(int))dlsym(handle, "emu_plugin_entry");
  if (!plugin)
    return 1;
  stop_here(plugin(argc));
  return 0;
}
