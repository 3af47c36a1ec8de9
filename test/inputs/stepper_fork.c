// fork: the child (which the debugger detaches: it runs untraced) calls
// child_work and exits; the parent waits for it in waitpid, then calls
// parent_done with the child's status.
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int child_work(int x) { return x * 3; }

__attribute__((noinline)) void parent_done(int status) {
  asm volatile("" ::"r"(status) : "memory");
}

int main(void) {
  pid_t child = fork();
  if (child == 0)
    _exit(child_work(2));
  int status = 0;
  waitpid(child, &status, 0);
  parent_done(WEXITSTATUS(status));
  return 0;
}
