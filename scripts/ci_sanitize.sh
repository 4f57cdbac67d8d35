#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build folder.
# Any report fails the run: UBSan does not recover (-fno-sanitize-recover), ASan stops at the
# first error, LeakSanitizer runs at exit.
# Usage: bash scripts/ci_sanitize.sh            (build folder: build-asan, or $WICK_ASAN_DIR)
#        WICK_ASAN_JOBS=N                        parallel build/test jobs (default: nproc)
#        WICK_ASAN_CHECK="--dtype f32"           filters for the `wick check --device cpu` run
#                                                (default: all cases; ~90 s at -O0 under ASan)
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
build="${WICK_ASAN_DIR:-build-asan}"
jobs="${WICK_ASAN_JOBS:-$(nproc)}"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O0: the compiles (UBSan doubles them) take ~2.5x less than at -O1 (elementwise.cpp 53 s against 134 s)
# and every check stays; the suite, one process per binary, runs fast enough. -g1 gives file:line.
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1" -DCMAKE_CXX_FLAGS="$san" \
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
# parallel; single-threaded BLAS keeps the run fast. wick's own thread pool keeps its threads.
export OPENBLAS_NUM_THREADS=1

# -O0 and one process per test binary keep this step short: on a 2-core machine (g++ 12, no ccache)
# the build took 440 s at -O0 (928 s at -O1), the suites one process per binary 194 s (ctest's one
# process per case, at -O1: ~330 s for half of them), `wick check --device cpu` 86 s.
t1=$SECONDS
# The GoogleTest suites: each test_* binary runs once with all its cases, not as ctest's one process
# per case (an instrumented process takes ~1 s to start, which was most of this step's test time);
# then through ctest the tests that are not GoogleTest cases (names without a dot: the command-line
# scripts, the gguf-py round trip); the parity harness is its own step, so that its time shows.
# VocabSpeed (a tokenizer's 100 KB within a second: a guard against quadratic time) is left to the
# Release suite: instrumented at -O0 it takes ~2 s.
find "$(realpath "$build")" -maxdepth 1 -type f -executable -name 'test_*' -print0 | sort -z |
  xargs -0 -P"$jobs" -I{} sh -c 'cd "${1%/*}" && "$1" --gtest_filter=-VocabSpeed.* >"$1.log" 2>&1 || { tail -n 60 "$1.log"; echo "FAIL: $1 (log: $1.log)"; exit 1; }' _ {}
echo "   $(cat "$build"/test_*.log | grep -c '^\[       OK \]') cases passed, $(cat "$build"/test_*.log | grep -c '^\[  SKIPPED \]') skipped, in $(ls "$build"/test_*.log | wc -l) suites"
ctest --test-dir "$build" --output-on-failure -j"$jobs" -E '[.]|^wick_check_cpu$'
echo "== asan gtest suites: $((SECONDS - t1)) s"
t2=$SECONDS
# shellcheck disable=SC2086
"$build/wick" check --device cpu ${WICK_ASAN_CHECK:-}
echo "== asan wick check --device cpu ${WICK_ASAN_CHECK:-}: $((SECONDS - t2)) s"
echo "== asan total: $((SECONDS - t0)) s"
