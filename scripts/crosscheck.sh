#!/usr/bin/env bash
# crosscheck.sh [options] CASE...: runs each case in ckpt-verify, runs it
# again in PyTorch with torch.utils.checkpoint (scripts/torch_crosscheck.py,
# from the case's HDF5 report alone), and compares the runs pairwise with
# `ckpt-verify diff`: baseline_0 / torch_none, reentrant / torch_reentrant,
# nonreentrant / torch_nonreentrant. A pair passes when it is bitwise
# identical, or when the case has a known cause of difference
# (torch_crosscheck.py CAUSES) and the difference is within its bound.
#
#   --ckpt-verify PATH   the binary (default: build/ckpt-verify)
#   --python PATH        python with torch and h5py (default: scripts/python)
#   --out DIR            reports go here, torch's under DIR/torch/
#                        (default: reports/crosscheck-<UTC time>)
#   --rules torch|harness, --plant KIND   passed to torch_crosscheck.py
#   --selective          also selective vs torch_selective (torch 2.x's
#                        create_selective_checkpoint_contexts); exit 2 without it
#                        (skipped) with the reason where torch lacks it
#
# Exit: 0 every pair bitwise or within its bound, 1 an unexplained
# difference, 2 usage error or the harness run itself failed (or
# --selective where torch has no selective checkpointing).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cv=$root/build/ckpt-verify
py=$root/scripts/python
out=""
extra=()
cases=()
while [ $# -gt 0 ]; do
  case $1 in
    --ckpt-verify) cv=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rules|--plant) extra+=("$1" "$2"); shift 2 ;;
    --selective) extra+=("$1"); shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "crosscheck.sh: unknown option $1" >&2; exit 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done
if [ ${#cases[@]} -eq 0 ]; then
  echo "usage: crosscheck.sh [--ckpt-verify PATH] [--python PATH] [--out DIR] [--rules R] [--plant K] CASE..." >&2
  exit 2
fi
[ -n "$out" ] || out=$root/reports/crosscheck-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out/torch" || exit 2

# --selective needs torch 2.x (the pinned torch has it): an older torch is
# an error, said before running anything, never a skip.
for e in ${extra[@]+"${extra[@]}"}; do
  if [ "$e" = --selective ] && ! "$py" -c 'import sys, torch.utils.checkpoint as c; sys.exit(0 if hasattr(c, "create_selective_checkpoint_contexts") else 1)'; then
    echo "crosscheck: $("$py" -c 'import torch; print("torch", torch.__version__)') has no selective checkpointing (create_selective_checkpoint_contexts is torch 2.x; env/requirements.txt pins one)" >&2
    exit 2
  fi
done

args=()
for c in "${cases[@]}"; do args+=(--case "$c"); done
# The harness's own verdicts must be as the cases expect before its runs
# are worth comparing with anything.
if ! "$cv" "${args[@]}" --out "$out"; then
  echo "crosscheck.sh: ckpt-verify failed on its own cases; nothing cross-checked" >&2
  exit 2
fi

reports=()
for c in "${cases[@]}"; do reports+=("$out/$c.h5"); done
"$py" "$root/scripts/torch_crosscheck.py" "${reports[@]}" --out-dir "$out/torch" --check "$cv" ${extra[@]+"${extra[@]}"}
status=$?
if [ $status -eq 77 ]; then
  echo "crosscheck: skipped (see the reason above)"
  exit 77
fi
if [ $status -gt 1 ]; then
  echo "crosscheck.sh: torch_crosscheck.py failed (exit $status)" >&2
  exit 2
fi
if [ $status -eq 0 ]; then
  echo "crosscheck: ${cases[*]}: every pair bitwise identical or within its documented bound"
else
  echo "crosscheck: ${cases[*]}: UNEXPLAINED differences (see above)"
fi
exit $status
