#!/usr/bin/python3
"""Times `wick bench --json` on the CPU beside the same cases in NumPy.

usage: bench/cpu_vs_numpy.py [path/to/wick] [--reps R] [--rounds N] [--size small|default|large] [--op NAME]

Each case runs once to warm up, then R times; the median is taken, as `wick bench` does. The two
sides alternate N rounds (wick bench, then NumPy, then wick bench...) and each side's time is the
median over the rounds, so that load from other processes falls on both sides alike instead of on
whichever ran while the machine was busy. The load average is printed before and after.
The ratio is wick's speed over NumPy's (numpy_ms / wick_ms): above 1 means wick is faster.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_wick():
    cands = [os.path.join(ROOT, "build", "wick")] + sorted(glob.glob(os.path.join(ROOT, "build*", "wick")))
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    sys.exit("cpu_vs_numpy.py: no wick binary under build/; pass its path as the first argument")


def numpy_case(name, shape):
    """The NumPy body of a wick bench case, given its name and shape (None if unknown)."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s, dtype=np.float32)
    if name.startswith("unary_exp_"):
        x = f32(*shape)
        return lambda: np.exp(x)
    if name.startswith("binary_add_"):
        a, b = f32(*shape), f32(*shape)
        return lambda: a + b
    if name.startswith("cast_f32_f16_"):
        x = f32(*shape)
        return lambda: x.astype(np.float16)
    if name.startswith("sum_all_"):
        x = f32(*shape)
        return lambda: x.sum()
    if name.startswith("sum_last_dim_"):
        x = f32(*shape)
        return lambda: x.sum(axis=-1)
    if name.startswith("transpose_copy_"):
        x = f32(*shape)
        return lambda: np.ascontiguousarray(x.T)
    if name.startswith("matmul_"):
        m, n, k = shape
        a, b = f32(m, k), f32(k, n)
        return lambda: a @ b
    return None


def time_median(fn, reps):
    fn()  # warm-up
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wick", nargs="?", help="path to the wick binary (default: found under build*/)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="alternating wick/NumPy rounds (median over them)")
    ap.add_argument("--size", default="default", choices=["small", "default", "large"])
    ap.add_argument("--op", default=None, help="only cases whose name contains this")
    args = ap.parse_args()
    wick = args.wick or find_wick()

    cmd = [wick, "bench", "--device", "cpu", "--json", "--reps", str(args.reps), "--size", args.size]
    if args.op:
        cmd += ["--op", args.op]
    load0 = os.getloadavg()
    wick_ms, np_ms, cases, fns = {}, {}, None, {}
    for _ in range(max(args.rounds, 1)):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        cases = json.loads(out)
        for c in cases:
            wick_ms.setdefault(c["name"], []).append(c["median_ms"])
            if c["name"] not in fns:
                fns[c["name"]] = numpy_case(c["name"], c["shape"])
            if fns[c["name"]] is not None:
                np_ms.setdefault(c["name"], []).append(time_median(fns[c["name"]], args.reps))
    load1 = os.getloadavg()

    print(f"wick: {wick}   numpy {np.__version__}   {os.cpu_count()} CPUs")
    print(f"reps {args.reps} (median after one warm-up) x {args.rounds} alternating rounds (median)   "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print(f"{'case':<28} {'shape':<20} {'wick ms':>10} {'numpy ms':>10} {'ratio':>7}  rate (wick / numpy)")
    ratios = []
    for c in cases:
        name = c["name"]
        shape = "x".join(str(s) for s in c["shape"])
        if fns[name] is None:
            print(f"{name:<28} {shape:<20} (no NumPy equivalent)")
            continue
        w, n = statistics.median(wick_ms[name]), statistics.median(np_ms[name])
        ratio = n / w if w > 0 else float("inf")
        ratios.append(ratio)
        # the rates scale c's own numbers (taken at c["median_ms"]) to the medians
        if c.get("gflops"):
            flops = c["gflops"] * c["median_ms"]  # GFLOP/s * ms = MFLOP
            rate = f"{flops / w:.1f} / {flops / n:.1f} GFLOP/s"
        else:
            nbytes = c["gbps"] * c["median_ms"]
            rate = f"{nbytes / w:.2f} / {nbytes / n:.2f} GB/s"
        print(f"{name:<28} {shape:<20} {w:>10.3f} {n:>10.3f} {ratio:>7.2f}  {rate}")
    if ratios:
        print(f"lowest ratio {min(ratios):.2f}")


if __name__ == "__main__":
    main()
