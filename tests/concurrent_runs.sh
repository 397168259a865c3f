#!/usr/bin/env bash
# concurrent_runs.sh CKPT_VERIFY CASES OUT MODE OFFSET: two runs into one
# --out that already holds a previous run of both cases, the second started
# OFFSET seconds after the first (issue 49: 0, 0.1, 0.2 and 0.6 s).
# MODE "different": one runs conc_t, the other conc_u; "same": both run
# conc_t. Each run must keep every report it announces: its exit code is
# 0, the reports of the cases it ran exist at the end, summary.json names
# only files that exist and (the runs overlap: each lasts seconds) every
# case either run ran, and no temporary is left.
set -u
cv=$1 cases=$2 out=$3 mode=$4 offset=$5
fail() { echo "concurrent_runs.sh ($mode, ${offset} s): $*" >&2; ls -la "$out" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# The predecessor: a summary naming both reports, which a run used to
# remove at its end whatever had been written since it started.
"$cv" --cases "$cases" --case conc_t --case conc_u --out "$out" >"$logs/first.log" 2>&1 ||
  { cat "$logs/first.log"; fail "the first run failed"; }
second=conc_u
[ "$mode" = same ] && second=conc_t
# Each run is held to several seconds by timing-only steps (--repeats: not
# recorded, so the reports stay small), so that runs started up to 0.6 s
# apart overlap whatever the machine's speed (a run of the bare case takes
# 0.8 s, about the offset: it made the 0.6 s variant pass or fail by chance).
long=(--repeats 6000)
"$cv" --cases "$cases" --case conc_t "${long[@]}" --out "$out" >"$logs/a.log" 2>&1 & a=$!
sleep "$offset"
"$cv" --cases "$cases" --case "$second" "${long[@]}" --out "$out" >"$logs/b.log" 2>&1 & b=$!
wait $a; ca=$?
wait $b; cb=$?
[ "$ca" -eq 0 ] && [ "$cb" -eq 0 ] || { cat "$logs/a.log" "$logs/b.log"; fail "exit codes $ca and $cb, wanted 0 and 0"; }
for log in a b; do
  grep -q "report in $out\$" "$logs/$log.log" || { cat "$logs/$log.log"; fail "run $log did not announce its report"; }
done
for c in conc_t "$second"; do
  [ -f "$out/$c.h5" ] || fail "$c.h5, announced, is gone"
  "$cv" diff "$out/$c.h5" "$out/$c.h5" >/dev/null || fail "$c.h5 is not whole"
done
python3 - "$out" conc_t "$second" <<'PY' || fail "summary.json does not hold what the runs announced"
import json, os, sys
out, cases = sys.argv[1], set(sys.argv[2:])
summary = json.load(open(os.path.join(out, "summary.json")))
named = {r["h5"] for r in summary["records"] if r.get("h5")}
missing = [h5 for h5 in named if not os.path.isfile(h5 if "/" in h5 else os.path.join(out, h5))]
assert not missing, f"summary.json names files that do not exist: {missing}"
ran = {r["case"] for r in summary["records"]}
assert cases <= ran, f"summary.json lacks case(s) {sorted(cases - ran)} (it holds {sorted(ran)})"
by_case = {}
for r in summary["records"]:
    by_case.setdefault(r["case"], set()).add(r["impl"])
assert all(len(v) == len(by_case[next(iter(cases))]) for k, v in by_case.items() if k in cases), by_case
PY
! compgen -G "$out/*.tmp" >/dev/null || fail "temporaries left: $(ls "$out")"
echo "two runs into one --out ($mode cases, ${offset} s apart): every announced report kept, summary whole"
