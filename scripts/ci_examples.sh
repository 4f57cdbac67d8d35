#!/usr/bin/env bash
# wick consumed as a package, the way another project would:
#   1. static (the default): configure, build, `cmake --install` into a prefix; build examples/api_tour,
#      examples/safetensors_ops and examples/llm_generate (wick::llm) against it with find_package(wick)
#      and run them (each checks its own results and exits non-zero when one is wrong); the installed
#      `wick` tool runs;
#   2. pkg-config: one compile of examples/api_tour with `pkg-config --cflags --libs wick`, and of
#      examples/llm_generate with `wick-llm`, run;
#   3. shared (-DBUILD_SHARED_LIBS=ON): install into a second prefix, build and run the examples;
#   4. subproject: examples/subproject add_subdirectory's this tree with GoogleTest hidden
#      (CMAKE_DISABLE_FIND_PACKAGE_GTest): it must configure, build and run without it.
# Usage: bash scripts/ci_examples.sh [WORK_DIR]   (default build-examples/, emptied first)
# Extra CMake arguments for the wick builds: WICK_CMAKE_ARGS="-DWICK_WERROR=ON ...".
# Uses ccache (installed when root) so the static, shared and subproject builds compile each source once.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=$(realpath -m "${1:-build-examples}")
if [ "$work" = / ] || [ "$work" = "$src" ] || [[ "$src" == "$work"/* ]]; then
  echo "ci_examples: refusing to empty $work (give a build folder)" >&2
  exit 2
fi
rm -rf "$work"
mkdir -p "$work"

# pkg-config (Debian's pkgconf) is needed beyond scripts/setup.sh's packages; ccache makes the shared and
# subproject builds reuse the static build's objects (identical flags), so install both when root.
need=()
command -v pkg-config >/dev/null || need+=(pkgconf)
command -v ccache >/dev/null || need+=(ccache)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; }
  elif ! command -v pkg-config >/dev/null; then
    echo "ci_examples: pkg-config is missing (Debian: apt-get install pkgconf)" >&2
    exit 1
  fi
fi

cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
if command -v ccache >/dev/null; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
read -r -a extra <<<"${WICK_CMAKE_ARGS:-}"
jobs=$(nproc)
t_all=$SECONDS
t=$SECONDS
step() {
  echo "== ci_examples: $1: $((SECONDS - t)) s"
  t=$SECONDS
}

# Builds examples/$1 against the package under prefix $2 into $3, runs it in $3/run with args $4...
build_and_run() {
  local ex=$1 prefix=$2 dir=$3
  shift 3
  cmake -S "examples/$ex" -B "$dir" "${cmake_args[@]}" -DCMAKE_PREFIX_PATH="$prefix" >"$dir.log" 2>&1 ||
    { cat "$dir.log"; return 1; }
  cmake --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  mkdir -p "$dir/run"
  (cd "$dir/run" && "$dir/$ex" "$@")
}

# Installs one wick build (tools on, tests off) into a prefix. $1 build dir, $2 prefix, rest: CMake args.
install_wick() {
  local dir=$1 prefix=$2
  shift 2
  cmake -S . -B "$dir" "${cmake_args[@]}" -DWICK_BUILD_TESTS=OFF -DWICK_BUILD_TOOLS=ON \
    -DCMAKE_INSTALL_PREFIX="$prefix" "${extra[@]}" "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  cmake --build "$dir" -j"$jobs" >>"$dir.log" 2>&1 || { tail -50 "$dir.log"; return 1; }
  cmake --install "$dir" >>"$dir.log" 2>&1 || { tail -50 "$dir.log"; return 1; }
  for f in include/wick/wick.hpp include/wick/version.hpp bin/wick; do
    [ -e "$prefix/$f" ] || { echo "ci_examples: $prefix/$f was not installed" >&2; return 1; }
  done
  [ -n "$(find "$prefix" -name wickConfig.cmake)" ] && [ -n "$(find "$prefix" -name wickConfigVersion.cmake)" ] &&
    [ -n "$(find "$prefix" -name wick.pc)" ] && [ -n "$(find "$prefix" -name wick-llm.pc)" ] ||
    { echo "ci_examples: package files missing in $prefix" >&2; return 1; }
  # no private header or dependency header leaks into the installed ones
  if grep -rlE '#include [<"](nlohmann|cblas|omp|cuda|hip)' "$prefix/include/wick"; then
    echo "ci_examples: an installed public header includes a private dependency" >&2
    return 1
  fi
  "$prefix/bin/wick" info >/dev/null
}

# 1. static
static=$work/prefix-static
install_wick "$work/wick-static" "$static"
[ -f "$(find "$static" -name libwick.a)" ] || { echo "ci_examples: no libwick.a in $static" >&2; exit 1; }
step "static build + install"
build_and_run api_tour "$static" "$work/api_tour-static"
build_and_run safetensors_ops "$static" "$work/safetensors_ops-static"
# the file api_tour wrote, loaded by the other example (softmax rows of p must sum to 1)
"$work/safetensors_ops-static/safetensors_ops" "$work/api_tour-static/run/p.safetensors"
llm_fixture=$src/tests/fixtures/llm/llama2/model-q4_0.gguf
build_and_run llm_generate "$static" "$work/llm_generate-static" "$llm_fixture"
step "examples against the static package (find_package)"

# 2. pkg-config
pc_dir=$(dirname "$(find "$static" -name wick.pc)")
pc_flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs wick)
echo "pkg-config --cflags --libs wick: $pc_flags"
mkdir -p "$work/pkgconfig/run"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 -O2 examples/api_tour/main.cpp $pc_flags -o "$work/pkgconfig/api_tour"
(cd "$work/pkgconfig/run" && "$work/pkgconfig/api_tour")
pc_llm_flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs wick-llm)
echo "pkg-config --cflags --libs wick-llm: $pc_llm_flags"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 -O2 examples/llm_generate/main.cpp $pc_llm_flags -o "$work/pkgconfig/llm_generate"
"$work/pkgconfig/llm_generate" "$llm_fixture"
step "api_tour and llm_generate through pkg-config"

# 3. shared
shared=$work/prefix-shared
install_wick "$work/wick-shared" "$shared" -DBUILD_SHARED_LIBS=ON
[ -n "$(find "$shared" -name 'libwick.so*')" ] || { echo "ci_examples: no libwick.so in $shared" >&2; exit 1; }
build_and_run api_tour "$shared" "$work/api_tour-shared"
build_and_run safetensors_ops "$shared" "$work/safetensors_ops-shared"
build_and_run llm_generate "$shared" "$work/llm_generate-shared" "$llm_fixture"
# ldd's output captured first: `ldd | grep -q` under pipefail fails when grep exits early (SIGPIPE)
libs=$(ldd "$work/api_tour-shared/api_tour")
grep -q "libwick.so" <<<"$libs" ||
  { echo "ci_examples: api_tour-shared does not link libwick.so" >&2; exit 1; }
step "shared build + install + examples"

# 4. subproject without GoogleTest
sub=$work/subproject
cmake -S examples/subproject -B "$sub" "${cmake_args[@]}" -DWICK_SOURCE_DIR="$src" "${extra[@]}" \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON >"$sub.log" 2>&1 || { cat "$sub.log"; exit 1; }
cmake --build "$sub" -j"$jobs" >>"$sub.log" 2>&1 || { tail -50 "$sub.log"; exit 1; }
mkdir -p "$sub/run"
(cd "$sub/run" && "$sub/api_tour")
step "add_subdirectory consumer (GoogleTest hidden)"

echo "== ci_examples: all passed in $((SECONDS - t_all)) s"
