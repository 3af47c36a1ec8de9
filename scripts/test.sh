#!/usr/bin/env bash
# Sets up, builds, and runs every test:
#   1. the normal build (build/): unit tests, lit suite, benchmark smoke runs;
#   2. an ASan+UBSan build (build-asan/, with libFuzzer coverage so stage 3
#      reuses it): unit tests and the lit suite of the core and its tools (the
#      plugin's lit tests need LLDB itself to load an instrumented library, so
#      they run in stage 1 only);
#   3. the libFuzzer targets for FUZZ_SECONDS each (default 30; see
#      scripts/fuzz.sh for longer runs).
# MT_QUICK=1 runs stage 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/check-format.sh
./scripts/build.sh
echo "== stage 1: tests of the normal build"
ctest --test-dir build --output-on-failure -j "$(nproc)"

if [ "${MT_QUICK:-0}" = 1 ]; then
  exit 0
fi

echo "== stage 2: ASan+UBSan build"
BUILD_DIR=build-asan MT_SANITIZE=ON MT_FUZZ=ON ./scripts/build.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Benchmarks are not run instrumented: their smoke runs are for stage 1.
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -E '^bench-'

echo "== stage 3: fuzzing, ${FUZZ_SECONDS:-30}s per target"
FUZZ_BUILD_DIR=build-asan FUZZ_SECONDS=${FUZZ_SECONDS:-30} ./scripts/fuzz.sh
