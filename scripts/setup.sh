#!/usr/bin/env bash
# Installs what magic-trace needs from Debian's registry, only what is missing.
# Quiet when everything is present. Never downloads anything else.
set -euo pipefail

PACKAGES=(
  clang-22 lldb-22 liblldb-22-dev python3-lldb-22 llvm-22-dev llvm-22-tools binutils
  libclang-rt-22-dev clang-format-22 libipt-dev cmake ninja-build
  libgtest-dev libbenchmark-dev python3 zlib1g-dev libzstd-dev
  libc6-dbg libstdc++6-12-dbg qemu-user linux-perf sqlite3 gzip lld-22
  gdb pybind11-dev python3-dev luajit
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
