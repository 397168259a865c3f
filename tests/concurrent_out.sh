#!/usr/bin/env bash
# concurrent_out.sh CKPT_VERIFY CASES CASE OUT ROUNDS: two runs of one case
# into one --out at the same time, ROUNDS times. Each writes its report,
# summary.json and junit.xml under a temporary name of its own, so both
# finish (exit 0) and whichever renames last leaves whole files: the report
# reads back, summary.json parses, no temporary is left.
set -u
cv=$1 cases=$2 case=$3 out=$4 rounds=$5
fail() { echo "concurrent_out.sh: $*" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  "$cv" --cases "$cases" --case "$case" --out "$out" >"$out/a.log" 2>&1 & a=$!
  "$cv" --cases "$cases" --case "$case" --out "$out" >"$out/b.log" 2>&1 & b=$!
  wait $a; ca=$?
  wait $b; cb=$?
  [ "$ca" -eq 0 ] && [ "$cb" -eq 0 ] || { cat "$out/a.log" "$out/b.log"; fail "round $round: exit codes $ca and $cb, wanted 0 and 0"; }
  "$cv" diff "$out/$case.h5" "$out/$case.h5" >/dev/null || fail "round $round: $case.h5 is not whole"
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out/summary.json" || fail "round $round: summary.json is not whole"
  grep -q '</testsuites>' "$out/junit.xml" || fail "round $round: junit.xml is not whole"
  ! compgen -G "$out/*.tmp" >/dev/null || fail "round $round: temporaries left: $(ls "$out")"
done
echo "$rounds rounds of two concurrent runs into one --out: both finished, files whole"
