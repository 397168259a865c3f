#!/usr/bin/env bash
# valgrind_memcheck.sh [--ours REGEX] -- VALGRIND [ARGS...] PROGRAM [ARGS...]
# Runs memcheck and separates our errors from what valgrind cannot control.
# valgrind 3.19 does not emulate every instruction a library may use on the
# machine it runs on (AVX-512; libhwy's static initialiser in Debian's
# libtorch on AMD EPYC): the process then dies with SIGILL, often before
# main. When the illegal instruction is in an object outside ckpt-verify,
# memcheck cannot run this binary here: exit 77 (CTest's skip) with the
# reason, naming the object and function. When it is in our own code (an
# object matching REGEX: the harness binary, its libraries, its tests), or
# the frame names a source file instead of an object (code built with debug
# information, as ours is; distributions' libraries name their object), it
# is our error: exit 1. Otherwise valgrind's
# own exit status (its --error-exitcode for memcheck errors).
set -u
ours='/(ckpt-verify|test_[a-z_0-9]+|libckpt_[a-z_0-9]+\.so[.0-9]*)$'
if [ "${1:-}" = --ours ]; then ours=$2; shift 2; fi
if [ "${1:-}" = -- ]; then shift; fi
# ckpt-verify re-executes itself when OMP_WAIT_POLICY is unset
# (harness/cli/wait_policy.c); valgrind would run that second image
# natively, unchecked. Set, it runs once, under memcheck.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2> >(tee "$log" >&2)
rc=$?
wait
if grep -q "Process terminating with default action of signal 4 (SIGILL)" "$log"; then
  frame=$(grep -A1 "Illegal opcode at address" "$log" | grep -m1 -oE "at 0x[0-9A-Fa-f]+: .*")
  object=$(sed -nE 's/.*\(in ([^)]*)\)$/\1/p' <<<"$frame")
  if [ -z "$object" ] || [[ $object =~ $ours ]]; then
    echo "valgrind_memcheck: SIGILL in our own code: ${frame:-no frame}" >&2
    exit 1
  fi
  echo "skipped: valgrind cannot emulate an instruction in $(basename "$object"), outside ckpt-verify" \
       "(${frame}): memcheck cannot run this program on this CPU"
  exit 77
fi
exit $rc
