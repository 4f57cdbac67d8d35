#!/usr/bin/env bash
# wick's tokenizer beside llama.cpp's llama-tokenize on the same vocabulary files and texts: speed at 10 KB,
# 1 MB and 10 MB of the license text (tests/fixtures/llm/apache-2.0.txt repeated), and the ids themselves on
# those texts and on hostile ones (invalid UTF-8, NULs, 100,000 repeats of one character).
#
# usage: bash bench/tokenize_vs_llamacpp.sh LLAMA_BIN [VOCAB.gguf ...]
#   LLAMA_BIN  a llama.cpp build's bin folder holding llama-tokenize (a CPU build is enough:
#              ../shared/anchors/llamacpp/README.md)
#   VOCAB      default: tests/fixtures/vocab/*.gguf
#   BENCH=path to bench_tokenize (default build/bench_tokenize); REPS (default 3)
# Prints one markdown table: vocab, text, bytes, llama.cpp MB/s, wick MB/s, wick / llama.cpp, same ids.
# llama-tokenize's MB/s is bytes over (its best wall time - its best wall time on a 1-byte file), so the
# vocabulary load and process start are taken out; it prints the ids to /dev/null. wick's is bench_tokenize's
# in-process wall time (best of REPS). Both add BOS/EOS as the vocabulary says and parse no special tokens.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
llama_bin=${1:?usage: $0 LLAMA_BIN [VOCAB.gguf ...]}
shift
vocabs=("$@")
[ ${#vocabs[@]} -gt 0 ] || vocabs=("$here"/tests/fixtures/vocab/*.gguf)
bench=${BENCH:-$here/build/bench_tokenize}
reps=${REPS:-3}
lt="$llama_bin/llama-tokenize"
[ -x "$lt" ] || { echo "tokenize_vs_llamacpp: no llama-tokenize in $llama_bin" >&2; exit 2; }
[ -x "$bench" ] || { echo "tokenize_vs_llamacpp: no $bench (ninja -C build bench_tokenize)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$here/tests/fixtures/llm/apache-2.0.txt" "$tmp" <<'PY'
import sys
lic = open(sys.argv[1], 'rb').read()
out = sys.argv[2]
for name, n in (("license-10k", 10_000), ("license-1m", 1_000_000), ("license-10m", 10_000_000)):
    open(f"{out}/{name}", 'wb').write((lic * (n // len(lic) + 1))[:n])
hostile = {
    "invalid-utf8": b"a\xffb \xe4\xb8 x\xc3( \xed\xa0\x80 \xc0\xaf \xf8\x88\x80\x80\x80 end\x80",
    "past-10ffff": b"x \xf4\x90\x80\x80 y",
    "nul-bytes": b"one\x00two \x00\x00 three",
    "repeat-a": b"a" * 100_000,
    "repeat-space": b" " * 100_000,
    "repeat-emoji": "\U0001F999".encode() * 25_000,
}
for k, v in hostile.items():
    open(f"{out}/{k}", 'wb').write(v)
open(f"{out}/one-byte", 'wb').write(b"a")
PY
best_wall() {  # best wall seconds of REPS runs of the command
  local best=""
  for _ in $(seq "$reps"); do
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    best=$(python3 -c "import sys; a=float(sys.argv[1]); b=sys.argv[2]; print(a if b == '' or a < float(b) else b)" \
      "$(python3 -c "print($t1 - $t0)")" "$best")
  done
  echo "$best"
}
echo "llama-tokenize: $("$lt" --version 2>&1 | grep -m1 -i version); wick: $("$here"/build/wick info 2>/dev/null | head -1)"
echo "$(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| vocab | text | bytes | llama.cpp MB/s | wick MB/s | wick / llama.cpp | same ids |"
echo "|---|---|---:|---:|---:|---:|---|"
for v in "${vocabs[@]}"; do
  vn=$(basename "$v" .gguf)
  base=$(best_wall "$lt" -m "$v" -f "$tmp/one-byte" --ids --no-escape --log-disable)
  for t in license-10k license-1m license-10m invalid-utf8 past-10ffff nul-bytes repeat-a repeat-space repeat-emoji; do
    f="$tmp/$t"
    bytes=$(stat -c %s "$f")
    "$lt" -m "$v" -f "$f" --ids --no-escape --log-disable > "$tmp/llama.out" 2>&1
    lrc=$?
    grep '^\[' "$tmp/llama.out" > "$tmp/llama.ids"
    "$bench" "$v" --file "$f" --reps "$reps" --bos --ids "$tmp/wick.ids" > "$tmp/wick.txt" 2>&1
    if [ "$lrc" != 0 ]; then
      echo "| $vn | $t | $(stat -c %s "$f") | llama-tokenize fails (exit $lrc: $(grep -m1 -o 'what(): .*' "$tmp/llama.out")) | $(awk -v t="$t" '$1 == t {print $5}' "$tmp/wick.txt") | - | - |"
      continue
    fi
    same=$(cmp -s "$tmp/llama.ids" "$tmp/wick.ids" && echo yes || echo "NO ($(python3 -c "
import ast,sys; a=ast.literal_eval(open(sys.argv[1]).read() or '[]'); b=ast.literal_eval(open(sys.argv[2]).read() or '[]')
k=next((i for i,(x,y) in enumerate(zip(a,b)) if x!=y), min(len(a),len(b)))
print(f'{len(a)} vs {len(b)} ids, first difference at {k}: llama {a[k:k+3]} wick {b[k:k+3]}')" "$tmp/llama.ids" "$tmp/wick.ids"))")
    wall=$(best_wall "$lt" -m "$v" -f "$f" --ids --no-escape --log-disable)
    lmbs=$(python3 -c "d=$wall-$base; print(f'{$bytes/d/1e6:.2f}' if d > 0.05 else '-')")
    wmbs=$(awk -v t="$(basename "$f")" '$1 == t {print $5}' "$tmp/wick.txt")
    ratio=$(python3 -c "print(f'{float(\"$wmbs\")/float(\"$lmbs\"):.2f}' if '$lmbs' not in ('-','','0.00') and '$wmbs' != '' else '-')")
    echo "| $vn | $t | $bytes | $lmbs | $wmbs | $ratio | $same |"
  done
done
