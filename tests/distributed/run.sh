#!/usr/bin/env bash
# run.sh PYTHON TEST_FILE: pytest on one file of tests/distributed; exit 77
# (CTest's Skipped) when every test in it was skipped, printing why.
py=$1; file=$2
out=$("$py" -m pytest -q -rs -p no:cacheprovider "$file" 2>&1); rc=$?
echo "$out"
if [ "$rc" -eq 0 ] && echo "$out" | grep -q "skipped" && ! echo "$out" | grep -q "passed"; then
  exit 77
fi
exit "$rc"
