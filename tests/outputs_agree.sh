#!/usr/bin/env bash
# outputs_agree.sh MODE CKPT_VERIFY CASES CASE OUT PYTHON: what a run leaves
# in OUT tells the same story in every file, also when a write fails.
#   report: the case's report cannot fit a file size limit (`ulimit -f`,
#           the failure path of a full disk; the room for the report is
#           reserved before the case runs, so it is refused up front):
#           summary.json records the case as ERROR, not expected, naming
#           the report and why, and junit.xml counts it as an error: no
#           green report beside the previous run's HDF5 file.
#   pair:   junit.xml cannot be replaced (a directory holds its name):
#           summary.json is not replaced either; the run exits 1.
set -u
mode=$1 cv=$2 cases=$3 case=$4 out=$5 py=$6
fail() { echo "outputs_agree.sh $mode: $*" >&2; exit 1; }
rm -rf "$out"
"$cv" --cases "$cases" --case "$case" --out "$out" >/dev/null || fail "the first run failed"
case $mode in
report)
    log=$(bash -c "ulimit -f 20; exec \"\$@\"" - "$cv" --cases "$cases" --case "$case" --out "$out" 2>&1)
    code=$?
    printf '%s\n' "$log"
    [ "$code" -eq 1 ] || fail "exit code $code with the report past the size limit, wanted 1"
    "$py" - "$out" "$case" <<'PY' || fail "summary.json or junit.xml reads green for an unwritten report"
import json, sys
import xml.etree.ElementTree as ET
out, case = sys.argv[1], sys.argv[2]
records = [r for r in json.load(open(out + "/summary.json"))["records"] if r["case"] == case]
bad = [r for r in records if r["verdict"] != "ERROR" or r["expected"]
       or f"{case}.h5: cannot write: File too large" not in r["reason"]]
suite = ET.parse(out + "/junit.xml").getroot().find("testsuite")
errors = int(suite.get("errors"))
print("records:", [(r["impl"], r["verdict"], r.get("judged_verdict")) for r in records], "junit errors:", errors)
sys.exit(0 if records and not bad and errors == len(records) else 1)
PY
    ;;
pair)
    summary=$(cksum <"$out/summary.json")
    rm "$out/junit.xml" && mkdir "$out/junit.xml" || fail "cannot set up"
    log=$("$cv" --cases "$cases" --case "$case" --out "$out" 2>&1)
    code=$?
    printf '%s\n' "$log"
    [ "$code" -eq 1 ] || fail "exit code $code with junit.xml unwritable, wanted 1"
    grep -q "junit.xml: is a directory" <<<"$log" || fail "the error does not name junit.xml"
    [ "$(cksum <"$out/summary.json")" = "$summary" ] || fail "summary.json was replaced without its junit.xml"
    ! compgen -G "$out/*.tmp" >/dev/null || fail "a temporary was left: $(ls "$out")"
    ;;
*) fail "unknown mode" ;;
esac
echo "outputs_agree.sh $mode: ok"
