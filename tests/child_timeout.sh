#!/usr/bin/env bash
# child_timeout.sh CKPT_VERIFY CASES OUT: a gnuplot that never finishes
# (tests/fake_gnuplot_hangs.sh) is killed past CKPT_CHILD_TIMEOUT, with
# whatever it started: `html` and a run with --out end, their page says
# "Plots not drawn: gnuplot did not finish in N s", stderr says it too, the
# run's exit code is its verdicts' (0: all as expected) and its report is
# kept; `plot` fails naming the limit. Without CKPT_CHILD_TIMEOUT the
# default limit (20 s) applies.
set -u
cv=$1 cases=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
hang=$here/fake_gnuplot_hangs.sh
fail() { echo "child_timeout.sh: $*" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
# Killed: gone within 5 s (a SIGKILLed child of the fake gnuplot is
# reaped by init a moment after the group's kill, not at once).
all_dead() {
  for p in $(cat "$1"); do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$p" 2>/dev/null || fail "$2: process $p left running"
  done
}

# A run with --out: its plots are the page's; the hang costs 1 s.
HANG_PIDS=$out/run.pids CKPT_CHILD_TIMEOUT=1 CKPT_GNUPLOT=$hang \
  "$cv" --cases "$cases" --case tiny_bs1 --out "$out/run" >"$out/run.log" 2>"$out/run.err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$out/run.log" "$out/run.err"; fail "run: exit $rc, wanted 0 (its verdicts are as expected)"; }
grep -q 'all verdicts as expected; report in' "$out/run.log" || fail "run: no final line"
[ -f "$out/run/tiny_bs1.h5" ] || fail "run: its report is gone"
grep -q 'plots not drawn: gnuplot did not finish in 1 s' "$out/run.err" || { cat "$out/run.err"; fail "run: stderr does not say it"; }
grep -q 'Plots not drawn: gnuplot did not finish in 1 s' "$out/run/report.html" || fail "run: the page does not say it"
[ -s "$out/run.pids" ] || fail "run: the fake gnuplot never ran"
all_dead "$out/run.pids" run

# html on that run, with the default limit.
HANG_PIDS=$out/html.pids CKPT_GNUPLOT=$hang "$cv" html "$out/run" >"$out/html.log" 2>&1 ||
  { cat "$out/html.log"; fail "html: exit $?"; }
grep -q 'Plots not drawn: gnuplot did not finish in 20 s' "$out/run/report.html" || fail "html: the page does not say 20 s"
all_dead "$out/html.pids" html

# plot: the plots are what it makes, so a killed gnuplot is its failure.
HANG_PIDS=$out/plot.pids CKPT_CHILD_TIMEOUT=1 CKPT_GNUPLOT=$hang "$cv" plot "$out/run" >"$out/plot.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "plot: exit 0 with no plot drawn"
grep -q 'plots not drawn: gnuplot did not finish in 1 s' "$out/plot.log" || { cat "$out/plot.log"; fail "plot: no line says why"; }
all_dead "$out/plot.pids" plot
echo "a gnuplot that never finishes: killed past its limit, run, html and plot ended and said so"
