# plot_saved_vs_segments.gp: memory saved by checkpointing against the
# number of checkpoint segments, measured per impl and as the model predicts
# it, written by `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."): three sets of curves, each a data file of
# blocks (title line, then "segments saved%" rows, blocks separated by two
# blank lines) with per-block styles <set>_lc, <set>_pt, <set>_dt and the
# count <set>_n:
#   lines   measured saving of the peak, per impl
#   points  measured saving of the bytes held at the end of forward, per impl
#   pred    the same as model_predict_saved_bytes predicts it, every N
#   common  what all curves share;  out  output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
if (!exists("common")) common = ''
if (term eq 'svg') {
    set terminal svg size 1300,720 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size 1300,720 noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title sprintf("Memory saved by checkpointing vs number of segments\n%s", common)
set xlabel "checkpoint segments N, log scale"
if (exists("every_x")) set xtics add (sprintf("%d = every layer", every_x) every_x)
set label 1 "saved = 1 - impl / baseline (no checkpoint).  checkpoint_sequential(N): N-1 segments of L/N layers checkpointed, the rest plain.\npeak: highest bytes live in the step (gradients included);  held at end of forward: what forward leaves for backward" at screen 0.5, screen 0.03 center font ',8'
set ylabel "memory saved (% of the baseline's)"
set logscale x 2
set yrange [*:100]
set grid lc rgb '#dddddd'
set key outside right top vertical Left reverse spacing 1.2
set bmargin 7

plot for [j=0:pred_n-1] pred index j using 1:2 with lines lw 2 lc rgb word(pred_lc, j+1) dt int(word(pred_dt, j+1)) title columnheader(1), \
     for [i=0:lines_n-1] lines index i using 1:2 with linespoints lw 2 ps 1.3 lc rgb word(lines_lc, i+1) pt int(word(lines_pt, i+1)) title columnheader(1), \
     for [i=0:points_n-1] points index i using 1:2 with points ps 2.2 lw 2 lc rgb word(points_lc, i+1) pt int(word(points_pt, i+1)) title columnheader(1)
