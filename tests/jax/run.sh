#!/usr/bin/env bash
# run.sh SCRIPT ARGS...: runs a tests/jax script in the JAX environment
# (scripts/python-jax); without .venv-jax the test is Skipped (exit 77,
# CTest's SKIP_RETURN_CODE) with the reason.
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -x "$root/.venv-jax/bin/python" ]; then
  echo "skipped: no JAX environment at $root/.venv-jax (bash scripts/setup-env.sh env/jax-requirements.txt .venv-jax)"
  exit 77
fi
exec "$root/scripts/python-jax" "$@"
