// Calls into the vdso: clock_gettime and gettimeofday run in the kernel's
// vdso image, which is code with no file on disk. A recorder must keep its
// bytes, or no decoder can follow those instructions.
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

int main(void) {
  struct timespec now;
  struct timeval tv;
  long odd = 0;
  for (int i = 0; i < 3; ++i) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    gettimeofday(&tv, NULL);
    odd += (now.tv_nsec ^ tv.tv_usec) & 1;
  }
  printf("%ld\n", odd);
  return 0;
}
