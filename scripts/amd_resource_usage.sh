#!/usr/bin/env bash
# Per-kernel register/scratch usage of wick's AMD GPU code, from hip-clang's own remarks
# (-Rpass-analysis=kernel-resource-usage). Prints, per target, how many kernels use scratch, spill VGPRs, and the
# lowest occupancy, with the worst kernels by name. Exits 1 when any kernel uses scratch on any target
# (scratch is private memory in VRAM, i.e. spills or stack objects that were not promoted to registers).
#
# usage: scripts/amd_resource_usage.sh --log BUILD_LOG [TARGET...]     (what CI runs: parse only, seconds)
#        scripts/amd_resource_usage.sh BUILD_DIR [TARGET...]           (recompile, minutes per target)
#        scripts/amd_resource_usage.sh --self-test [REMARKS_LOG]
#   --log: BUILD_LOG is the output of building a -DWICK_GPU=rocm -DWICK_AMD_RESOURCE_REMARKS=ON configuration
#          (cmake/gpu.cmake): the remarks come from the build itself, and each target's remarks in each
#          translation unit open with the marker kernel wick_remarks_target_<gfx>, which says whose they are.
#          TARGET: gfx ids that must all have remarks (default: every target that has a marker in the log).
#   BUILD_DIR: a configured -DWICK_GPU=rocm build with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (nothing needs to be
#          built); every GPU source is compiled again, device code only, once per target.
#          TARGET: gfx ids to check (default: every --offload-arch in the compile commands).
#   --self-test: runs the parser on made-up logs: a clean one must pass, one with ScratchSize > 0 must fail (exit
#          1) and name the kernel, and one with a record before any marker must be refused (exit 2). With
#          REMARKS_LOG (the remarks of compiling a kernel that really uses scratch, as CI makes it), that log must
#          fail too.
# Exit status: 0 no scratch, 1 some kernel uses scratch, 2 the check itself could not run (missing remarks,
#   unattributable remarks, a failed compile).
# env: JOBS (parallel compiles, default nproc), FILES (regex on the source path, default every GPU source),
#      TOP (worst kernels listed per table, default 5), KEEP (folder to keep the raw remarks in).
# The recompile mode costs about one device build of the GPU sources per target: forky's six CI targets took
# 15.7 min of CPU (25 min wall at JOBS=2 on a 2-core machine shared with other builds; ~8 min on 2 free cores).
set -euo pipefail

