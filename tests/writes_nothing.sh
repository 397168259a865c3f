#!/usr/bin/env bash
# writes_nothing.sh DIR CODE REGEX -- COMMAND...: COMMAND must fail as
# expect_error.sh checks (exit CODE, one line on stderr matching REGEX) and
# leave DIR exactly as it was: absent stays absent, a previous report keeps
# every file byte for byte and gains none.
set -u
dir=$1 code=$2 pattern=$3
shift 3
[ "${1:-}" = "--" ] && shift
snapshot() { if [ -e "$dir" ]; then (cd "$dir" && find . -print0 | sort -z | xargs -0 -r cksum 2>&1); else echo absent; fi; }
before=$(snapshot)
bash "$(dirname "$0")/expect_error.sh" "$code" "$pattern" -- "$@" || exit 1
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "writes_nothing.sh: $dir changed:"; diff <(echo "$before") <(echo "$after"); exit 1
fi
echo "writes_nothing.sh: $dir unchanged"
