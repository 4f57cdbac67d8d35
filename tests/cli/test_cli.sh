#!/usr/bin/env bash
# The `wick` command line: exit codes and messages. A command line the tool
# cannot act on exits 2 and names what was wrong; nothing may exit 0 having done nothing.
# Usage: bash tests/cli/test_cli.sh path/to/wick
set -u
wick="${1:?usage: test_cli.sh path/to/wick}"
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp)"
err="$out"  # one stream: expect_line reads the progress lines quantize writes to stderr
tmpd="$(mktemp -d)"
trap 'rm -f "$out"; rm -rf "$tmpd"' EXIT
fails=0
runs=0
source "$here/expect.sh"

# help
expect 0 "info" -- --help
expect 0 "check" -- --help
expect 0 "--dtype" -- check --help
expect 0 "--reps" -- bench --help
expect 0 "--markdown" -- ops --help
expect 2 "" --  # no command: the help on stderr, exit 2

# unknown command, arguments a command does not take
expect 2 "unknown command 'nosuch'" -- nosuch
expect 2 "unknown option '--bogus'" -- --bogus
expect 2 "SOME_FILE" -- info SOME_FILE
expect 2 "--bogus" -- check --bogus
expect 2 "--bogus" -- bench --bogus
expect 2 "extra" -- check --op add extra

# filters that match no case: exit 2, the filter named and what would match listed
expect 2 "--op 'nope' matches no case" -- check --op nope
expect 2 "add, " -- check --op nope  # the ops are listed
expect 2 "--op 'nope' is in no case name" -- bench --op nope
expect 2 "unary_exp_" -- bench --op nope  # the case names are listed
expect 2 "--op 'nope' is in no torch-suite case name" -- bench --suite torch --op nope --quick

# typed option values
expect 2 "nope not in" -- check --dtype nope
expect 2 "--reps: takes an integer > 0" -- bench --reps 0
expect 2 "--reps: takes an integer > 0" -- bench --reps abc
expect 2 "huge not in" -- bench --size huge
expect 2 "--device" -- check --device nodev:0
expect 2 "use cpu, cuda:N" -- check --device nodev
expect 2 "--suite" -- bench --suite nope
expect 2 "--quick belongs to --suite torch" -- bench --quick
expect 2 "--reps belongs to the default suite" -- bench --suite torch --reps 3

# runs that do something
expect 0 "passed, 0 failed" -- check --op add --dtype f32 --device cpu
expect 0 "binary_add_" -- bench --device cpu --op add --reps 1 --size small
expect 0 "unary_exp_64K" -- bench --device cpu --op exp --reps 1 --size small --json
runs=$((runs + 1))
"$wick" ops --markdown >"$out" 2>&1
if [ $? != 0 ] || [ "$(head -c 2 "$out")" != "# " ]; then
  echo "FAIL: wick ops --markdown: want exit 0 and text starting with '# '; got:"
  head -c 500 "$out"
  fails=$((fails + 1))
fi
expect 0 "add" -- ops
expect 0 "wick " -- info

# quantize and info. A small safetensors: a (64, 64) f32 weight, a 1-D f16 norm and a (4, 48) f32
# weight whose rows are not whole 32-blocks; values 1, -0.5, 3, -0.25 repeated.
st="$tmpd/in.safetensors"
hdr='{"layer.weight":{"dtype":"F32","shape":[64,64],"data_offsets":[0,16384]},'
hdr+='"norm.weight":{"dtype":"F16","shape":[64],"data_offsets":[16384,16512]},'
hdr+='"odd.weight":{"dtype":"F32","shape":[4,48],"data_offsets":[16512,17280]}}'
n=${#hdr}
pattern='\x00\x00\x80\x3f\x00\x00\x00\xbf\x00\x00\x40\x40\x00\x00\x80\xbe'
{
  printf "$(printf '\\x%02x' $((n & 255)) $(((n >> 8) & 255)) 0 0 0 0 0 0)"
  printf '%s' "$hdr"
  for _ in $(seq 1024); do printf "$pattern"; done
  for _ in $(seq 64); do printf '\x00\x3c'; done
  for _ in $(seq 48); do printf "$pattern"; done
} >"$st"
# wants a line of the last output matching the extended regex $1
expect_line() {
  runs=$((runs + 1))
  if ! grep -qE -- "$1" "$out"; then
    echo "FAIL: no line matches '$1' in:"
    head -c 2000 "$out"
    fails=$((fails + 1))
  fi
}
expect 0 "--keep-f32" -- quantize --help
expect 0 "_norm.weight" -- quantize --help  # the rule is stated
expect 0 "wrote $tmpd/q8.gguf: 3 tensors (1 quantized to Q8_0)" -- quantize "$st" "$tmpd/q8.gguf" --type q8_0
expect_line '^\[1/3\] layer\.weight: F32 -> Q8_0'  # plain progress lines when stderr is no terminal
expect_line '^\[3/3\] odd\.weight: F32 -> F32.*not whole Q8_0 blocks'
expect 0 "GGUF v3, alignment 32" -- info "$tmpd/q8.gguf"
expect_line '^  layer\.weight +\[64, 64\] +Q8_0 +4352 '
expect_line '^  norm\.weight +\[64\] +F32 +256 '
expect_line '^  general\.file_type +u32 +7$'
expect_line '^  Q8_0 +1 tensors'
expect 0 "safetensors, 0 metadata keys, 3 tensors" -- info "$st"
expect_line '^  norm\.weight +\[64\] +f16 +128$'
expect 2 "the types are Q4_0, Q4_1" -- quantize "$st" "$tmpd/x.gguf" --type q9
expect 2 "'Q8_K' is not a type wick quantize writes" -- quantize "$st" "$tmpd/x.gguf" --type Q8_K
expect 2 "OUT is required" -- quantize "$st"
expect 2 "--type is required" -- quantize "$st" "$tmpd/x.gguf"
expect 1 "tensor 'layer.weight' [64, 64] Q8_0: it is already Q8_0" -- quantize "$tmpd/q8.gguf" "$tmpd/q4.gguf" --type q4_0
expect 0 "(1 quantized to Q4_0)" -- quantize "$tmpd/q8.gguf" "$tmpd/q4.gguf" --type q4_0 --allow-requantize
expect 0 "(0 quantized to Q4_0)" -- quantize "$st" "$tmpd/k.gguf" --type q4_0 --keep-f32 layer
expect 1 "is the input file" -- quantize "$tmpd/q8.gguf" "$tmpd/q8.gguf" --type q8_0
printf 'not a model' >"$tmpd/junk.bin"
expect 1 "neither a GGUF file" -- info "$tmpd/junk.bin"

# the quantized bench suite: a baseline, then the case in % of it
expect 0 "% of copy_bandwidth" -- bench --suite quant --quick --device cpu --op q8_0_1x4096x4096
expect 2 "--op 'nope' is in no quant-suite case name" -- bench --suite quant --op nope --quick
expect 2 "--reps belongs to the default suite; --suite quant" -- bench --suite quant --reps 3

echo "test_cli.sh: $((runs - fails)) of $runs passed"
[ "$fails" = 0 ]
