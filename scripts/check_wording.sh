#!/usr/bin/env bash
# Tracked text speaks of the product, for its users and the next engineer: how it was developed
# (numbered attempts, rejected variants, issue numbers as targets, session talk) lives in git
# history. Scans every tracked text file for the phrases below, case-insensitive, and prints each
# hit as file:line: phrase. Exit 0 when there is none, 1 otherwise.
#
# Skipped: binary files (git's own test: the GGUF vocab fixtures carry tokens such as "stop 4") and
# the JSON data under tests/fixtures (reference outputs of other tools), and this file, which holds
# the patterns. Nothing else is exempt.
#
# Usage: scripts/check_wording.sh [ROOT]   (ROOT defaults to the repository of this script)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"

# One extended regular expression a line; a line of the file matching any of them is a hit.
patterns=(
  '\bstops? [0-9]+'              # "stop 48", "stops 42-48"
  'stop[-_]?[0-9]+'              # "stop48", "stop-48", "_stop48" in file names
  '\blevers?\b'                  # "the lever", "levers tried"
  '\bnot kept\b'
  '\btried and (reverted|dropped|rejected)\b'
  '\bissue #?[0-9]+'             # issue numbers as targets
  '\bthis (session|stop)\b'
  '\b(next|previous|last|earlier) session\b'
  '\b(the )?session.s (device )?time\b'
  '\btime budget\b'
  '\bdevice budget\b'
  '\blaps? (on|at)\b'            # CI lap history
)
regex=$(IFS='|'; echo "${patterns[*]}")

status=0
exclude=(':(exclude)tests/fixtures/**/*.json' ':(exclude)tests/fixtures/*.json' ':(exclude)scripts/check_wording.sh')
if git grep -I -n -o -i -E -e "$regex" -- . "${exclude[@]}"; then
  status=1
fi
# File names too (bench/results is named by suite, device and date).
if git ls-files | grep -i -E -e "$regex" | sed 's/$/: (file name)/'; then
  status=1
fi

if [ "$status" -ne 0 ]; then
  echo "check_wording: the lines above speak of how the code was developed; say what the product" \
    "does and why, and leave the history to git (patterns in scripts/check_wording.sh)." >&2
fi
exit "$status"
