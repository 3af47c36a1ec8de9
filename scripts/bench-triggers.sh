#!/usr/bin/env bash
# What recorder triggers cost a long session (issue 41), measured as whole
# lldb-22 sessions with farm-bench (A B A B, the ratio pair by pair):
#   A: magic-trace run on test/inputs/tick_loop (ROUNDS rounds of fib(20)
#      then tick()), a recorder trigger on tick for every round
#      (snapshot-on --continue: each snapshot decoded by the session's
#      worker as it comes), continue to the end;
#   B: the same session without the trigger.
# Prints the medians, the ratio A/B, the cost per snapshot ((A - B) / ROUNDS)
# and, from A's own status, how long the recorder waited for the decoder
# (the bound of 4 snapshots on disk) and how many hits it skipped.
# Build first (./scripts/build.sh). Environment: BUILD_DIR (build), ROUNDS
# (1000), RING (the ring size, 64K), RUNS (farm-bench's runs, 3).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-1000}
RING=${RING:-64K}
RUNS=${RUNS:-3}
PLUGIN=$PWD/$BUILD_DIR/lib/libmagic-trace-lldb.so
PROGRAM=$PWD/$BUILD_DIR/test/inputs/tick_loop
command -v farm-bench >/dev/null ||
  { echo "bench-triggers.sh: farm-bench is not on PATH" >&2; exit 1; }
[ -f "$PLUGIN" ] && [ -x "$PROGRAM" ] ||
  { echo "bench-triggers.sh: build first (./scripts/build.sh)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

cat >with.sh <<SCRIPT
exec lldb-22 --no-lldbinit -b -o 'plugin load $PLUGIN' -o 'file $PROGRAM' \\
  -o 'magic-trace run --start main --snapshot-size $RING -- $ROUNDS' \\
  -o 'magic-trace snapshot-on -n tick --continue -o t-%N.fxt' \\
  -o continue -o 'magic-trace status' >>$WORK/with.out 2>&1
SCRIPT
cat >without.sh <<SCRIPT
exec lldb-22 --no-lldbinit -b -o 'plugin load $PLUGIN' -o 'file $PROGRAM' \\
  -o 'magic-trace run --start main --snapshot-size $RING -- $ROUNDS' \\
  -o continue -o 'magic-trace status' >>$WORK/without.out 2>&1
SCRIPT
farm-bench -n "$RUNS" --timeout 1800 --vs "sh $WORK/without.sh" -- \
  sh "$WORK/with.sh" | tee bench.txt
python3 - "$ROUNDS" bench.txt with.out <<'PY'
import re, sys
rounds = int(sys.argv[1])
text = open(sys.argv[2]).read()
walls = re.findall(r"^[AB] wall s\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)", text,
                   re.M)
status = open(sys.argv[3]).read().split("(lldb) magic-trace status")[-1]
match = re.search(r"recorder snapshots: (\d+) written, (\d+) decoded, .*?"
                  r"(\d+) skipped, ([0-9.]+) s waited", status)
if len(walls) >= 2:
    a, b = float(walls[0][1]), float(walls[1][1])
    print("session with a trigger on every round: %.2f s, without: %.2f s "
          "(medians), %.2fx" % (a, b, a / b))
    print("cost per snapshot: %.1f ms (%d rounds)" % ((a - b) * 1000 / rounds,
                                                      rounds))
if match:
    print("recorder: %s snapshots written and decoded, %s skipped, %s s "
          "waited for the decoder" % (match.group(1), match.group(3),
                                       match.group(4)))
PY
