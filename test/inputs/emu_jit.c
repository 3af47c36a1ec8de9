// A minimal JIT, as V8 or PCRE2 make code: machine code copied into anonymous
// memory (mmap RW, write, mprotect RX), named in /tmp/perf-PID.map the way
// node --perf-basic-prof names its code ("START SIZE name", hex), and called
// EMU_JIT_ROUNDS times: 1000, or 3 in emu_jit_short (the same source, for
// the single-steppers under a debugger); one JIT function calls back into
// C. argv[1] is the mode:
//   plain    the code runs where it was written;
//   rewrite  then each slot is overwritten in place with another function
//            (mprotect RW, write, mprotect RX) and the code runs again;
//   unmap    then the code is copied to a second region, the first one is
//            unmapped, and the code runs from the copy.
// So a decoder that reads the code as it is at the stop (or at exit) gets
// the first runs wrong in 'rewrite' and cannot read them at all in 'unmap'.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// x86-64 code, assembled by llvm-mc (Intel syntax in the comments).
static const uint8_t kAdd[] = {0x8d, 0x04, 0x37,
                               0xc3}; // lea eax,[rdi+rsi]; ret
// xor eax,eax; test edi,edi; jle done; l: add eax,edi; dec edi; jnz l; done:
// ret
static const uint8_t kLoop[] = {0x31, 0xc0, 0x85, 0xff, 0x7e, 0x06, 0x01,
                                0xf8, 0xff, 0xcf, 0x75, 0xfa, 0xc3};
// push rbx; mov ebx,edi; call rsi; add eax,ebx; pop rbx; ret
static const uint8_t kCallback[] = {0x53, 0x89, 0xfb, 0xff, 0xd6,
                                    0x01, 0xd8, 0x5b, 0xc3};
// mov eax,edi; imul eax,esi; ret
static const uint8_t kMul[] = {0x89, 0xf8, 0x0f, 0xaf, 0xc6, 0xc3};
// mov eax,edi; sub eax,esi; ret
static const uint8_t kSub[] = {0x89, 0xf8, 0x29, 0xf0, 0xc3};

enum { kSlot = 64, kSlots = 4 };

#ifndef EMU_JIT_ROUNDS
#define EMU_JIT_ROUNDS 1000
#endif

struct Code {
  const char *name;
  const uint8_t *bytes;
  size_t size;
};

typedef int (*Binary)(int, int);
typedef int (*Unary)(int);
typedef int (*WithCallback)(int, int (*)(int));

__attribute__((noinline)) int c_callback(int x) {
  asm volatile("" ::"r"(x) : "memory");
  return x * 3;
}

__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}

/// Called in 'rewrite' mode after the rewritten slot 0 first ran, before
/// the other slots run rewritten: a recording that starts here sees the
/// new code's other blocks first run after the recorder logged the page's
/// new version (the QEMU recorder must mark them too).
__attribute__((noinline)) void rewritten(void) {
  asm volatile("" ::: "memory");
}

static FILE *perfMap;

/// Writes `code` into the slots of `region` and names them in the perf map.
static void place(uint8_t *region, const struct Code *code) {
  mprotect(region, 4096, PROT_READ | PROT_WRITE);
  for (int i = 0; i < kSlots; ++i) {
    memset(region + i * kSlot, 0xcc, kSlot);
    memcpy(region + i * kSlot, code[i].bytes, code[i].size);
    fprintf(perfMap, "%lx %zx %s\n", (unsigned long)(region + i * kSlot),
            code[i].size, code[i].name);
  }
  fflush(perfMap);
  mprotect(region, 4096, PROT_READ | PROT_EXEC);
}

/// Calls the four slots `rounds` times: slots 0 and 3 take two ints, slot 1
/// one, slot 2 one and a callback; `after` (if any) after the first call.
static int run(uint8_t *region, int rounds, void (*after)(void)) {
  int sum = 0;
  for (int i = 0; i < rounds; ++i) {
    sum += ((Binary)(region + 0 * kSlot))(i, 7);
    if (after && i == 0)
      after();
    sum += ((Unary)(region + 1 * kSlot))(i & 7);
    sum += ((WithCallback)(region + 2 * kSlot))(i, c_callback);
    sum += ((Binary)(region + 3 * kSlot))(i, 3);
  }
  return sum;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "plain";
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  // EMU_JIT_NO_MAP: a JIT that writes no map, so that a file another user
  // planted at its name stays there for the reader to meet (issue 50).
  perfMap = fopen(getenv("EMU_JIT_NO_MAP") ? "/dev/null" : path, "w");
  if (!perfMap)
    return 1;
  uint8_t *region = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED)
    return 1;
  struct Code first[kSlots] = {{"jit_add", kAdd, sizeof kAdd},
                               {"jit_loop", kLoop, sizeof kLoop},
                               {"jit_callback", kCallback, sizeof kCallback},
                               {"jit_mul", kMul, sizeof kMul}};
  place(region, first);
  int sum = run(region, EMU_JIT_ROUNDS, NULL);
  if (!strcmp(mode, "rewrite")) {
    // Each slot gets another function: the old bytes no longer exist.
    struct Code second[kSlots] = {
        {"jit_sub", kSub, sizeof kSub},
        {"jit_loop2", kLoop, sizeof kLoop},
        {"jit_callback2", kCallback, sizeof kCallback},
        {"jit_add2", kAdd, sizeof kAdd}};
    place(region, second);
    sum += run(region, EMU_JIT_ROUNDS, rewritten);
  } else if (!strcmp(mode, "unmap")) {
    uint8_t *copy = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
      return 1;
    place(copy, first);
    munmap(region, 4096);
    sum += run(copy, EMU_JIT_ROUNDS, NULL);
  }
  fclose(perfMap);
  stop_here(sum);
  return 0;
}
