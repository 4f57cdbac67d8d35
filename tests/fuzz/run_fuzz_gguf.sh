#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer + ASan + UBSan. The instrumented gguf.cpp and mmap.cpp are
# linked ahead of a normal (uninstrumented) libwick.a for the rest of the library.
# Usage: tests/fuzz/run_fuzz_gguf.sh BUILD_DIR [RUNS]   (BUILD_DIR holds libwick.a; RUNS default 1000000)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build=${1:?usage: $0 BUILD_DIR [RUNS]}
runs=${2:-1000000}
out="$build/fuzz_gguf"
mkdir -p "$out/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/include" -I"$root/src" "$root/tests/fuzz/fuzz_gguf.cpp" "$root/src/io/gguf.cpp" "$root/src/io/mmap.cpp" \
  "$build/libwick.a" -lopenblas -lgomp -lpthread -o "$out/fuzz_gguf"
cp "$root"/tests/fixtures/gguf/*.gguf "$out/corpus/"
"$out/fuzz_gguf" -runs="$runs" -max_len=4096 -timeout=5 "$out/corpus"
