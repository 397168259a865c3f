# plot_overhead.gp: step-time overhead of each checkpoint impl per case,
# against the ideal: recomputing every layer once costs one extra forward,
# (baseline + forward) / baseline, which is 4/3 when backward costs two
# forwards. Written by `ckpt-verify plot`, one page of cases at a time.
#
# Variables (gnuplot -e "..."):
#   data   overhead.dat (or overhead_P.dat, page P): a header row, then per
#          case: index "case" ideal, and per impl four columns: overhead,
#          low, high, stable. overhead = step / the fastest baseline's step;
#          low = step / the slowest baseline's step, so low..high is the
#          range the baselines' own spread allows; stable 0: that spread,
#          or the run's own steps' spread, is over 1.25x, or the ratio is
#          below 1, and the bar is hatched and marked '?', never left out.
#          The ideal is measured on the case's own fastest baseline run.
#   nimpl, ncase   impl column groups and cases on this page
#   unstable       ratios marked unstable on this page
#   page, pages    this page's number and the count
#   W      the width in pixels (the caller keeps a page readable: <= 2000)
#   bm     rows the rotated case names take under the axis (default 7)
#   colours  the impls' colours, one word each (optional)
#   hasref   0: no case on the page has a reference value (a Python or
#            external producer's report: no prediction), none is drawn
#   logy   1: the page's figures span more than 10x (smallest..largest,
#          both given): the y axis is logarithmic, so an outlier does not
#          flatten every other bar, and the title says so
#   out    output file;  term  'png' or 'svg'
if (!exists("term")) term = 'png'
if (!exists("unstable")) unstable = 0
if (!exists("logy")) logy = 0
if (!exists("page")) page = 1
if (!exists("hasref")) hasref = 1
if (!exists("pages")) pages = 1
if (!exists("W")) W = 360 + ncase * (24 * nimpl + 20)
W = W < 1000 ? 1000 : W
# The bottom margin: the rotated case names (bm rows, from the caller, who
# knows the longest name) and under them the footer (4 rows), so the
# two never overlap; the image grows with it.
if (!exists("bm")) bm = 7
bottom = bm + 4
H = 720 + (bottom > 11 ? 14 * (bottom - 11) : 0)
if (term eq 'svg') {
    set terminal svg size W,H dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,H noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title sprintf("Time overhead of checkpointing per case%s\nstep time (forward + backward, median) / the fastest baseline's\nwhiskers: down to step time / the slowest baseline's%s%s", \
    pages > 1 ? sprintf(" (page %d of %d)", page, pages) : "", \
    unstable > 0 ? sprintf("\n%d ratio(s) hatched, marked ?: step times spread > 1.25x, or below 1", unstable) : "", \
    logy ? sprintf("\nlog scale: the ratios span %.3g to %.3g", smallest, largest) : "")
set ylabel "step time / baseline step time"
set style fill solid 0.8 border -1
set xrange [-0.6:ncase - 0.4]
set xtics rotate by -40 nomirror font ',9'
# A bar's base: 0 on a linear axis; on a log one (0 is not on it) the
# axis' bottom, a little under the smallest figure.
if (logy) {
    set logscale y
    base = smallest / 1.5
    set yrange [base:largest * 1.5]
    set ytics format "%gx"
} else {
    base = 0
    set yrange [0:*]
}
set grid ytics lc rgb '#dddddd'
set key outside right top vertical Left reverse
set bmargin bottom
set datafile missing 'nan'
set label 1 "dot: the case's ideal, (baseline step + baseline forward) / baseline step: every layer recomputed once;\nred bar: the target ceiling, 1.10 x that; dashed: 4/3, the ideal when backward costs two forwards.\nCases with fewer checkpointed layers (segments = 2) recompute less than one forward." at screen 0.5, character 2.2 center font ',8'

bw = 0.8 / nimpl
x(k) = column(1) - 0.4 + bw * (k - 0.5)
col(k, j) = column(3 + 4 * (k - 1) + j)
# each impl's colour of every plot, when the caller names them
colour(k) = exists("colours") && words(colours) >= k ? word(colours, k) : k == 1 ? '#7b1fa2' : k == 2 ? '#00897b' : '#1e88e5'
stable_or_nan(k) = col(k, 4) == 1 ? col(k, 1) : 1/0
unstable_or_nan(k) = col(k, 4) == 0 ? col(k, 1) : 1/0

# the ideal and its ceiling only where there is one (an empty iteration would warn)
ideal = hasref ? ", data using 1:3 with points pt 7 ps 1.0 lc rgb 'black' title '(baseline + forward) / baseline: the ideal', data using 1:(1.10 * $3):(0.45) with xerrorbars pt -1 lw 2 lc rgb '#c62828' title 'target ceiling: 1.10 x ideal'" : ""

plot data using 1:(0):xtic(2) with points ps 0 notitle, \
     for [k=1:nimpl] data using (x(k)):(stable_or_nan(k)):(bw) with boxes lc rgb colour(k) title columnheader(4 + 4 * (k - 1)), \
     for [k=1:nimpl] data using (x(k)):(unstable_or_nan(k)):(bw) with boxes fs pattern 4 border lc rgb colour(k) lc rgb colour(k) notitle, \
     for [k=1:nimpl] data using (x(k)):(col(k, 1)):(col(k, 2)):(col(k, 3)) with yerrorbars pt -1 lw 1 lc rgb 'black' notitle, \
     for [k=1:nimpl] data using (x(k)):(unstable_or_nan(k)):("?") with labels offset 0,0.8 font ',11' tc rgb '#c62828' notitle, \
     4.0/3 with lines dt 2 lw 2 lc rgb '#555555' title "4/3", \
     keyentry with boxes fs pattern 4 lc rgb '#555555' title "hatched, ?: step times spread > 1.25x, or below 1" \
     @ideal