die() { echo "amd_resource_usage: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: $0 --log BUILD_LOG [TARGET...] | BUILD_DIR [TARGET...] | --self-test [REMARKS_LOG]"
command -v python3 >/dev/null || die "python3 is needed"
TOP=${TOP:-5}
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$WORK"' EXIT

# The parser and the table, shared by every mode. Inputs: "log PATH" (marker-attributed build log) or
# "jobs PATH" (recompile mode: one log per line, each for one target), then TOP and the targets that must appear.
cat >"$WORK/report.py" <<'EOF'
import re, shutil, subprocess, sys
mode, path, top, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
fields = {"VGPRs": "vgpr", "AGPRs": "agpr", "ScratchSize [bytes/lane]": "scratch", "VGPRs Spill": "vspill",
          "SGPRs Spill": "sspill", "Occupancy [waves/SIMD]": "occ", "LDS Size [bytes/block]": "lds",
          "Dynamic Stack": "dynstack"}
rx = re.compile(r"remark:\s+(Function Name|%s): (\S+)" % "|".join(re.escape(k) for k in fields))
marker = re.compile(r"^wick_remarks_target_(\S+)$")
ninja_edge = re.compile(r"^\[\d+/\d+\] ")  # a ninja status line: the next edge's output follows
per = {}  # target -> {kernel: record}
order = []

def fail(msg):
    print("amd_resource_usage: %s" % msg, file=sys.stderr)
    sys.exit(2)

def add(t, rec):
    if t not in per:
        per[t] = {}
        order.append(t)
    old = per[t].get(rec["name"])
    if old is None or (old.get("scratch", 0), old.get("dynstack", 0)) < (rec.get("scratch", 0), rec.get("dynstack", 0)):
        per[t][rec["name"]] = rec

def parse(lines, where, target=None):
    """Kernel records of one log. target=None: each record belongs to the target of the marker before it in the
    same ninja edge (a compile's output), and every target of an edge must have as many kernels as the others."""
    fixed = target
    cur, counts, edge, n = None, {}, None, 0
    def end_edge():
        if fixed is None and len(set(counts.values())) > 1:
            fail("%s: %s: kernel counts differ between targets %s; the remarks cannot be attributed"
                 % (where, edge or "log", counts))
    for n, l in enumerate(lines, 1):
        if fixed is None and ninja_edge.match(l):
            end_edge()
            cur, counts, target, edge = None, {}, None, l.strip()
            continue
        m = rx.search(l)
        if not m:
            continue
        k, v = m.groups()
        if k == "Function Name":
            cur = None
            mk = marker.match(v)
            if mk:
                if fixed is None:
                    target = mk.group(1)
                    counts.setdefault(target, 0)
                continue
            if target is None:
                fail("%s:%d: remark for %s before any wick_remarks_target_* marker (configure with "
                     "-DWICK_AMD_RESOURCE_REMARKS=ON and keep the whole build output)" % (where, n, v))
            cur = {"name": v}
            continue
        if cur is None:
            continue
        cur[fields[k]] = (1 if v == "True" else 0) if k == "Dynamic Stack" else (int(v) if v.lstrip("-").isdigit() else 0)
        # Occupancy is only reported for kernels (entry points); LDS Size is the last field of a record.
        if k == "LDS Size [bytes/block]" and "occ" in cur:
            add(target, cur)
            if fixed is None:
                counts[target] += 1
            cur = None
    end_edge()

if mode == "log":
    with open(path, errors="replace") as f:
        parse(f, path)
else:
    for line in open(path):
        t, log, _ = line.rstrip("\n").split("\t", 2)
        per.setdefault(t, {})
        if t not in order:
            order.append(t)
        with open(log, errors="replace") as f:
            parse(f, log, t)

missing = [t for t in want if not per.get(t)] + [t for t in order if not per[t]]
if missing or not order:
    fail("no kernel remarks for %s: is the build configured with -DWICK_AMD_RESOURCE_REMARKS=ON for those targets, "
         "and does this clang support -Rpass-analysis=kernel-resource-usage?" % (", ".join(missing) or "any target"))
order = [t for t in want if t in per] + [t for t in order if t not in want]

def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}

def short(s, n=150):
    return s if len(s) <= n else s[: n - 3] + "..."

def uses_scratch(k):
    return k.get("scratch", 0) > 0 or k.get("dynstack", 0)

bad = 0
print("\n| target | kernels | with scratch | with spilled VGPRs | lowest occupancy (waves/SIMD) | max VGPRs |")
print("|---|---|---|---|---|---|")
for t in order:
    ks = per[t].values()
    sc = sum(1 for k in ks if uses_scratch(k))
    sp = sum(1 for k in ks if k.get("vspill", 0) > 0)
    occ = min((k["occ"] for k in ks), default=0)
    print("| %s | %d | %d | %d | %d | %d |" % (t, len(ks), sc, sp, occ, max((k.get("vgpr", 0) for k in ks), default=0)))
    bad += sc
for t in order:
    ks = list(per[t].values())
    worst = sorted((k for k in ks if uses_scratch(k)), key=lambda k: -k.get("scratch", 0))[:top]
    low = sorted(ks, key=lambda k: (k["occ"], -k.get("vgpr", 0)))[:top]
    dm = demangle(list({k["name"] for k in worst + low}))
    if worst:
        print("\n%s: kernels with scratch (bytes/lane, spilled VGPRs, VGPRs):" % t)
        for k in worst:
            print("  %4d B%s  %3d spilled  %3d vgpr  %s" % (k.get("scratch", 0), " + dynamic stack" if k.get("dynstack") else "",
                                                         k.get("vspill", 0), k.get("vgpr", 0), short(dm[k["name"]])))
    print("\n%s: lowest occupancy (waves/SIMD, VGPRs, LDS bytes):" % t)
    for k in low:
        print("  %2d  %3d vgpr  %6d B LDS  %s" % (k["occ"], k.get("vgpr", 0), k.get("lds", 0), short(dm[k["name"]])))
print("\n%s" % ("FAIL: %d kernel/target pairs use scratch" % bad if bad else "OK: no kernel uses scratch"))
sys.exit(1 if bad else 0)
EOF

