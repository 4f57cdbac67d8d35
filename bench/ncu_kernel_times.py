#!/usr/bin/env python3
"""Where a GPU decode step's time goes, from ncu's per-kernel durations.

usage: python3 bench/ncu_kernel_times.py NCU.csv --per PATTERN [--count N]

NCU.csv is the output of
  ncu --csv --metrics gpu__time_duration.sum --graph-profiling node --cache-control none \
      --clock-control none wick bench-llm FILE -p 0 -n 8 -r 1 > NCU.csv
(ncu profiles a replayed graph's kernels one by one). Kernels are grouped by name (template arguments
kept, parameters dropped) and the sums divided by the number of steps: the calls of the kernel whose name
contains PATTERN, divided by --count (its calls per step: 1 for the head product, the only kernel of its
kind once per step). Prints us per step, calls per step and us per call, largest first. ncu serialises
the kernels, so the sum exceeds a real step whose kernels overlap under programmatic dependent launch.
Standard library only.
"""
import argparse
import collections
import csv
import re
import sys


def kernel_name(full):
    name = full.replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*$", "", name)  # the parameter list
    return re.sub(r"^void ", "", name)


def microseconds(value, unit):
    v = float(value.replace(",", ""))
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    if unit not in scale:
        raise ValueError(f"unknown duration unit '{unit}'")
    return v * scale[unit]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--per", required=True, help="a name substring of a kernel that runs --count times a step")
    ap.add_argument("--count", type=float, default=1.0, help="that kernel's calls per step (default 1)")
    a = ap.parse_args()
    with open(a.csv) as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages are not quoted
    total = collections.defaultdict(float)
    calls = collections.Counter()
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        k = kernel_name(row["Kernel Name"])
        total[k] += microseconds(row["Metric Value"], row.get("Metric Unit", "ns"))
        calls[k] += 1
    marks = sum(c for k, c in calls.items() if a.per in k)
    if marks == 0:
        sys.exit(f"ncu_kernel_times: no kernel name contains '{a.per}'; names: {', '.join(sorted(calls))}")
    steps = marks / a.count
    print(f"{steps:g} steps: {sum(total.values()) / steps:.1f} us and {sum(calls.values()) / steps:.1f} kernels a step")
    print(f"{'us/step':>9} {'calls':>7} {'us/call':>8}  kernel")
    for k, us in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{us / steps:9.1f} {calls[k] / steps:7.2f} {us / calls[k]:8.2f}  {k}")


if __name__ == "__main__":
    main()
