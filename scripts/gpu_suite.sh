#!/usr/bin/env bash
# The GPU suite, for a machine with an NVIDIA GPU (CUDA toolkit, cmake, ninja, GoogleTest,
# OpenBLAS, nlohmann-json installed): build with -DWICK_GPU=cuda, run ctest (CPU and GPU
# suites), `wick check --device cuda:0`, then compute-sanitizer memcheck (with leak check)
# on the GPU tests and on the parity check for one dtype. Logs go to $LOG_DIR (default
# build-gpu/logs). Usage: bash scripts/gpu_suite.sh [TARGETS]   (default 90)
# WICK_SKIP_SANITIZER=1 leaves the (slow) memcheck steps out, e.g. for a benchmarking run.
# WICK_GPU_EMULATE=cdna|rdna builds AMD's device paths for the NVIDIA GPU (docs/gpu.md: 64-lane waves on
# warp pairs, AMD tuning and portable paths) in build-gpu-<mode>, and adds a racecheck step.
set -uo pipefail
cd "$(dirname "$0")/.."
targets="${1:-90}"
emulate="${WICK_GPU_EMULATE:-off}"
if [ "$emulate" = off ]; then build="${WICK_BUILD_DIR:-build-gpu}"; else build="${WICK_BUILD_DIR:-build-gpu-$emulate}"; fi
logs="${LOG_DIR:-$build/logs}"
mkdir -p "$logs"
status=0
step() {  # step NAME SECONDS CMD...: runs with a time limit, logs, prints the closing lines
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
  tail -n 4 "$logs/$name.log"
  [ $rc -eq 0 ] || status=1
  return $rc
}
step configure 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWICK_GPU=cuda \
  -DWICK_GPU_TARGETS="$targets" -DWICK_GPU_EMULATE="$emulate" -DWICK_WERROR=ON || exit 1
step build 420 cmake --build "$build" -j"$(nproc)" || { grep -m 20 -E "error" "$logs/build.log"; exit 1; }
step info 30 "$build/wick" info
step ctest 300 ctest --test-dir "$build" --output-on-failure -j8 --timeout 240
step check_gpu 240 "$build/wick" check --device cuda:0
grep -m 40 '^FAIL' "$logs/check_gpu.log"
if [ "${WICK_SKIP_SANITIZER:-0}" = 1 ]; then
  echo "== compute-sanitizer steps skipped (WICK_SKIP_SANITIZER=1)"
elif command -v compute-sanitizer > /dev/null; then
  step sanitize_tests 240 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
    "$build/test_gpu" --gtest_filter=-GpuLarge.*:GpuMemory.OutOfMemoryIsAnError  # that one provokes OOM on purpose
  step sanitize_check 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
    "$build/wick" check --device cuda:0 --dtype f32
  # Shared-memory races: the emulated wave64 exchanges are where they would hide.
  step racecheck_tests 240 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 \
    "$build/test_gpu" --gtest_filter=-GpuLarge.*:GpuMemory.OutOfMemoryIsAnError
  step racecheck_wave 120 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 \
    "$build/test_gpu_wave"
  step racecheck_check 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 \
    "$build/wick" check --device cuda:0 --dtype f32
else
  echo "compute-sanitizer not found: memcheck not run"; status=1
fi
exit $status
