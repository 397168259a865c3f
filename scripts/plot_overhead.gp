# plot_overhead.gp: step-time overhead of each checkpoint impl per case,
# against the ideal: recomputing every layer once costs one extra forward,
# (baseline + forward) / baseline, which is 4/3 when backward costs two
# forwards. Written by `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."):
#   data   overhead.dat: a header row, then per case: index "case"
#          ideal overhead_impl1 overhead_impl2 ... (ideal measured on the
#          case's own fastest baseline run)
#   nimpl, ncase   impl columns and cases
#   out    output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
if (!exists("unstable")) unstable = 0
W = 300 + ncase * (24 * nimpl + 20)
W = W < 1000 ? 1000 : W
if (term eq 'svg') {
    set terminal svg size W,700 dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,700 noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title sprintf("Time overhead of checkpointing per case\nstep time (forward + backward, median over the timed steps) / the fastest baseline run's%s", \
    unstable > 0 ? sprintf("\n%d ratio(s) left out: their baselines' own step times spread more than 1.25x", unstable) : "")
set ylabel "step time / baseline step time"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -40 nomirror font ',9'
set yrange [0:*]
set grid ytics lc rgb '#dddddd'
set key outside right top vertical Left reverse
set bmargin 11
set datafile missing 'nan'
set label 1 "dot: the case's ideal, (baseline step + baseline forward) / baseline step: every layer recomputed once.  red bar: the target ceiling, 1.10 x that.\ndashed: 4/3, the ideal when backward costs two forwards.  Cases with fewer checkpointed layers (segments = 2) recompute less than one forward." at screen 0.5, screen 0.03 center font ',8'

plot for [k=1:nimpl] data using (column(3 + k)):xtic(2) title columnheader(3 + k) lc rgb (k == 1 ? '#7b1fa2' : k == 2 ? '#00897b' : '#1e88e5'), \
     data using 1:3 with points pt 7 ps 1.0 lc rgb 'black' title "ideal: (baseline + forward) / baseline", \
     data using 1:(1.10 * $3):(0.45) with xerrorbars pt -1 lw 2 lc rgb '#c62828' title "target ceiling: 1.10 x ideal", \
     4.0/3 with lines dt 2 lw 2 lc rgb '#555555' title "4/3"
