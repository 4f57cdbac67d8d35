#!/usr/bin/env bash
# llama.cpp's own GGUF reader (ggml's gguf.cpp, what llama.cpp loads models with) reads a file
# written by wick's save_gguf: same metadata (keys, types, values), alignment, tensor names,
# types, shapes and bytes. Not part of ctest: it needs llama.cpp's source (the kit's tarball,
# ../shared/anchors/llamacpp/README.md), whose ggml-base it builds once (about a minute).
# Usage: scripts/check_gguf_with_ggml.sh WICK_BUILD_DIR [WORK_DIR]
#   WICK_BUILD_DIR holds gguf_roundtrip_writer; WORK_DIR (default /tmp/wick-ggml-check) keeps the
#   llama.cpp source and build between runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build=${1:?usage: $0 WICK_BUILD_DIR [WORK_DIR]}
work=${2:-/tmp/wick-ggml-check}
mkdir -p "$work"
if [ ! -f "$work/lcpp/ggml/src/libggml-base.a" ]; then
  [ -d "$work/llama.cpp" ] || tar xzf "$root/.llamacpp/llama.cpp-src.tgz" -C "$work"
  cmake -S "$work/llama.cpp" -B "$work/lcpp" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  ninja -j1 -C "$work/lcpp" ggml-base >/dev/null
fi
g++ -std=c++17 -O1 -I"$work/llama.cpp/ggml/include" "$root/tests/ggml_gguf_check.cpp" \
  "$work/lcpp/ggml/src/libggml-base.a" -fopenmp -lpthread -lm -o "$work/ggml_gguf_check"
# ggml refuses nested arrays (gguf-py and wick read them): the file for ggml leaves them out.
"$build/gguf_roundtrip_writer" "$work/wick.gguf" "$work/wick.json" --no-nested
"$work/ggml_gguf_check" "$work/wick.gguf" "$work/wick.json"
