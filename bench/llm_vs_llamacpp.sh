#!/usr/bin/env bash
# wick bench-llm beside llama.cpp's llama-bench, on the same GGUF files in the same run.
#
# usage: bash bench/llm_vs_llamacpp.sh [options] [LLAMA_BIN [MODELS [WICK]]]
#   LLAMA_BIN  the llama.cpp build's bin folder, holding llama-bench (default /tmp/lcpp/build/bin)
#   MODELS     a folder of .gguf files; every one is run (default /tmp/lcpp, where
#              ../shared/anchors/llamacpp/device.sh writes m-1b-*.gguf and m-7b-*.gguf)
#   WICK       the wick binary (default build/wick beside this script's repository)
# options:
#   --pp N          prefill test length (default 512)
#   --tg N          decode test length (default 128)
#   --depth N       also tgN with N tokens in the KV cache, llama-bench's `-p 0 -n TG -d N`
#                   (default 8192; 0: no such rows)
#   --reps R        timed runs per test, both sides (default 5)
#   --bw B          copy bandwidth in bytes/s for the tg rows' share of the weight-bandwidth limit
#                   (default 4.2e12, torch dst.copy_(src) of 1 GiB on an H200, bench/results/);
#                   `wick`: measure it now with `wick bench --suite torch --op copy_f32_256M`;
#                   `torch`: measure it now with PyTorch (1 GiB device-to-device copy)
#   --device D      wick's device (default: wick's, the first GPU)
#   --llama-args S  llama-bench's options (default "-ngl 99 -fa 1"; "-ngl 0 -t 2" on a CPU)
#   --wick-args S   more options for wick bench-llm (e.g. "--dtype f16")
#   --only SUBSTR   only the GGUF files whose name contains SUBSTR
#   --out DIR       keep every raw JSON and log there (default: a temporary folder, printed)
# Prints one markdown table on stdout: model, size, test, llama.cpp t/s, wick t/s, wick/llama.cpp, and
# for tg rows the share of the weight-bandwidth limit, t/s x model bytes / copy bandwidth, of each.
# t/s is each tool's mean over --reps runs (llama-bench's avg_ts; wick's avg_ts, measured the same
# way). Needs bash and python3 (standard library only; --bw torch needs torch).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pp=512 tg=128 depth=8192 reps=5 bw=4.2e12 device="" llama_args="-ngl 99 -fa 1" wick_args="" only="" out=""
pos=()
die() { echo "llm_vs_llamacpp.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --pp | --tg | --depth | --reps | --bw | --device | --llama-args | --wick-args | --only | --out)
      [ $# -ge 2 ] || die "$1 needs a value"
      v="$2"
      case "$1" in
        --pp) pp="$v" ;; --tg) tg="$v" ;; --depth) depth="$v" ;; --reps) reps="$v" ;; --bw) bw="$v" ;;
        --device) device="$v" ;; --llama-args) llama_args="$v" ;; --wick-args) wick_args="$v" ;;
        --only) only="$v" ;; --out) out="$v" ;;
      esac
      shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) pos+=("$1"); shift ;;
  esac
