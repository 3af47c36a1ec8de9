// The perf backend's end-to-end test program (test/lit/perf/replay*.test):
// linked static and non-PIE, so its code has the same addresses natively
// and under QEMU, and deterministic. main reaches start_here (the debugger
// attaches there), starts three workers that each compute and report, waits
// for all three, and calls stop_here (the snapshot) while every worker is
// blocked in read(2): each thread the debugger lists there is one the QEMU
// recording has. Then it releases the workers and exits.
//
// The workers are made with clone(2) through glibc's clone(), not
// pthread_create: glibc's pthread_create tries clone3 first, which QEMU 7.2
// does not emulate (ENOSYS, then clone), so natively the threads would start
// in other code than the recording's. They make their system calls through
// syscall(): they have no thread control block of their own.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { kWorkers = 3 };

static int donePipe[2], releasePipe[2];

__attribute__((noinline)) void start_here(void) { __asm__ volatile(""); }
__attribute__((noinline)) void stop_here(void) { __asm__ volatile(""); }

__attribute__((noinline)) static unsigned mix(unsigned x, unsigned round) {
  __asm__ volatile("");
  return (x * 2654435761u) ^ (round + (x >> 13));
}

__attribute__((noinline)) static unsigned work(unsigned seed, int rounds) {
  unsigned x = seed;
  for (int round = 0; round < rounds; ++round)
    x = (x & 1) ? mix(x, (unsigned)round) : mix(x + 7, (unsigned)round) + 1;
  return x;
}

static int worker(void *arg) {
  unsigned seed = (unsigned)(unsigned long)arg;
  volatile unsigned result = work(seed, 4000 + 1000 * (int)seed);
  (void)result;
  char byte = 'd';
  if (syscall(SYS_write, donePipe[1], &byte, 1) != 1)
    return 1;
  // Blocked here at the stop; released after it.
  while (syscall(SYS_read, releasePipe[0], &byte, 1) > 0)
    ;
  return 0;
}

static char stacks[kWorkers][64 * 1024] __attribute__((aligned(16)));

int main(void) {
  if (pipe(donePipe) || pipe(releasePipe))
    return 1;
  start_here();
  for (int i = 0; i < kWorkers; ++i)
    if (clone(worker, stacks[i] + sizeof(stacks[i]),
              CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                  CLONE_SYSVSEM,
              (void *)(unsigned long)(i + 1)) < 0)
      return 1;
  volatile unsigned mine = work(100, 3000);
  (void)mine;
  for (int i = 0; i < kWorkers; ++i) {
    char byte;
    if (read(donePipe[0], &byte, 1) != 1)
      return 1;
  }
  stop_here();
  close(releasePipe[1]);
  printf("perf_replay: done\n");
  // exit_group ends the workers, wherever they are.
  exit(0);
}
