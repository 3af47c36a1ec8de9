#!/usr/bin/env bash
# Measures magic-trace's pipeline against its baselines on this machine, in
# one run, on the same bytes (docs/performance.md explains every row):
#   1. emulates test/inputs/bench_deep (deep recursion, inlined code, virtual
#      and tail calls) for ~1 M instructions -> a natural bundle ("1M");
#   2. repeats its PT into a >= 10 M-instruction bundle ("10M"), the same as
#      two threads ("10Mx2", for the parallel thread models) and a wrapped
#      4 MiB ring ("wrap4M") with magic-trace-decode-bench --save;
#   3. times whole processes with scripts/timeit.py (wall, user+sys CPU, peak
#      RSS): the raw libipt block-decoder loop (the baseline) vs our decode,
#      decode+symbolize and the full pipeline to .fxt, 1 and 2 threads, and
#      Linux perf's `perf script --itrace=cr` and `--call-trace` on the same
#      bytes (magic-trace-perfdata writes them as a perf.data); on these
#      bundles and on a real-hardware one (../shared/realpt/mruby, kAFL) and
#      a QEMU-recorder one ("qemu30M", 30 M instructions) and real programs
#      recorded whole by the QEMU recorder with 4 MiB rings, as `magic-trace
#      run` records them (issue 51): clang compiling a C++ file, CPython,
#      LuaJIT, node and gzip ("clang", "python3", "luajit", "node", "gzip");
#      LLDB's `thread trace dump function-calls` / `dump info` on "1M" vs
#      magic-trace-decode -o out.fxt; magic-trace-symbolize vs
#      llvm-symbolizer-22 --inlining on the trace's distinct addresses;
#   4. prints one table and writes docs/performance.md (MT_BENCH_DOC).
# Build first (./scripts/build.sh). Environment: BUILD_DIR (build),
# MT_BENCH_ROUNDS (bench_deep rounds, 950 ~ 1 M instructions),
# MT_BENCH_SMALL_ROUNDS (280 ~ 300 k instructions, where LLDB finishes),
# MT_BENCH_INSNS (10000000), MT_BENCH_LLDB_TIMEOUT (seconds, 240),
# MT_BENCH_LLDB_VMEM_GB (address-space cap for lldb, 14), MT_BENCH_DOC,
# MT_BENCH_REALPT (the real-hardware bundle, ../shared/realpt/mruby; skipped
# when missing), MT_BENCH_QEMU_INSNS (30000000; 0 skips the QEMU bundle),
# MT_BENCH_PROGRAMS (the real programs, "clang python3 luajit node gzip";
# empty: none; a program not installed is skipped with a note),
# MT_BENCH_PIPELINE_RUNS (5: full-pipeline runs per thread count, median),
# PERF (perf).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
PROGRAM=$BUILD_DIR/test/inputs/bench_deep
ROUNDS=${MT_BENCH_ROUNDS:-950}
SMALL_ROUNDS=${MT_BENCH_SMALL_ROUNDS:-280}
TARGET_INSNS=${MT_BENCH_INSNS:-10000000}
LLDB_TIMEOUT=${MT_BENCH_LLDB_TIMEOUT:-240}
LLDB_VMEM_GB=${MT_BENCH_LLDB_VMEM_GB:-14}
DOC=${MT_BENCH_DOC:-docs/performance.md}
WRAP_BYTES=$((4 * 1024 * 1024))
LLDB=${LLDB:-lldb-22}
LLVM_SYMBOLIZER=${LLVM_SYMBOLIZER:-llvm-symbolizer-22}
PERF=${PERF:-perf}
REALPT=${MT_BENCH_REALPT:-../shared/realpt/mruby}
QEMU_INSNS=${MT_BENCH_QEMU_INSNS:-30000000}
PROGRAMS=${MT_BENCH_PROGRAMS-clang python3 luajit node gzip}
PIPELINE_RUNS=${MT_BENCH_PIPELINE_RUNS:-5}

die() {
  echo "bench.sh: error: $*" >&2
  exit 1
}

for tool in magic-trace-emulate magic-trace-decode magic-trace-decode-bench \
  magic-trace-stage-bench magic-trace-symbolize magic-trace-fxt-check \
  magic-trace-perfdata; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool is missing (run ./scripts/build.sh)"
done
[ -x "$PROGRAM" ] || die "$PROGRAM is missing (run ./scripts/build.sh)"
command -v "$LLDB" >/dev/null || die "$LLDB not found (set LLDB=...)"
command -v "$LLVM_SYMBOLIZER" >/dev/null ||
  die "$LLVM_SYMBOLIZER not found (set LLVM_SYMBOLIZER=...)"
command -v "$PERF" >/dev/null ||
  die "$PERF not found (apt-get install linux-perf, or set PERF=...)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
START=$(date +%s)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# Rows of the table: name|bundle|threads|wall|cpu|rssKiB|status
ROWS=()
# Baselines (wall, cpu) per group, for the ratio columns.
declare -A BASE_WALL BASE_CPU

# run NAME OUTFILE CMD...: runs CMD under scripts/timeit.py (what
# /usr/bin/time -f '%e %U %S %M' says, at 1 ms); sets WALL CPU RSS
# and STATUS (exit status; 124 = timeout). stdout -> OUTFILE, stderr kept in
# $TMP/last.err.
run() {
  local name=$1 out=$2
  shift 2
  echo "  running: $name" >&2
  STATUS=0
  rm -f "$TMP/time"
  # No writeback of earlier runs' output under way: it competes for the
  # cores (wrap4M's 2-worker runs took 2.2x the default's, the same code,
  # with a GiB of earlier .fxt files being written back).
  sync
  python3 scripts/timeit.py "$TMP/time" "$@" >"$out" 2>"$TMP/last.err" ||
    STATUS=$?
  read -r WALL user sys RSS <"$TMP/time" || die "no timing for $name"
  CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')
}

