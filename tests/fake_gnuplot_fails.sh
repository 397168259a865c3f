#!/usr/bin/env bash
# fake_gnuplot_fails.sh -e EXPR SCRIPT: stands in for gnuplot (CKPT_GNUPLOT)
# and fails the way a real one does on a bad script: the output file named
# by EXPR's out='...' is created empty, then exit 1.
out=$(sed -n "s/.*out='\([^']*\)'.*/\1/p" <<<"$2")
[ -n "$out" ] && : >"$out"
echo "fake gnuplot: failing on purpose" >&2
exit 1
