#!/usr/bin/env bash
# Sets up, builds, and runs the main job: load the plugin into lldb-22 and ask
# what this machine offers for tracing.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh >/dev/null
lldb-22 --no-lldbinit -b \
  -o "plugin load $PWD/${BUILD_DIR:-build}/lib/libmagic-trace-lldb.so" \
  -o 'magic-trace doctor'
