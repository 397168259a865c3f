# plot_held_per_case.gp: how much each checkpoint impl cuts, per case, of
# what forward leaves for backward (against the model's prediction) and,
# beside it, of the step's peak: the peak also holds backward's buffers
# and the gradients, which can outweigh a small case's saving (a negative
# cut; batch size 1 shows it). Drawn for any run (no sweep needed), so a
# suite run always gets a memory plot. Written by `ckpt-verify plot`, one
# page of cases at a time.
#
# Variables (gnuplot -e "..."):
#   data   held_per_case.dat (or held_per_case_P.dat, page P): a header
#          row, then per case: index "case", and per impl three columns:
#          held cut, peak cut, the impl's own predicted held cut (percent
#          of the baseline's; only PASS and NOISE runs)
#   nimpl, ncase   impl column groups and cases on this page
#   page, pages    this page's number and the count
#   W      the width in pixels (the caller keeps a page readable: <= 2000)
#   bm     rows the rotated case names take under the axis (default 7)
#   colours  the impls' colours, one word each (optional)
#   predicted  the impls (1-based, one word each) with a prediction on
#            this page: each prediction is a dot on top of the impl's own
#            held bar ("" or absent: a Python or external producer's report,
#            no prediction, none is drawn)
#   out    output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
if (!exists("page")) page = 1
if (!exists("predicted")) predicted = ''
if (!exists("pages")) pages = 1
if (!exists("W")) W = 360 + ncase * (28 * nimpl + 20)
W = W < 1000 ? 1000 : W
# The bottom margin: the rotated case names (bm rows, from the caller, who
# knows the longest name) and under them the footer (2 rows), so the
# two never overlap; the image grows with it.
if (!exists("bm")) bm = 7
bottom = bm + 2
H = 720 + (bottom > 11 ? 14 * (bottom - 11) : 0)
if (term eq 'svg') {
    set terminal svg size W,H dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,H noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title sprintf("Memory cut by checkpointing per case%s: held at the end of forward (solid) and the step's peak (hatched)\n(1 - the impl's / the baseline's; below 0: the impl's is higher)\na dot: the model's prediction for the solid bar under it", \
    pages > 1 ? sprintf(" (page %d of %d)", page, pages) : "")
set ylabel "cut (% of the baseline's)"
set style fill solid 0.8 border -1
set xrange [-0.6:ncase - 0.4]
set xtics rotate by -40 nomirror font ',9'
set yrange [*:100]
set grid ytics lc rgb '#dddddd'
set xzeroaxis lt 1 lc rgb 'black'
set key outside right top vertical Left reverse
set bmargin bottom
set datafile missing 'nan'
set label 1 "Only runs that did the case's work (PASS, NOISE) are drawn: a FAIL or ERROR run's bytes are not a saving." at screen 0.5, character 1.0 center font ',8'

bw = 0.8 / (2 * nimpl)
x(k, j) = column(1) - 0.4 + bw * (2 * (k - 1) + j - 0.5)
# each impl's colour of every plot, when the caller names them
colour(k) = exists("colours") && words(colours) >= k ? word(colours, k) : k == 1 ? '#7b1fa2' : k == 2 ? '#00897b' : '#1e88e5'

col(k, j) = column(2 + 3 * (k - 1) + j)
# each impl's prediction on its own held bar, only for impls that have one
# (an iteration over no point would warn); one key entry for them all
dots = words(predicted) > 0 ? ", for [i=1:words(predicted)] data using (x(word(predicted, i) + 0, 1)):(col(word(predicted, i) + 0, 3)) with points pt 7 ps 1.0 lc rgb 'black' title (i == 1 ? 'predicted held cut of the impl under it' : '')" : ""

plot data using 1:(0):xtic(2) with points ps 0 notitle, \
     for [k=1:nimpl] data using (x(k, 1)):(col(k, 1)):(bw) with boxes lc rgb colour(k) title columnheader(2 + 3 * (k - 1) + 1), \
     for [k=1:nimpl] data using (x(k, 2)):(col(k, 2)):(bw) with boxes fs pattern 4 border lc rgb colour(k) lc rgb colour(k) title columnheader(2 + 3 * (k - 1) + 2) \
     @dots
