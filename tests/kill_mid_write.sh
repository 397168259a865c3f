#!/usr/bin/env bash
# kill_mid_write.sh CKPT_VERIFY CASES OUT PYTHON: SIGKILLs `ckpt-verify`
# while it writes a report (a *.tmp file exists in OUT), several times, and
# after each kill checks that OUT holds no partial report: every *.h5 is a
# complete file (diff reads it), summary.json (if any) is complete JSON that
# lists only files that exist; *.tmp leftovers are allowed and never listed.
# Then one run to the end must leave a summary whose every file exists.
set -u
cv=$1 cases=$2 out=$3 py=$4
attempts=8
fail() { echo "kill_mid_write.sh: $*" >&2; exit 1; }

check_out() {
  local f
  for f in "$out"/*.h5; do
    [ -e "$f" ] || continue
    "$cv" diff "$f:baseline_0" "$f:baseline_0" >/dev/null 2>&1 || fail "partial report $f after $1"
  done
  if [ -e "$out/summary.json" ]; then
    "$py" - "$out/summary.json" <<'PY' || fail "bad summary.json after $1"
import json, os, sys
with open(sys.argv[1]) as f:
    summary = json.load(f)
for r in summary["records"]:
    h5 = r.get("h5")
    if h5 is not None and (h5.endswith(".tmp") or not os.path.isfile(h5)):
        sys.exit("summary lists %s, which does not exist" % h5)
PY
  fi
}

caught=0
for attempt in $(seq 1 $attempts); do
  rm -rf "$out"
  mkdir -p "$out"
  "$cv" --cases "$cases" --suite kill --out "$out" >/dev/null 2>&1 &
  pid=$!
  # Poll for a write in progress; kill at once or a little later, so the
  # kills land at different points of the write.
  for i in $(seq 1 4000); do
    if compgen -G "$out/*.tmp" >/dev/null; then
      [ $((attempt % 2)) -eq 0 ] && sleep "0.0$((RANDOM % 5))"
      kill -9 "$pid" 2>/dev/null && caught=$((caught + 1))
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.005
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "attempt $attempt: $(ls "$out" | tr '\n' ' ')"
  check_out "kill $attempt"
done
[ "$caught" -gt 0 ] || fail "no kill landed while a report was being written"
echo "$caught of $attempts kills landed mid-write; no partial report left"

rm -rf "$out"
"$cv" --cases "$cases" --suite kill --out "$out" >/dev/null || fail "the unkilled run failed"
[ -e "$out/summary.json" ] || fail "the unkilled run wrote no summary.json"
check_out "a complete run"
