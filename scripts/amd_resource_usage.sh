#!/usr/bin/env bash
# Per-kernel register/scratch usage of wick's AMD GPU code, from hip-clang's own remarks
# (-Rpass-analysis=kernel-resource-usage). Prints, per target, how many kernels use scratch, spill VGPRs, and the
# lowest occupancy, with the worst kernels by name. Exits 1 when any kernel uses scratch on any target (issue 11 s.3:
# scratch is private memory in VRAM, i.e. spills or stack objects that were not promoted to registers).
#
# usage: scripts/amd_resource_usage.sh BUILD_DIR [TARGET...]
#   BUILD_DIR: a configured -DWICK_GPU=rocm build with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (nothing needs to be built).
#   TARGET:    gfx ids to check (default: every --offload-arch in the compile commands).
# env: JOBS (parallel compiles, default nproc), FILES (regex on the source path, default every GPU source),
#      TOP (worst kernels listed per table, default 5), KEEP (folder to keep the raw remarks in).
# Each (source, target) pair is one device-only compile (codegen is needed: -fsyntax-only emits no remarks), so the
# run costs about one device build of the GPU sources per target, spread over JOBS cores: forky's six CI targets took
# 15.7 min of CPU (25 min wall at JOBS=2 on a 2-core machine shared with other builds; ~8 min on 2 free cores).
set -euo pipefail

die() { echo "amd_resource_usage: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: $0 BUILD_DIR [TARGET...]"
BUILD=$(cd "$1" && pwd) || die "no build dir $1"
shift
CC_JSON=$BUILD/compile_commands.json
[[ -f $CC_JSON ]] || die "$CC_JSON missing: configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON"
command -v python3 >/dev/null || die "python3 is needed"
JOBS=${JOBS:-$(nproc)}
FILES=${FILES:-/src/backend/gpu/}
TOP=${TOP:-5}
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$WORK"' EXIT

# One line per job: "target<TAB>outfile<TAB>shell command". The command is the build's own, with its
# --offload-arch/-o/-c/-Werror replaced: one target, device code only, no object written.
python3 - "$CC_JSON" "$FILES" "$WORK" "$@" >"$WORK/jobs" <<'EOF'
import json, os, re, shlex, sys
cc, pat, work, want = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3], sys.argv[4:]
entries, archs = [], []
for e in json.load(open(cc)):
    if not e["file"].endswith(".cu") or not pat.search(e["file"]):
        continue
    args = e.get("arguments") or shlex.split(e["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o",):
            skip = True
            continue
        if a.startswith("--offload-arch="):
            archs.append(a.split("=", 1)[1])
            continue
        if a in ("-c", "-Werror") or a.startswith("-Werror="):
            continue
        out.append(a)
    entries.append((e["directory"], e["file"], out))
if not entries:
    sys.exit("no GPU sources in compile_commands.json (is this a -DWICK_GPU=rocm build?)")
targets = want or list(dict.fromkeys(archs))
# Biggest sources first so the slowest compiles do not start last.
entries.sort(key=lambda x: -os.path.getsize(x[1]))
for t in targets:
    for i, (d, f, a) in enumerate(entries):
        log = os.path.join(work, "%s.%s.%d.log" % (t, os.path.basename(f), i))
        cmd = "cd %s && %s --offload-arch=%s --cuda-device-only -Rpass-analysis=kernel-resource-usage -c -o /dev/null" % (
            shlex.quote(d), shlex.join(a), t)
        # One script per compile: xargs then passes a path, never a command line to split.
        job = log[:-4] + ".sh"
        with open(job, "w") as js:
            js.write("%s >%s 2>&1 || { echo 'compile failed: %s' >&2; tail -20 %s >&2; exit 255; }\n" % (
                cmd, shlex.quote(log), os.path.basename(log), shlex.quote(log)))
        print("%s\t%s\t%s" % (t, log, job))
EOF

start=$SECONDS
# A failed compile is an error of this check (not a pass): its log is printed and the run exits 2.
export WORK
cut -f3 "$WORK/jobs" | xargs -d '\n' -n 1 -P "$JOBS" bash || die "a compile failed (see above)"
echo "compiled $(wc -l <"$WORK/jobs") source/target pairs with JOBS=$JOBS in $((SECONDS - start)) s"

python3 - "$WORK/jobs" "$TOP" <<'EOF'
import re, shutil, subprocess, sys
jobs, top = sys.argv[1], int(sys.argv[2])
fields = {"VGPRs": "vgpr", "AGPRs": "agpr", "ScratchSize [bytes/lane]": "scratch", "VGPRs Spill": "vspill",
          "SGPRs Spill": "sspill", "Occupancy [waves/SIMD]": "occ", "LDS Size [bytes/block]": "lds"}
rx = re.compile(r"remark:\s+(Function Name|%s): (\S+)" % "|".join(re.escape(k) for k in fields))
per = {}  # target -> {kernel: record}
order = []
for line in open(jobs):
    t, log, _ = line.rstrip("\n").split("\t", 2)
    if t not in per:
        per[t] = {}
        order.append(t)
    cur = None
    for l in open(log, errors="replace"):
        m = rx.search(l)
        if not m:
            continue
        k, v = m.groups()
        if k == "Function Name":
            cur = {"name": v}
            continue
        if cur is None:
            continue
        cur[fields[k]] = int(v) if v.lstrip("-").isdigit() else 0
        # Occupancy is only reported for kernels (entry points); it marks a complete kernel record.
        if k == "LDS Size [bytes/block]" and "occ" in cur:
            old = per[t].get(cur["name"])
            if old is None or old.get("scratch", 0) < cur.get("scratch", 0):
                per[t][cur["name"]] = cur
            cur = None

def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}

