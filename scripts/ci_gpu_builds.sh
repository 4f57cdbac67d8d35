#!/usr/bin/env bash
# CI for the GPU builds, on a machine without a GPU: compile and link everything (library,
# tests, tools) with warnings as errors
#  1. for ROCm inside the Debian roots of rocm_root.sh: forky (HIP 6.4, clang 21) for gfx90a;gfx942;
#     gfx1030;gfx1100;gfx1200;gfx1201 with ctest there (CPU tests pass, GPU suites skip: no device),
#     and trixie (ROCm 5.7) for gfx90a;gfx942;gfx1030;gfx1100, as WICK_CI_ROCM_SUITES says
#     (default: trixie); in each the built `wick info` must exit 0, list no ROCm device and say why;
#  2. for CUDA (80;90) with /usr/local/cuda/bin/nvcc, skipped (saying why) when it is missing.
# Usage: bash scripts/ci_gpu_builds.sh   Environment: WICK_CI_ROCM_SUITES ("trixie", "forky trixie"),
#   WICK_CI_ROCM_BUILD (build dir prefix inside the roots, default /tmp/wick-ci-rocm),
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

# One ROCm build inside a Debian root (rocm_root.sh): configure, build everything, check that
# `wick info` says no ROCm device is reachable, and (ctest=1) run ctest there: the CPU tests pass,
# the GPU suites skip for want of a device.
rocm_build_in() {  # suite targets ctest
  local suite="$1" targets="$2" run_ctest="$3" root build="$rocm_build-$1"
  root="$(WICK_ROCM_SUITE=$suite bash scripts/rocm_root.sh | tail -n 1)"
  reuse_or_clear "$root$build" /src/wick
  # A clean environment inside the root: nothing of the host's compilers or cache settings.
  # /proc is mounted for the build: hipconfig reads /proc/self/exe.
  in_root() { $sudo chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
  mountpoint -q "$root/proc" || $sudo mount -t proc proc "$root/proc"
  trap '$sudo umount "$root/proc" 2>/dev/null || true' RETURN

  echo "== ROCm ($suite) build in $root:$build for $targets (-j$jobs)"
  local t0=$SECONDS
  # shellcheck disable=SC2016  # $1..$3 expand inside the root
  in_root bash -c 'set -e; cd /src/wick
    cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWICK_GPU=rocm -DWICK_GPU_TARGETS="$2" -DWICK_WERROR=ON
    cmake --build "$1" -j"$3"' _ "$build" "$targets" "$jobs"
  echo "== ROCm ($suite) build took $((SECONDS - t0)) s"

  # No AMD GPU is reachable here: `wick info` must say so by listing no rocm device, and exit 0.
  local info rc
  set +e
  info="$(in_root "$build/wick" info 2>&1)"
  rc=$?
  set -e
  echo "$info"
  if [ $rc -ne 0 ]; then
    echo "FAIL: wick info (ROCm $suite build) exited with $rc"
    exit 1
  fi
  if ! grep -Eq '^backends built:.* rocm( |$)' <<<"$info"; then
    echo "FAIL: wick info (ROCm $suite build) does not list the rocm backend"
    exit 1
  fi
  if grep -Eq '^devices:.* rocm:[0-9]' <<<"$info"; then
    echo "FAIL: wick info lists a ROCm device where none should be reachable"
    exit 1
  fi
  if ! grep -Eq '^rocm: no usable device' <<<"$info"; then
    echo "FAIL: wick info (ROCm $suite build) has no 'rocm: no usable device: <reason>' line"
    exit 1
  fi
  echo "== wick info (ROCm $suite build): exit 0, no ROCm device"
  if [ "$run_ctest" = 1 ]; then
    t0=$SECONDS
    in_root bash -c 'cd /src/wick && ctest --test-dir "$1" -j"$2" --output-on-failure --timeout 600' _ "$build" "$jobs" \
      > "/tmp/wick-ci-rocm-$suite-ctest.log" 2>&1 || { tail -n 60 "/tmp/wick-ci-rocm-$suite-ctest.log"; echo "FAIL: ctest in the ROCm ($suite) build"; exit 1; }
    tail -n 3 "/tmp/wick-ci-rocm-$suite-ctest.log"
    echo "== ctest (ROCm $suite build, no device: GPU suites skipped) took $((SECONDS - t0)) s"
  fi
}

# WICK_CI_ROCM_SUITES picks the roots: forky (Debian testing: HIP 6.4, clang 21) builds every
# target, RDNA4 included, and runs ctest there; trixie (Debian 13's ROCm 5.7, what stable users
# have) builds the four targets it knows.
for suite in ${WICK_CI_ROCM_SUITES:-trixie}; do
  case "$suite" in
    forky) rocm_build_in forky "gfx90a;gfx942;gfx1030;gfx1100;gfx1200;gfx1201" 1 ;;
    trixie) rocm_build_in trixie "gfx90a;gfx942;gfx1030;gfx1100" 0 ;;
    *) echo "FAIL: WICK_CI_ROCM_SUITES names '$suite' (forky or trixie)"; exit 1 ;;
  esac
done

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
