#!/usr/bin/env bash
# Prints the md5 of every output magic-trace-decode makes of a fixed set of
# inputs, one "md5  name" line each, so that a refactoring can show its outputs
# are byte-identical: run it before, save the list, run it after, diff.
#
#   scripts/output-md5.sh [BUILD_DIR] > /tmp/md5-before.txt
#   ... change, rebuild ...
#   scripts/output-md5.sh [BUILD_DIR] | diff /tmp/md5-before.txt -
#
# Inputs: every bundle in ../shared/realpt (MT_REALPT overrides), the perf.data
# files in ../shared/realpt-perf, and emulator bundles of test/inputs' programs.
# The emulator records a live process (addresses, timing differ run to run),
# so its bundles are recorded once into MT_MD5_BUNDLES (default
# /tmp/mt-md5-bundles) and reused by every later run; delete that folder to
# record afresh (and then take a new "before" list).
#
# Outputs per input: the four -o formats (.fxt with compact and with full slice
# arguments, .json, .folded, .txt) with the summary each prints, and the --dump
# events, calls and insns listings. The wall-clock figure in the summary
# line ("N ms") is masked; everything else of stdout is hashed as printed.
# MT_MD5_OUTPUT_ARGS adds options to every -o run (e.g. "--window all", to
# show that the whole trace's outputs are those of a build before windows).
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${1:-build}
BIN=$BUILD_DIR/bin
INPUTS=$BUILD_DIR/test/inputs
REALPT=${MT_REALPT:-$(cd .. && pwd)/shared/realpt}
[ -d "$REALPT" ] || REALPT=/work/shared/realpt
REALPT_PERF=$(dirname "$REALPT")/realpt-perf
BUNDLES=${MT_MD5_BUNDLES:-/tmp/mt-md5-bundles}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# Emulator bundles: program and where it stops (as the lit tests record them).
EMULATED="emu_calls emu_exception emu_longjmp emu_printf emu_thread emu_dlopen
emu_signal emu_rep"
mkdir -p "$BUNDLES"
for prog in $EMULATED; do
  [ -d "$BUNDLES/$prog" ] && continue
  "$BIN/magic-trace-emulate" --engine ptrace --stop stop_here \
    -o "$BUNDLES/$prog" -- "$INPUTS/$prog" >/dev/null 2>&1 ||
    echo "note: could not record $prog" >&2
done

mask() { sed -E 's/[0-9]+\.[0-9]+ ms/# ms/'; }

# hash NAME FILE
hash() { printf '%s  %s\n' "$(md5sum <"$2" | cut -d' ' -f1)" "$1"; }

# one NAME INPUT [decode options...]
one() {
  local name=$1 input=$2
  shift 2
  for dump in events calls insns; do
    "$BIN/magic-trace-decode" "$input" "$@" --dump "$dump" 2>&1 | mask \
      >"$OUT/d"
    hash "$name/dump-$dump" "$OUT/d"
  done
  for file in trace.fxt trace.json trace.folded trace.txt; do
    # shellcheck disable=SC2086 # word-split on purpose: several options
    "$BIN/magic-trace-decode" "$input" "$@" ${MT_MD5_OUTPUT_ARGS:-} \
      -o "$OUT/$file" 2>&1 | mask |
      sed "s|$OUT/||" >"$OUT/stdout"
    hash "$name/$file" "$OUT/$file"
    hash "$name/$file.stdout" "$OUT/stdout"
  done
  # shellcheck disable=SC2086
  "$BIN/magic-trace-decode" "$input" "$@" --slice-args full \
    ${MT_MD5_OUTPUT_ARGS:-} -o "$OUT/full.fxt" >/dev/null 2>&1
  hash "$name/full.fxt" "$OUT/full.fxt"
  rm -f "$OUT"/*
}

for dir in "$REALPT"/*/; do
  one "realpt/$(basename "$dir")" "$dir"
done
if [ -d "$REALPT_PERF" ]; then
  one realpt-perf/chromeos-4.14 "$REALPT_PERF/chromeos-4.14/perf.data"
  one realpt-perf/loopy "$REALPT_PERF/loopy/perf.data" \
    --symfs "$REALPT_PERF/loopy/symfs"
fi
for prog in $EMULATED; do
  [ -d "$BUNDLES/$prog" ] && one "emulated/$prog" "$BUNDLES/$prog"
done
