#!/usr/bin/env bash
# external_dies_with_harness.sh CKPT_VERIFY OUT_DIR: an --external command
# does not outlive a SIGKILLed ckpt-verify. The command starts a child of
# its own (sleep 297 in the background; not the 'sleep 300' that
# external.hanging_command_times_out looks for) and writes its pid;
# ckpt-verify is then killed with SIGKILL, and within two seconds that
# child must be gone.
set -u
cv=$1 out=$2
rm -rf "$out"
mkdir -p "$out"
pidfile=$out/child.pid
"$cv" --case bias_gelu_bs1 --out "$out/report" \
  --external "sh -c 'sleep 297 & echo \$! > $pidfile; wait' ext" >/dev/null 2>&1 &
cv_pid=$!
for _ in $(seq 1 1200); do
  [ -s "$pidfile" ] && break
  sleep 0.05
done
if [ ! -s "$pidfile" ]; then
  kill -9 "$cv_pid" 2>/dev/null
  echo "external_dies_with_harness: the external command never started"
  exit 1
fi
child=$(cat "$pidfile")
kill -9 "$cv_pid"
wait "$cv_pid" 2>/dev/null
for _ in $(seq 1 40); do
  if ! kill -0 "$child" 2>/dev/null; then
    echo "the external command's child $child ended with ckpt-verify"
    exit 0
  fi
  sleep 0.05
done
kill -9 "$child"
echo "external_dies_with_harness: the external command's child $child outlived the SIGKILLed ckpt-verify"
exit 1
