#!/usr/bin/env bash
# CI for the GPU builds, on a machine without a GPU: compile and link everything (library,
# tests, tools) with warnings as errors
#  1. for ROCm inside the Debian roots of rocm_root.sh, as WICK_CI_ROCM_SUITES says (default: both):
#     forky (Debian testing: HIP 6.4, clang 21) for gfx942;gfx1030;gfx1100 with
#     ctest there (CPU tests pass, GPU suites skip: no device); trixie (Debian 13's ROCm 5.7, what
#     stable users have) for WICK_CI_TRIXIE_TARGETS (default gfx90a;gfx942;gfx1030;gfx1100). In each
#     the built `wick info` must exit 0, list no ROCm device and say why. Each ROCm build prints
#     hip-clang's kernel resource remarks (-DWICK_AMD_RESOURCE_REMARKS=ON) into its log, and
#     scripts/amd_resource_usage.sh --log turns them into the per-target table: any kernel with
#     scratch on any target fails CI (after the check's self-test, which includes a real kernel with
#     scratch that must fail it);
#  2. for CUDA with /usr/local/cuda/bin/nvcc (skipped, saying why, when it is missing), as
#     WICK_CI_CUDA_BUILDS says (default "native emulate-cdna"): native for WICK_CI_CUDA_TARGETS (90),
#     and AMD's device paths for the NVIDIA GPU (-DWICK_GPU_EMULATE=cdna) for the same targets.
# Usage: bash scripts/ci_gpu_builds.sh   Environment: WICK_CI_ROCM_SUITES ("forky trixie", "forky",
#   "" for none), WICK_CI_FORKY_TARGETS (forky's targets; gfx1200 is the other RDNA4 target),
#   WICK_CI_TRIXIE_TARGETS (trixie's targets), WICK_CI_TRIXIE_BUILD (the CMake targets
#   trixie builds, e.g. wick_cli: the library's kernels and the tool; default all), WICK_CI_ROCM_BUILD
#   (build dir prefix inside the roots, default /tmp/wick-ci-rocm),
#   WICK_CI_CUDA_BUILDS ("native emulate-cdna emulate-rdna", "" for none), WICK_CI_CUDA_TARGETS (90),
#   WICK_CI_CUDA_BUILD (prefix, default /tmp/wick-ci-cuda), WICK_CI_LOGS (build logs, default
#   /tmp/wick-ci-logs). Needs root for chroot (sudo otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
rocm_build="${WICK_CI_ROCM_BUILD:-/tmp/wick-ci-rocm}"
cuda_build="${WICK_CI_CUDA_BUILD:-/tmp/wick-ci-cuda}"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

# rm -rf crosses mount points, bind mounts of the checkout included (rocm_root.sh mounts it in
# each root): refuse a path that is a mount point or holds one.
remove_tree() {  # dir
  local p
  p="$(realpath -m "$1")"
  if findmnt -rn -o TARGET | awk -v p="$p" '$0 == p || index($0, p "/") == 1 { found = 1 } END { exit !found }'; then
    echo "FAIL: $p is or holds a mount point; not removing it (unmount first: bash scripts/rocm_root.sh --unmount)"
    exit 1
  fi
  $sudo rm -rf "$p"
}

# A build folder configured from another checkout (an earlier run's clone) is emptied first:
# CMake refuses to reuse a cache made for a different source directory.
reuse_or_clear() {  # build-dir source-dir
  local cache="$1/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$2" "$cache"; then
    echo "== $1 was configured for another source tree; starting it afresh"
    remove_tree "$1"
  fi
}

# The root a ROCm build is using, left on return or exit: /proc and the checkout's bind mount
# unmounted, so nothing of the checkout stays reachable through the root.
in_use_root="" in_use_suite=""
leave_root() {
  [ -n "$in_use_root" ] || return 0
  $sudo umount "$in_use_root/proc" 2>/dev/null || true
  WICK_ROCM_SUITE="$in_use_suite" WICK_ROCM_ROOT="$in_use_root" bash scripts/rocm_root.sh --unmount || true
  in_use_root="" in_use_suite=""
}
trap leave_root EXIT

# A build's output goes to a log (the ROCm remarks are ~10^5 lines); on failure this prints what
# failed, without the remarks (each remark line and the source lines clang quotes under it).
show_failure() {  # log
  echo "---- from the first failed step of $1 (remarks left out):"
  sed -n '/^FAILED:/,$p' "$1" | awk '/-Rpass-analysis=kernel-resource-usage\]$/ { skip = 2; next }
    skip > 0 && /^ *[0-9]* *\| / { skip--; next } { skip = 0; print }' | head -n 150
  echo "---- last lines of $1:"
  tail -n 20 "$1"
}

