#!/bin/sh
# jit-fifos.sh KIND T INPUTS PLUGIN LLDB...: in a private mount namespace
# (run under `unshare --mount`) with a /tmp of its own, nobody plants, for
# the next 200 pids, FIFOs (KIND fifo) at /tmp/perf-PID.map and
# /tmp/jit-PID.dump, or (KIND file) perf maps of its own that name every
# JIT address 'planted_name'; then root snapshots emu_jit (a JIT that writes
# no map of its own) under 'magic-trace run' and reports it. Prints the
# session and how long it took.
set -e
KIND=$1 T=$2 INPUTS=$3 PLUGIN=$4
shift 4
mount --make-rprivate / 2>/dev/null || true
# A build tree under /tmp (a clone made there) stays visible: the old /tmp is
# bound aside first, and each path the test uses is bound back from it.
keep=""
for path in "$T" "$INPUTS" "$(dirname "$PLUGIN")"; do
  case "$path" in /tmp/*) keep="$keep $path" ;; esac
done
aside=/dev/shm/magic-trace-lit-tmp-$$
if [ -n "$keep" ]; then
  mkdir -p "$aside"
  trap 'umount -l "$aside"; rmdir "$aside"' EXIT
  mount --bind /tmp "$aside"
fi
mount -t tmpfs -o mode=1777 magic-trace-lit-tmp /tmp
for path in $keep; do
  mkdir -p "$path"
  mount --bind "$aside${path#/tmp}" "$path"
done
# lit's TMPDIR was in the /tmp this namespace no longer sees.
if [ -n "${TMPDIR:-}" ]; then mkdir -m 0700 -p "$TMPDIR"; fi
last=$(cat /proc/sys/kernel/ns_last_pid)
# One process plants them all: a process per FIFO would use up the pids.
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import os
for pid in range($last + 1, $last + 201):
    if '$KIND' == 'fifo':
        for name in ('/tmp/perf-%d.map', '/tmp/jit-%d.dump'):
            os.mkfifo(name % pid, 0o666)
    else:
        with open('/tmp/perf-%d.map' % pid, 'w') as f:
            f.write('0 7fffffffffff planted_name\\n')
        os.chmod('/tmp/perf-%d.map' % pid, 0o644)"
echo "planted $(ls /tmp | grep -c '^perf-.*\.map$') $KIND at /tmp/perf-PID.map, pids $((last + 1)) to $((last + 200))"
start=$(date +%s)
EMU_JIT_NO_MAP=1 timeout 120 "$@" -b -o "plugin load $PLUGIN" \
  -o "file $INPUTS/emu_jit" -o 'magic-trace run --start main' \
  -o 'b stop_here' -o continue -o "magic-trace snapshot -o $T/jit.fxt" \
  -o 'magic-trace report' -o kill 2>&1
echo "snapshot done in $(($(date +%s) - start)) s"