done
[ ${#pos[@]} -le 3 ] || die "at most 3 arguments: LLAMA_BIN MODELS WICK (see --help)"
llama_bin="${pos[0]:-/tmp/lcpp/build/bin}"
models="${pos[1]:-/tmp/lcpp}"
wick="${pos[2]:-$here/../build/wick}"
for n in "$pp" "$tg" "$reps"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--pp, --tg and --reps take integers > 0, not '$n'"; done
[[ "$depth" =~ ^[0-9]+$ ]] || die "--depth takes an integer >= 0, not '$depth'"
[ -x "$llama_bin/llama-bench" ] || die "no llama-bench in '$llama_bin' (build it: ../shared/anchors/llamacpp/device.sh)"
[ -x "$wick" ] || die "no wick binary at '$wick' (build it: cmake --build build --target wick_cli)"
[ -d "$models" ] || die "no folder '$models'"
ggufs=()
while IFS= read -r f; do
  case "$(basename "$f")" in *"$only"*) ggufs+=("$f") ;; esac
done < <(find "$models" -maxdepth 1 -name '*.gguf' | sort)
# shellcheck disable=SC2016  # the quotes are literal text in the message; $only expands
[ ${#ggufs[@]} -gt 0 ] || die "no .gguf file in '$models'${only:+ matching '$only'}"
command -v python3 >/dev/null || die "python3 is needed for the table"
case "$bw" in
  wick | torch) ;;
  *) python3 -c 'import sys; v = float(sys.argv[1]); sys.exit(0 if v > 0 else 1)' "$bw" 2>/dev/null ||
       die "--bw takes bytes/s (e.g. 4.2e12), wick or torch, not '$bw'" ;;
esac
if [ -z "$out" ]; then out="$(mktemp -d /tmp/llm_vs_llamacpp.XXXXXX)"; fi
mkdir -p "$out" || die "cannot make '$out'"
wick_dev=(); [ -n "$device" ] && wick_dev=(--device "$device")

# The copy bandwidth, as given or measured now.
bw_how="given (--bw)"
case "$bw" in
  wick)
    "$wick" bench --suite torch --op copy_f32_256M --json "${wick_dev[@]}" >"$out/copy_wick.json" 2>"$out/copy_wick.err" ||
      die "wick bench --suite torch --op copy_f32_256M failed: $(tail -3 "$out/copy_wick.err")"
    bw="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["value"] * 1e9)' "$out/copy_wick.json")" ||
      die "no copy bandwidth in $out/copy_wick.json"
    bw_how="measured now: wick bench --suite torch --op copy_f32_256M (x.copy() of 1 GiB, bytes read + written)" ;;
  torch)
    bw="$(python3 - <<'EOF' 2>"$out/copy_torch.err"
import time, torch
n = (1 << 30) // 4
src = torch.randn(n, device="cuda"); dst = torch.empty_like(src)
for _ in range(3): dst.copy_(src)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(20): dst.copy_(src)
torch.cuda.synchronize()
print(2 * 4 * n * 20 / (time.perf_counter() - t))
EOF
)" || die "the torch copy failed: $(tail -3 "$out/copy_torch.err")"
    bw_how="measured now: torch dst.copy_(src) of 1 GiB on cuda, bytes read + written" ;;
esac

# Each file: llama-bench, then wick, for pp+tg and then for tg at depth.
runs=("pp$pp+tg$tg:-p $pp -n $tg")
[ "$depth" -gt 0 ] && runs+=("d$depth:-p 0 -n $tg -d $depth")
tags=""
for r in "${runs[@]}"; do tags+="${r%%:*} "; done
read -r -a largs <<<"$llama_args"
read -r -a wargs <<<"$wick_args"
for f in "${ggufs[@]}"; do
  b="$(basename "$f" .gguf)"
  for r in "${runs[@]}"; do
    tag="${r%%:*}"
    read -r -a targs <<<"${r#*:}"
    echo "llm_vs_llamacpp: $b $tag: llama-bench ..." >&2
    "$llama_bin/llama-bench" -m "$f" "${largs[@]}" "${targs[@]}" -r "$reps" -o json \
      >"$out/$b.$tag.llamacpp.json" 2>"$out/$b.$tag.llamacpp.err" ||
      echo "llm_vs_llamacpp: llama-bench failed on $b ($tag): $(tail -2 "$out/$b.$tag.llamacpp.err")" >&2
    echo "llm_vs_llamacpp: $b $tag: wick bench-llm ..." >&2
    # wick checks depth + N against the file's context length; llama-bench does not (the kit's
    # files say 4096, the depth rows run at 8192), so neither side refuses it here.
    "$wick" bench-llm "$f" "${targs[@]}" -r "$reps" --no-ctx-check --json "${wick_dev[@]}" "${wargs[@]}" \
      >"$out/$b.$tag.wick.json" 2>"$out/$b.$tag.wick.err" ||
      echo "llm_vs_llamacpp: wick failed on $b ($tag): $(tail -2 "$out/$b.$tag.wick.err")" >&2
  done
done

gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
python3 - "$out" "$bw" "$bw_how" "$("$wick" --version 2>/dev/null)" "${gpu:-no nvidia-smi}" \
  "$llama_args" "$wick_args" "$device" "$reps" "$tags" "${ggufs[@]}" <<'EOF'
import datetime, json, os, sys

out, bw, bw_how, wick_version, gpu, llama_args, wick_args, device, reps, tags = sys.argv[1:11]
files = sys.argv[11:]
bw = float(bw)


def load(path):
    """A JSON array of test rows, or [] (a tool that failed wrote nothing usable)."""
    try:
        with open(path) as fh:
            rows = json.load(fh)
        return rows if isinstance(rows, list) else []
    except (OSError, ValueError):
        return []