# One ROCm build inside a Debian root (rocm_root.sh): configure, build everything with the kernel
# resource remarks on, check that no kernel uses scratch on any target, check that `wick info` says
# no ROCm device is reachable, and (ctest=1) run ctest there: the CPU tests pass, the GPU suites
# skip for want of a device.
rocm_build_in() {  # suite targets ctest [cmake build targets: all when empty]
  local suite="$1" targets="$2" run_ctest="$3" only="${4:-}" root build="$rocm_build-$1" log="$logs/rocm-$1-build.log"
  root="$(WICK_ROCM_SUITE=$suite bash scripts/rocm_root.sh | tail -n 1)"
  in_use_root="$root" in_use_suite="$suite"
  trap leave_root RETURN
  reuse_or_clear "$root$build" /src/wick
  # A clean environment inside the root: nothing of the host's compilers or cache settings. The
  # checkout at /src/wick is read-only: the build and its ctest write under $build (/tmp).
  # /proc is mounted for the build: hipconfig reads /proc/self/exe.
  in_root() { $sudo chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
  mountpoint -q "$root/proc" || $sudo mount -t proc proc "$root/proc"

  echo "== ROCm ($suite) build in $root:$build for $targets${only:+ (targets: $only)} (-j$jobs), output in $log"
  local t0=$SECONDS
  # shellcheck disable=SC2016  # $1..$4 expand inside the root
  in_root bash -c 'set -e; cd /src/wick
    cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWICK_GPU=rocm -DWICK_GPU_TARGETS="$2" -DWICK_WERROR=ON \
      -DWICK_AMD_RESOURCE_REMARKS=ON
    cmake --build "$1" -j"$3" ${4:+--target $4}' _ "$build" "$targets" "$jobs" "$only" >"$log" 2>&1 ||
    { show_failure "$log"; echo "FAIL: ROCm ($suite) build"; exit 1; }
  echo "== ROCm ($suite) build took $((SECONDS - t0)) s"

  # Scratch: first the check's own self-test, with the remarks of a real compile of a kernel whose
  # dynamically indexed local array must live in scratch (it must fail the check), then the build's.
  t0=$SECONDS
  local hipcc first="${targets%%;*}"
  hipcc="$(sed -n 's/^set(CMAKE_HIP_COMPILER "\(.*\)")$/\1/p' "$root$build"/CMakeFiles/*/CMakeHIPCompiler.cmake | head -n 1)"
  [ -n "$hipcc" ] || { echo "FAIL: no CMAKE_HIP_COMPILER in $root$build/CMakeFiles/*/CMakeHIPCompiler.cmake"; exit 1; }
  cat >"$root/tmp/wick-ci-scratch.hip" <<'HIP'
#include <hip/hip_runtime.h>
__global__ void __launch_bounds__(256) needs_scratch(float* p, int k) {
  float a[512];
  for (int i = 0; i < 512; ++i) a[i] = p[i * 7 + threadIdx.x];
  p[threadIdx.x] = a[k & 511] + a[(k * 3) & 511];
}
HIP
  in_root "$hipcc" -x hip --offload-arch="$first" --cuda-device-only -O2 -Rpass-analysis=kernel-resource-usage \
    -include "$build/wick_remarks_target.h" -c /tmp/wick-ci-scratch.hip -o /dev/null \
    >"$logs/rocm-$suite-scratch-selftest.log" 2>&1 ||
    { cat "$logs/rocm-$suite-scratch-selftest.log"; echo "FAIL: the scratch self-test kernel did not compile"; exit 1; }
  bash scripts/amd_resource_usage.sh --self-test "$logs/rocm-$suite-scratch-selftest.log" >"$logs/rocm-$suite-selftest.out" 2>&1 ||
    { cat "$logs/rocm-$suite-selftest.out"; echo "FAIL: the scratch check's self-test (ROCm $suite)"; exit 1; }
  grep '^self-test' "$logs/rocm-$suite-selftest.out"
  local rc=0
  # shellcheck disable=SC2086  # the targets, one argument each
  bash scripts/amd_resource_usage.sh --log "$log" ${targets//;/ } | tee "$logs/rocm-$suite-resources.md" || rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -eq 1 ] && echo "FAIL: some AMD kernel uses scratch (ROCm $suite, table above); every kernel must keep to registers"
    [ $rc -ne 1 ] && echo "FAIL: the scratch check could not read the ROCm ($suite) build's remarks"
    exit 1
  fi
  echo "== scratch check (ROCm $suite) took $((SECONDS - t0)) s"

  # No AMD GPU is reachable here: `wick info` must say so by listing no rocm device, and exit 0.
  local info
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
    local clog="$logs/rocm-$suite-ctest.log"
    # shellcheck disable=SC2016  # $1, $2 expand inside the root
    in_root bash -c 'cd /src/wick && ctest --test-dir "$1" -j"$2" --output-on-failure --timeout 600' _ "$build" "$jobs" \
      >"$clog" 2>&1 || { tail -n 60 "$clog"; echo "FAIL: ctest in the ROCm ($suite) build"; exit 1; }
    grep -E '^[0-9]+% tests passed' "$clog" || true
    echo "   $(grep -c '(Skipped)' "$clog") skipped (GPU suites: no device), $(grep -c '(Disabled)' "$clog") disabled"
    echo "== ctest (ROCm $suite build, no device: GPU suites skipped) took $((SECONDS - t0)) s"
  fi
}

# One CUDA build (no GPU here: compile and link only). ccache, where there is one, serves the
# tests and tools of the second build from the first (they do not see the emulation's definitions).
cuda_build_one() {  # name cmake-args...
  local name="$1" dir="$cuda_build-$1" log="$logs/cuda-$1-build.log"
  shift
  echo "== CUDA ($name) build in $dir for $cuda_targets (-j$jobs), output in $log"
  local t0=$SECONDS
  reuse_or_clear "$dir" "$(pwd -P)"
  { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWICK_GPU=cuda -DWICK_GPU_TARGETS="$cuda_targets" \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DWICK_WERROR=ON "${launcher[@]}" "$@" &&
    cmake --build "$dir" -j"$jobs"; } >"$log" 2>&1 || { show_failure "$log"; echo "FAIL: CUDA ($name) build"; exit 1; }
  grep -m 1 'wick: GPU backend' "$log" || true
  echo "== CUDA ($name) build took $((SECONDS - t0)) s"
}

logs="${WICK_CI_LOGS:-/tmp/wick-ci-logs}"
mkdir -p "$logs"

# WICK_CI_ROCM_SUITES picks the roots: forky (Debian testing: HIP 6.4, clang 21) builds its three
# targets, or those WICK_CI_FORKY_TARGETS names, and runs ctest there; trixie (Debian 13's ROCm 5.7,
# what stable users have) builds the four targets it knows, or those WICK_CI_TRIXIE_TARGETS names.
# forky's three are one target per device-code path of src/ops/capabilities.hpp: gfx942 (64-lane
# waves, sdot4), gfx1030 (32 lanes, sdot4), gfx1100 (32 lanes, sudot4; gfx12 takes the same paths).
# gfx90a, the 64-lane target where the older compiler spills first, is trixie's; gfx1201 and gfx90a
# are not in forky's default list, to keep CI's time (both compile there with no scratch). .ci/run
# calls this once per build, in its priority order.
for suite in ${WICK_CI_ROCM_SUITES-forky trixie}; do
  case "$suite" in
    forky) rocm_build_in forky "${WICK_CI_FORKY_TARGETS:-gfx942;gfx1030;gfx1100}" 1 ;;
    trixie)
      rocm_build_in trixie "${WICK_CI_TRIXIE_TARGETS:-gfx90a;gfx942;gfx1030;gfx1100}" 0 "${WICK_CI_TRIXIE_BUILD:-}" ;;
    *) echo "FAIL: WICK_CI_ROCM_SUITES names '$suite' (forky or trixie)"; exit 1 ;;
  esac
done

nvcc=/usr/local/cuda/bin/nvcc
cuda_targets="${WICK_CI_CUDA_TARGETS:-90}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
builds="${WICK_CI_CUDA_BUILDS-native emulate-cdna}"
if [ -z "$builds" ]; then
  :
elif [ -x "$nvcc" ]; then
  for b in $builds; do
    case "$b" in
      native) cuda_build_one native ;;
      emulate-cdna|emulate-rdna) cuda_build_one "$b" -DWICK_GPU_EMULATE="${b#emulate-}" ;;
      *) echo "FAIL: WICK_CI_CUDA_BUILDS names '$b' (native, emulate-cdna or emulate-rdna)"; exit 1 ;;
    esac
  done
else
  echo "== CUDA builds skipped: $nvcc not found (install CUDA 13 there; the CI image has it)"
fi
echo "== GPU builds OK"
