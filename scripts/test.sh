#!/usr/bin/env bash
# Sets up, builds, and runs every test (unit tests and the lit suite, via ctest).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
./scripts/check-format.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
