# plot_peak_vs_batch.gp: peak memory of one training step against batch
# size, one line per impl and for the baseline, written by `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."):
#   lines   peak_vs_batch.dat: blocks separated by two blank lines, each a
#           title line then "batch peak" rows (peak in `unit`)
#   lines_n number of blocks; lines_lc, lines_pt, lines_dt: per block its
#           colour, point type and dash type (space-separated words)
#   unit    'KiB', 'MiB', ...;  common  what all curves share, for the title
#   out     output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
if (!exists("common")) common = ''
if (term eq 'svg') {
    set terminal svg size 1300,720 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size 1300,720 noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title sprintf("Peak memory of one training step vs batch size\n%s", common)
set xlabel "batch size (sequences per step, log scale)"
set ylabel sprintf("peak memory (%s, log scale), above what was live at the step's start", unit)
set label 1 "peak: highest bytes live during forward + backward; parameters, input and target were allocated before the step and are not in it" at screen 0.5, screen 0.015 center font ',8'
set logscale x 2
set logscale y 2
set grid xtics ytics lc rgb '#dddddd'
set key outside right top vertical Left reverse spacing 1.2
set bmargin 7

plot for [i=0:lines_n-1] lines index i using 1:2 with linespoints lw 2 ps 1.2 \
       lc rgb word(lines_lc, i+1) pt int(word(lines_pt, i+1)) dt int(word(lines_dt, i+1)) title columnheader(1)
