#!/usr/bin/env python3
"""Times wick beside PyTorch eager on the same device, in one run.

usage: bench/vs_torch.py [--wick build/wick] [--device cuda:0] [--wick-device D] [--quick]
                         [--op SUBSTR] [--out results.json] [--wick-json FILE]

1. Runs `wick bench --suite torch --json` (a subprocess; it exits before PyTorch touches the GPU).
2. Times every case it reported in PyTorch eager, with the same method as wick: 3 warm-up calls,
   then 7 repeats of (synchronise, t0, N calls, synchronise, t1) with N chosen so that a repeat
   lasts at least 20 ms (5 ms with --quick); one call's time is the median repeat over N.
3. Measures the device-to-device copy bandwidth with PyTorch (dst.copy_(src) of 1 GiB; GB/s =
   2 * bytes / time) and prints each bandwidth-bound case as a fraction of it.

Both sides use the same bytes and flops per call (wick's JSON), so ratio = torch time / wick time:
above 1 means wick is faster, for every unit (GB/s, TFLOP/s and us/op alike). Targets are TARGETS below;
with --quick the shapes shrink and the targets mean nothing (the run is a smoke test).
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The speed each op aims for beside PyTorch, by the case's op. ratio: torch time / wick time at least this; copy_frac: wick's
# GB/s at least this fraction of the copy bandwidth measured with PyTorch; max_us: wick's us/op at
# most this. Ops not listed are reported without a target.
_ELEMENTWISE = {"ratio": 0.95, "copy_frac": 0.85}
TARGETS = {
    "exp": _ELEMENTWISE,
    "add": _ELEMENTWISE,
    "affine": _ELEMENTWISE,
    "cast": _ELEMENTWISE,
    "transpose_copy": {"ratio": 2.5},
    "add_transposed": {"ratio": 1.5},
    "sum_last": {"ratio": 1.0},
    "max_last": {"ratio": 1.0},
    "sum_dim0": {"ratio": 1.0},
    "max_dim0": {"ratio": 1.0},
    "sum_all": {"ratio": 1.0},
    "softmax": {"ratio": 2.0},
    "rms_norm": {"ratio": 1.0},
    "layer_norm": {"ratio": 1.0},
    "matmul": {"ratio": 0.97},
    "matmul_decode": {"ratio": 1.0},
    "attention_causal": {"ratio": 1 / 1.5},  # wick's time within 1.5x of SDPA's
    "arg_sort": {"ratio": 1.0},
    "host_add_chain": {"max_us": 4.0},
}

REPEATS = 7
WARMUP = 3


def target_text(t):
    if not t:
        return "-"
    parts = []
    if "ratio" in t:
        parts.append(f"ratio>={t['ratio']:.3g}")
    if "copy_frac" in t:
        parts.append(f"bw>={t['copy_frac'] * 100:.0f}%")
    if "max_us" in t:
        parts.append(f"<={t['max_us']:g}us/op")
    return ",".join(parts)


def find_wick():
    cands = [os.path.join(ROOT, "build", "wick")]
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    sys.exit("vs_torch.py: no wick binary at build/wick; pass --wick path/to/wick")


def import_torch():
    try:
        import torch  # noqa: F401
        import torch.nn.functional  # noqa: F401
    except ImportError as e:
        sys.exit(f"vs_torch.py: PyTorch is not importable by {sys.executable} ({e}).\n"
                 "Run this on the GPU machine, where python3 has torch, or install torch for this python.")
    return torch


def time_calls(fn, sync, min_repeat_s):
    """wick's method (tools/check/bench_torch.cpp run_torch_case): returns (seconds per call, N)."""
    for _ in range(WARMUP):
        fn()

    def timed(n):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return time.perf_counter() - t0

    n = 1
    el = timed(n)
    while el < min_repeat_s / 10 and n < (1 << 24):
        n *= 2
        el = timed(n)
    iters = max(1, math.ceil(n * min_repeat_s / max(el, 1e-9)))
    per_call = [timed(iters) / iters for _ in range(REPEATS)]
    return statistics.median(per_call), iters


