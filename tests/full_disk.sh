#!/usr/bin/env bash
# full_disk.sh CKPT_VERIFY CASES CASE OUT PYTHON: writes that fail part way
# (a file size limit, `ulimit -f`: EFBIG, the same failure paths as a full
# disk's ENOSPC, and it needs no root) while the report, then the summary,
# is written must end in exit 1, never a crash, leave the previous report,
# summary.json and junit.xml byte for byte as they were (or, when only the
# report failed, a new summary that does not list it) and no temporary.
set -u
cv=$1 cases=$2 case=$3 out=$4 py=$5
fail() { echo "full_disk.sh: $*" >&2; exit 1; }
rm -rf "$out"
"$cv" --cases "$cases" --case "$case" --out "$out" >/dev/null || fail "the first run failed"
report=$(cksum <"$out/$case.h5")

# 20 KiB: the summary fits, the report does not.
# Output goes through a pipe: the size limit applies to every file written.
log=$(bash -c "ulimit -f 20; exec \"\$@\"" - "$cv" --cases "$cases" --case "$case" --out "$out" 2>&1)
code=$?
printf '%s\n' "$log"
[ "$code" -eq 1 ] || fail "exit code $code with the report past the size limit, wanted 1"
grep -q "File too large" <<<"$log" || fail "the error does not say why the report was not written"
[ "$(cksum <"$out/$case.h5")" = "$report" ] || fail "the previous report changed"
! compgen -G "$out/*.tmp" >/dev/null || fail "a temporary was left: $(ls "$out")"
"$py" - "$out/summary.json" "$case" <<'PY' || fail "the summary lists the unwritten report"
import json, sys
records = [r for r in json.load(open(sys.argv[1]))["records"] if r["case"] == sys.argv[2]]
sys.exit(0 if records and all(r.get("h5") is None for r in records) else 1)
PY

# 1 KiB: neither the report nor the summary fits.
summary=$(cksum <"$out/summary.json") junit=$(cksum <"$out/junit.xml")
log=$(bash -c "ulimit -f 1; exec \"\$@\"" - "$cv" --cases "$cases" --case "$case" --out "$out" 2>&1)
code=$?
printf '%s\n' "$log"
[ "$code" -eq 1 ] || fail "exit code $code with the summary past the size limit, wanted 1"
# The summary and junit.xml are published as a pair: whichever temporary
# does not fit is named, and neither file is replaced.
grep -Eq "(summary\.json|junit\.xml)\.[A-Za-z0-9]{6}\.tmp: cannot write: File too large" <<<"$log" || fail "the error does not name the summary or junit.xml"
[ "$(cksum <"$out/summary.json")" = "$summary" ] || fail "the previous summary changed"
[ "$(cksum <"$out/junit.xml")" = "$junit" ] || fail "the previous junit.xml changed"
[ "$(cksum <"$out/$case.h5")" = "$report" ] || fail "the previous report changed"
! compgen -G "$out/*.tmp" >/dev/null || fail "a temporary was left: $(ls "$out")"
echo "writes past a size limit: exit 1, previous report, summary and junit kept"
