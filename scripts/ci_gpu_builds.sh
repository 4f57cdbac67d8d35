#!/usr/bin/env bash
# CI for the GPU builds, on a machine without a GPU: compile and link everything (library,
# tests, tools) with warnings as errors
#  1. for ROCm (gfx90a;gfx942;gfx1030;gfx1100) inside the Debian 13 root of rocm_root.sh, where
#     the built `wick info` must exit 0, list no ROCm device and say why;
#  2. for CUDA (80;90) with /usr/local/cuda/bin/nvcc, skipped (saying why) when it is missing.
# Usage: bash scripts/ci_gpu_builds.sh   Environment: WICK_ROCM_ROOT (see rocm_root.sh),
#   WICK_CI_ROCM_BUILD (build dir inside the root, default /tmp/wick-ci-rocm),
#   WICK_CI_CUDA_BUILD (default /tmp/wick-ci-cuda). Needs root for chroot (sudo otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
rocm_build="${WICK_CI_ROCM_BUILD:-/tmp/wick-ci-rocm}"
cuda_build="${WICK_CI_CUDA_BUILD:-/tmp/wick-ci-cuda}"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

# A build folder configured from another checkout (an earlier run's clone) is emptied first:
# CMake refuses to reuse a cache made for a different source directory.
reuse_or_clear() {  # build-dir source-dir
  local cache="$1/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$2" "$cache"; then
    echo "== $1 was configured for another source tree; starting it afresh"
    $sudo rm -rf "$1"
  fi
}

root="$(bash scripts/rocm_root.sh | tail -n 1)"
reuse_or_clear "$root$rocm_build" /src/wick
# A clean environment inside the root: nothing of the host's compilers or cache settings.
in_root() { $sudo chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

echo "== ROCm build in $root:$rocm_build (-j$jobs)"
t0=$SECONDS
# shellcheck disable=SC2016  # $1..$3 expand inside the root
in_root bash -c 'set -e; cd /src/wick
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWICK_GPU=rocm -DWICK_GPU_TARGETS="$2" -DWICK_WERROR=ON
  cmake --build "$1" -j"$3"' _ "$rocm_build" "gfx90a;gfx942;gfx1030;gfx1100" "$jobs"
echo "== ROCm build took $((SECONDS - t0)) s"

# No AMD GPU is reachable here: `wick info` must say so by listing no rocm device, and exit 0.
set +e
info="$(in_root "$rocm_build/wick" info 2>&1)"
rc=$?
set -e
echo "$info"
if [ $rc -ne 0 ]; then
  echo "FAIL: wick info (ROCm build) exited with $rc"
  exit 1
fi
if ! grep -Eq '^backends built:.* rocm( |$)' <<<"$info"; then
  echo "FAIL: wick info (ROCm build) does not list the rocm backend"
  exit 1
fi
if grep -Eq '^devices:.* rocm:[0-9]' <<<"$info"; then
  echo "FAIL: wick info lists a ROCm device where none should be reachable"
  exit 1
fi
if ! grep -Eq '^rocm: no usable device' <<<"$info"; then
  echo "FAIL: wick info (ROCm build) has no 'rocm: no usable device: <reason>' line"
  exit 1
fi
echo "== wick info (ROCm build): exit 0, no ROCm device"

nvcc=/usr/local/cuda/bin/nvcc
if [ -x "$nvcc" ]; then
  echo "== CUDA build in $cuda_build (-j$jobs)"
  t0=$SECONDS
  reuse_or_clear "$cuda_build" "$(pwd -P)"
  cmake -S . -B "$cuda_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWICK_GPU=cuda -DWICK_GPU_TARGETS="80;90" \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DWICK_WERROR=ON
  cmake --build "$cuda_build" -j"$jobs"
  echo "== CUDA build took $((SECONDS - t0)) s"
else
  echo "== CUDA build skipped: $nvcc not found (install CUDA 13 there; the CI image has it)"
fi
echo "== GPU builds OK"