# must NAME: fails the script with the command's stderr unless STATUS is 0.
must() {
  [ "$STATUS" = 0 ] || {
    cat "$TMP/last.err" >&2
    die "$1 failed (status $STATUS)"
  }
}

# row NAME BUNDLE THREADS GROUP [NOTE]: records the last run.
row() {
  ROWS+=("$1|$2|$3|$WALL|$CPU|$RSS|$4|${5:-}")
}

echo "== 1. emulating bench_deep $ROUNDS rounds (~1 M instructions, slow)" >&2
run "emulate" "$TMP/emulate.out" "$BIN/magic-trace-emulate" --engine ptrace --stop stop_here \
  --max-insns 0 -o "$TMP/1M" -- "$PROGRAM" "$ROUNDS"
must "magic-trace-emulate"
EMULATE_LINE=$(cat "$TMP/emulate.out")
SMALL_INSNS=$(sed -n 's/^magic-trace-emulate: \([0-9]*\) instructions.*/\1/p' "$TMP/emulate.out")
[ -n "$SMALL_INSNS" ] || die "cannot read the instruction count from: $EMULATE_LINE"
grep -q "ended at stop point" "$TMP/emulate.out" ||
  die "the emulated run did not end at stop_here: $EMULATE_LINE"
EMULATE_WALL=$WALL

echo "== 2. building the 10M and wrapped bundles" >&2
REPEAT=$(((TARGET_INSNS + SMALL_INSNS - 1) / SMALL_INSNS))
run "save 10M" "$TMP/save.out" "$BIN/magic-trace-decode-bench" "$TMP/1M" \
  --repeat "$REPEAT" --save "$TMP/10M"
must "magic-trace-decode-bench --save"
run "save 10Mx2" /dev/null "$BIN/magic-trace-decode-bench" "$TMP/1M" \
  --repeat "$REPEAT" --save "$TMP/10Mx2" --thread-copies 2
must "magic-trace-decode-bench --save --thread-copies 2"
SMALL_BYTES=$(sed -n 's/.*(\([0-9]*\) x \([0-9]*\)).*/\2/p' "$TMP/save.out")
[ -n "$SMALL_BYTES" ] || die "cannot read the PT size from: $(cat "$TMP/save.out")"
WRAP_REPEAT=$((WRAP_BYTES / SMALL_BYTES + 2))
run "save wrap4M" "$TMP/save.out" "$BIN/magic-trace-decode-bench" "$TMP/1M" \
  --repeat "$WRAP_REPEAT" --save "$TMP/wrap4M" --wrap-bytes "$WRAP_BYTES"
must "magic-trace-decode-bench --save --wrap-bytes"
# A 64-thread snapshot: the 1M stream as 64 threads.
run "save 1Mx64" /dev/null "$BIN/magic-trace-decode-bench" "$TMP/1M" \
  --repeat 1 --save "$TMP/1Mx64" --thread-copies 64
must "magic-trace-decode-bench --save --thread-copies 64"
BUNDLES=(10M 10Mx2 wrap4M 1Mx64)
if [ -f "$REALPT/trace.json" ]; then
  ln -s "$(cd "$REALPT" && pwd)" "$TMP/mruby"
  BUNDLES+=(mruby)
fi
if [ "$QEMU_INSNS" != 0 ]; then
  # The QEMU recorder (docs/qemu.md) on the same program, unwrapped.
  run "emulate qemu" "$TMP/emulate.out" "$BIN/magic-trace-emulate" --engine qemu \
    --max-insns "$QEMU_INSNS" --buffer-size $((256 * 1024 * 1024)) \
    -o "$TMP/qemu30M" -- "$PROGRAM" 100000
  must "magic-trace-emulate --engine qemu"
  BUNDLES+=(qemu30M)
fi
# Real programs (issue 51): each run whole under the QEMU recorder with
# 4 MiB rings, so each thread's bundle holds its newest 4 MiB of PT, as a
# snapshot of `magic-trace run` does. Their commands, for the Traces section.
declare -A PROGRAM_LINE
printf 'local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end\nprint(fib(27))\n' >"$TMP/fib.lua"
cp "$BUILD_DIR/bin/magic-trace-decode" "$TMP/gzip-input"
for name in $PROGRAMS; do
  case $name in
  clang) cmd=(clang++-22 -fsyntax-only -std=c++17 -O1 test/inputs/bench_deep.cpp) ;;
  python3) cmd=(/usr/bin/python3 -c 'print(sum(i * i for i in range(300000)))') ;;
  luajit) cmd=(luajit "$TMP/fib.lua") ;;
  node) cmd=(node -e 'function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); } console.log(fib(27));') ;;
  gzip) cmd=(gzip -6 -c "$TMP/gzip-input") ;;
  *) die "unknown program '$name' in MT_BENCH_PROGRAMS (clang python3 luajit node gzip)" ;;
  esac
  if ! command -v "${cmd[0]}" >/dev/null; then
    echo "bench.sh: note: ${cmd[0]} is not installed: no $name bundle" >&2
    continue
  fi
  echo "== 2b. recording $name under the QEMU recorder" >&2
  run "emulate $name" /dev/null "$BIN/magic-trace-emulate" --engine qemu \
    --max-insns 0 --buffer-size "$WRAP_BYTES" -o "$TMP/$name" -- "${cmd[@]}"
  must "magic-trace-emulate --engine qemu on $name"
  PROGRAM_LINE[$name]="${cmd[*]}"
  BUNDLES+=("$name")
