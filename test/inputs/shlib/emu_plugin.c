// The library emu_dlopen loads at run time.
__attribute__((noinline)) static int helper(int x) { return x * 13 + 1; }

int emu_plugin_entry(int x) { return helper(x) + helper(x + 1); }
