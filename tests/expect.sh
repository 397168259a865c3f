#!/usr/bin/env bash
# expect.sh CODE REGEX [REGEX...] -- COMMAND...: runs COMMAND, passes when it
# exits with CODE and its output (stdout + stderr) matches every REGEX.
# A COMMAND that exits 77 (skipped, with its reason in the output) makes
# expect.sh exit 77 too, for tests with SKIP_RETURN_CODE 77.
set -u
want=$1; shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
shift
out=$("$@" 2>&1); code=$?
printf '%s\n' "$out"
if [ "$code" -eq 77 ] && [ "$want" -ne 77 ]; then
  exit 77
fi
if [ "$code" -ne "$want" ]; then
  echo "expect.sh: exit code $code, wanted $want" >&2; exit 1
fi
for p in "${patterns[@]}"; do
  if ! grep -Eq -- "$p" <<<"$out"; then
    echo "expect.sh: output does not match /$p/" >&2; exit 1
  fi
done