done

declare -A INSNS MODEL_BPI MODEL_BYTES MODEL_BPF PT_BYTES PERF_LINES
# pt_bytes BUNDLE_DIR: the PT bytes of every thread of a bundle.
pt_bytes() {
  python3 -c 'import json, os, sys
d = sys.argv[1]
t = json.load(open(os.path.join(d, "trace.json")))
print(sum(os.path.getsize(os.path.join(d, th["iptTrace"]))
          for p in t["processes"] for th in p["threads"]))' "$1"
}
# perf_rows BUNDLE: Linux perf decoding the same bytes (as a perf.data).
perf_rows() {
  local bundle=$1 dir=$TMP/$1 itrace
  run "perf.data $bundle" /dev/null "$BIN/magic-trace-perfdata" "$dir" \
    -o "$TMP/$bundle.data"
  if [ "$STATUS" != 0 ]; then
    ROWS+=("perf script|$bundle|1||||-|no perf.data: $(head -c 120 "$TMP/last.err" | tr '|\n' '/ ')")
    return
  fi
  for itrace in "--itrace=cr" "--call-trace"; do
    run "perf $itrace $bundle" /dev/null "$PERF" script -i "$TMP/$bundle.data" $itrace
    if [ "$STATUS" != 0 ]; then
      row "perf script $itrace" "$bundle" 1 - "failed: status $STATUS$([ "$STATUS" -gt 128 ] && echo " (signal $((STATUS - 128)))" || true) $(head -c 120 "$TMP/last.err" | tr '|\n' '/ ')"
      continue
    fi
    row "perf script $itrace" "$bundle" 1 "$bundle"
  done
  # Whether perf printed anything at all (it prints nothing when it finds
  # no code to follow the trace through).
  PERF_LINES[$bundle]=$(timeout 60 "$PERF" script -i "$TMP/$bundle.data" --itrace=cr 2>/dev/null |
    head -n 1 | wc -l || true)
  rm -f "$TMP/$bundle.data"
}
# stages BUNDLE: raw loop, decode, decode+symbolize, pipeline -> .fxt.
stages() {
  local bundle=$1 dir=$TMP/$1
  echo "== 3. stages on $bundle" >&2
  local i raws=()
  for ((i = 0; i < PIPELINE_RUNS; i++)); do
    run "raw $bundle" /dev/null "$BIN/magic-trace-stage-bench" "$dir" --stage raw
    must "raw libipt loop on $bundle"
    raws+=("$WALL $CPU $RSS")
  done
  read -r WALL CPU RSS <<<"$(median_run "${raws[@]}")"
  INSNS[$bundle]=$(sed -n 's/^instructions //p' "$TMP/last.err")
  BASE_WALL[$bundle]=$WALL
  BASE_CPU[$bundle]=$CPU
  row "raw libipt block loop (baseline)" "$bundle" 1 "$bundle" "median of $PIPELINE_RUNS"
  local t
  for t in 1 2; do
    run "decode $bundle $t" /dev/null "$BIN/magic-trace-stage-bench" "$dir" \
      --stage decode --jobs "$t"
    must "decode on $bundle"
    row "decode" "$bundle" "$t" "$bundle"
    run "symbolize $bundle $t" /dev/null "$BIN/magic-trace-stage-bench" "$dir" \
      --stage symbolize --jobs "$t"
    must "decode+symbolize on $bundle"
    row "decode + symbolize" "$bundle" "$t" "$bundle"
  done
  # The full pipeline with 1 thread, the default (--threads 0: the cores
  # no other task runs on) and 2 threads, alternating, PIPELINE_RUNS times
  # each: the median run (by wall time) is the row, so that they are
  # compared under the same load.
  local -A runs=()
  local line label
  for ((i = 0; i < PIPELINE_RUNS; i++)); do
    for t in 1 0 2; do
      # A new file each run: replacing the last run's 100s of MiB would
      # charge this run for dropping that file's pages.
      rm -f "$TMP/$bundle.$t.fxt"
      run "pipeline $bundle $t" "$TMP/pipeline.out" "$BIN/magic-trace-decode" \
        "$dir" --threads "$t" -o "$TMP/$bundle.$t.fxt"
      must "magic-trace-decode -o on $bundle"
      runs[$t]+="$WALL $CPU $RSS"$'\n'
    done
  done
  for t in 1 0 2; do
    line=$(printf '%s' "${runs[$t]}" | sort -n | sed -n "$(((PIPELINE_RUNS + 1) / 2))p")
    read -r WALL CPU RSS <<<"$line"
    label=$t
    [ "$t" = 0 ] && label=default
    row "full pipeline -> .fxt" "$bundle" "$label" "$bundle" "median of $PIPELINE_RUNS"
    "$BIN/magic-trace-fxt-check" "$TMP/$bundle.$t.fxt" >/dev/null ||
      die "the .fxt of $bundle ($t threads) does not validate"
  done
  # Floors inside every pipeline row: writing the same .fxt bytes to a new
  # file (dd, reading them from the page cache), and starting the process
  # (its libraries, libLLVM's 55 MiB among them, with nothing to do).
  # Medians of PIPELINE_RUNS, as the rows they are part of.
  local writes=() starts=()
  for ((i = 0; i < PIPELINE_RUNS; i++)); do
    rm -f "$TMP/$bundle.copy.fxt"
    run "write floor $bundle" /dev/null dd if="$TMP/$bundle.1.fxt" \
      of="$TMP/$bundle.copy.fxt" bs=1M status=none
    must "dd of the .fxt of $bundle"
    writes+=("$WALL $CPU $RSS")
    run "start floor $bundle" /dev/null "$BIN/magic-trace-decode" --help
    must "magic-trace-decode --help"
    starts+=("$WALL $CPU $RSS")
  done
  rm -f "$TMP/$bundle.copy.fxt"
  read -r WALL CPU RSS <<<"$(median_run "${writes[@]}")"
  row "floor: write the same .fxt (dd)" "$bundle" 1 "$bundle" "median of $PIPELINE_RUNS; $(($(stat -c %s "$TMP/$bundle.1.fxt") / 1048576)) MiB"
  read -r WALL CPU RSS <<<"$(median_run "${starts[@]}")"
  row "floor: start the process (--help)" "$bundle" 1 "$bundle" "median of $PIPELINE_RUNS"
  rm -f "$TMP/$bundle".[012].fxt
  MODEL_BPI[$bundle]=$(sed -n 's/.*model [0-9]* bytes (\([0-9.]*\) per instruction[,)].*/\1/p' "$TMP/pipeline.out")
  MODEL_BYTES[$bundle]=$(sed -n 's/.*model \([0-9]*\) bytes.*/\1/p' "$TMP/pipeline.out")
  MODEL_BPF[$bundle]=$(sed -n 's/.* per instruction, \([0-9.]*\) per frame).*/\1/p' "$TMP/pipeline.out")
}
# median_run "WALL CPU RSS"...: the run with the median wall time.
median_run() {
  printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"
}
for bundle in "${BUNDLES[@]}"; do
  stages "$bundle"
  PT_BYTES[$bundle]=$(pt_bytes "$TMP/$bundle")
  perf_rows "$bundle"
