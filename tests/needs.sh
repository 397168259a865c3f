#!/usr/bin/env bash
# needs.sh TOOL... -- COMMAND...: runs COMMAND when every TOOL is found on
# PATH; otherwise says which are absent and exits 77, the SKIP_RETURN_CODE
# of the tests that go through it (ckpt_add_test_needing in
# cmake/test_env.cmake), so CTest reports them Skipped, not Failed.
set -u
missing=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  command -v "$1" >/dev/null 2>&1 || missing+=("$1")
  shift
done
if [ $# -eq 0 ]; then
  echo "usage: needs.sh TOOL... -- COMMAND..." >&2
  exit 2
fi
shift
if [ ${#missing[@]} -gt 0 ]; then
  echo "skipped: ${missing[*]} is absent (not found on PATH), and this test needs it"
  exit 77
fi
exec "$@"
