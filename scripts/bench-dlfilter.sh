#!/usr/bin/env bash
# The perf dlfilter's cost (docs/dlfilter.md, "Cost"): on one perf.data of
# emu_bench under the QEMU recorder (its first 10 M instructions: about
# 1.5 M branch samples), times with scripts/timeit.py (wall, user+sys CPU,
# peak RSS; the median of MT_BENCH_RUNS runs, 3):
#   floor   perf script --itrace=be with a filter that drops every sample
#           (test/bench/dlfilter_floor): perf's own decode and sample
#           synthesis, nothing formatted;
#   filter  the same with libmagic-trace-perf.so --dlarg out=trace.fxt: the
#           floor plus our items, symbols, model and writer;
#   text    perf script --itrace=be to /dev/null, perf's own text output;
#   decode  magic-trace-decode perf.data -o trace.fxt, our decoder (libipt)
#           to the same model and file.
# Build first: ninja -C build magic-trace-perf magic-trace-dlfilter-floor
# magic-trace-emulate magic-trace-qemu magic-trace-perfdata magic-trace-decode
# emu_bench. Environment: BUILD_DIR (build), MT_BENCH_ROUNDS (3000),
# MT_BENCH_INSNS (the recording's first 10000000 instructions),
# MT_BENCH_RUNS (3), PERF (perf), MT_BENCH_DIR (a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
LIB=$BUILD_DIR/lib
ROUNDS=${MT_BENCH_ROUNDS:-3000}
RUNS=${MT_BENCH_RUNS:-3}
INSNS=${MT_BENCH_INSNS:-10000000}
PERF=${PERF:-perf}
WORK=${MT_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$WORK"

for need in "$LIB/libmagic-trace-perf.so" "$LIB/libmagic-trace-dlfilter-floor.so" \
  "$BIN/magic-trace-emulate" "$BIN/magic-trace-perfdata" "$BIN/magic-trace-decode" \
  "$BUILD_DIR/test/inputs/emu_bench"; do
  if [ ! -e "$need" ]; then
    echo "error: $need is missing (build it first: see the top of $0)" >&2
    exit 1
  fi
done

echo "== recording emu_bench $ROUNDS under the QEMU recorder -> $WORK/perf.data"
"$BIN/magic-trace-emulate" --engine qemu --buffer-size $((256 << 20)) \
  --max-insns "$INSNS" --stop stop_here -o "$WORK/b" -- \
  "$BUILD_DIR/test/inputs/emu_bench" "$ROUNDS" |
  tail -1
"$BIN/magic-trace-perfdata" "$WORK/b" -o "$WORK/perf.data"
samples=$("$PERF" script -i "$WORK/perf.data" --itrace=be -F ip 2>/dev/null | wc -l)
echo "branch samples (perf script --itrace=be): $samples"

# One timed command, RUNS times; prints the median run's "WALL CPU RSS".
measure() {
  local name=$1
  shift
  for i in $(seq "$RUNS"); do
    python3 scripts/timeit.py "$WORK/$name.$i.time" "$@" >/dev/null 2>"$WORK/$name.err"
  done
  cat "$WORK/$name".*.time | sort -n | awk -v n="$RUNS" \
    'NR == int((n + 1) / 2) { printf "%.3f %.3f %d\n", $1, $2 + $3, $4 }'
}

floor=$(measure floor "$PERF" script -i "$WORK/perf.data" --itrace=be \
  --dlfilter "$LIB/libmagic-trace-dlfilter-floor.so")
filter=$(measure filter "$PERF" script -i "$WORK/perf.data" --itrace=be \
  --dlfilter "$LIB/libmagic-trace-perf.so" --dlarg "out=$WORK/filter.fxt")
text=$(measure text sh -c "'$PERF' script -i '$WORK/perf.data' --itrace=be > /dev/null")
decode=$(measure decode "$BIN/magic-trace-decode" "$WORK/perf.data" -o "$WORK/decode.fxt")
cat "$WORK/filter.err"

echo
printf '%-8s %9s %9s %10s   %s\n' run wall_s cpu_s rss_MiB what
row() {
  read -r wall cpu rss <<<"$2"
  printf '%-8s %9s %9s %10.1f   %s\n' "$1" "$wall" "$cpu" "$(echo "$rss / 1024" | bc -l)" "$3"
}
row floor "$floor" "perf script --itrace=be, a filter dropping every sample"
row filter "$filter" "the same with libmagic-trace-perf.so out=trace.fxt"
row text "$text" "perf script --itrace=be > /dev/null"
row decode "$decode" "magic-trace-decode perf.data -o trace.fxt"
read -r fw _ _ <<<"$floor"
read -r mw _ _ <<<"$filter"
echo
echo "the filter's own cost: $(echo "$mw - $fw" | bc -l) s over the floor," \
  "$(echo "($mw - $fw) * 1000000000 / $samples" | bc) ns a sample ($samples samples)"