done

# inprocess BUNDLE: the same work inside one process that has its libraries
# loaded and the bundle read (as in the plugin): best of 3 runs of each part.
inprocess() {
  local bundle=$1 line part wall cpu
  echo "== 3b. in-process parts on $bundle" >&2
  run "inprocess $bundle" /dev/null "$BIN/magic-trace-stage-bench" "$TMP/$bundle" \
    --stage inprocess --jobs 1 -o "$TMP/$bundle.inprocess.fxt"
  must "magic-trace-stage-bench --stage inprocess on $bundle"
  while read -r line; do
    part=$(sed 's/^inprocess \(.*\) wall_ms .*/\1/' <<<"$line")
    wall=$(sed 's/.* wall_ms \([0-9.]*\) .*/\1/' <<<"$line")
    cpu=$(sed 's/.* cpu_ms \([0-9.]*\).*/\1/' <<<"$line")
    wall=$(awk -v v="$wall" 'BEGIN { printf "%.3f", v / 1000 }')
    cpu=$(awk -v v="$cpu" 'BEGIN { printf "%.3f", v / 1000 }')
    if [ "$part" = raw ]; then
      BASE_WALL[in$bundle]=$wall
      BASE_CPU[in$bundle]=$cpu
      part="raw libipt block loop (baseline)"
    fi
    ROWS+=("in-process: $part|$bundle|1|$wall|$cpu||in$bundle|best of 3")
  done < <(grep '^inprocess ' "$TMP/last.err")
}
inprocess 10M
inprocess wrap4M

echo "== 4. LLDB vs magic-trace-decode on the 1M bundle" >&2
for t in 1 2; do
  run "decode -o 1M $t" "$TMP/pipeline.out" "$BIN/magic-trace-decode" \
    "$TMP/1M" --threads "$t" -o "$TMP/1M.fxt"
  must "magic-trace-decode -o on 1M"
  if [ "$t" = 1 ]; then
    BASE_WALL[lldb]=$WALL
    BASE_CPU[lldb]=$CPU
    OURS_RSS=$RSS
    MODEL_BPI[1M]=$(sed -n 's/.*model [0-9]* bytes (\([0-9.]*\) per instruction[,)].*/\1/p' "$TMP/pipeline.out")
    INSNS[1M]=$(sed -n 's/^summary: [0-9]* threads, \([0-9]*\) instructions.*/\1/p' "$TMP/pipeline.out")
  fi
  row "magic-trace-decode -o out.fxt" 1M "$t" lldb
done
LLDB_NOTES=()
# lldb_run NAME COMMAND [BUNDLE GROUP]: LLDB's own decoder on a bundle.
lldb_run() {
  local name=$1 command=$2 bundle=${3:-1M} group=${4:-lldb}
  run "$name" "$TMP/lldb.out" timeout "$LLDB_TIMEOUT" bash -c \
    'ulimit -v $(('"$LLDB_VMEM_GB"' * 1024 * 1024)); exec "$0" --no-lldbinit -b -o "trace load $1" -o "$2"' \
    "$LLDB" "$TMP/$bundle/trace.json" "$command"
  local note="" why
  if [ "$STATUS" = 124 ]; then
    note="did not finish within ${LLDB_TIMEOUT} s"
  elif [ "$STATUS" != 0 ] || grep -qi "error:" "$TMP/lldb.out" "$TMP/last.err"; then
    why=$( (grep -hi -m1 'error' "$TMP/lldb.out" "$TMP/last.err" || tail -n 1 "$TMP/last.err") |
      head -c 160 | tr '|\n' '/ ')
    note="did not finish: status $STATUS$( [ "$STATUS" -gt 128 ] && echo " (signal $((STATUS - 128)))" || true) with the address space capped at ${LLDB_VMEM_GB} GiB; ${why:-no message}"
  else
    note="$(wc -l <"$TMP/lldb.out") lines of output"
  fi
  LLDB_NOTES+=("$name: $note")
  row "$name" "$bundle" 1 "$group" "$note"
}
lldb_run "lldb: thread trace dump info" "thread trace dump info"
lldb_run "lldb: thread trace dump function-calls" "thread trace dump function-calls"
LLDB_FC_WALL=$WALL
LLDB_FC_RSS=$RSS
LLDB_FC_STATUS=$STATUS

