// A library loaded with dlopen, called 50 times, and unloaded with dlclose
// before the stop (argv[1] is its path): at `checkpoint` the debugger no
// longer lists it, but the trace ran in it.
#include <dlfcn.h>
#include <stdio.h>

__attribute__((noinline)) void checkpoint(int value) {
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
  int sum = 0;
  for (int i = 0; i < 50; ++i)
    sum += plugin(i);
  if (dlclose(handle) != 0)
    return 1;
  checkpoint(sum);
  return 0;
}
