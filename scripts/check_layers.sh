#!/usr/bin/env bash
# The layers of docs/ARCHITECTURE.md, checked from the #include lines (and a few spellings) of
# the tree, so the structure stays true without anyone re-reading it. Exit 0 when every rule
# holds; otherwise exit 1, listing each violation as file:line: the rule.
#
#   public API     include/wick      includes only include/wick (and the standard library)
#   op math        src/ops           includes only include/wick and src/ops
#   core           src/core          no backend header but the contract it calls through:
#                                    backend/storage.hpp (the Storage/Backend virtuals) and
#                                    backend/registry.hpp (which backends are linked in)
#   backends       src/backend       never src/core; cpu, gpu and no_gpu never include each other
#   io             src/io            never src/backend/gpu
#   llm runtime    src/llm           only include/wick (the public API, as any user) and src/llm;
#                                    its own headers by bare name ("model_impl.hpp"), as its target
#                                    wick_llm's include path is include/ and src/llm, never src/
#   library        src, include      never tools/ (the wick command and its parity harness)
# Spellings: no WICK_HAVE_GPU in src/core (backends are chosen at link time); no __CUDA_ARCH__ or
# __HIP_DEVICE_COMPILE__ outside src/backend/gpu and src/ops/capabilities.hpp, which turns them
# into capability macros; asm( only there and in src/backend/cpu (host-ISA hints); no
# __CUDACC__/__HIPCC__/__device__/__global__ in a public header but config.hpp's WICK_HD. Each
# public header compiles alone as plain C++20 (g++, no -D flags): no device code in the API.
# GPU kernels (programmatic dependent launch, src/backend/gpu/device_utils.cuh): each __global__
# body begins with kernel_entry(); launches go through launch_kernel() (no <<< elsewhere); no bare
# __restrict__ (WICK_RESTRICT).
#
# Usage: scripts/check_layers.sh [ROOT]   (ROOT defaults to the repository of this script)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"

rc_edges=0
python3 - <<'EOF' || rc_edges=$?
import os, re, sys

ALLOWED_CORE_BACKEND = {"src/backend/storage.hpp", "src/backend/registry.hpp"}
CAPABILITY_HEADER = "src/ops/capabilities.hpp"
SOURCE_EXT = (".hpp", ".cpp", ".cu", ".cuh", ".h")
ROOTS = ["include", "src", "tools"]

def files(top):
    for d, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                yield os.path.join(d, n).replace(os.sep, "/")

def resolve(inc, src):
    """The tree file an #include "inc" names (searched as the build does: include/, src/,
    tools/, then beside the includer), or None for a system or generated header."""
    for base in ("include", "src", "tools", os.path.dirname(src)):
        p = os.path.normpath(os.path.join(base, inc)).replace(os.sep, "/")
        if os.path.isfile(p):
            return p
    return None

def under(path, *dirs):
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)

def edge_rule(src, dst):
    """The rule an include edge src -> dst breaks, or None."""
    if under(src, "src", "include") and under(dst, "tools"):
        return "the library never includes tools/ (the wick command and its harness)"
    if under(src, "include/wick") and not under(dst, "include/wick"):
        return "public headers include only include/wick"
    if under(src, "src/llm") and not under(dst, "include/wick", "src/llm"):
        return "src/llm uses only the public API (include/wick) and its own headers"
    if under(src, "src/ops") and not under(dst, "include/wick", "src/ops"):
        return "src/ops (the op math) includes only include/wick and src/ops"
    if under(src, "src/core") and under(dst, "src/backend") and dst not in ALLOWED_CORE_BACKEND:
        return ("src/core reaches backends only through " + " and ".join(sorted(ALLOWED_CORE_BACKEND)))
    if under(src, "src/backend") and under(dst, "src/core"):
        return "backends never include src/core (the flow is core -> Storage -> backend)"
    for a, b in (("cpu", "gpu"), ("gpu", "cpu"), ("no_gpu", "gpu"), ("gpu", "no_gpu"), ("no_gpu", "cpu"),
                 ("cpu", "no_gpu")):
        if under(src, "src/backend/" + a) and under(dst, "src/backend/" + b):
            return "backend %s never includes backend %s (backends meet only in storage.hpp)" % (a, b)
    if under(src, "src/io") and under(dst, "src/backend/gpu"):
        return "src/io never includes the GPU backend"
    return None

include_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
device_re = re.compile(r"__CUDA_ARCH__|__HIP_DEVICE_COMPILE__")
asm_re = re.compile(r"\b(__)?asm(__)?\s*(volatile\s*|__volatile__\s*)?\(")
have_gpu_re = re.compile(r"\bWICK_HAVE_GPU\b")
# Device code in the public API; config.hpp alone spells WICK_HD's __host__ __device__.
public_device_re = re.compile(r"__CUDACC__|__HIPCC__|__device__|__global__|__shared__|__host__")