# LLDB 22 crashes on the 1M bundle here; a smaller trace where it finishes
# gives a measured ratio too.
echo "== 4b. LLDB vs magic-trace-decode on the $SMALL_ROUNDS-round bundle" >&2
run "emulate small" "$TMP/emulate.out" "$BIN/magic-trace-emulate" --engine ptrace --stop stop_here \
  --max-insns 0 -o "$TMP/small" -- "$PROGRAM" "$SMALL_ROUNDS"
must "magic-trace-emulate ($SMALL_ROUNDS rounds)"
SMALL_TRACE_INSNS=$(sed -n 's/^magic-trace-emulate: \([0-9]*\) instructions.*/\1/p' "$TMP/emulate.out")
run "decode -o small" "$TMP/pipeline.out" "$BIN/magic-trace-decode" \
  "$TMP/small" --threads 1 -o "$TMP/small.fxt"
must "magic-trace-decode -o on the small bundle"
BASE_WALL[lldbsmall]=$WALL
BASE_CPU[lldbsmall]=$CPU
SMALL_OURS_WALL=$WALL
SMALL_OURS_RSS=$RSS
row "magic-trace-decode -o out.fxt" small 1 lldbsmall
lldb_run "lldb: thread trace dump function-calls" "thread trace dump function-calls" small lldbsmall
LLDB_SMALL_WALL=$WALL
LLDB_SMALL_RSS=$RSS
LLDB_SMALL_STATUS=$STATUS

echo "== 5. symbolizing the distinct addresses of the 1M trace" >&2
run "addresses" "$TMP/addresses" "$BIN/magic-trace-stage-bench" "$TMP/1M" \
  --stage addresses --module "$(basename "$PROGRAM")"
must "listing the trace's addresses"
ADDRESSES=$(wc -l <"$TMP/addresses")
[ "$ADDRESSES" -gt 0 ] || die "no address of $(basename "$PROGRAM") in the trace"
run "ours" "$TMP/ours.sym" "$BIN/magic-trace-symbolize" --obj "$PROGRAM" \
  <"$TMP/addresses"
must "magic-trace-symbolize"
BASE_WALL[sym]=$WALL
BASE_CPU[sym]=$CPU
row "magic-trace-symbolize (stdin)" "1M: $ADDRESSES addrs" 1 sym
run "llvm-symbolizer" "$TMP/llvm.sym" "$LLVM_SYMBOLIZER" --inlining \
  --obj="$PROGRAM" <"$TMP/addresses"
must "$LLVM_SYMBOLIZER"
row "llvm-symbolizer-22 --inlining" "1M: $ADDRESSES addrs" 1 sym
# Agreement on function names (file:line formats differ: columns).
functions() { awk 'BEGIN { RS = ""; FS = "\n" } { for (i = 1; i <= NF; i += 2) printf "%s%s", $i, (i + 2 <= NF ? " > " : "\n") }' "$1"; }
SYM_SAME=$(paste -d'\t' <(functions "$TMP/ours.sym") <(functions "$TMP/llvm.sym") |
  awk -F'\t' '$1 == $2 { n++ } END { print n + 0 }')

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$(($(date +%s) - START))

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; }

table() {
  echo "| measurement | trace | threads | wall s | CPU s | peak RSS MiB | wall vs base | CPU vs base | note |"
  echo "|---|---|---|---|---|---|---|---|---|"
  local entry name bundle threads wall cpu rss group note
  for entry in "${ROWS[@]}"; do
    IFS='|' read -r name bundle threads wall cpu rss group note <<<"$entry"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$bundle" \
      "$threads" "$wall" "$cpu" "$([ -n "$rss" ] && echo $((rss / 1024)) || echo -)" \
      "$(ratio "$wall" "${BASE_WALL[$group]:-}")" \
      "$(ratio "$cpu" "${BASE_CPU[$group]:-}")" "$note"
  done
}

# The goals, from the rows.
find_row() { # NAME BUNDLE THREADS -> "wall cpu rss"
  local entry name bundle threads wall cpu rss rest
  for entry in "${ROWS[@]}"; do
    IFS='|' read -r name bundle threads wall cpu rss rest <<<"$entry"
    if [ "$name" = "$1" ] && [ "$bundle" = "$2" ] && [ "$threads" = "$3" ]; then
      echo "$wall $cpu $rss"
      return
    fi
  done
}
read -r P_WALL P_CPU _ < <(find_row "full pipeline -> .fxt" 10M 1)
read -r P2_WALL P2_CPU _ < <(find_row "full pipeline -> .fxt" 10M 2)
read -r W_WALL W_CPU _ < <(find_row "full pipeline -> .fxt" wrap4M 1)
read -r X_WALL X_CPU _ < <(find_row "full pipeline -> .fxt" 10Mx2 1)
read -r X2_WALL X2_CPU _ < <(find_row "full pipeline -> .fxt" 10Mx2 2)
read -r I_WALL I_CPU _ < <(find_row "in-process: pipeline" 10M 1)
read -r IW_WALL IW_CPU _ < <(find_row "in-process: pipeline" wrap4M 1)
read -r _ IC_CPU _ < <(find_row "in-process: pipeline, warm symbol cache" 10M 1)
read -r _ ICW_CPU _ < <(find_row "in-process: pipeline, warm symbol cache" wrap4M 1)
read -r O_WALL _ O_RSS < <(find_row "magic-trace-decode -o out.fxt" 1M 1)
if [ "$LLDB_FC_STATUS" = 0 ]; then
  LLDB_VERDICT="LLDB $(ratio "$LLDB_FC_WALL" "$O_WALL") slower (wall) and $(ratio "$LLDB_FC_RSS" "$O_RSS") more peak RSS than magic-trace-decode -o out.fxt (1 thread)"
