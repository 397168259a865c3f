#!/usr/bin/env bash
# fake_gnuplot_hangs.sh -e EXPR SCRIPT: stands in for gnuplot (CKPT_GNUPLOT)
# and never finishes, holding a child of its own as a stuck gnuplot holds
# its helpers. With HANG_PIDS set, appends its pid and the child's there,
# so a test can check that both were killed.
sleep 100000 &
[ -n "${HANG_PIDS:-}" ] && echo "$$ $!" >>"$HANG_PIDS"
wait
