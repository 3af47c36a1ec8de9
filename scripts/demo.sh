#!/usr/bin/env bash
# The main job: set up, build, then one lldb-22 session that runs a small C
# program doing real work (test/inputs/emu_bench.c: recursion, snprintf,
# millions of instructions) under QEMU with magic-trace's recorder
# ('magic-trace run': genuine Intel PT at emulator speed, no Intel PT
# hardware needed), snapshots when stop_here() is hit on a plain 'continue',
# writes the Fuchsia trace, prints the end of the call tree and where to open
# it. Without qemu-x86_64 it records emu_calls.cpp with the emulate backend's
# stepper instead. Environment: BUILD_DIR (default build), OUT_DIR (default
# demo-out), ROUNDS (emu_bench's rounds, default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-$PWD/demo-out}
./scripts/setup.sh
./scripts/build.sh >/dev/null
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/demo-*.fxt

PLUGIN=$PWD/$BUILD_DIR/lib/libmagic-trace-lldb.so
if command -v qemu-x86_64 >/dev/null; then
  PROGRAM=$PWD/$BUILD_DIR/test/inputs/emu_bench
  echo "== magic-trace session on $PROGRAM ${ROUNDS:-20000} (source: test/inputs/emu_bench.c), under QEMU"
  lldb-22 --no-lldbinit -b \
    -o "plugin load $PLUGIN" \
    -o "file $PROGRAM" \
    -o "magic-trace run --start main -- ${ROUNDS:-20000}" \
    -o "magic-trace snapshot-on -n stop_here -o $OUT_DIR/demo-%N.fxt" \
    -o continue \
    -o 'magic-trace report --last 400ns' \
    -o 'magic-trace status' \
    -o 'process kill'
else
  PROGRAM=$PWD/$BUILD_DIR/test/inputs/emu_calls
  echo "== qemu-x86_64 is missing (apt-get install qemu-user): the emulate backend's stepper on $PROGRAM"
  lldb-22 --no-lldbinit -b \
    -o "plugin load $PLUGIN" \
    -o 'b main' -o run \
    -o 'magic-trace attach --backend auto' \
    -o "magic-trace snapshot-on -n stop_here -o $OUT_DIR/demo-%N.fxt" \
    -o 'magic-trace continue' \
    -o 'magic-trace report --depth 8' \
    -o 'magic-trace status' \
    -o 'process kill' \
    "$PROGRAM"
fi

TRACE=$OUT_DIR/demo-1.fxt
echo "== checking $TRACE"
"$BUILD_DIR/bin/magic-trace-fxt-check" "$TRACE"
echo "Open $TRACE in https://ui.perfetto.dev (Open trace file) to see the timeline."