else
  LLDB_VERDICT="LLDB did not complete (${LLDB_NOTES[1]}); up to that point it used ${LLDB_FC_WALL} s and $((LLDB_FC_RSS / 1024)) MiB peak RSS: at least $(ratio "$LLDB_FC_WALL" "$O_WALL") our time and $(ratio "$LLDB_FC_RSS" "$O_RSS") our memory"
fi

if [ "$LLDB_SMALL_STATUS" = 0 ]; then
  LLDB_SMALL_VERDICT="on the small trace ($SMALL_TRACE_INSNS instructions) LLDB finished: $(ratio "$LLDB_SMALL_WALL" "$SMALL_OURS_WALL") our wall time, $(ratio "$LLDB_SMALL_RSS" "$SMALL_OURS_RSS") our peak RSS"
else
  LLDB_SMALL_VERDICT="on the small trace ($SMALL_TRACE_INSNS instructions) LLDB did not finish either (status $LLDB_SMALL_STATUS)"
fi

# verdict A OP B: "met" when A OP B holds (OP is <= or >=), else "not met".
verdict() {
  awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {
    if (a == "" || b == "") { print "not measured"; exit }
    ok = op == "<=" ? a + 0 <= b + 0 : a + 0 >= b + 0
    print ok ? "met" : "not met" }'
}
quotient() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'; }

# Issue 20's goals, per bundle.
speed_goals() {
  local bundle w0 c0 r0 w1 c1 r1 w2 c2 r2 pw pc pr base cbase limit fw fc sw sc
  for bundle in "${BUNDLES[@]}"; do
    read -r w1 c1 r1 < <(find_row "full pipeline -> .fxt" "$bundle" 1)
    read -r w2 c2 r2 < <(find_row "full pipeline -> .fxt" "$bundle" 2)
    read -r w0 c0 r0 < <(find_row "full pipeline -> .fxt" "$bundle" default)
    read -r pw pc pr < <(find_row "perf script --itrace=cr" "$bundle" 1)
    base=${BASE_WALL[$bundle]}
    cbase=${BASE_CPU[$bundle]}
    limit=$(((PT_BYTES[$bundle] + ${MODEL_BYTES[$bundle]:-0}) / 1024 + 100 * 1024))
    echo "- **$bundle** (${INSNS[$bundle]} instructions, ${PT_BYTES[$bundle]} bytes of PT, model ${MODEL_BYTES[$bundle]} bytes):"
    echo "  - pipeline, 1 thread <= 1.5x the raw loop: wall $(ratio "$w1" "$base"), CPU $(ratio "$c1" "$cbase"): $(verdict "$(quotient "$c1" "$cbase")" "<=" 1.5) (CPU), $(verdict "$(quotient "$w1" "$base")" "<=" 1.5) (wall)."
    echo "  - pipeline, 2 threads <= 1.0x the raw loop (wall): $(ratio "$w2" "$base"): $(verdict "$(quotient "$w2" "$base")" "<=" 1.0); 2 threads vs 1 thread: wall $(ratio "$w2" "$w1"), CPU $(ratio "$c2" "$c1")."
    read -r fw fc _ < <(find_row "floor: write the same .fxt (dd)" "$bundle" 1)
    read -r sw sc _ < <(find_row "floor: start the process (--help)" "$bundle" 1)
    echo "  - floors inside those ratios: writing the same .fxt alone takes $(ratio "$fw" "$base") the raw loop's wall time ($(ratio "$fc" "$cbase") its CPU), starting the process $(ratio "$sw" "$base") ($(ratio "$sc" "$cbase")); with libipt's own loop, $(awk -v b="$base" -v f="$fw" -v s="$sw" 'BEGIN { if (b > 0) printf "%.2fx", (b + f + s) / b }') the wall time ($(awk -v b="$cbase" -v f="$fc" -v s="$sc" 'BEGIN { if (b > 0) printf "%.2fx", (b + f + s) / b }') the CPU) before any decode bookkeeping, symbolization, model or FXT encoding."
    echo "  - the default never slower than 1 thread: default vs 1 thread, wall $(ratio "$w0" "$w1"), CPU $(ratio "$c0" "$c1"): $(verdict "$(quotient "$w0" "$w1")" "<=" 1.05) (wall within 5 %, the noise of two medians of the same code)."
    if [ "${PERF_LINES[$bundle]:-0}" = 0 ]; then
      echo "  - >= 3x faster than \`perf script --itrace=cr\`: not comparable: perf printed nothing for this bundle (see its rows)."
    else
      echo "  - >= 3x faster than \`perf script --itrace=cr\`: perf takes $(ratio "$pw" "$w1") our wall time (1 thread), $(ratio "$pc" "$c1") our CPU time: $(verdict "$(quotient "$pw" "$w1")" ">=" 3) (wall), $(verdict "$(quotient "$pc" "$c1")" ">=" 3) (CPU); perf's peak RSS $((${pr:-0} / 1024)) MiB."
    fi
    echo "  - peak RSS <= PT + model + 100 MiB ($((limit / 1024)) MiB): 1 thread $((${r1:-0} / 1024)) MiB, 2 threads $((${r2:-0} / 1024)) MiB: $(verdict "$r1" "<=" "$limit") (1 thread), $(verdict "$r2" "<=" "$limit") (2 threads)."
  done
  # Linear in the total instructions: 64 threads of 1M against the 10M
  # stream (the same PT), per instruction.
  local cpu64 rss64 cpu10 rss10
  read -r _ cpu64 rss64 < <(find_row "full pipeline -> .fxt" 1Mx64 2)
  read -r _ cpu10 rss10 < <(find_row "full pipeline -> .fxt" 10M 2)
  if [ -n "$cpu64" ] && [ -n "$cpu10" ]; then
    echo "- 64 threads grow linearly: per instruction, 1Mx64 (2 threads) costs $(awk -v a="$cpu64" -v n="${INSNS[1Mx64]}" -v b="$cpu10" -v m="${INSNS[10M]}" 'BEGIN { printf "%.2fx", (a / n) / (b / m) }') the CPU time and $(awk -v a="$rss64" -v n="${INSNS[1Mx64]}" -v b="$rss10" -v m="${INSNS[10M]}" 'BEGIN { printf "%.2fx", ((a - 56320) / n) / ((b - 56320) / m) }') the peak RSS above a 55 MiB base of 10M (2 threads)."
  fi
}

