#!/usr/bin/env bash
# Fuzzes the GGUF reader (and the writer, by writing back what parses) with libFuzzer + ASan +
# UBSan (Debian's clang). gguf.cpp, mmap.cpp and the QTensor validation (core/quant.cpp) are
# compiled instrumented and linked ahead of a normal (uninstrumented) libwick.a for the rest.
# Results of the runs so far: tests/fuzz/RESULTS.md.
# Usage: tests/fuzz/run_fuzz_gguf.sh BUILD_DIR [RUNS] [OUT_DIR]
#   BUILD_DIR holds libwick.a (any Release build); RUNS default 1000000; OUT_DIR default
#   BUILD_DIR/fuzz_gguf (binary, corpus, crash-* artifacts, fuzz.log).
# Seeds: tests/fixtures/gguf/*.gguf, written by tests/fixtures/gen_gguf.py with gguf-py (every
# metadata value type, nested arrays, F32/F16 and every block type gguf-py decodes).
# One thread (OMP_NUM_THREADS=1) and one fuzzing process, so the machine keeps its other core.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build=${1:?usage: $0 BUILD_DIR [RUNS] [OUT_DIR]}
runs=${2:-1000000}
out=${3:-$build/fuzz_gguf}
cxx=${CLANGXX:-clang++}
mkdir -p "$out/corpus"
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/include" -I"$root/src" "$root/tests/fuzz/fuzz_gguf.cpp" "$root/src/io/gguf.cpp" "$root/src/io/mmap.cpp" \
  "$root/src/core/quant.cpp" "$build/libwick.a" -lopenblas -lgomp -lpthread -o "$out/fuzz_gguf"
cp "$root"/tests/fixtures/gguf/*.gguf "$out/corpus/"
OMP_NUM_THREADS=1 "$out/fuzz_gguf" -runs="$runs" -max_len=4096 -timeout=5 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" 2>&1 | tee "$out/fuzz.log"
