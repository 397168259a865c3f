#!/usr/bin/env bash
# run_bounded.sh FUZZER SECONDS WORKDIR SEED_DIR...: fuzzes for SECONDS in
# libFuzzer's fork mode (a crash, hang or out-of-memory is recorded and the
# run goes on), then replays every finding and sorts it by where it
# happened. Inside HDF5 (a library bug hit by a crafted file: a hang or a
# bad read in its global-heap or object-header code) it is reported and
# kept under WORKDIR, but does not fail: it is not ours to fix, and any
# fuzzing time can find one. Anywhere else, our code or our oracles (a
# message that is not one line, a run that differs from itself, an HDF5
# handle left open), it fails the test. The working corpus and the findings
# live under WORKDIR; seeds are only read.
set -u
# UBSan prints no stack by default, and the stack is what sorts a finding.
export UBSAN_OPTIONS=print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
fuzzer=$1 seconds=$2 work=$3
shift 3
rm -rf "$work/artifacts" "$work/tmp"
mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp"
# The targets write each input to a file under TMPDIR; an input that
# crashed or hung leaves its file behind, so keep those in WORKDIR.
export TMPDIR="$work/tmp"
limits=(-timeout=5 -rss_limit_mb=2048)
log="$work/fuzz.log"
"$fuzzer" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
  "${limits[@]}" -artifact_prefix="$work/artifacts/" "$work/corpus" "$@" >"$log" 2>&1
status=$?
stats=$(grep -a '^#[0-9]*: cov:' "$log" | tail -n 1)
if [ -z "$stats" ]; then
  tail -n 40 "$log"
  echo "run_bounded.sh: the fuzzer did not run (exit $status)" >&2
  exit 1
fi

# The first stack frame that is not the sanitizers', libFuzzer's or libc's:
# where the finding happened (for a leak, who allocated).
site() {
  awk '/^ *#[0-9]+ / {
         if ($0 ~ /__sanitizer|__asan|__lsan|__ubsan|__interceptor_|fuzzer::|libc\.so|libc-start|libc_start|sysdeps\/|_start |__pthread_kill|in (raise|abort|malloc|calloc|realloc|free|posix_memalign|memcpy|memmove|memset|strlen|strdup|__mem[a-z_0-9]*|__str[a-z_0-9]*) /)
           next
         print; exit
       }'
}

ours=0 hdf5=0 flaky=0
for finding in "$work"/artifacts/*; do
  [ -e "$finding" ] || continue
  report=$("$fuzzer" "${limits[@]}" "$finding" 2>&1)
  replayed=$?
  where=$(site <<<"$report")
  if [ "$replayed" -eq 0 ]; then
    # A leak or a slow run that needed the state earlier inputs left (in
    # HDF5's caches): reported, but a finding must replay to count.
    flaky=$((flaky + 1))
    echo "did not replay on its own: $(basename "$finding")"
  elif [[ "$where" == *libhdf5* ]]; then
    hdf5=$((hdf5 + 1))
    echo "inside HDF5 (reported, not ours): $(basename "$finding"): ${where## }"
  else
    ours=$((ours + 1))
    echo "FINDING IN OUR CODE: $finding: ${where:-no stack}"
    grep -a -E 'ERROR|SUMMARY|bad error message|differs from itself|left open|round trip|^ *#[0-9]+ ' <<<"$report" | head -n 25
  fi
done
echo "fuzz: $(basename "$fuzzer") ${seconds}s: ${stats#*: }"
echo "fuzz: findings in our code: $ours; inside HDF5: $hdf5; not replayable: $flaky (inputs under $work/artifacts)"
[ "$ours" -eq 0 ]