goals() {
  echo "Issue 20 (speed and memory), in this run:"
  echo
  speed_goals
  echo
  echo "Earlier goals:"
  echo
  echo "- End-to-end <= 1.5x raw block decode (whole process, same bytes; goal met only if both are):"
  echo "  10M, 1 thread: wall $(ratio "$P_WALL" "${BASE_WALL[10M]}"), CPU $(ratio "$P_CPU" "${BASE_CPU[10M]}");"
  echo "  10M, 2 threads: wall $(ratio "$P2_WALL" "${BASE_WALL[10M]}"), CPU $(ratio "$P2_CPU" "${BASE_CPU[10M]}");"
  echo "  wrap4M, 1 thread: wall $(ratio "$W_WALL" "${BASE_WALL[wrap4M]}"), CPU $(ratio "$W_CPU" "${BASE_CPU[wrap4M]}");"
  echo "  10Mx2 (two traced threads; the raw loop decodes them one after the other), 1 thread:"
  echo "  wall $(ratio "$X_WALL" "${BASE_WALL[10Mx2]}"), CPU $(ratio "$X_CPU" "${BASE_CPU[10Mx2]}"); 2 threads: wall $(ratio "$X2_WALL" "${BASE_WALL[10Mx2]}"), CPU $(ratio "$X2_CPU" "${BASE_CPU[10Mx2]}")."
  echo "  In-process (libraries loaded, as in the plugin): 10M $(ratio "$I_CPU" "${BASE_CPU[in10M]}"),"
  echo "  wrap4M $(ratio "$IW_CPU" "${BASE_CPU[inwrap4M]}") CPU time of the raw loop's; with a warm symbol cache (a"
  echo "  session's later snapshots) 10M $(ratio "$IC_CPU" "${BASE_CPU[in10M]}"), wrap4M $(ratio "$ICW_CPU" "${BASE_CPU[inwrap4M]}")."
  echo "- 1M-instruction trace, >= 100x faster and >= 100x less peak memory than LLDB's"
  echo "  \`thread trace dump function-calls\`: $LLDB_VERDICT; $LLDB_SMALL_VERDICT."
  echo "- Model <= 4 bytes per traced instruction: 10M ${MODEL_BPI[10M]:-?}, wrap4M ${MODEL_BPI[wrap4M]:-?}, 1M ${MODEL_BPI[1M]:-?} bytes per instruction."
  echo "- Model <= 12 bytes a frame (issue 51; the whole model, sites and strings included, over its frames): 10M ${MODEL_BPF[10M]:-?}, wrap4M ${MODEL_BPF[wrap4M]:-?}, clang ${MODEL_BPF[clang]:-?}, node ${MODEL_BPF[node]:-?} bytes a frame."
}

TABLE=$(table)
GOALS=$(goals)
echo
echo "$TABLE"
echo
echo "$GOALS"

NOTES=""
if [ -f "$DOC" ] && grep -q '^## Notes' "$DOC"; then
  NOTES=$(sed -n '/^## Notes/,$p' "$DOC")
