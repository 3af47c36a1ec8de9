#!/usr/bin/env bash
# Measures the QEMU recorder (libmagic-trace-qemu.so) in one run, on three
# CPU-bound programs: the bench input (test/inputs/emu_bench), python3
# running a loop, sqlite3 running a recursive query, and LuaJIT running
# a recursive fib with its JIT on and off. For each: native,
# plain qemu-x86_64, and qemu-x86_64 recording with the plugin (4 MiB ring
# per thread, timer normal, no ground truth), whole processes under
# /usr/bin/time; the ratios are recording / plain QEMU (wall and CPU time,
# user + sys) and instructions recorded per second, plus the share of them
# the plugin dropped unwritten (docs/qemu.md, "The block log"), PT bytes per
# instruction written and peak RSS. The floor is qemu-x86_64 with an empty
# callback per executed block (libmagic-trace-qemu-floor.so, test/bench/qemu_floor):
# what any plugin that sees every block pays; the recorder's own work is its
# time minus the floor's. With MT_BENCH_BASELINE set to another build's
# libmagic-trace-qemu.so, that plugin is measured in the same run too (the
# runs alternate, so both see the same load) and the last column is this
# plugin's CPU time over the baseline's.
# A second table measures what a user runs, the CLI itself
# (magic-trace-emulate --engine qemu --max-insns 0: QEMU, the plugin from
# `main` or the entry point, reading the rings and writing the bundle) in
# the same alternating runs, against the same plain QEMU.
# Build first (./scripts/build.sh). Environment: BUILD_DIR (build),
# MT_BENCH_REPEAT (best of N runs, 3), MT_BENCH_BASELINE. Prints a Markdown
# table.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PLUGIN=$BUILD_DIR/lib/libmagic-trace-qemu.so
CLI=$BUILD_DIR/bin/magic-trace-emulate
FLOOR=$BUILD_DIR/lib/libmagic-trace-qemu-floor.so
REPEAT=${MT_BENCH_REPEAT:-3}
die() {
  echo "bench-qemu.sh: error: $*" >&2
  exit 1
}
[ -f "$PLUGIN" ] || die "$PLUGIN is missing (run ./scripts/build.sh)"
[ -x "$CLI" ] || die "$CLI is missing (run ./scripts/build.sh)"
[ -f "$FLOOR" ] || die "$FLOOR is missing (run ./scripts/build.sh)"
command -v qemu-x86_64 >/dev/null || die "qemu-x86_64 not found (apt-get install qemu-user)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-bench-qemu.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/loop.py" <<'PY'
s = 0
for i in range(300000):
    s += i * i % 7
print(s)
PY
SQL="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<300000) SELECT sum(x) FROM c;"

# measure NAME CMD...: one run of CMD; keeps NAME's fastest wall time, its
# peak RSS, and its lowest CPU time (user + sys) in best_* arrays.
declare -A best_wall best_rss best_cpu
measure() {
  local name=$1
  shift
  /usr/bin/time -f "%e %M %U %S" -o "$TMP/time" "$@" >"$TMP/stdout" 2>"$TMP/stderr" ||
    die "failed: $* ($(tail -1 "$TMP/stderr"))"
  read -r wall kib user sys <"$TMP/time"
  local cpu
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u + s}')
  if [ -z "${best_wall[$name]:-}" ] || awk -v a="$wall" -v b="${best_wall[$name]}" 'BEGIN{exit !(a<b)}'; then
    best_wall[$name]=$wall
    best_rss[$name]=$kib
  fi
  if [ -z "${best_cpu[$name]:-}" ] || awk -v a="$cpu" -v b="${best_cpu[$name]}" 'BEGIN{exit !(a<b)}'; then
    best_cpu[$name]=$cpu
  fi
}

# Reads the instruction count and PT bytes from a ring directory.
ring_facts() {
  python3 - "$1" <<'PY'
import os, struct, sys
d = sys.argv[1]
h = open(os.path.join(d, "header"), "rb").read()
count = struct.unpack_from("<I", h, 12)[0]
slots = 8 + 4 + 4 + 8 + 8 + 16 + 16 + 8 + 4 + 4 + 16 + 4 + 4 + 8 + 4 + 4 + 256
insns = 0
pt = 0
dropped = 0
for i in range(count):
    tid, state, busy, n, lost = struct.unpack_from("<QIIQQ", h, slots + 32 * i)
    insns += n
    dropped += lost
    page = open(os.path.join(d, "ring.%d" % tid), "rb").read(4096)
    # perf_event_mmap_page: data_head at 1024, ..., aux_head at 1056.
    pt += struct.unpack_from("<Q", page, 1056)[0]
print(insns, pt, dropped)
PY
}

