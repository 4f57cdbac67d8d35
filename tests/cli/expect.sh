# The `expect` check the tests/cli scripts share (sourced, not run). The caller sets wick (the
# binary), out and err (files for stdout and stderr; err = out keeps one combined stream, for
# checks of the order of lines), and fails=0, runs=0 (counted here).
# expect CODE SUBSTRING -- ARGS...: runs wick ARGS, wants exit CODE and SUBSTRING in stdout+stderr
# (an empty SUBSTRING checks the exit code only).
expect() {
  local code="$1" want="$2" got
  shift 3
  runs=$((runs + 1))
  local files=("$out")
  if [ "$err" = "$out" ]; then
    "$wick" "$@" >"$out" 2>&1
    got=$?
  else
    "$wick" "$@" >"$out" 2>"$err"
    got=$?
    files+=("$err")
  fi
  if [ "$got" != "$code" ]; then
    echo "FAIL: wick $*: exit $got, want $code; output:"
    head -c 2000 "${files[@]}"
    fails=$((fails + 1))
  elif [ -n "$want" ] && ! cat "${files[@]}" | grep -qF -- "$want"; then
    echo "FAIL: wick $*: output lacks '$want'; output:"
    head -c 2000 "${files[@]}"
    fails=$((fails + 1))
  fi
}
