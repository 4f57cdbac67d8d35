#!/usr/bin/env bash
# Installs what wick needs from Debian's packages and builds it (Release) into build/.
# Usage: bash scripts/setup.sh [extra cmake args]   (WICK_BUILD_DIR overrides build/)
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(cmake ninja-build g++ libopenblas-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libgtest-dev python3 python3-numpy)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
build="${WICK_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j"$(nproc)"
