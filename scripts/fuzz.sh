#!/usr/bin/env bash
# Builds the libFuzzer targets (build-asan/, ASan+UBSan) and runs each for
# FUZZ_SECONDS (default 600) on a corpus seeded from the emulator's test
# traces. CI runs it with FUZZ_SECONDS=30. Corpora live in $BUILD/corpus/
# and grow across runs. Usage: scripts/fuzz.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${FUZZ_SECONDS:-600}
BUILD=${FUZZ_BUILD_DIR:-build-asan}
# The same configuration as test.sh's sanitizer stage, so either reuses the
# other's build: ASan+UBSan with libFuzzer coverage everywhere.
BUILD_DIR="$BUILD" MT_SANITIZE=ON MT_FUZZ=ON ./scripts/build.sh >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(bundle fxt-writer model decoder)
fi

# Seeds: one emulated run of emu_calls gives PT bytes (decoder) and a bundle
# (trace.json + NUL + magic-trace.json for the bundle loader).
seed_dir="$BUILD/seed-bundle"
if [ ! -f "$seed_dir/trace.json" ]; then
  "$BUILD/bin/magic-trace-emulate" --stop stop_here --buffer-size 4096 \
    -o "$seed_dir" -- "$BUILD/test/inputs/emu_calls" >/dev/null
fi
mkdir -p "$BUILD/corpus/decoder" "$BUILD/corpus/bundle" \
  "$BUILD/corpus/model" "$BUILD/corpus/fxt-writer"
cp "$seed_dir"/threads/*.intelpt_trace "$BUILD/corpus/decoder/" 2>/dev/null || true
{ cat "$seed_dir/trace.json"; printf '\0'; cat "$seed_dir/magic-trace.json"; } \
  > "$BUILD/corpus/bundle/seed-emu-calls"

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
for target in "${targets[@]}"; do
  log="$BUILD/fuzz-$target.log"
  echo "fuzz-$target: ${SECONDS_PER_TARGET}s"
  if ! "$BUILD/bin/fuzz-$target" -max_total_time="$SECONDS_PER_TARGET" \
      -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
      -artifact_prefix="$BUILD/crash-$target-" \
      "$BUILD/corpus/$target" >"$log" 2>&1; then
    tail -30 "$log"
    echo "error: fuzz-$target found a failure (reproduce: $BUILD/bin/fuzz-$target $BUILD/crash-$target-*)" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz-$target: $runs executions, no failure"
done
