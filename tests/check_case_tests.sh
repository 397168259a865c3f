#!/usr/bin/env bash
# check_case_tests.sh CMAKE CKPT_VERIFY GENERATOR CASES OUT_DIR: runs the
# per-case test generator (tests/gen_case_tests.cmake) on CASES as a CUDA
# build and as a CPU build would, and checks what each gets: the gpu case
# it_gpu, on CUDA, RESOURCE_GROUPS gpus:1 and the GPU launcher; on CPU, no
# test; the CPU case it_cpu a plain test with its labels in both; every test
# the environment it is given (the pinned thread count).
set -euo pipefail
cmake=$1 cv=$2 gen=$3 cases=$4 out=$5
mkdir -p "$out"
for full in ON OFF; do
  "$cmake" -DCV="$cv" -DCASES="$cases" -DOUT="$out/gen_$full.cmake" -DWORK="$out/work" \
    -DCUDA_FULL=$full -DGPU_LAUNCHER=/launcher -DTEST_ENVIRONMENT=OMP_NUM_THREADS=3,MKL_NUM_THREADS=3 -P "$gen"
done
fail() { echo "check_case_tests: $*"; cat "$out/gen_ON.cmake" "$out/gen_OFF.cmake"; exit 1; }
on=$out/gen_ON.cmake off=$out/gen_OFF.cmake
grep -qF 'add_test([=[case/it_gpu]=] [=[/launcher]=] ' "$on" || fail "CUDA: it_gpu does not run through the launcher"
grep -qF 'set_tests_properties([=[case/it_gpu]=] PROPERTIES LABELS "case;gpu" ENVIRONMENT "OMP_NUM_THREADS=3;MKL_NUM_THREADS=3" RESOURCE_GROUPS gpus:1 ' "$on" ||
  fail "CUDA: it_gpu lacks RESOURCE_GROUPS gpus:1"
grep -qF 'set_tests_properties([=[case/it_cpu]=] PROPERTIES LABELS "case;nightly" ENVIRONMENT "OMP_NUM_THREADS=3;MKL_NUM_THREADS=3")' "$on" ||
  fail "CUDA: it_cpu labels or environment"
grep -q 'it_gpu' "$off" && fail "CPU: it_gpu has a test"
grep -qF '# 1 gpu-labelled case(s) have no test' "$off" || fail "CPU: the omission is not noted"
grep -qF 'add_test([=[case/it_cpu]=] [=[' "$off" || fail "CPU: it_cpu has no test"
grep -qF 'set_tests_properties([=[case/it_cpu]=] PROPERTIES LABELS "case;nightly" ENVIRONMENT "OMP_NUM_THREADS=3;MKL_NUM_THREADS=3")' "$off" ||
  fail "CPU: it_cpu labels or environment"
echo "check_case_tests: CUDA and CPU builds get the expected per-case tests"
