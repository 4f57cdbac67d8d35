#!/usr/bin/env bash
# ctest gguf_py_roundtrip: wick writes a GGUF (tests/gguf_roundtrip_writer.cpp: metadata of every
# type, F32/F16/BF16 and every block type quantized by wick) and llama.cpp's gguf-py reads it back
# (tests/fixtures/gen_gguf.py --roundtrip). Skipped (exit 77, ctest SKIP_RETURN_CODE) with the
# reason when /usr/bin/python3, NumPy or the gguf-py kit (.llamacpp/gguf-py) is missing.
# Usage: tests/gguf_py_roundtrip.sh WRITER_EXE
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
writer=${1:?usage: $0 WRITER_EXE}
py=/usr/bin/python3
skip() { echo "SKIPPED: $1"; exit 77; }
[ -x "$py" ] || skip "no $py (gguf-py needs Python 3 with NumPy)"
"$py" -c 'import numpy' 2>/dev/null || skip "$py has no NumPy (Debian: python3-numpy)"
[ -d "$root/.llamacpp/gguf-py/gguf" ] ||
  skip "no gguf-py under $root/.llamacpp (fetch the llama.cpp kit: ../shared/anchors/llamacpp/README.md)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$writer" "$tmp/wick.gguf" "$tmp/wick.json"
cd "$root"
"$py" tests/fixtures/gen_gguf.py --roundtrip "$tmp/wick.gguf" "$tmp/wick.json"
