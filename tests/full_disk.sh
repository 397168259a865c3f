#!/usr/bin/env bash
# full_disk.sh CKPT_VERIFY CASES CASE OUT PYTHON: a full disk while the
# report or the summary is written (its temporary name is made a link to
# /dev/full, where every write fails with ENOSPC, even for root) must fail
# the run, leave the previous report and summary byte for byte as they were,
# remove the temporary, and never list the unwritten report in a summary.
set -u
cv=$1 cases=$2 case=$3 out=$4 py=$5
fail() { echo "full_disk.sh: $*" >&2; exit 1; }
[ -c /dev/full ] || { echo "no /dev/full: skipped"; exit 0; }
rm -rf "$out"
"$cv" --cases "$cases" --case "$case" --out "$out" >/dev/null || fail "the first run failed"
report=$(cksum <"$out/$case.h5") summary=$(cksum <"$out/summary.json")

ln -s /dev/full "$out/$case.h5.tmp"
"$cv" --cases "$cases" --case "$case" --out "$out" >"$out/log" 2>&1
code=$?
cat "$out/log"
[ "$code" -eq 1 ] || fail "exit code $code with the report's disk full, wanted 1"
grep -q "No space left on device" "$out/log" || fail "the error does not say the disk is full"
[ "$(cksum <"$out/$case.h5")" = "$report" ] || fail "the previous report changed"
[ ! -e "$out/$case.h5.tmp" ] && [ ! -L "$out/$case.h5.tmp" ] || fail "the temporary report was left"
"$py" - "$out/summary.json" "$case" <<'PY' || fail "the summary lists the unwritten report"
import json, sys
records = [r for r in json.load(open(sys.argv[1]))["records"] if r["case"] == sys.argv[2]]
sys.exit(0 if records and all(r.get("h5") is None for r in records) else 1)
PY

summary=$(cksum <"$out/summary.json")
ln -s /dev/full "$out/summary.json.tmp"
"$cv" --cases "$cases" --case "$case" --out "$out" >"$out/log" 2>&1
code=$?
cat "$out/log"
[ "$code" -ne 0 ] || fail "exit code 0 with the summary's disk full"
grep -q "summary.json.tmp: cannot write" "$out/log" || fail "the error does not name the summary"
[ "$(cksum <"$out/summary.json")" = "$summary" ] || fail "the previous summary changed"
echo "full disk: previous report and summary kept"