def short(s, n=150):
    return s if len(s) <= n else s[: n - 3] + "..."

bad = 0
print("\n| target | kernels | with scratch | with spilled VGPRs | lowest occupancy (waves/SIMD) | max VGPRs |")
print("|---|---|---|---|---|---|")
for t in order:
    ks = per[t].values()
    sc = sum(1 for k in ks if k.get("scratch", 0) > 0)
    sp = sum(1 for k in ks if k.get("vspill", 0) > 0)
    occ = min((k["occ"] for k in ks), default=0)
    print("| %s | %d | %d | %d | %d | %d |" % (t, len(ks), sc, sp, occ, max((k.get("vgpr", 0) for k in ks), default=0)))
    bad += sc
for t in order:
    ks = list(per[t].values())
    worst = sorted((k for k in ks if k.get("scratch", 0) > 0), key=lambda k: -k["scratch"])[:top]
    low = sorted(ks, key=lambda k: (k["occ"], -k.get("vgpr", 0)))[:top]
    dm = demangle(list({k["name"] for k in worst + low}))
    if worst:
        print("\n%s: kernels with scratch (bytes/lane, spilled VGPRs, VGPRs):" % t)
        for k in worst:
            print("  %4d B  %3d spilled  %3d vgpr  %s" % (k["scratch"], k.get("vspill", 0), k.get("vgpr", 0), short(dm[k["name"]])))
    print("\n%s: lowest occupancy (waves/SIMD, VGPRs, LDS bytes):" % t)
    for k in low:
        print("  %2d  %3d vgpr  %6d B LDS  %s" % (k["occ"], k.get("vgpr", 0), k.get("lds", 0), short(dm[k["name"]])))
if any(not per[t] for t in order):
    sys.exit("no kernel remarks parsed for some target: does this clang support -Rpass-analysis=kernel-resource-usage?")
print("\n%s" % ("FAIL: %d kernel/target pairs use scratch" % bad if bad else "OK: no kernel uses scratch"))
sys.exit(1 if bad else 0)
EOF
