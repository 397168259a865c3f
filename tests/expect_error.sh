#!/usr/bin/env bash
# expect_error.sh CODE REGEX -- COMMAND...: runs COMMAND and passes when it
# exits with CODE, prints nothing on stdout, and prints exactly one line on
# stderr that matches REGEX: the one-line error every bad input must get (no
# HDF5 error stack, no crash report, no partial output before it).
set -u
want=$1 pattern=$2
shift 2
[ "${1:-}" = "--" ] && shift
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
out=$("$@" 2>"$errfile"); code=$?
err=$(cat "$errfile")
printf 'stdout: %s\nstderr: %s\n' "$out" "$err"
fail() { echo "expect_error.sh: $*" >&2; exit 1; }
[ "$code" -eq "$want" ] || fail "exit code $code, wanted $want"
[ -z "$out" ] || fail "stdout is not empty"
[ -n "$err" ] || fail "stderr is empty"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "stderr has more than one line"
grep -Eq -- "$pattern" <<<"$err" || fail "stderr does not match /$pattern/"
