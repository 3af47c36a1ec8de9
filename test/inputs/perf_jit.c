// A JIT at a fixed address for the perf backend's replay test
// (test/lit/perf/jit-at-stop.test): linked static and non-PIE, its code
// region mapped at a constant address (MAP_FIXED), so the code and the JIT
// code have the same addresses natively and under QEMU, and a QEMU
// recording of it is PT of the native process too. main writes three
// functions into anonymous memory (mmap RW, write, mprotect RX), reaches
// start_here (the debugger attaches there), calls them 100 times (one calls
// back into C), and calls stop_here (the snapshot). With the argument
// "rewrite", halfway through the calls it rewrites the first function in
// place (mprotect RW, a new body of other instructions, mprotect RX): the
// code at the stop is then not the code of the first half (jitdump.test).
// With "unmap", halfway through it copies the functions to a second region
// (COPY), unmaps the first and calls the copies: the first half's code is
// no longer mapped at the stop.
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define REGION ((uint8_t *)0x50000000)
#define COPY ((uint8_t *)0x50010000)

// x86-64 code, assembled by llvm-mc (Intel syntax in the comments), as in
// emu_jit.c.
static const uint8_t kAdd[] = {0x8d, 0x04, 0x37,
                               0xc3}; // lea eax,[rdi+rsi]; ret
// xor eax,eax; test edi,edi; jle done; l: add eax,edi; dec edi; jnz l; done:
// ret
static const uint8_t kLoop[] = {0x31, 0xc0, 0x85, 0xff, 0x7e, 0x06, 0x01,
                                0xf8, 0xff, 0xcf, 0x75, 0xfa, 0xc3};
// push rbx; mov ebx,edi; call rsi; add eax,ebx; pop rbx; ret
static const uint8_t kCallback[] = {0x53, 0x89, 0xfb, 0xff, 0xd6,
                                    0x01, 0xd8, 0x5b, 0xc3};

// The first function's second version, written at the same address: other
// instructions at other offsets, the same result.
// mov eax,edi; add eax,esi; ret
static const uint8_t kAddRewritten[] = {0x89, 0xf8, 0x01, 0xf0, 0xc3};

typedef int (*Binary)(int, int);
typedef int (*Unary)(int);
typedef int (*WithCallback)(int, int (*)(int));

__attribute__((noinline)) void start_here(void) { __asm__ volatile(""); }
__attribute__((noinline)) void stop_here(int value) {
  __asm__ volatile("" ::"r"(value) : "memory");
}
__attribute__((noinline)) int c_callback(int x) {
  __asm__ volatile("" ::"r"(x) : "memory");
  return x * 3;
}

int main(int argc, char **argv) {
  int rewrite = argc > 1 && strcmp(argv[1], "rewrite") == 0;
  int unmap = argc > 1 && strcmp(argv[1], "unmap") == 0;
  uint8_t *code = REGION;
  if (mmap(REGION, 4096, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != REGION)
    return 1;
  memset(REGION, 0xcc, 4096);
  memcpy(REGION, kAdd, sizeof kAdd);
  memcpy(REGION + 64, kLoop, sizeof kLoop);
  memcpy(REGION + 128, kCallback, sizeof kCallback);
  if (mprotect(REGION, 4096, PROT_READ | PROT_EXEC))
    return 1;
  start_here();
  int sum = 0;
  for (int i = 0; i < 100; ++i) {
    if (rewrite && i == 50) {
      if (mprotect(REGION, 4096, PROT_READ | PROT_WRITE))
        return 1;
      memcpy(REGION, kAddRewritten, sizeof kAddRewritten);
      if (mprotect(REGION, 4096, PROT_READ | PROT_EXEC))
        return 1;
    }
    if (unmap && i == 50) {
      if (mmap(COPY, 4096, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != COPY)
        return 1;
      memcpy(COPY, REGION, 4096);
      if (mprotect(COPY, 4096, PROT_READ | PROT_EXEC) || munmap(REGION, 4096))
        return 1;
      code = COPY;
    }
    sum += ((Binary)code)(i, 7);
    sum += ((Unary)(code + 64))(i & 7);
    sum += ((WithCallback)(code + 128))(i, c_callback);
  }
  stop_here(sum);
  return 0;
}
