#!/usr/bin/env python3
"""Times one command as /usr/bin/time -f '%e %U %S %M' does, at 1 ms.

Usage: timeit.py OUTFILE COMMAND [ARGS...]

Writes "WALL USER SYS MAXRSS_KIB" to OUTFILE (seconds with 3 decimals) and
exits with the command's status (128 + N when signal N ended it).
/usr/bin/time prints 10 ms steps, too coarse for the benchmark's shorter
runs (mruby's raw loop takes about 50 ms). The clock starts before the fork
and stops when wait4 returns, so Python's own start-up is not counted; the
CPU times and peak RSS are the child's, from wait4's rusage.
"""

import os
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: timeit.py OUTFILE COMMAND [ARGS...]")
    out, command = sys.argv[1], sys.argv[2:]
    start = time.perf_counter()
    try:
        pid = os.posix_spawnp(command[0], command, os.environ)
    except OSError as error:
        sys.exit(f"timeit.py: cannot run {command[0]}: {error.strerror}")
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    with open(out, "w") as f:
        f.write(f"{wall:.3f} {usage.ru_utime:.3f} {usage.ru_stime:.3f} "
                f"{usage.ru_maxrss}\n")
    if os.WIFSIGNALED(status):
        sys.exit(128 + os.WTERMSIG(status))
    sys.exit(os.WEXITSTATUS(status))


if __name__ == "__main__":
    main()
