#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each on a corpus seeded from the
# emulator's test traces. docs/fuzzing.md describes the targets.
#
#   FUZZ_MODE=asan (default): build-asan/, ASan+UBSan with libFuzzer coverage,
#     the same build as test.sh's sanitizer stage (CI runs this mode with
#     FUZZ_SECONDS=30).
#   FUZZ_MODE=fast: build-fuzz/, UBSan only (no ASan), several times faster;
#     for long local runs. Builds only the targets and their seed tools.
#   FUZZ_SECONDS: time per target (default 600; no limit when only FUZZ_RUNS
#     is given).
#   FUZZ_RUNS: stop each target after this many executions (e.g. 10000000).
#   FUZZ_JOBS: targets run at the same time (default 1).
#   FUZZ_PROCESSES: processes per target on its one corpus (default 1); with
#     FUZZ_RUNS each runs its share, and the executions are summed.
#   FUZZ_BUILD_DIR: override the build directory.
# Corpora live in $BUILD/corpus/ and grow across runs; logs in
# $BUILD/fuzz-<target>.log. Usage: scripts/fuzz.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${FUZZ_MODE:-asan}
RUNS=${FUZZ_RUNS:-}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-}
if [ -z "$SECONDS_PER_TARGET" ] && [ -z "$RUNS" ]; then
  SECONDS_PER_TARGET=600
fi
JOBS=${FUZZ_JOBS:-1}
PROCESSES=${FUZZ_PROCESSES:-1}
fuzz_targets=(fuzz-bundle fuzz-fxt-writer fuzz-model fuzz-decoder fuzz-perf-data
  fuzz-qemu-code-log fuzz-bundle-history fuzz-perf-map fuzz-jitdump)
case "$MODE" in
asan)
  BUILD=${FUZZ_BUILD_DIR:-build-asan}
  # The same configuration as test.sh's sanitizer stage, so either reuses the
  # other's build: ASan+UBSan with libFuzzer coverage everywhere.
  BUILD_DIR="$BUILD" MT_SANITIZE=ON MT_FUZZ=ON ./scripts/build.sh >/dev/null
  ;;
fast)
  BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
  werror=OFF
  if [ -n "${CI:-}" ] || [ "${MT_WERROR:-}" = ON ]; then
    werror=ON
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DMT_WERROR="$werror" -DMT_SANITIZE=OFF -DMT_FUZZ=ON \
    -DMT_FUZZ_SANITIZERS=undefined >/dev/null
  cmake --build "$BUILD" --target "${fuzz_targets[@]}" magic-trace-emulate \
    magic-trace-perfdata emu_calls >/dev/null
  ;;
*)
  echo "error: FUZZ_MODE must be asan or fast, not '$MODE'" >&2
  exit 2
  ;;
esac

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(bundle fxt-writer model decoder perf-data qemu-code-log
    bundle-history perf-map jitdump)
fi

# Seeds: one emulated run of emu_calls gives PT bytes (decoder) and a bundle
# (trace.json + NUL + magic-trace.json for the bundle loader). Two more runs
# with a PSB every 256 bytes give the decoder buffers of several PSBs (the
# parallel pieces), one with every return a TIP, overflows and TSC timing.
seed_dir="$BUILD/seed-bundle"
emulate_seed() {
  local dir=$1
  shift
  if [ ! -f "$dir/trace.json" ]; then
    "$BUILD/bin/magic-trace-emulate" --engine ptrace --buffer-size 4096 "$@" -o "$dir" \
      -- "$BUILD/test/inputs/emu_calls" >/dev/null
  fi
}
emulate_seed "$seed_dir" --stop stop_here
emulate_seed "$BUILD/seed-psb256" --psb-period 256 --max-insns 3000
emulate_seed "$BUILD/seed-psb256-ovf" --psb-period 256 --max-insns 3000 \
  --noretcomp --inject-overflow-every 500 --timer-resolution low
mkdir -p "$BUILD/corpus/decoder" "$BUILD/corpus/bundle" \
  "$BUILD/corpus/model" "$BUILD/corpus/fxt-writer" "$BUILD/corpus/perf-data"
