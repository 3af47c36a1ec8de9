#!/usr/bin/env bash
# Measures windows on busy traces (issue 49; docs/user-guide.md "Big
# snapshots"; the table goes to docs/performance.md, "Windows"), in one run:
#   1. a 16 x 4 MiB bundle (a 100 M-instruction QEMU recording of bench_deep,
#      its PT repeated into 16 wrapped 4 MiB threads by magic-trace-decode-bench
#      --thread-copies 16 --wrap-bytes 4194304 --save): magic-trace-decode with
#      defaults (a window that fits 10 M slices) against --window all (the
#      whole decode, what it did before), in turn, A B A B, MT_WINDOW_PAIRS
#      pairs (3), with the ratio pair by pair: wall, CPU, peak RSS, slices;
#   2. busy_threads (8 workers spinning in small calls, checkpoint() every
#      300 ms) under `magic-trace run` in LLDB and in GDB with
#      `snapshot-on checkpoint --count 12 --continue` (recorder triggers):
#      snapshots written and skipped, each snapshot's decode time (wall, in
#      the session, from `status --json`), its slices
#      (magic-trace-fxt-check), and the debugger's peak RSS;
#   3. the same in LLDB with busy_threads' LOOPS at 24 (each leaf call loops
#      24 times: fewer calls per byte of trace, so that the decode's budget,
#      --max-trace, not the slice budget, sets the window).
# Build first (./scripts/build.sh). Environment: BUILD_DIR (build),
# MT_WINDOW_PAIRS (3), MT_BENCH_DOC (docs/performance.md; empty: print only).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
PAIRS=${MT_WINDOW_PAIRS:-3}
DOC=${MT_BENCH_DOC-docs/performance.md}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mt-window.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

for tool in magic-trace-emulate magic-trace-decode magic-trace-decode-bench \
  magic-trace-fxt-check; do
  [ -x "$BIN/$tool" ] || { echo "bench-window.sh: $BIN/$tool is missing (run ./scripts/build.sh)" >&2; exit 1; }
done

ROWS=()
row() { ROWS+=("$(printf '| %s |' "$(IFS='|'; echo "$*" | sed 's/|/ | /g')")"); }

# --- 1. The 16 x 4 MiB bundle ---------------------------------------------
"$BIN/magic-trace-emulate" --engine qemu --buffer-size 16777216 \
  --max-insns 100000000 -o "$TMP/deep" -- "$BUILD_DIR/test/inputs/bench_deep" 100000 >/dev/null
"$BIN/magic-trace-decode-bench" --thread-copies 16 --wrap-bytes 4194304 \
  --save "$TMP/big16" "$TMP/deep" >/dev/null

slices() { "$BIN/magic-trace-fxt-check" "$1" | sed -E 's/.* ([0-9]+) events/\1/'; }
declare -a WIN ALL WINRSS ALLRSS WINCPU ALLCPU
for ((i = 0; i < PAIRS; i++)); do
  python3 scripts/timeit.py "$TMP/t" "$BIN/magic-trace-decode" "$TMP/big16" -o "$TMP/win.fxt" >/dev/null
  read -r wall user sys rss <"$TMP/t"
  WIN+=("$wall"); WINCPU+=("$(echo "$user + $sys" | bc)"); WINRSS+=("$rss")
  python3 scripts/timeit.py "$TMP/t" "$BIN/magic-trace-decode" "$TMP/big16" --window all -o "$TMP/all.fxt" >"$TMP/all.txt"
  read -r wall user sys rss <"$TMP/t"
  ALL+=("$wall"); ALLCPU+=("$(echo "$user + $sys" | bc)"); ALLRSS+=("$rss")
  rm -f "$TMP/all.fxt.keep"
done
WIN_SLICES=$(slices "$TMP/win.fxt")
# The whole output's slices from the decoder's summary: magic-trace-fxt-check
# holds a file's events in memory, and 129 M of them do not fit in 24 GiB.
ALL_SLICES=$(grep -o '[0-9,]* slices' "$TMP/all.txt" | tail -1 | tr -d , | cut -d' ' -f1)
rm -f "$TMP/all.fxt"
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
RATIOS=()
for ((i = 0; i < PAIRS; i++)); do
  RATIOS+=("$(echo "scale=2; ${ALL[$i]} / ${WIN[$i]}" | bc)")
