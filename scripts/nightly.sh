#!/usr/bin/env bash
# The nightly job. Runs the nightly suite into $CKPT_NIGHTLY_DIR/<UTC
# date-time> (default reports/nightly), compares it with the latest earlier
# run there (--compare-to: regressions make the exit code 1), draws the
# plots when this ckpt-verify has the `plot` command, keeps the last
# $CKPT_NIGHTLY_KEEP runs (default 14) and exits with ckpt-verify's code.
#
#   CKPT_VERIFY         the binary (default build/ckpt-verify, built if missing)
#   CKPT_NIGHTLY_DIR    where the runs go (default reports/nightly)
#   CKPT_NIGHTLY_KEEP   runs to keep, the new one included (default 14)
#   CKPT_NIGHTLY_ARGS   what to run (default --suite nightly; e.g. add --shard K/N)
set -uo pipefail
cd "$(dirname "$0")/.."

root=${CKPT_NIGHTLY_DIR:-reports/nightly}
keep=${CKPT_NIGHTLY_KEEP:-14}
args=${CKPT_NIGHTLY_ARGS:---suite nightly}
if ! [[ $keep =~ ^[1-9][0-9]*$ ]]; then
  echo "nightly: CKPT_NIGHTLY_KEEP='$keep' is not a positive whole number" >&2
  exit 2
fi
bin=${CKPT_VERIFY:-}
if [ -z "$bin" ]; then
  bin=build/ckpt-verify
  if [ ! -x "$bin" ]; then
    bash scripts/install-deps.sh || exit 3
    { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
      cmake --build build -j "$(nproc)" --target ckpt-verify >/dev/null; } || exit 3
  fi
fi

# Run directories are named by UTC time, so name order is time order; only
# names of that shape are ever compared with or pruned.
run_name='^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$'
runs() { ls -1 "$root" 2>/dev/null | grep -E "$run_name" | sort; }

mkdir -p "$root" || exit 2
previous=""
for name in $(runs); do
  if [ -f "$root/$name/summary.json" ]; then previous=$root/$name; fi
done
stamp=$(date -u +%Y%m%dT%H%M%SZ)
dir=$root/$stamp
n=1
while [ -e "$dir" ]; do n=$((n + 1)); dir=$root/$stamp-$n; done
mkdir -p "$dir" || exit 2

compare=()
if [ -n "$previous" ]; then
  compare=(--compare-to "$previous")
else
  echo "nightly: no earlier run to compare with in $root"
fi
start=$(date +%s)
# shellcheck disable=SC2086 # $args is a list of flags on purpose
"$bin" $args --out "$dir" "${compare[@]}" 2>&1 | tee "$dir/nightly.log"
code=${PIPESTATUS[0]}
echo "nightly: ckpt-verify exited $code after $(( $(date +%s) - start )) s; run in $dir"

if "$bin" plot --help >/dev/null 2>&1; then
  "$bin" plot "$dir" || echo "nightly: warning: plotting failed (the run's verdicts stand)" >&2
else
  echo "nightly: plots skipped: this ckpt-verify has no plot command"
fi

# Keep the newest $keep runs.
mapfile -t all < <(runs)
for ((i = 0; i < ${#all[@]} - keep; i++)); do
  rm -rf -- "${root:?}/${all[i]}"
  echo "nightly: removed old run ${all[i]}"
done
exit "$code"
