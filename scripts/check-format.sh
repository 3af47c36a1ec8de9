#!/usr/bin/env bash
# Fails when a C/C++ file of the project is not clang-format clean.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.cpp' '*.h' 2>/dev/null || true)
if [ -z "$files" ]; then
  exit 0
fi
# shellcheck disable=SC2086
if ! clang-format-22 --dry-run --Werror $files; then
  echo "error: files above are not clang-format clean (run: clang-format-22 -i <file>)" >&2
  exit 1
fi
