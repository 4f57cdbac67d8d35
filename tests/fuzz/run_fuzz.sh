#!/usr/bin/env bash
# Fuzzes one of the LLM layer's input paths with libFuzzer + ASan + UBSan (Debian's clang): the LLM
# sources (src/llm) and the readers they call (src/io, src/core/quant.cpp) are compiled instrumented
# and linked ahead of a normal libwick.a for the rest. Results: tests/fuzz/RESULTS.md.
# Usage: tests/fuzz/run_fuzz.sh TARGET BUILD_DIR [RUNS] [OUT_DIR]
#   TARGET: model_gguf | tokenizer_json | tokenizer_gguf | config_json | safetensors
#   BUILD_DIR holds libwick.a (any Release build); RUNS default 1000000; OUT_DIR default
#   BUILD_DIR/fuzz (objects shared by the targets; per target: binary, corpus, crash-* artifacts, log).
#   MAX_TIME=S stops after S seconds instead (CI's short run).
# Seeds: the repository's own files of that kind (tests/fixtures: GGUFs, tokenizer.json, config.json,
# safetensors). One fuzzing process, so the machine keeps its other core.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target=${1:?usage: $0 TARGET BUILD_DIR [RUNS] [OUT_DIR]}
build=${2:?usage: $0 TARGET BUILD_DIR [RUNS] [OUT_DIR]}
runs=${3:-1000000}
out=${4:-$build/fuzz}
cxx=${CLANGXX:-clang++}
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/src" -I"$root/src/llm")
case "$target" in
  model_gguf | tokenizer_gguf) seeds=("$root"/tests/fixtures/llm/*/model*.gguf "$root"/tests/fixtures/vocab/*.gguf) ;;
  tokenizer_json) seeds=("$root"/tests/fixtures/llm/*/tokenizer.json) ;;
  config_json) seeds=("$root"/tests/fixtures/llm/*/config.json "$root"/tests/fixtures/llm/*/*/config.json) ;;
  safetensors) seeds=("$root"/tests/fixtures/llm/*/*.safetensors "$root"/tests/fixtures/llm/*/*/*.safetensors "$root"/tests/fixtures/io/*.safetensors) ;;
  *) echo "run_fuzz.sh: unknown target '$target' (model_gguf, tokenizer_json, tokenizer_gguf, config_json, safetensors)" >&2
     exit 2 ;;
esac
[ -f "$root/tests/fuzz/fuzz_$target.cpp" ] || { echo "run_fuzz.sh: no tests/fuzz/fuzz_$target.cpp" >&2; exit 2; }
mkdir -p "$out/obj" "$out/$target/corpus"
# The instrumented objects, built once for every target (make-style: a source newer than its object is rebuilt).
objs=() stale=()
for src in "$root"/src/llm/*.cpp "$root"/src/llm/models/*.cpp "$root"/src/io/gguf.cpp "$root"/src/io/mmap.cpp \
           "$root"/src/io/safetensors.cpp "$root"/src/core/quant.cpp; do
  o="$out/obj/$(echo "${src#$root/}" | tr / _).o"
  [ "$o" -nt "$src" ] || stale+=("$o" "$src")
  objs+=("$o")
done
# One compile per core.
[ ${#stale[@]} -eq 0 ] || printf '%s\0' "${stale[@]}" |
  xargs -0 -n 2 -P "$(nproc)" sh -c '"$0" "$@"' "$cxx" "${flags[@]}" -c -o
"$cxx" "${flags[@]}" -fsanitize=fuzzer "$root/tests/fuzz/fuzz_$target.cpp" "${objs[@]}" "$build/libwick.a" \
  -lpcre2-8 -lopenblas -lpthread -o "$out/$target/fuzz_$target"
for s in "${seeds[@]}"; do
  # Seeds above libFuzzer's -max_len would be cut; the big GGUFs are left to the small ones.
  [ -f "$s" ] && [ "$(stat -c %s "$s")" -le 262144 ] || continue
  seed="$out/$target/corpus/seed-$(echo "${s#$root/}" | tr / _)"
  if [ "$target" = tokenizer_json ]; then  # the input's first line is the text to tokenize
    { printf 'Hello world, 123 h\xc3\xa9llo <s> \xe4\xb8\x80!\n'; cat "$s"; } >"$seed"
  else
    cp "$s" "$seed"
  fi
done
limit=(-runs="$runs")
[ -n "${MAX_TIME:-}" ] && limit=(-max_total_time="$MAX_TIME")
OMP_NUM_THREADS=1 "$out/$target/fuzz_$target" "${limit[@]}" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$out/$target/" "$out/$target/corpus" 2>&1 | tee "$out/$target/fuzz.log"