fi
{
  echo "# Performance"
  echo
  echo "Generated by \`scripts/bench.sh\` (the sections before *Notes* are overwritten on each run)."
  echo "Reproduce: \`./scripts/build.sh && ./scripts/bench.sh\` ($ELAPSED s here)."
  echo
  echo "## Machine"
  echo
  echo "- $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(uname -sr)"
  echo "- load average (1/5/15 min) $LOAD_BEFORE before, $LOAD_AFTER after: the machine is shared, so"
  echo "  wall times include waiting for a core; CPU time (user+sys of the whole process) is the cost."
  echo "- $($LLDB --version | head -1)"
  echo
  echo "## Traces"
  echo
  echo "- **1M**: \`magic-trace-emulate --stop stop_here -- build/test/inputs/bench_deep $ROUNDS\`"
  echo "  (test/inputs/bench_deep.cpp: recursion 20-40 frames deep, inlined helpers at every level,"
  echo "  virtual and tail calls): ${INSNS[1M]:-$SMALL_INSNS} instructions, $SMALL_BYTES bytes of PT"
  echo "  (emulation took ${EMULATE_WALL} s)."
  echo "- **10M**: that PT repeated $REPEAT times (\`magic-trace-decode-bench --repeat $REPEAT --save\`;"
  echo "  each copy starts with PSB+ and ends with TIP.PGD, so the result is one valid stream):"
  echo "  ${INSNS[10M]} instructions."
  echo "- **10Mx2**: the 10M trace as two threads (\`--thread-copies 2\`; only the first has a stop"
  echo "  context): ${INSNS[10Mx2]} instructions. The raw loop decodes the threads one after the other;"
  echo "  the pipeline with 2 threads decodes and builds both threads' models in parallel."
  echo "- **1Mx64**: the 1M trace as 64 threads (\`--thread-copies 64\`), a 64-thread snapshot:"
  echo "  ${INSNS[1Mx64]} instructions."
  echo "- **wrap4M**: the last 4 MiB of $WRAP_REPEAT copies, marked wrapped (starts mid-packet, as a"
  echo "  4 MiB ring that wrapped): ${INSNS[wrap4M]} instructions."
  echo "- **small**: \`magic-trace-emulate --stop stop_here -- build/test/inputs/bench_deep $SMALL_ROUNDS\`:"
  echo "  $SMALL_TRACE_INSNS instructions (a size LLDB's \`dump function-calls\` completes on here)."
  if [ -n "${INSNS[mruby]:-}" ]; then
    echo "- **mruby**: real Intel PT (\`$REALPT\`, recorded by kAFL on real hardware; no timing"
    echo "  packets, no symbols): ${INSNS[mruby]} instructions, ${PT_BYTES[mruby]} bytes of PT."
  fi
  if [ -n "${INSNS[qemu30M]:-}" ]; then
    echo "- **qemu30M**: \`magic-trace-emulate --engine qemu --max-insns $QEMU_INSNS\` (the QEMU"
    echo "  recorder, docs/qemu.md) on bench_deep: ${INSNS[qemu30M]} instructions, ${PT_BYTES[qemu30M]} bytes of PT."
  fi
  for name in $PROGRAMS; do
    [ -n "${INSNS[$name]:-}" ] || continue
    echo "- **$name**: \`magic-trace-emulate --engine qemu --max-insns 0 --buffer-size $WRAP_BYTES --"
    echo "  ${PROGRAM_LINE[$name]}\` (the whole run; each thread's ring keeps its newest 4 MiB):"
    echo "  ${INSNS[$name]} instructions, ${PT_BYTES[$name]} bytes of PT."
  done
  echo "- perf rows: the bundle written as a perf.data (\`magic-trace-perfdata BUNDLE -o FILE\`, the"
  echo "  same PT bytes), then \`$PERF script -i FILE --itrace=cr\` (calls and returns, what a"
  echo "  call-stack tool needs) and \`--call-trace\`, output to /dev/null; $($PERF --version)."
  echo
  echo "## Results"
  echo
  echo "Each row is one whole process under \`scripts/timeit.py\` (wall, user+sys CPU and peak RSS as"
  echo "\`/usr/bin/time\` reports them, at 1 ms; load, decode, output, exit), run once,"
  echo "except the raw loop and the full pipeline: $PIPELINE_RUNS runs each (the pipeline's 1- and 2-thread runs"
  echo "alternating, so both see the same load), and the row is the run with the median wall time."
  echo "Ratios are against the first row of the group: the raw libipt block-decoder loop on the same"
  echo "bundle (\`magic-trace-stage-bench --stage raw\`: sync, \`pt_blk_next\`, drain events, resync"
  echo "on error; no output), magic-trace-decode for the LLDB rows, magic-trace-symbolize for"
  echo "llvm-symbolizer. \"decode\" and \"decode + symbolize\" are \`magic-trace-stage-bench\`"
  echo "(\`decodeSnapshot\`, then one \`Symbolizer::lookup\` per block); the full pipeline is"
  echo "\`magic-trace-decode BUNDLE --threads T -o out.fxt\` (decode, symbolize, model, FXT)."
  echo "\"in-process\" rows are \`magic-trace-stage-bench --stage inprocess\`: inside one process with"
  echo "its libraries loaded and the bundle read (as in the plugin), the best of 3 runs of the raw"
  echo "loop, of decode, of symbolize + model (a fresh symbolizer each run, as each snapshot has), of"
  echo "the FXT write, of the whole pipeline, and of the whole pipeline with a symbol cache kept"
  echo "across runs (what a session's later snapshots cost); wall and CPU seconds, no RSS."
  echo "The LLDB rows run \`$LLDB --no-lldbinit -b -o 'trace load 1M/trace.json' -o COMMAND\` under"
  echo "\`timeout $LLDB_TIMEOUT\` and \`ulimit -v\` $LLDB_VMEM_GB GiB. Symbolization: the $ADDRESSES distinct"
  echo "instruction addresses of bench_deep in the 1M trace, as file addresses on stdin; the two"
  echo "symbolizers named the same inline chain for $SYM_SAME of them."
  echo
  echo "$TABLE"
  echo
  echo "## Goals"
  echo
  echo "$GOALS"
  echo
  if [ -n "$NOTES" ]; then
    echo "$NOTES"
  fi
} >"$DOC"
echo
echo "bench.sh: done in $ELAPSED s; wrote $DOC" >&2
