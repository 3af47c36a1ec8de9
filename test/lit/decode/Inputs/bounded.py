#!/usr/bin/env python3
"""bounded.py SECONDS MIB CMD...: runs CMD and says whether it ended within
SECONDS of CPU time (user + system: what it costs, however loaded the
machine running the tests in parallel is; a hang is caught by a wall-clock
limit of four times that) and MIB of memory (its peak resident set), and
how many lines it wrote to stderr; CMD's stderr follows. Exits non-zero
when a bound is broken (CMD's own status does not matter: a refusal is a
good end)."""
import resource
import subprocess
import sys
import time


def main():
    seconds, mib = float(sys.argv[1]), int(sys.argv[2])
    start = time.monotonic()
    try:
        done = subprocess.run(sys.argv[3:], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=seconds * 4)
        stderr = done.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        print("did not end within %g s" % (seconds * 4))
        return 1
    elapsed = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    peak = usage.ru_maxrss // 1024
    lines = [line for line in stderr.splitlines() if line.strip()]
    ok = cpu <= seconds and peak <= mib
    print("%s: %d error line(s)" % ("within bounds" if ok else
                                   "OUT OF BOUNDS", len(lines)))
    print("took %.1f s of CPU (%.1f s of wall time), %d MiB"
          % (cpu, elapsed, peak), file=sys.stderr)
    sys.stdout.write(stderr)
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
