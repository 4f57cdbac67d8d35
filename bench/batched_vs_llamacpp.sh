#!/usr/bin/env bash
# wick's batched engine beside llama.cpp's llama-batched-bench on the same GGUF, in one run: both tables, then
# S_PP and S_TG side by side with their ratio.
#
# usage: bash bench/batched_vs_llamacpp.sh LLAMA_BIN MODEL.gguf [gpu|cpu]
#   LLAMA_BIN  a llama.cpp build's bin folder holding llama-batched-bench (../shared/anchors/llamacpp/README.md)
#   NPP (default 512), NTG (128), NPL (1,8,32,64 on a GPU; 1,2,4 on the CPU); THREADS for the CPU (default nproc);
#   WICK=path to the wick binary (default build/wick)
# llama-batched-bench runs with -fa 1 -b 2048 -ub 512 and a context of B_max * (NPP + NTG) tokens (-ngl 99 on a GPU,
# -ngl 0 -t THREADS on the CPU); wick bench-batch with the same -npp/-ntg/-npl (every prompt in one step).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
llama_bin=${1:?usage: $0 LLAMA_BIN MODEL.gguf [gpu|cpu]}
model=${2:?usage: $0 LLAMA_BIN MODEL.gguf [gpu|cpu]}
where=${3:-gpu}
wick=${WICK:-$here/build/wick}
npp=${NPP:-512} ntg=${NTG:-128}
if [ "$where" = cpu ]; then npl=${NPL:-1,2,4}; else npl=${NPL:-1,8,32,64}; fi
threads=${THREADS:-$(nproc)}
lbb="$llama_bin/llama-batched-bench"
[ -x "$lbb" ] || { echo "batched_vs_llamacpp: no llama-batched-bench in $llama_bin" >&2; exit 2; }
[ -x "$wick" ] || { echo "batched_vs_llamacpp: no $wick (ninja -C build wick)" >&2; exit 2; }
bmax=$(echo "$npl" | tr , '\n' | sort -n | tail -1)
ctx=$(( bmax * (npp + ntg) + 256 ))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$where" = cpu ]; then
  dev=(--device cpu); lflags=(-ngl 0 -t "$threads")
else
  dev=(--device cuda:0); lflags=(-ngl 99)
fi
echo "$(date -u +%Y-%m-%d), $(basename "$model"), $where$( [ "$where" = cpu ] && echo " ($threads threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))" || nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/ (/;s/$/)/')"
echo
echo "llama-batched-bench -m MODEL ${lflags[*]} -fa 1 -c $ctx -b 2048 -ub 512 -npp $npp -ntg $ntg -npl $npl"
"$lbb" -m "$model" "${lflags[@]}" -fa 1 -c "$ctx" -b 2048 -ub 512 -npp "$npp" -ntg "$ntg" -npl "$npl" > "$tmp/llama.txt" 2>&1
grep -E '^\|' "$tmp/llama.txt" || { tail -5 "$tmp/llama.txt"; exit 1; }
echo
echo "wick bench-batch MODEL ${dev[*]} -npp $npp -ntg $ntg -npl $npl"
"$wick" bench-batch "$model" "${dev[@]}" -npp "$npp" -ntg "$ntg" -npl "$npl" > "$tmp/wick.txt" 2> "$tmp/wick.err"
grep -E '^\|' "$tmp/wick.txt" || { tail -5 "$tmp/wick.err"; exit 1; }
grep -E '^wick ' "$tmp/wick.txt"
echo
python3 - "$tmp/llama.txt" "$tmp/wick.txt" <<'PY'
import sys
def rows(path):
    out = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        if len(c) >= 10 and c[0].isdigit():
            out[(int(c[0]), int(c[1]), int(c[2]))] = (float(c[5]), float(c[7]))
    return out
l, w = rows(sys.argv[1]), rows(sys.argv[2])
print("| PP | TG | B | llama.cpp S_PP | wick S_PP | ratio | llama.cpp S_TG | wick S_TG | ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for k in sorted(set(l) & set(w)):
    (lp, lt), (wp, wt) = l[k], w[k]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {lp:.1f} | {wp:.1f} | {wp/lp:.2f} | {lt:.1f} | {wt:.1f} | {wt/lt:.2f} |")
PY