def torch_case(torch, case, dev):
    """The PyTorch eager body of a wick case, as a user would write it (None if unknown)."""
    F = torch.nn.functional
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    op, shape = case["op"], list(case["shape"])
    randn = lambda s, d: torch.randn(s, dtype=d, device=dev)
    d = dt.get(case["dtype"])
    if op == "exp":
        x = randn(shape, d)
        return lambda: torch.exp(x)
    if op == "add":
        a, b = randn(shape, d), randn(shape, d)
        return lambda: a + b
    if op == "affine":
        x = randn(shape, d)
        return lambda: x * 2 + 1  # two kernels in eager: what the expression costs a torch user
    if op == "cast":
        src, dst = case["dtype"].split("->")
        x = randn(shape, dt[src])
        to = dt[dst]
        return lambda: x.to(to)
    if op == "transpose_copy":
        x = randn(shape, d)
        return lambda: x.t().contiguous()
    if op == "add_transposed":
        a, b = randn(shape, d), randn(shape, d)
        return lambda: a + b.t()
    if op == "copy":
        x = randn(shape, d)
        return lambda: x.clone()
    if op == "sum_last":
        x = randn(shape, d)
        return lambda: x.sum(-1)
    if op == "max_last":
        x = randn(shape, d)
        return lambda: x.amax(-1)
    if op == "sum_dim0":
        x = randn(shape, d)
        return lambda: x.sum(0)
    if op == "max_dim0":
        x = randn(shape, d)
        return lambda: x.amax(0)
    if op == "sum_all":
        x = randn(shape, d)
        return lambda: x.sum()
    if op == "arg_sort":
        x = randn(shape, d)
        return lambda: torch.argsort(x, dim=-1, stable=True)
    if op == "softmax":
        x = randn(shape, d)
        return lambda: torch.softmax(x, -1)
    if op == "log_softmax":
        x = randn(shape, d)
        return lambda: torch.log_softmax(x, -1)
    if op == "rms_norm":
        x, w = randn(shape, d), randn(shape[-1:], d)
        return lambda: F.rms_norm(x, shape[-1:], w, eps=1e-5)
    if op == "layer_norm":
        x, w, b = randn(shape, d), randn(shape[-1:], d), randn(shape[-1:], d)
        return lambda: F.layer_norm(x, shape[-1:], w, b, eps=1e-5)
    if op == "rope":
        # The usual eager formulation (HF Llama): tables (t, d) built once, half-split rotation.
        _, _, t, hd = shape
        x = randn(shape, d)
        cos_h = torch.rand((t, hd // 2), dtype=d, device=dev) * 2 - 1
        sin_h = torch.rand((t, hd // 2), dtype=d, device=dev) * 2 - 1
        cos, sin = torch.cat([cos_h, cos_h], -1), torch.cat([sin_h, sin_h], -1)

        def rotate_half(v):
            return torch.cat((-v[..., hd // 2:], v[..., : hd // 2]), dim=-1)

        return lambda: x * cos + rotate_half(x) * sin
    if op == "silu_mul":
        a, b = randn(shape, d), randn(shape, d)
        return lambda: F.silu(a) * b
    if op in ("matmul", "matmul_decode"):
        m, k, n = shape
        x, w = randn((m, k), d), randn((k, n), d)
        return lambda: torch.matmul(x, w)
    if op in ("attention", "attention_causal"):
        q, k, v = randn(shape, d), randn(shape, d), randn(shape, d)
        causal = op == "attention_causal"
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if op == "host_add_chain":
        x, y = randn(shape, d), randn(shape, d)
        chain = int(case["ops_per_call"])

        def run():
            z = x
            for _ in range(chain):
                z = z + y
            return z

        return run
    return None


def rate(case, seconds):
    """The value in the case's unit for one call's time, from wick's bytes/flops per call."""
    unit = case["unit"]
    if unit == "us/op":
        return seconds / case["ops_per_call"] * 1e6
    if unit == "TFLOP/s":
        return case["flops"] / seconds / 1e12
    return case["bytes"] / seconds / 1e9


def run_wick(args):
    if args.wick_json:
        with open(args.wick_json) as f:
            return json.load(f)
    cmd = [args.wick, "bench", "--suite", "torch", "--json", "--device", args.wick_device]
    if args.quick:
        cmd.append("--quick")
    if args.op:
        cmd += ["--op", args.op]
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    # stderr (wick's progress lines) goes straight to the terminal.
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode not in (0, 1) or not p.stdout.strip():
        sys.exit(f"vs_torch.py: `{' '.join(cmd)}` failed with exit code {p.returncode}")
    if p.returncode == 1:
        print("vs_torch.py: wick reported errors in some cases (kept in the table)", file=sys.stderr)
    return json.loads(p.stdout)


def fmt(v, unit):
    if v is None:
        return "-"
    return f"{v:.3f}" if unit in ("TFLOP/s", "us/op") else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wick", default=None, help="path to the wick binary (default: build/wick)")
    ap.add_argument("--device", default="cuda:0", help="PyTorch device (default cuda:0; ROCm torch also calls it cuda)")
    ap.add_argument("--wick-device", default=None, help="wick's device name (default: the same as --device)")
    ap.add_argument("--quick", action="store_true", help="shrunken shapes: a smoke test, targets meaningless")
    ap.add_argument("--op", default=None, help="only cases whose name contains this")
    ap.add_argument("--out", default=None, help="write every number to this JSON file")
    ap.add_argument("--wick-json", default=None, help="use this saved `wick bench --suite torch --json` output")
    args = ap.parse_args()
    args.wick_device = args.wick_device or args.device
    torch = import_torch()  # before the (long) wick run, so a missing torch fails at once
    if not args.wick_json:
        args.wick = args.wick or find_wick()

    cases = run_wick(args)
    dev = torch.device(args.device)
    on_gpu = dev.type == "cuda"
    if on_gpu and not torch.cuda.is_available():
        sys.exit(f"vs_torch.py: torch {torch.__version__} sees no GPU for --device {args.device}")
    sync = (lambda: torch.cuda.synchronize(dev)) if on_gpu else (lambda: None)
    min_repeat_s = 0.005 if args.quick else 0.02
    torch.manual_seed(0)

    def free():
        if on_gpu:
            torch.cuda.empty_cache()

    # Copy bandwidth: 1 GiB (1/64 of it with --quick) device to device.
    copy_bytes = (1 << 30) // (64 if args.quick else 1)
    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=dev).normal_()
    dst = torch.empty_like(src)
    copy_s, _ = time_calls(lambda: dst.copy_(src), sync, min_repeat_s)
    copy_gbps = 2 * copy_bytes / copy_s / 1e9
    del src, dst
    free()

    rows = []
    for c in cases:
        name = c["case"]
        print(f"torch: {name} ...", file=sys.stderr, flush=True)
        tres = {}
        try:
            fn = torch_case(torch, c, dev)
            if fn is None:
                tres["skipped"] = f"no PyTorch equivalent for op '{c['op']}'"
            else:
                s, iters = time_calls(fn, sync, min_repeat_s)
                tres = {"seconds": s, "iters": iters, "value": rate(c, s)}
        except Exception as e:  # OOM, an op this torch build lacks: report, go on
            tres["skipped"] = f"{type(e).__name__}: {e}"
        fn = None
        free()

        w_s, t_s = c.get("seconds"), tres.get("seconds")
        ratio = t_s / w_s if w_s and t_s else None
        bw_bound = c["unit"] == "GB/s"
        w_frac = c["value"] / copy_gbps if bw_bound and c.get("value") else None
        t_frac = tres["value"] / copy_gbps if bw_bound and tres.get("value") else None
        tgt = TARGETS.get(c["op"])
        if not tgt:
            result = "-"
        elif c.get("value") is None:
            result = "SKIP"  # wick did not run it: a target it cannot pass
        else:
            ok = True
            if "ratio" in tgt:
                ok = ok and ratio is not None and ratio >= tgt["ratio"]
            if "copy_frac" in tgt:
                ok = ok and w_frac is not None and w_frac >= tgt["copy_frac"]
            if "max_us" in tgt:
                ok = ok and c["value"] <= tgt["max_us"]
            result = "PASS" if ok else "MISS"
        rows.append({
            "case": name, "op": c["op"], "dtype": c["dtype"], "shape": c["shape"], "unit": c["unit"],
            "bytes": c["bytes"], "flops": c["flops"],
            "wick": {k: c[k] for k in ("seconds", "iters", "value", "skipped", "error") if c.get(k) is not None},
            "torch": tres, "ratio": ratio, "wick_copy_frac": w_frac, "torch_copy_frac": t_frac,
            "target": target_text(tgt), "result": result,
        })

    if on_gpu:
        props = torch.cuda.get_device_properties(dev)
        dev_name = f"{props.name} ({props.total_memory / 2**30:.0f} GiB)"
    else:
        dev_name = platform.processor() or platform.machine()
    backend = f"CUDA {torch.version.cuda}" if torch.version.cuda else (
        f"HIP {torch.version.hip}" if getattr(torch.version, "hip", None) else "cpu")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:  # newer torch also has fp32_precision; allow_tf32 is still readable
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32) if on_gpu else None
    except Exception:
        tf32 = None

    print()
    print(f"device: {args.device} = {dev_name}; torch {torch.__version__} ({backend}); {date}")
    print(f"wick: {args.wick_json or args.wick} (device {args.wick_device}); method: {WARMUP} warm-up calls, "
          f"median of {REPEATS} repeats of >= {min_repeat_s * 1e3:.0f} ms; torch matmul allow_tf32={tf32}")
    print(f"copy bandwidth (torch dst.copy_(src), {copy_bytes / 2**20:.0f} MiB): {copy_gbps:.1f} GB/s")
    if args.quick:
        print("--quick: shapes shrunk; PASS/MISS below mean nothing")
    print()
    hdr = f"{'case':<30} {'unit':<8} {'wick':>10} {'torch':>10} {'ratio':>7} {'wick%bw':>8} {'torch%bw':>8}  {'target':<22} result"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        w, t = r["wick"], r["torch"]
        pct = lambda f: f"{f * 100:.0f}%" if f is not None else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        line = (f"{r['case']:<30} {r['unit']:<8} {fmt(w.get('value'), r['unit']):>10} "
                f"{fmt(t.get('value'), r['unit']):>10} {ratio:>7} {pct(r['wick_copy_frac']):>8} "
                f"{pct(r['torch_copy_frac']):>8}  {r['target']:<22} {r['result']}")
        why = w.get("skipped") or w.get("error")
        if why:
            line += f"   wick {'error' if w.get('error') else 'skipped'}: {why.splitlines()[0][:100]}"
        if t.get("skipped"):
            line += f"   torch skipped: {t['skipped'].splitlines()[0][:100]}"
        print(line)
    counts = {k: sum(1 for r in rows if r["result"] == k) for k in ("PASS", "MISS", "SKIP")}
    print(f"\ntargets: {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['SKIP']} SKIP (wick did not run)")
    print("ratio = torch time / wick time (>1: wick faster; for us/op that is torch us / wick us)")

    if args.out:
        doc = {
            "device": args.device, "device_name": dev_name, "wick_device": args.wick_device,
            "torch": torch.__version__, "torch_backend": backend, "torch_allow_tf32": tf32,
            "python": platform.python_version(), "date": date, "wick": args.wick_json or args.wick,
            "quick": args.quick, "method": {"warmup": WARMUP, "repeats": REPEATS, "min_repeat_s": min_repeat_s},
            "copy_bytes": copy_bytes, "copy_gbps": copy_gbps, "targets": TARGETS, "summary": counts, "cases": rows,
        }
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
