#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build folder.
# Any report fails the run: UBSan does not recover (-fno-sanitize-recover), ASan stops at the
# first error, LeakSanitizer runs at exit.
# Usage: bash scripts/ci_sanitize.sh            (build folder: build-asan, or $WICK_ASAN_DIR)
#        WICK_ASAN_JOBS=N                        parallel build/test jobs (default: nproc)
#        WICK_ASAN_CHECK="--dtype f32"           filters for the `wick check --device cpu` run
#                                                (default: all cases; they take ~10 s under ASan)
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
build="${WICK_ASAN_DIR:-build-asan}"
jobs="${WICK_ASAN_JOBS:-$(nproc)}"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 keeps the instrumented suite fast enough and the stack traces exact; -g1 gives file:line.
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DWICK_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs"
echo "== asan build: $((SECONDS - t0)) s"

# libgomp and OpenBLAS are not instrumented. That gives no ASan false positives (only
# instrumented code is checked) and no UBSan ones; the risk is LeakSanitizer at exit, where
# their thread pools still hold memory: none is reported today (reachable through globals).
# scripts/sanitize.supp takes LSan suppressions, each with its reason; it is empty, keep it so.
supp="$PWD/scripts/sanitize.supp"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:report_error_type=1"
# OpenBLAS would start one thread per core in every test binary while ctest runs them in
# parallel; single-threaded BLAS keeps the run fast. wick's own OpenMP loops keep their threads.
export OPENBLAS_NUM_THREADS=1

# Measured on 2 dedicated cores (taskset, g++ 13, no ccache), on the tree of issue 7:
# build 245 s, GoogleTest suites 129 s, full `wick check --device cpu` 9 s: 383 s in all.
t1=$SECONDS
# The GoogleTest suites (every test_* binary), then the parity harness as its own step so that
# its time is reported separately. WICK_ASAN_CHECK narrows the harness when time is short.
ctest --test-dir "$build" --output-on-failure -j"$jobs" -E '^wick_check_cpu$'
echo "== asan gtest suites: $((SECONDS - t1)) s"
t2=$SECONDS
# shellcheck disable=SC2086
"$build/wick" check --device cpu ${WICK_ASAN_CHECK:-}
echo "== asan wick check --device cpu ${WICK_ASAN_CHECK:-}: $((SECONDS - t2)) s"
echo "== asan total: $((SECONDS - t0)) s"
