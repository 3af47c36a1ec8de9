#!/usr/bin/env bash
# Configures (once) and builds magic-trace into build/ with clang-22 and Ninja.
# Environment: BUILD_DIR (default build), BUILD_TYPE (default RelWithDebInfo),
# MT_SANITIZE=ON for an ASan+UBSan build, MT_FUZZ=ON to add the libFuzzer
# targets (implies ASan+UBSan). Warnings are errors when CI is set.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
WERROR=OFF
if [ -n "${CI:-}" ] || [ "${MT_WERROR:-}" = ON ]; then
  WERROR=ON
fi

cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DMT_WERROR="$WERROR" -DMT_SANITIZE="${MT_SANITIZE:-OFF}" \
  -DMT_FUZZ="${MT_FUZZ:-OFF}" >/dev/null
cmake --build "$BUILD_DIR"
