#!/usr/bin/env bash
# check_threads.sh CKPT_VERIFY OUT_DIR PYTHON PINNED: every CTest test runs
# with its thread count pinned to PINNED (cmake/test_env.cmake), and in that
# environment the harness still gives a case the threads it asks for: a case
# with `threads = N` in its file, or run with --threads N, records N threads
# in its report (the root attribute `threads`), one without records PINNED.
set -euo pipefail
cv=$1 out=$2 python=$3 pinned=$4
fail() { echo "check_threads: $*" >&2; exit 1; }
[ "${OMP_NUM_THREADS:-unset}" = "$pinned" ] || fail "OMP_NUM_THREADS is '${OMP_NUM_THREADS:-unset}', wanted $pinned"
[ "${MKL_NUM_THREADS:-unset}" = "$pinned" ] || fail "MKL_NUM_THREADS is '${MKL_NUM_THREADS:-unset}', wanted $pinned"
asked=$((pinned + 1))
rm -rf "$out"
mkdir -p "$out"
printf '[defaults]\nlayers = 1\nhidden = 8\nseq = 2\nbatch = 1\n[case:default_threads]\n[case:case_threads]\nthreads = %d\n' \
  "$asked" >"$out/threads.ini"
"$cv" --cases "$out/threads.ini" --case default_threads --case case_threads --out "$out/run" >/dev/null
"$cv" --cases "$out/threads.ini" --case default_threads --threads "$asked" --out "$out/flag" >/dev/null
threads_of() { "$python" -c 'import sys, h5py; print(int(h5py.File(sys.argv[1], "r").attrs["threads"]))' "$1"; }
check() { # REPORT WANTED WHY
  local got
  got=$(threads_of "$1")
  [ "$got" = "$2" ] || fail "$1: ran with $got thread(s), wanted $2 ($3)"
  echo "check_threads: $(basename "$(dirname "$1")")/$(basename "$1"): $got thread(s) ($3)"
}
check "$out/run/default_threads.h5" "$pinned" "the pinned environment"
check "$out/run/case_threads.h5" "$asked" "threads = $asked in the case file"
check "$out/flag/default_threads.h5" "$asked" "--threads $asked"
