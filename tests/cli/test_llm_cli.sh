#!/usr/bin/env bash
# `wick run`, `wick perplexity` and `wick bench-llm` on the tiny fixture models (tests/fixtures/llm): text on stdout,
# exit 0; bad inputs exit non-zero with a message naming the problem, never a crash.
# Usage: bash tests/cli/test_llm_cli.sh path/to/wick
set -u
wick="${1:?usage: test_llm_cli.sh path/to/wick}"
here="$(cd "$(dirname "$0")" && pwd)"
fx="$here/../fixtures/llm"
out="$(mktemp)"
err="$(mktemp)"
tmpd="$(mktemp -d)"
trap 'rm -f "$out" "$err"; rm -rf "$tmpd"' EXIT
fails=0
runs=0

source "$here/expect.sh"  # expect CODE SUBSTRING -- ARGS...; stdout in $out, stderr in $err

gguf="$fx/llama2/model-f16.gguf"

# generation: text on stdout, the stats line on stderr
expect 0 "" -- run "$gguf" -p "The licence grants" -n 8 --device cpu --temp 0
[ -s "$out" ] || { echo "FAIL: wick run printed no text"; fails=$((fails + 1)); }
grep -q "generated 8 tok" "$err" || { echo "FAIL: no stats line:"; cat "$err"; fails=$((fails + 1)); }
grep -q "loading" "$err" || { echo "FAIL: no load progress:"; cat "$err"; fails=$((fails + 1)); }

# --json: one object whose ids are transformers' greedy tokens for the fixture prompt
expect 0 '"stop_reason":"max_tokens"' -- run "$gguf" -p "The licence grants you the right to copy, modify and distribute the Work in 2026." -n 8 --device cpu --temp 0 --ignore-eos --cache-dtype f32 --json
if command -v python3 >/dev/null && [ -s "$out" ]; then
  python3 - "$out" "$fx/llama2/expected.json" <<'EOF' || fails=$((fails + 1))
import json, sys
got = json.load(open(sys.argv[1]))
ex = json.load(open(sys.argv[2]))
ok = got["ids"] == ex["greedy_ids"][:8] and got["prompt_ids"] == ex["prompt_ids"] and len(got["ids"]) == 8
for k in ("text", "timings", "memory"):
    ok = ok and k in got
if not ok:
    print("FAIL: wick run --json:", got["prompt_ids"], got["ids"], "want", ex["prompt_ids"], ex["greedy_ids"][:8])
    sys.exit(1)
EOF
fi

# the default device (the first GPU where there is one): the memory report (peak on a GPU)
expect 0 "memory: " -- run "$gguf" -p "The licence grants" -n 8
if "$wick" info | grep -q "^devices:.*\(cuda\|rocm\)"; then
  grep -q "peak " "$err" || { echo "FAIL: no peak memory on the GPU:"; cat "$err"; fails=$((fails + 1)); }
fi

# the same seed gives the same text
"$wick" run "$gguf" -p "Hello" -n 12 --seed 5 --temp 1 --device cpu >"$tmpd/a" 2>/dev/null
"$wick" run "$gguf" -p "Hello" -n 12 --seed 5 --temp 1 --device cpu >"$tmpd/b" 2>/dev/null
runs=$((runs + 1))
cmp -s "$tmpd/a" "$tmpd/b" || { echo "FAIL: --seed 5 twice gave different text"; fails=$((fails + 1)); }

# --chat on a model without a template: a warning, still text
expect 0 "plain 'role: content' prompt" -- run "$gguf" -p "Hi" --chat --system "Be brief" -n 4 --device cpu

# perplexity: PPL and its error
expect 0 "PPL = " -- perplexity "$gguf" "$fx/apache-2.0.txt" --ctx 128 --device cpu
grep -q "+/-" "$out" || { echo "FAIL: perplexity prints no error estimate"; fails=$((fails + 1)); }
expect 0 '"ppl"' -- perplexity "$gguf" "$fx/apache-2.0.txt" --ctx 64 --device cpu --json

