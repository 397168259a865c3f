# plot_memory_vs_depth.gp: activation memory against the number of layers
# on log-log axes, so a power law L^k is a straight line of slope k; each
# curve's fitted k is in its title. Written by `ckpt-verify plot`.
#
# "activation peak": the highest live bytes minus the gradients held at that
# moment (sampled at every op of forward and recompute; memory.activation_
# peak_bytes). "peak - all gradients": the step's peak minus the gradients
# held after backward; biased low for checkpointed runs, whose peak comes
# before all gradients exist. Bytes are above the step's start, so the
# parameters are not in them. "held at end of forward": what forward leaves
# for backward.
#
# Variables (gnuplot -e "..."): three sets of curves, each a data file of
# blocks (title line, then "layers bytes" rows in `unit`, blocks separated
# by two blank lines) with per-block styles <set>_lc, <set>_pt, <set>_dt and
# the count <set>_n:
#   lines   measured activation peak and peak - all gradients (baseline, per impl)
#   points  measured bytes held at the end of forward, per impl
#   pred    the same as model_predict_saved_bytes predicts it
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

set title sprintf("Activation memory vs depth, log-log: a line of slope k is growth like L^k (sqrt(L) is k = 0.5)\n%s", common)
set xlabel "layers L (log scale)"
set ylabel sprintf("%s (log scale)", unit)
set label 1 "activation peak: highest (live bytes - gradients held at that moment) over forward and recomputes; peak - all gradients: the step's peak minus\nthe gradients held after backward (low for checkpointed runs: their peak comes before all gradients exist). Parameters are never counted.\nk: least-squares slope of log(bytes) on log(L) over the measured depths" at screen 0.5, screen 0.05 center font ',8'
set logscale x 2
set logscale y 2
set grid xtics ytics lc rgb '#dddddd'
set key outside right top vertical Left reverse spacing 1.2
set bmargin 8

plot for [j=0:pred_n-1] pred index j using 1:2 with lines lw 2 lc rgb word(pred_lc, j+1) dt int(word(pred_dt, j+1)) title columnheader(1), \
     for [i=0:lines_n-1] lines index i using 1:2 with linespoints lw 2 ps 1.3 lc rgb word(lines_lc, i+1) pt int(word(lines_pt, i+1)) dt int(word(lines_dt, i+1)) title columnheader(1), \
     for [i=0:points_n-1] points index i using 1:2 with points ps 2.2 lw 2 lc rgb word(points_lc, i+1) pt int(word(points_pt, i+1)) title columnheader(1)
