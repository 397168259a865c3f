#!/usr/bin/env bash
# bytes_plot.sh OUT_DIR XLA_REPORTS_DIR JAX_REPORTS_DIR: the figure of bytes
# per XLA run, measured and predicted (scripts/xla_bytes_figure.py), from
# the reports the xla and jax tests wrote (their fixture runs them first),
# and the check that its data file holds one row per run with both numbers:
# 16 torch_xla runs, and 5 JAX runs when .venv-jax is there. Skipped
# (exit 77) without .venv-xla: there are no XLA reports to draw.
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1 xla=$2 jax=$3
if [ ! -x "$root/.venv-xla/bin/python" ]; then
  echo "skipped: no XLA environment at $root/.venv-xla, so no XLA reports"
  exit 77
fi
want=16
reports=("$xla"/*/*.h5)
if [ -x "$root/.venv-jax/bin/python" ]; then
  want=$((want + 5))
  reports+=("$jax"/*/*.h5)
fi
exec "$root/scripts/python" "$root/scripts/xla_bytes_figure.py" --out "$out" --expect-rows "$want" "${reports[@]}"
