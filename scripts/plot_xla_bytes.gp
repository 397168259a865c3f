# plot_xla_bytes.gp: per XLA run, the temp bytes XLA's buffer assignment
# gave the compiled step (measured) beside the prediction from the eager
# torch CPU run of the same model (the plain step's XLA temp bytes less
# what a per-block checkpoint saves in eager torch), and the plain step's.
# Written by scripts/xla_bytes_figure.py.
#
# Variables (gnuplot -e "..."):
#   data   a header row, then per run: "label" measured predicted baseline
#   nrow   runs;  out  output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
W = 300 + nrow * 70
W = W < 900 ? 900 : W
if (term eq 'svg') {
    set terminal svg size W,700 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,700 noenhanced font 'Sans,10' background rgb 'white'
}
set output out
set title "XLA temp bytes of the compiled step per run: measured (buffer assignment), predicted (eager torch CPU saving)"
set ylabel "bytes"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by 40 right nomirror font ',8'
set yrange [0:*]
set grid ytics lc rgb '#dddddd'
set key below horizontal
plot data using 2:xtic(1) title columnheader(2), '' using 3 title columnheader(3), '' using 4 title columnheader(4)
