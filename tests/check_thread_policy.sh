#!/usr/bin/env bash
# check_thread_policy.sh CKPT_VERIFY OUT_DIR PYTHON: with no thread count
# pinned by the caller (OMP_NUM_THREADS unset), a case too small for
# libtorch to split any op runs on one thread and a larger one on
# libtorch's default, each report saying why (threads, threads_reason); and
# idle OpenMP workers sleep (OMP_WAIT_POLICY=PASSIVE) unless the caller
# asked otherwise, as libgomp itself reports it (OMP_DISPLAY_ENV).
set -euo pipefail
cv=$1 out=$2 python=$3
fail() { echo "check_thread_policy: $*" >&2; exit 1; }
unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS OMP_WAIT_POLICY
rm -rf "$out"
mkdir -p "$out"
# tiny: 1 x 2 rows x 8 wide = 16 elements; wide: 4 x 64 rows x 256 wide = 65536.
printf '[defaults]\nlayers = 1\nsteps = 1\n[case:tiny]\nhidden = 8\nseq = 2\nbatch = 1\n[case:wide]\nhidden = 256\nseq = 64\nbatch = 4\n' \
  >"$out/sizes.ini"
"$cv" --cases "$out/sizes.ini" --case tiny --case wide --out "$out/run" >/dev/null
default=$("$python" -c 'import torch; print(torch.get_num_threads())')
attr() { "$python" -c 'import sys, h5py; v = h5py.File(sys.argv[1], "r").attrs[sys.argv[2]]; print(v.decode() if isinstance(v, bytes) else v)' "$1" "$2"; }
[ "$(attr "$out/run/tiny.h5" threads)" = 1 ] || fail "tiny ran with $(attr "$out/run/tiny.h5" threads) threads, wanted 1"
attr "$out/run/tiny.h5" threads_reason | grep -q "below libtorch's parallel grain" ||
  fail "tiny's threads_reason: $(attr "$out/run/tiny.h5" threads_reason)"
[ "$(attr "$out/run/wide.h5" threads)" = "$default" ] ||
  fail "wide ran with $(attr "$out/run/wide.h5" threads) threads, wanted libtorch's default $default"
echo "check_thread_policy: tiny 1 thread, wide $default ($(attr "$out/run/wide.h5" threads_reason))"
policy() { OMP_DISPLAY_ENV=true "$@" "$cv" --version 2>&1 >/dev/null | sed -nE "s/^ *OMP_WAIT_POLICY = '([A-Z]+)'.*/\1/p"; }
[ "$(policy env)" = PASSIVE ] || fail "with OMP_WAIT_POLICY unset, libgomp's policy is '$(policy env)', wanted PASSIVE"
[ "$(policy env OMP_WAIT_POLICY=active)" = ACTIVE ] || fail "the caller's OMP_WAIT_POLICY=active was not kept"
echo "check_thread_policy: idle workers PASSIVE by default, the caller's ACTIVE kept"