BASELINE=${MT_BENCH_BASELINE:-}
[ -z "$BASELINE" ] || [ -f "$BASELINE" ] || die "MT_BENCH_BASELINE=$BASELINE is not a file"
OPTIONS="start=,size=4194304,timer=normal"
header="| program | native s | qemu s (CPU) | floor s (CPU) | floor / qemu (CPU) | qemu + plugin s (CPU) | plugin / qemu (CPU) | recorded insns | insns/s recorded (CPU) | of them dropped unwritten | PT bytes/written insn | RSS qemu / plugin MiB |"
rule="|---|---|---|---|---|---|---|---|---|---|---|---|"
if [ -n "$BASELINE" ]; then
  header="$header baseline plugin s (CPU) | CPU vs baseline |"
  rule="$rule---|---|"
fi
echo "$header"
echo "$rule"
run() {
  local name=$1
  shift
  best_wall=() best_rss=() best_cpu=()
  local i
  for i in $(seq "$REPEAT"); do
    measure native "$@"
    measure plain qemu-x86_64 "$@"
    measure floor qemu-x86_64 -plugin "$FLOOR" "$@"
    rm -rf "$TMP/rings"
    measure plugin qemu-x86_64 -plugin "$PLUGIN,dir=$TMP/rings,$OPTIONS" "$@"
    measure cli "$CLI" --engine qemu --max-insns 0 -o "$TMP/bundle" -- "$@"
    cp "$TMP/stdout" "$TMP/cli.out"
    if [ -n "$BASELINE" ]; then
      rm -rf "$TMP/baseline-rings"
      measure baseline qemu-x86_64 -plugin "$BASELINE,dir=$TMP/baseline-rings,$OPTIONS" "$@"
    fi
  done
  read -r insns pt dropped < <(ring_facts "$TMP/rings")
  local row
  row=$(awk -v n="$name" -v a="${best_wall[native]}" -v q="${best_wall[plain]}" \
    -v qc="${best_cpu[plain]}" -v f="${best_wall[floor]}" -v fc="${best_cpu[floor]}" \
    -v t="${best_wall[plugin]}" -v tc="${best_cpu[plugin]}" \
    -v i="$insns" -v p="$pt" -v d="$dropped" -v qr="${best_rss[plain]}" -v tr="${best_rss[plugin]}" 'BEGIN {
      printf "| %s | %.2f | %.2f (%.2f) | %.2f (%.2f) | %.2fx (%.2fx) | %.2f (%.2f) | %.2fx (%.2fx) | %.0f | %.0f M (%.0f M) | %.0f %% | %.3f | %.0f / %.0f |",
        n, a, q, qc, f, fc, f / q, fc / qc, t, tc, t / q, tc / qc, i, i / t / 1e6, i / tc / 1e6, 100 * d / i, (i > d ? p / (i - d) : 0), qr / 1024, tr / 1024 }')
  if [ -n "$BASELINE" ]; then
    row=$row$(awk -v b="${best_wall[baseline]}" -v bc="${best_cpu[baseline]}" -v tc="${best_cpu[plugin]}" \
      'BEGIN { printf " %.2f (%.2f) | %.2fx |", b, bc, tc / bc }')
  fi
  echo "$row"
  # The CLI's own count: "magic-trace-emulate: N instructions, ...".
  local cli_insns
  cli_insns=$(sed -n 's/^magic-trace-emulate: \([0-9]*\) instructions.*/\1/p' "$TMP/cli.out")
  cli_rows+=("$(awk -v n="$name" -v q="${best_wall[plain]}" -v qc="${best_cpu[plain]}" \
    -v c="${best_wall[cli]}" -v cc="${best_cpu[cli]}" -v i="${cli_insns:-0}" -v r="${best_rss[cli]}" 'BEGIN {
      printf "| %s | %.2f (%.2f) | %.2f (%.2f) | %.2fx (%.2fx) | %.0f | %.0f M | %.0f |",
        n, q, qc, c, cc, c / q, cc / qc, i, i / c / 1e6, r / 1024 }')")
}
cli_rows=()
run emu_bench "$BUILD_DIR/test/inputs/emu_bench"
run "python3 loop" /usr/bin/python3 "$TMP/loop.py"
run "sqlite3 query" /usr/bin/sqlite3 :memory: "$SQL"
# A JIT: LuaJIT's traces are code outside files, rewritten in place as the
# mcode area is reused (docs/qemu.md, "The code log"), and the interpreter
# alone (-joff) for comparison.
if command -v luajit >/dev/null; then
  cat >"$TMP/fib.lua" <<'LUA'
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = 0
for i = 1, 3 do t = t + fib(32) end
print(t)
LUA
  run "luajit fib (JIT)" "$(command -v luajit)" "$TMP/fib.lua"
  run "luajit -joff fib" "$(command -v luajit)" -joff "$TMP/fib.lua"
fi
echo
echo "| program | qemu s (CPU) | magic-trace-emulate --engine qemu --max-insns 0 s (CPU) | CLI / qemu (CPU) | recorded insns | insns/s recorded (wall) | peak RSS MiB (largest process) |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${cli_rows[@]}"
echo
echo "load average before/after: $(cut -d' ' -f1-3 /proc/loadavg)"