# bad inputs: exit non-zero, a message, no crash
expect 2 "nosuch.gguf" -- run "$tmpd/nosuch.gguf" -p hi
expect 2 "--prompt" -- run "$gguf"
expect 2 "--temp" -- run "$gguf" -p hi --temp abc
expect 2 "--top-p" -- run "$gguf" -p hi --top-p 2
expect 2 "--dtype" -- run "$gguf" -p hi --dtype q4
expect 2 "--chat" -- run "$gguf" -p hi --system "s"
expect 2 "--ctx" -- run "$gguf" -p hi --ctx 0
expect 2 "--device" -- run "$gguf" -p hi --device nodev:0
expect 2 "FILE" -- perplexity "$gguf"
expect 2 "--ctx" -- perplexity "$gguf" "$fx/apache-2.0.txt" --ctx 2
printf 'not a gguf file at all' >"$tmpd/bad.gguf"
expect 1 "" -- run "$tmpd/bad.gguf" -p hi --device cpu
printf 'too short' >"$tmpd/short.txt"
expect 1 "at least" -- perplexity "$gguf" "$tmpd/short.txt" --ctx 128 --device cpu
expect 1 "context" -- run "$gguf" -p "The licence grants you the right to copy" -n 4 --ctx 3 --device cpu

# bench-llm: llama-bench's table (one row per test), --json rows, bad inputs exit 2 naming the option
q4="$fx/llama2/model-q4_0.gguf"
expect 0 "| model" -- bench-llm "$q4" -p 16 -n 8 -r 2 --device cpu
for t in pp16 tg8; do
  grep -q "^| model-q4_0.gguf .*| *$t | .* ± " "$out" || { echo "FAIL: bench-llm: no $t row:"; cat "$out"; fails=$((fails + 1)); }
done
[ "$(grep -c '^| model-q4_0' "$out")" = 2 ] || { echo "FAIL: bench-llm: not 2 rows:"; cat "$out"; fails=$((fails + 1)); }
grep -q "loading" "$err" || { echo "FAIL: bench-llm: no load progress:"; cat "$err"; fails=$((fails + 1)); }
expect 0 "" -- bench-llm "$q4" -p 8,16 -n 4 -d 0,32 -r 2 --device cpu --json
if command -v python3 >/dev/null && [ -s "$out" ]; then
  python3 - "$out" <<'EOF' || fails=$((fails + 1))
import json, sys
rows = json.load(open(sys.argv[1]))
want = ["pp8", "pp16", "tg4", "pp8 @ d32", "pp16 @ d32", "tg4 @ d32"]  # llama-bench's order
ok = [r["test"] for r in rows] == want
for r in rows:
    ok = ok and r["avg_ts"] > 0 and r["stddev_ts"] >= 0 and len(r["samples_ts"]) == 2 and r["device"] == "cpu"
    ok = ok and r["model_size"] == 849920 and r["model_n_params"] == 1443072  # llama-bench's numbers for this file
    n = r["n_prompt"] + r["n_gen"]
    ok = ok and all(abs(ts - 1e9 * n / ns) <= 1e-6 * ts for ts, ns in zip(r["samples_ts"], r["samples_ns"]))
if not ok:
    print("FAIL: wick bench-llm --json:", json.dumps(rows)[:2000])
    sys.exit(1)
EOF
fi
expect 0 "tg4 @ d520" -- bench-llm "$q4" -p 0 -n 4 -d 520 -r 1 --device cpu --no-ctx-check
expect 2 "--n-depth" -- bench-llm "$q4" -p 0 -n 8 -d 510 --device cpu
grep -q "context length of 512" "$err" || { echo "FAIL: bench-llm: no context message:"; cat "$err"; fails=$((fails + 1)); }
expect 2 "--bogus" -- bench-llm "$q4" --bogus
expect 2 "--n-gen" -- bench-llm "$q4" -n -1
expect 2 "--n-gen" -- bench-llm "$q4" -p 0 -n 0
expect 2 "--n-prompt" -- bench-llm "$q4" -p 16,x
expect 2 "--repetitions" -- bench-llm "$q4" -r 0
expect 2 "nosuch.gguf" -- bench-llm "$tmpd/nosuch.gguf"

echo "$((runs - fails)) of $runs wick run/perplexity/bench-llm checks passed"
[ "$fails" = 0 ]
