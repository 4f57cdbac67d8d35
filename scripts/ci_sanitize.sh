#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build folder.
# Any report fails the run: UBSan does not recover (-fno-sanitize-recover), ASan stops at the
# first error, LeakSanitizer runs at exit.
# Usage: bash scripts/ci_sanitize.sh            (build folder: build-asan, or $WICK_ASAN_DIR)
#        WICK_ASAN_JOBS=N                        parallel build/test jobs (default: nproc)
#        WICK_ASAN_CHECK="--dtype f32"           filters for the `wick check --device cpu` run
#                                                (default: all cases; see below)
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

# ASan: libgomp and OpenBLAS are not instrumented; they are not a source of false positives
# for ASan itself (it only checks instrumented code), but their worker threads are alive at
# exit, so leak checking stays on and nothing of theirs is suppressed unless it is reported
# (scripts/sanitize.supp holds the LSan suppressions, each with its reason).
# detect_odr_violation=0 is not needed (one static library); container overflow checks are on.
supp="$PWD/scripts/sanitize.supp"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:report_error_type=1"
# OpenBLAS spawns one thread per core on first use; under ASan each thread's shadow stack costs
# memory and time while the test binaries run in parallel, so BLAS runs single-threaded here
# (wick's own OpenMP loops keep their threads: those are what ASan/TSan should see).
export OPENBLAS_NUM_THREADS=1

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
