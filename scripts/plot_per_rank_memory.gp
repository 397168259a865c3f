# plot_per_rank_memory.gp: bytes per rank of a distributed report (held at
# the end of forward, peak) beside the single-process baseline_0.
# Written by scripts/distributed_figures.py --plot.
#
# Variables (gnuplot -e "..."):
#   data   a header row, then per bar group: "label" held_bytes peak_bytes
#   nrow   bar groups;  out  output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
W = 300 + nrow * 60
W = W < 900 ? 900 : W
if (term eq 'svg') {
    set terminal svg size W,600 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,600 noenhanced font 'Sans,10' background rgb 'white'
}
set output out
set title "Bytes per rank (counting CPU allocator): held at the end of forward and peak, against one process"
set ylabel "bytes"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -40 nomirror font ',9'
set yrange [0:*]
set grid ytics lc rgb '#dddddd'
set key top right
plot data using 2:xtic(1) title columnheader(2), '' using 3 title columnheader(3)