# --self-test: made-up remark logs in the build log's shape (two targets, ninja status lines).
self_test() {
  local dir=$WORK/self-test rc
  mkdir -p "$dir"
  # record NAME SCRATCH SPILL: one kernel's remarks as hip-clang prints them
  record() {
    local p="x.cu:1:1: remark:" tag=" [-Rpass-analysis=kernel-resource-usage]"
    printf '%s Function Name: %s%s\n' "$p" "$1" "$tag"
    printf '%s     VGPRs: 40%s\n%s     ScratchSize [bytes/lane]: %s%s\n%s     Dynamic Stack: False%s\n' \
      "$p" "$tag" "$p" "$2" "$tag" "$p" "$tag"
    printf '%s     Occupancy [waves/SIMD]: 8%s\n%s     SGPRs Spill: 0%s\n%s     VGPRs Spill: %s%s\n' \
      "$p" "$tag" "$p" "$tag" "$p" "$3" "$tag"
    printf '%s     LDS Size [bytes/block]: 0%s\n' "$p" "$tag"
  }
  edge() {  # edge SCRATCH SPILLED_VGPRS: of k2 on gfx90a
    echo "[1/2] Building HIP object CMakeFiles/wick.dir/src/backend/gpu/kernels/x.cu.o"
    record wick_remarks_target_gfx1100 0 0; record _Z2k1v 0 0; record _Z2k2v 0 0
    record wick_remarks_target_gfx90a 0 0; record _Z2k1v 0 0; record _Z2k2v "$1" "$2"
  }
  { edge 0 0; echo "[2/2] Linking CXX static library libwick.a"; } >"$dir/clean.log"
  edge 2064 3 >"$dir/scratch.log"
  { echo "[1/1] Building HIP object x.cu.o"; record _Z2k1v 0 0; } >"$dir/nomarker.log"
  { echo "[1/1] Building HIP object x.cu.o"; record wick_remarks_target_gfx1100 0 0; record _Z2k1v 0 0
    record wick_remarks_target_gfx90a 0 0; } >"$dir/uneven.log"
  check() {  # check WANT_RC LOG [GREP]
    set +e
    python3 "$WORK/report.py" log "$2" "$TOP" gfx90a gfx1100 >"$dir/out" 2>&1
    rc=$?
    set -e
    if [[ $rc != "$1" ]] || { [[ -n ${3:-} ]] && ! grep -q -- "$3" "$dir/out"; }; then
      cat "$dir/out"
      die "self-test: $2 gave exit $rc, expected $1${3:+ and a line with [$3]}"
    fi
    echo "self-test: $(basename "$2"): exit $rc as expected"
  }
  check 0 "$dir/clean.log" "| gfx90a | 2 | 0 | 0 | 8 | 40 |"
  check 1 "$dir/scratch.log" "2064 B .* k2()"
  check 2 "$dir/nomarker.log" "before any wick_remarks_target"
  check 2 "$dir/uneven.log" "kernel counts differ"
  if [[ -n ${1:-} ]]; then
    set +e
    python3 "$WORK/report.py" log "$1" "$TOP" >"$dir/out" 2>&1
    rc=$?
    set -e
    cat "$dir/out"
    [[ $rc == 1 ]] || die "self-test: the remarks of a kernel with scratch ($1) gave exit $rc, expected 1"
    echo "self-test: $1 (a real compile's remarks): exit 1 as expected"
  fi
  echo "self-test: OK"
}

case "$1" in
  --self-test)
    shift
    self_test "$@"
    exit 0
    ;;
  --log)
    [[ $# -ge 2 ]] || die "usage: $0 --log BUILD_LOG [TARGET...]"
    log=$2
    shift 2
    [[ -f $log ]] || die "no build log $log"
    exec python3 "$WORK/report.py" log "$log" "$TOP" "$@"
    ;;
esac

BUILD=$(cd "$1" && pwd) || die "no build dir $1"
shift
CC_JSON=$BUILD/compile_commands.json
[[ -f $CC_JSON ]] || die "$CC_JSON missing: configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON"
JOBS=${JOBS:-$(nproc)}
FILES=${FILES:-/src/backend/gpu/}

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
        if a in ("-c", "-Werror") or a.startswith("-Werror=") or a == "-Rpass-analysis=kernel-resource-usage":
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
python3 "$WORK/report.py" jobs "$WORK/jobs" "$TOP"
