#!/usr/bin/env bash
# bench_threads.sh [--suite LABEL] [--load N] [CKPT_VERIFY]: what the thread
# policy costs and saves (docs/performance.md, "Threads"). Runs the suite
# (default nightly) once per mode, one after the other, and prints each
# mode's wall time and CPU time (user + system, all threads):
#   policy   ckpt-verify as shipped: idle OpenMP workers sleep, a case too
#            small to split runs on one thread (thread_policy.h);
#   spin     idle workers spin (OMP_WAIT_POLICY=ACTIVE) and every case runs
#            on all cores (OMP_NUM_THREADS=nproc): libgomp's spinning taken
#            to its end, the shared-runner worst case;
#   one      every case on one thread (--threads 1).
# --load N starts N busy processes for the whole measurement, as other jobs
# on a shared CI runner would be (0: none; the machine's own load counts
# too: the load average is printed). A benchmark, not a test: compare the
# modes of one run only.
set -euo pipefail
suite=nightly load=0
while [ $# -gt 0 ]; do
  case $1 in
    --suite) suite=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_threads.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
cv=${1:-$(dirname "$0")/../build/ckpt-verify}
[ -x "$cv" ] || { echo "bench_threads.sh: $cv: not an executable (build first, or name it)" >&2; exit 2; }
[[ $load =~ ^[0-9]+$ ]] || { echo "bench_threads.sh: --load $load: expected a count" >&2; exit 2; }
work=$(mktemp -d)
busy=()
cleanup() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for ((i = 0; i < load; i++)); do
  bash -c 'while :; do :; done' &
  busy+=($!)
done
cores=$(nproc)
printf '%-8s %10s %10s  %s\n' mode wall_s cpu_s "load average at the end (suite $suite, $load busy processes, $cores cores)"
for mode in policy spin one; do
  case $mode in
    policy) run=(env -u OMP_WAIT_POLICY -u OMP_NUM_THREADS -u MKL_NUM_THREADS "$cv") ;;
    spin) run=(env OMP_WAIT_POLICY=ACTIVE OMP_NUM_THREADS="$cores" MKL_NUM_THREADS="$cores" "$cv") ;;
    one) run=(env -u OMP_WAIT_POLICY -u OMP_NUM_THREADS -u MKL_NUM_THREADS "$cv" --threads 1) ;;
  esac
  /usr/bin/time -f '%e %U %S' -o "$work/time" "${run[@]}" --suite "$suite" --out "$work/$mode" >/dev/null 2>"$work/$mode.err" ||
    { echo "bench_threads.sh: $mode: ckpt-verify failed (exit $?); its last lines:" >&2; tail -3 "$work/$mode.err" >&2; }
  read -r wall user sys < <(tail -1 "$work/time")
  printf '%-8s %10.1f %10.1f  %s\n' "$mode" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
done
