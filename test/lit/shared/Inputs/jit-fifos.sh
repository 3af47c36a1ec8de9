#!/bin/sh
# jit-fifos.sh T INPUTS PLUGIN LLDB...: in a private mount namespace (run
# under `unshare --mount`) with a /tmp of its own, nobody plants FIFOs at
# /tmp/perf-PID.map and /tmp/jit-PID.dump for the next 200 pids; then root
# snapshots emu_jit (a JIT that writes no map of its own) under
# 'magic-trace run'. Prints the session and how long it took.
set -e
T=$1 INPUTS=$2 PLUGIN=$3
shift 3
mount --make-rprivate / 2>/dev/null || true
mount -t tmpfs -o mode=1777 magic-trace-lit-tmp /tmp
# lit's TMPDIR was in the /tmp this namespace no longer sees.
if [ -n "${TMPDIR:-}" ]; then mkdir -m 0700 -p "$TMPDIR"; fi
last=$(cat /proc/sys/kernel/ns_last_pid)
# One process plants them all: a process per FIFO would use up the pids.
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import os
for pid in range($last + 1, $last + 201):
    for name in ('/tmp/perf-%d.map', '/tmp/jit-%d.dump'):
        os.mkfifo(name % pid, 0o666)"
echo "planted $(ls /tmp | grep -c '^perf-.*\.map$') FIFOs at /tmp/perf-PID.map, pids $((last + 1)) to $((last + 200))"
start=$(date +%s)
EMU_JIT_NO_MAP=1 timeout 120 "$@" -b -o "plugin load $PLUGIN" \
  -o "file $INPUTS/emu_jit" -o 'magic-trace run --start main' \
  -o 'b stop_here' -o continue -o "magic-trace snapshot -o $T/jit.fxt" \
  -o kill 2>&1
echo "snapshot done in $(($(date +%s) - start)) s"
