# plot_held_vs_seq.gp: selective activation checkpointing. Bytes held at
# the end of forward (what forward leaves for backward) against the sequence
# length on log-log axes, one curve per policy: the baseline (no
# checkpoint), full recompute, and selective checkpointing with each policy
# (save_matmuls, attention_core, save:...), measured and as the model's
# prediction (model_predict_saved_bytes_keeping) gives them. The baseline's
# attention probabilities grow like seq^2 (slope 2), what attention_core
# keeps like seq (slope 1). Written by `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."): two sets of curves, each a data file of
# blocks (title line, then "seq bytes" rows in `unit`, blocks separated by
# two blank lines) with per-block styles <set>_lc, <set>_pt, <set>_dt and
# the count <set>_n:
#   points  measured bytes held at the end of forward, per policy
#   pred    the same as predicted, per policy
#   unit    'KiB', 'MiB', ...;  common  what all curves share
#   out     output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
if (!exists("common")) common = ''
if (term eq 'svg') {
    set terminal svg size 1300,720 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size 1300,720 noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title sprintf("Activation bytes held at the end of forward vs sequence length, per checkpoint policy (log-log)\n%s", common)
set xlabel "sequence length (log scale)"
set ylabel sprintf("held at end of forward, %s (log scale)", unit)
set label 1 "points: measured (bytes live above the step's start when forward ends); lines: the model's exact prediction.\nselective: the policy's ops keep their saved tensors from forward, every other op is recomputed in backward (docs/memory.md)" at screen 0.5, screen 0.04 center font ',8'
set logscale x 2
set logscale y 2
set grid xtics ytics lc rgb '#dddddd'
set key outside right top vertical Left reverse spacing 1.2
set bmargin 7

plot for [j=0:pred_n-1] pred index j using 1:2 with lines lw 2 lc rgb word(pred_lc, j+1) dt int(word(pred_dt, j+1)) title columnheader(1), \
     for [i=0:points_n-1] points index i using 1:2 with points ps 1.8 lw 2 lc rgb word(points_lc, i+1) pt int(word(points_pt, i+1)) title columnheader(1)