for dir in "$seed_dir" "$BUILD/seed-psb256" "$BUILD/seed-psb256-ovf"; do
  for trace in "$dir"/threads/*.intelpt_trace; do
    if [ -f "$trace" ]; then
      cp "$trace" "$BUILD/corpus/decoder/$(basename "$dir")"
    fi
  done
done
{ cat "$seed_dir/trace.json"; printf '\0'; cat "$seed_dir/magic-trace.json"; } \
  > "$BUILD/corpus/bundle/seed-emu-calls"
# The perf.data reader: the seed bundle written as perf.data.
"$BUILD/bin/magic-trace-perfdata" "$seed_dir" \
  -o "$BUILD/corpus/perf-data/seed-emu-calls"

# The code-history targets start from seeds of real recordings, committed in
# test/fuzz/corpus/<target>/ (test/fuzz/make_seeds.py: emu_jit, LuaJIT and
# node under the QEMU recorder, node --perf-prof's jitdump and perf map).
# Inputs that once crashed a target (test/fuzz/regressions/<target>/, also
# run by the unit tests) join its corpus.
for seeds in test/fuzz/corpus/*/ test/fuzz/regressions/*/; do
  target=$(basename "$seeds")
  mkdir -p "$BUILD/corpus/$target"
  cp -n "$seeds"* "$BUILD/corpus/$target/" 2>/dev/null || true
done

# Largest input per target: a few KiB of PT reach every decoder path (the
# seeds are 160-700 bytes with 1-3 PSBs), the
# model's item stream is at most 255 items of 5 bytes plus the stop, the FXT
# writer pads long names itself, and the bundle seed is 8 KiB of JSON.
max_len() {
  case "$1" in
  decoder) echo 4096 ;;
  model) echo 2048 ;;
  fxt-writer) echo 4096 ;;
  bundle) echo 16384 ;;
  perf-data) echo 8192 ;;
  # A code log with its code.bin (the LuaJIT seed's is 77 KiB), a bundle's
  # extras with code.bin, a perf map, a jitdump (node's first records).
  qemu-code-log) echo 131072 ;;
  bundle-history) echo 65536 ;;
  perf-map) echo 16384 ;;
  jitdump) echo 65536 ;;
  *) echo 4096 ;;
  esac
}

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1
# fuzz_process TARGET LOG RUNS: one libFuzzer process on the target's corpus.
fuzz_process() {
  local target=$1 log=$2 runs=$3
  local limits=()
  [ -n "$SECONDS_PER_TARGET" ] && limits+=(-max_total_time="$SECONDS_PER_TARGET")
  [ -n "$runs" ] && limits+=(-runs="$runs")
  "$BUILD/bin/fuzz-$target" "${limits[@]}" -max_len="$(max_len "$target")" \
    -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$BUILD/crash-$target-" \
    "$BUILD/corpus/$target" >"$log" 2>&1
}

run_target() {
  local target=$1
  local log="$BUILD/fuzz-$target.log"
  local share=$RUNS
  if [ -n "$RUNS" ] && [ "$PROCESSES" -gt 1 ]; then
    share=$(((RUNS + PROCESSES - 1) / PROCESSES))
  fi
  local what="${SECONDS_PER_TARGET:+-max_total_time=$SECONDS_PER_TARGET }${RUNS:+-runs=$RUNS}"
  if [ "$PROCESSES" -gt 1 ]; then
    what+=" in $PROCESSES processes"
  fi
  echo "fuzz-$target ($MODE): $what"
  local logs=() pids=() status=0 i
  for ((i = 1; i <= PROCESSES; i++)); do
    if [ "$PROCESSES" -gt 1 ]; then
      log="$BUILD/fuzz-$target.$i.log"
    fi
    logs+=("$log")
    fuzz_process "$target" "$log" "$share" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      tail -30 "${logs[$i]}"
      status=1
    fi
  done
  if [ "$status" != 0 ]; then
    echo "error: fuzz-$target found a failure (reproduce: $BUILD/bin/fuzz-$target $BUILD/crash-$target-*)" >&2
    return 1
  fi
  local runs=0 rates="" done_line="" one
  for log in "${logs[@]}"; do
    one=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    runs=$((runs + one))
    rates+="${rates:+ + }$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')/s"
    done_line=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 || true)
  done
  echo "fuzz-$target: $runs executions ($rates; $done_line), no failure"
}

failed=0
running=0
for target in "${targets[@]}"; do
  if [ "$JOBS" -le 1 ]; then
    run_target "$target" || exit 1
    continue
  fi
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