def test_name(r):  # llama-bench's test column: pp512, tg128, tg128 @ d8192
    p, n, d = int(r.get("n_prompt", 0)), int(r.get("n_gen", 0)), int(r.get("n_depth", 0))
    s = f"pp{p}" if p > 0 and n == 0 else f"tg{n}" if n > 0 and p == 0 else f"pp{p}+tg{n}"
    return s + (f" @ d{d}" if d > 0 else "")


def size(b):
    return f"{b / 2**20:.2f} MiB" if b < 2**30 else f"{b / 2**30:.2f} GiB"


rows, build = [], ""
for f in files:
    base = os.path.basename(f)[: -len(".gguf")]
    lc, wk = {}, {}
    for tag in tags.split():  # the runs in the order they ran: pp+tg, then tg at depth
        for r in load(os.path.join(out, f"{base}.{tag}.llamacpp.json")):
            lc[test_name(r)] = r
            build = build or f"{r.get('build_commit', '?')} ({r.get('build_number', '?')})"
        for r in load(os.path.join(out, f"{base}.{tag}.wick.json")):
            wk[test_name(r)] = r
    tests = list(lc) + [t for t in wk if t not in lc]
    if not tests:
        tests = ["(no result)"]
    for t in tests:
        a, b = lc.get(t), wk.get(t)
        nbytes = (b or {}).get("model_size") or (a or {}).get("model_size") or 0
        row = {"model": os.path.basename(f), "model_size": nbytes, "test": t,
               "llamacpp_ts": a and a["avg_ts"], "llamacpp_stddev_ts": a and a["stddev_ts"],
               "wick_ts": b and b["avg_ts"], "wick_stddev_ts": b and b["stddev_ts"]}
        row["ratio"] = row["wick_ts"] / row["llamacpp_ts"] if a and b and a["avg_ts"] > 0 else None
        tg = t.startswith("tg")
        # tokens/s x bytes read per token (every weight once) / copy bandwidth: 1.0 is the limit.
        row["llamacpp_bw_share"] = a["avg_ts"] * nbytes / bw if tg and a and nbytes else None
        row["wick_bw_share"] = b["avg_ts"] * nbytes / bw if tg and b and nbytes else None
        rows.append(row)

date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
print(f"device: {gpu}; {date}")
print(f"llama.cpp: llama-bench {llama_args}, build {build or '?'}; {wick_version}: bench-llm "
      f"{('--device ' + device + ' ') if device else ''}{wick_args}".rstrip())
print(f"{reps} runs per test after a warm-up, both; t/s = mean over the runs (± their standard deviation)")
print(f"copy bandwidth {bw / 1e9:.1f} GB/s, {bw_how}; bw = t/s x model bytes / copy bandwidth (tg rows)")
print()
hdr = ["model", "size", "test", "llama.cpp t/s", "wick t/s", "wick/llama.cpp", "llama.cpp bw", "wick bw"]
right = [False, True, True, True, True, True, True, True]
cells = []
for r in rows:
    ts = lambda v, s: "error" if v is None else f"{v:.2f} ± {s:.2f}"
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    cells.append([r["model"], size(r["model_size"]) if r["model_size"] else "-", r["test"],
                  ts(r["llamacpp_ts"], r["llamacpp_stddev_ts"]), ts(r["wick_ts"], r["wick_stddev_ts"]),
                  "-" if r["ratio"] is None else f"{r['ratio']:.3f}", pct(r["llamacpp_bw_share"]),
                  pct(r["wick_bw_share"])])
width = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(hdr)]
fmt = lambda row: "| " + " | ".join(v.rjust(w) if rt else v.ljust(w) for v, w, rt in zip(row, width, right)) + " |"
print(fmt(hdr))
print("| " + " | ".join("-" * (w - 1) + (":" if rt else "-") for w, rt in zip(width, right)) + " |")
for c in cells:
    print(fmt(c))
with open(os.path.join(out, "summary.json"), "w") as fh:
    json.dump({"date": date, "device": gpu, "copy_bandwidth": bw, "copy_bandwidth_source": bw_how,
               "llama_bench_args": llama_args, "llamacpp_build": build, "wick": wick_version,
               "wick_args": wick_args, "reps": int(reps), "rows": rows}, fh, indent=1)
print(f"\nraw JSON and logs: {out} (summary.json: the table)")
EOF