done
row "16 x 4 MiB, --window all (the whole decode)" "$(median "${ALL[@]}")" "$(median "${ALLCPU[@]}")" "$(($(median "${ALLRSS[@]}") / 1024))" "$ALL_SLICES" "1.00x"
row "16 x 4 MiB, default window" "$(median "${WIN[@]}")" "$(median "${WINCPU[@]}")" "$(($(median "${WINRSS[@]}") / 1024))" "$WIN_SLICES" "$(median "${RATIOS[@]}")x faster (pairs: ${RATIOS[*]})"

# --- 2. busy_threads in LLDB and GDB --------------------------------------
PROGRAM=$BUILD_DIR/test/inputs/busy_threads
mkdir -p "$TMP/lldb" "$TMP/gdb" "$TMP/loops"
lldb_session() {
  local dir=$1 args=$2
  (cd "$TMP/$dir" && python3 "$OLDPWD/scripts/timeit.py" "../$dir.t" lldb-22 --no-lldbinit -b \
    -o "plugin load $OLDPWD/$BUILD_DIR/lib/libmagic-trace-lldb.so" -o "file $OLDPWD/$PROGRAM" \
    -o "magic-trace run --start main $args" \
    -o 'magic-trace snapshot-on -n checkpoint --count 12 --continue -o big-%N.fxt' \
    -o continue -o 'magic-trace status' -o 'magic-trace status --json' >"../$dir.txt" 2>&1) || true
}
lldb_session lldb ""
lldb_session loops "-- 16 8 300 24"
(cd "$TMP/gdb" && python3 "$OLDPWD/scripts/timeit.py" ../gdb.t gdb -nx -batch \
  -x "$OLDPWD/$BUILD_DIR/lib/magic-trace-gdb.py" -ex "file $OLDPWD/$PROGRAM" \
  -ex 'magic-trace run --start main' \
  -ex 'magic-trace snapshot-on checkpoint --count 12 --continue -o big-%N.fxt' \
  -ex continue -ex 'magic-trace status' -ex 'magic-trace status --json' >../gdb.txt 2>&1) || true

session_rows() {
  local host=$1 text=$TMP/$1.txt name=${2:-busy_threads in $1}
  read -r wall _ _ rss <"$TMP/$host.t"
  local written skipped most=0 files=0 over=0
  written=$(grep -c "^magic-trace: snapshot [0-9]*:" "$text" || true)
  skipped=$(grep -o '[0-9]* skipped' "$text" | tail -1 | cut -d' ' -f1)
  for f in "$TMP/$host"/big-*.fxt; do
    [ -e "$f" ] || continue
    files=$((files + 1))
    n=$(slices "$f")
    [ "$n" -gt "$most" ] && most=$n
    [ "$n" -gt 10000000 ] && over=$((over + 1))
  done
  # Each snapshot's decode (wall, in the session), from `status --json`
  # (LLDB's object starts with "attached", GDB's with "backend").
  local decode
  decode=$(python3 - "$text" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
start = re.search(r'\{"(attached|backend)"', text)
status, _ = json.JSONDecoder().raw_decode(text[start.start():])
times = sorted(s["decodeSeconds"] for s in status["snapshots"])
print("decode median %.2f s, max %.2f s" % (times[len(times) // 2], times[-1]))
PY
)
  row "$name: $written snapshots written, ${skipped:-0} skipped; $files files, $over over 10 M slices; $decode" "$wall" "" "$((rss / 1024))" "$most (largest)" ""
}
session_rows lldb
session_rows gdb
session_rows loops "busy_threads, 24 loops a leaf call, in lldb"

TABLE=$(printf '%s\n' "| measurement | wall s | CPU s | peak RSS MiB | slices | vs whole |" "|---|---|---|---|---|---|" "${ROWS[@]}")
echo "$TABLE"
if [ -n "$DOC" ]; then
  python3 - "$DOC" "$TABLE" <<'PY'
import sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
start = "<!-- bench-window.sh: begin -->"
end = "<!-- bench-window.sh: end -->"
block = start + "\n" + table + "\n" + end
if start in text:
    head, rest = text.split(start, 1)
    text = head + block + rest.split(end, 1)[1]
else:
    text += "\n## Windows\n\nGenerated by `scripts/bench-window.sh` (issue 49; docs/user-guide.md, \"Big snapshots\").\n\n" + block + "\n"
open(path, "w").write(text)
PY
fi
