#!/usr/bin/env bash
# The main job: set up, build, then one lldb-22 session that launches a small
# C++ program (virtual calls, recursion, a tail call), attaches magic-trace
# (emulate backend here: no Intel PT needed), snapshots when stop_here() is
# hit, writes the Fuchsia trace, prints the call tree and where to open it.
# Environment: BUILD_DIR (default build), OUT_DIR (default demo-out).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-$PWD/demo-out}
./scripts/setup.sh
./scripts/build.sh >/dev/null
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/demo-*.fxt

PROGRAM=$PWD/$BUILD_DIR/test/inputs/emu_calls
echo "== magic-trace session on $PROGRAM (source: test/inputs/emu_calls.cpp)"
lldb-22 --no-lldbinit -b \
  -o "plugin load $PWD/$BUILD_DIR/lib/libmagic-trace-lldb.so" \
  -o 'b main' -o run \
  -o 'magic-trace attach --backend auto' \
  -o "magic-trace snapshot-on -n stop_here -o $OUT_DIR/demo-%N.fxt" \
  -o 'magic-trace continue' \
  -o 'magic-trace report --depth 8' \
  -o 'magic-trace status' \
  -o 'process kill' \
  "$PROGRAM"

TRACE=$OUT_DIR/demo-1.fxt
echo "== checking $TRACE"
"$BUILD_DIR/bin/magic-trace-fxt-check" "$TRACE"
echo "Open $TRACE in https://ui.perfetto.dev (Open trace file) to see the timeline."