bad = []
for top in ROOTS:
    if not os.path.isdir(top):
        continue
    for f in files(top):
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        for n, line in enumerate(lines, 1):
            m = include_re.match(line)
            if m:
                dst = resolve(m.group(1), f)
                if dst:
                    why = edge_rule(f, dst)
                    if why:
                        bad.append("%s:%d: includes %s: %s" % (f, n, dst, why))
            if m and under(f, "src/llm") and not m.group(1).startswith("wick/") and "/" in m.group(1):
                bad.append("%s:%d: includes \"%s\": src/llm includes the public API as \"wick/...\" and its "
                           "own headers by bare name (wick_llm's include path has no src/)" % (f, n, m.group(1)))
            code = line.split("//", 1)[0]
            if under(f, "src/core") and have_gpu_re.search(code):
                bad.append("%s:%d: WICK_HAVE_GPU in src/core: the backends are chosen at link time "
                           "(src/backend/registry.hpp)" % (f, n))
            if under(f, "include/wick") and f != "include/wick/config.hpp" and public_device_re.search(code):
                bad.append("%s:%d: device code in a public header: it belongs behind the GPU backend or "
                           "in src/ops" % (f, n))
            if device_re.search(code) and not under(f, "src/backend/gpu") and f != CAPABILITY_HEADER:
                bad.append("%s:%d: device-compiler macro outside src/backend/gpu: test the capability "
                           "macros of %s instead" % (f, n, CAPABILITY_HEADER))
            # Inline assembly belongs to a backend of its instruction set: GPU code (or the
            # capability header), or host-ISA hints of the CPU backend (a spin-wait pause).
            if asm_re.search(code) and not under(f, "src/backend/gpu", "src/backend/cpu") and f != CAPABILITY_HEADER:
                bad.append("%s:%d: inline asm outside src/backend/gpu, src/backend/cpu and %s" %
                           (f, n, CAPABILITY_HEADER))

# The PDL contract of src/backend/gpu/device_utils.cuh: a kernel launched early must wait first.
launcher = "src/backend/gpu/device_utils.cuh"
for f in files("src/backend/gpu"):
    with open(f, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    code = "\n".join(l.split("//", 1)[0] for l in text.split("\n"))
    for m in re.finditer(r"__global__", code):
        body = code.find("{", m.end())
        if not code[body + 1:].lstrip().startswith("kernel_entry();"):
            bad.append("%s:%d: a __global__ body must begin with kernel_entry() (PDL: %s)" %
                       (f, code.count("\n", 0, m.start()) + 1, launcher))
    for n, line in enumerate(code.split("\n"), 1):
        if "<<<" in line and not (f == launcher and "kernel<<<grid, block, smem, s>>>" in line):
            bad.append("%s:%d: launch kernels with launch_kernel() (%s), not <<<>>>" % (f, n, launcher))
        if "__restrict__" in line and "#define WICK_RESTRICT" not in line:
            bad.append("%s:%d: __restrict__ in GPU code: write WICK_RESTRICT (%s says why)" % (f, n, launcher))

# wick_llm's include path: include/ (through wick) and src/llm only, so src/core and the backends
# stay out of its reach whatever its files spell.
with open("CMakeLists.txt", encoding="utf-8") as fh:
    cmake = fh.read()
for m in re.finditer(r"target_include_directories\(\s*wick_llm\b([^)]*)\)", cmake):
    for d in m.group(1).split():
        if ("src" in d or "tools" in d or "tests" in d) and not d.rstrip("/").endswith("src/llm"):
            bad.append("CMakeLists.txt:%d: wick_llm's include path names %s: it sees include/ and src/llm only" %
                       (cmake.count("\n", 0, m.start()) + 1, d))

for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF

# Every public header alone, as a user's plain C++ compiler sees it.
rc_plain=0
cxx=${CXX:-g++}
for h in include/wick/*.hpp include/wick/llm/*.hpp; do
  if ! out=$(printf '#include "%s"\n' "${h#include/}" | "$cxx" -std=c++20 -fsyntax-only -Iinclude -x c++ - 2>&1); then
    echo "$h:1: does not compile as plain C++20 ($cxx -std=c++20 -fsyntax-only, no -D flags):"
    echo "$out" | head -5
    rc_plain=1
  fi
done

if [ $rc_edges -ne 0 ] || [ $rc_plain -ne 0 ]; then
  echo "check_layers: FAILED (rules at the top of scripts/check_layers.sh; map in docs/ARCHITECTURE.md)"
  exit 1
fi
echo "check_layers: ok"
