#!/usr/bin/env bash
# Checks --backend perf on a machine with Intel PT (docs/perf-backend.md):
# a program whose main thread starts a worker *after* attach is recorded with
# the hardware, two snapshots are taken at a breakpoint, and the Chrome JSON
# they are written to is checked:
#   1. both snapshots have slices (the ring is read again after a resume);
#   2. the first one has the worker (a thread created after attach, already
#      exited at the stop: traced from its first instruction via inherit);
#   3. times are spread: many distinct timestamps over a real span (a wrong
#      MTC ratio or a frozen clock puts everything on a few timestamps).
# Usage: scripts/check-perf-backend.sh [BUILD_DIR]   (default build)
# BACKEND=emulate runs the same checks without Intel PT (to test the script;
# with LOOPS=300, since the emulator single-steps).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BACKEND=${BACKEND:-perf}
LOOPS=${LOOPS:-200000}
PLUGIN="$BUILD/lib/libmagic-trace-lldb.so"
LLDB=${LLDB:-lldb-22}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
[ -f "$PLUGIN" ] || { echo "FAIL: no $PLUGIN (build first: scripts/build.sh)"; exit 1; }

cat > "$WORK/prog.c" <<'PROG'
#include <pthread.h>
__attribute__((noinline)) void stop_here(int value) {
  asm volatile("" ::"r"(value) : "memory");
}
__attribute__((noinline)) int work(int n) {
  int total = 0;
  for (int i = 0; i < n; i++)
    total += i % 7 ? i : -i;
  return total;
}
static void *worker(void *arg) {
  *(int *)arg = work(LOOPS);
  return 0;
}
int main(void) {
  int result = 0;
  pthread_t thread; /* created after the debugger attached at main */
  pthread_create(&thread, 0, worker, &result);
  pthread_join(thread, 0);
  for (int round = 0; round < 2; round++)
    stop_here(result + work(LOOPS / 2));
  return 0;
}
PROG
cc -O1 -g -pthread -DLOOPS="$LOOPS" -o "$WORK/prog" "$WORK/prog.c" || { echo "FAIL: cc"; exit 1; }

# perf records during any resume; emulate only under 'magic-trace continue'.
RESUME=continue
[ "$BACKEND" = perf ] || RESUME="magic-trace continue"
"$LLDB" -b -o "plugin load $PLUGIN" -o "file $WORK/prog" -o "b main" \
  -o "process launch -i /dev/null" -o "magic-trace doctor" \
  -o "magic-trace attach --backend $BACKEND" \
  -o "magic-trace snapshot-on -n stop_here -o $WORK/snap-%N.json" \
  -o "$RESUME" -o "$RESUME" -o "magic-trace status" -o "process kill" \
  > "$WORK/lldb.log" 2>&1
grep -E "perf plan|^error|^warning|^note|magic-trace:" "$WORK/lldb.log"

python3 - "$WORK" <<'CHECK'
import json, os, sys
work = sys.argv[1]
failed = False
def check(ok, what):
    global failed
    print(("ok:   " if ok else "FAIL: ") + what)
    failed |= not ok
snaps = []
for n in (1, 2):
    path = os.path.join(work, "snap-%d.json" % n)
    events = json.load(open(path))["traceEvents"] if os.path.exists(path) else []
    snaps.append([e for e in events if e.get("ph") == "X"])
    check(len(snaps[-1]) > 0, "snapshot %d has %d slices" % (n, len(snaps[-1])))
if snaps[0]:
    tids = {e["tid"] for e in snaps[0]}
    names = {e["name"] for e in snaps[0]}
    check(len(tids) >= 2 and any("worker" in n for n in names),
          "snapshot 1 has the thread started after attach (%d threads; "
          "worker slices: %s)" % (len(tids), any("worker" in n for n in names)))
    times = sorted({e["ts"] for e in snaps[0]})
    span = times[-1] - times[0] if times else 0
    check(len(times) > 20 and span > 0,
          "times are spread: %d distinct timestamps over %.3f us"
          % (len(times), span))
sys.exit(1 if failed else 0)
CHECK
