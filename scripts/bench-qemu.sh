#!/usr/bin/env bash
# Measures the QEMU recorder (libmagic-trace-qemu.so) in one run, on three
# CPU-bound programs: the bench input (test/inputs/emu_bench), python3
# running a loop, sqlite3 running a recursive query. For each: native,
# plain qemu-x86_64, and qemu-x86_64 recording with the plugin (4 MiB ring
# per thread, timer normal, no ground truth), whole processes under
# /usr/bin/time; the ratios are recording / plain QEMU and instructions
# recorded per second, plus PT bytes per instruction and peak RSS.
# Build first (./scripts/build.sh). Environment: BUILD_DIR (build),
# MT_BENCH_REPEAT (best of N runs, 3). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PLUGIN=$BUILD_DIR/lib/libmagic-trace-qemu.so
REPEAT=${MT_BENCH_REPEAT:-3}
die() {
  echo "bench-qemu.sh: error: $*" >&2
  exit 1
}
[ -f "$PLUGIN" ] || die "$PLUGIN is missing (run ./scripts/build.sh)"
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

# best_of CMD...: prints "wall_seconds peak_rss_kib" of the fastest run.
best_of() {
  local best="" rss="" i
  for i in $(seq "$REPEAT"); do
    /usr/bin/time -f "%e %M" -o "$TMP/time" "$@" >/dev/null 2>"$TMP/stderr" ||
      die "failed: $* ($(tail -1 "$TMP/stderr"))"
    read -r wall kib <"$TMP/time"
    if [ -z "$best" ] || awk -v a="$wall" -v b="$best" 'BEGIN{exit !(a<b)}'; then
      best=$wall
      rss=$kib
    fi
  done
  echo "$best $rss"
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
for i in range(count):
    tid, state, busy, n, lost = struct.unpack_from("<QIIQQ", h, slots + 32 * i)
    insns += n
    page = open(os.path.join(d, "ring.%d" % tid), "rb").read(4096)
    # perf_event_mmap_page: data_head at 1024, ..., aux_head at 1056.
    pt += struct.unpack_from("<Q", page, 1056)[0]
print(insns, pt)
PY
}

echo "| program | native s | qemu s | qemu + plugin s | plugin / qemu | recorded insns | insns/s recorded | PT bytes/insn | RSS qemu / plugin MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
run() {
  local name=$1
  shift
  read -r native _ < <(best_of "$@")
  read -r plain plainRss < <(best_of qemu-x86_64 "$@")
  rm -rf "$TMP/rings"
  read -r traced tracedRss < <(best_of qemu-x86_64 -plugin "$PLUGIN,dir=$TMP/rings,start=,size=4194304,timer=normal" "$@")
  read -r insns pt < <(ring_facts "$TMP/rings")
  awk -v n="$name" -v a="$native" -v q="$plain" -v t="$traced" -v i="$insns" -v p="$pt" \
    -v qr="$plainRss" -v tr="$tracedRss" 'BEGIN {
      printf "| %s | %.2f | %.2f | %.2f | %.2fx | %.0f | %.0f M | %.3f | %.0f / %.0f |\n",
        n, a, q, t, t / q, i, i / t / 1e6, p / i, qr / 1024, tr / 1024 }'
}
run emu_bench "$BUILD_DIR/test/inputs/emu_bench"
run "python3 loop" /usr/bin/python3 "$TMP/loop.py"
run "sqlite3 query" /usr/bin/sqlite3 :memory: "$SQL"
echo
echo "load average before/after: $(cut -d' ' -f1-3 /proc/loadavg)"
