#!/usr/bin/env bash
# run.sh SCRIPT ARGS...: runs a tests/xla script in the XLA environment
# (scripts/python-xla); without .venv-xla the test is Skipped (exit 77,
# CTest's SKIP_RETURN_CODE) with the reason.
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -x "$root/.venv-xla/bin/python" ]; then
  echo "skipped: no XLA environment at $root/.venv-xla (bash scripts/setup-env.sh env/xla-requirements.txt .venv-xla)"
  exit 77
fi
exec "$root/scripts/python-xla" "$@"
