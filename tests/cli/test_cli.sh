#!/usr/bin/env bash
# The `wick` command line: exit codes and messages (issue 7 section 6). A command line the tool
# cannot act on exits 2 and names what was wrong; nothing may exit 0 having done nothing.
# Usage: bash tests/cli/test_cli.sh path/to/wick
set -u
wick="${1:?usage: test_cli.sh path/to/wick}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
fails=0
runs=0

# expect CODE SUBSTRING -- ARGS...: runs wick ARGS, wants exit CODE and SUBSTRING in stdout+stderr
# (an empty SUBSTRING checks the exit code only).
expect() {
  local code="$1" want="$2"
  shift 3
  runs=$((runs + 1))
  "$wick" "$@" >"$out" 2>&1
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL: wick $*: exit $got, want $code; output:"
    head -c 2000 "$out"
    fails=$((fails + 1))
  elif [ -n "$want" ] && ! grep -qF -- "$want" "$out"; then
    echo "FAIL: wick $*: output lacks '$want'; output:"
    head -c 2000 "$out"
    fails=$((fails + 1))
  fi
}

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

echo "test_cli.sh: $((runs - fails)) of $runs passed"
[ "$fails" = 0 ]
