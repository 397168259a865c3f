# plot_peak_per_case.gp: how much of the step's peak memory each checkpoint
# impl cuts, per case, beside the held cut of plot_held_per_case.gp: the
# peak also holds backward's buffers and gradients, which small cases'
# savings can be outweighed by (a negative cut). Written by
# `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."):
#   data   peak_per_case.dat: a header row, then per case: index "case"
#          nan cut_impl1 cut_impl2 ... (percent of the baseline's peak;
#          only PASS and NOISE runs; the third column is unused)
#   nimpl, ncase   impl columns and cases
#   out    output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
W = 300 + ncase * (24 * nimpl + 20)
W = W < 1000 ? 1000 : W
if (term eq 'svg') {
    set terminal svg size W,700 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,700 noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title "Peak memory of the step, cut by checkpointing, per case\n(1 - peak of the impl / peak of the baseline; below 0: the impl's peak is higher)"
set ylabel "peak: cut (% of the baseline's)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -40 nomirror font ',9'
set yrange [*:100]
set grid ytics lc rgb '#dddddd'
set xzeroaxis lt 1 lc rgb 'black'
set key outside right top vertical Left reverse
set bmargin 11
set datafile missing 'nan'
set label 1 "Only runs that did the case's work (PASS, NOISE) are drawn: a FAIL or ERROR run's bytes are not a saving." at screen 0.5, screen 0.03 center font ',8'

plot for [k=1:nimpl] data using (column(3 + k)):xtic(2) title columnheader(3 + k) lc rgb (k == 1 ? '#7b1fa2' : k == 2 ? '#00897b' : '#1e88e5')
