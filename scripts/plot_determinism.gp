# plot_determinism.gp: one cell per case x impl, coloured by whether the
# verdict is the one the case expects, written by `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."):
#   data   determinism.dat, one row per cell: impl_index case_index rgb
#          distance verdict "impl" "case" known mark (distance: the
#          verdict's distance from baseline_0 in scaled ULP, as the table
#          prints it; '-' where none was measured)
#          (rgb: the cell colour as 0xRRGGBB; known 0: no figure;
#          mark * a bad verdict the case expects, ! unexpected, - neither)
#   out    output file;  term  'png' or 'svg'
#   nx, ny number of impls and cases;  bm  bottom margin (character rows)
#          for the rotated impl names;  lm  left margin for the case names
# Re-run by hand, e.g.:
#   gnuplot -e "data='RUN/plots/determinism.dat'; out='d.png'; term='png'; nx=2; ny=40; bm=8; lm=20" scripts/plot_determinism.gp
if (!exists("term")) term = 'png'
if (!exists("bm")) bm = 10
if (!exists("lm")) lm = 24
# Cells of 150 x 30 pixels, plus the margins the names and the legend need.
# The legend is two lines of at most 96 characters (about 6 pixels each at
# font size 9): 760 pixels hold it, whatever the number of cells.
W = 8 * lm + 150 * nx + 60
W = W < 760 ? 760 : W
H = 110 + 30 * ny + 14 * bm
if (term eq 'svg') {
    set terminal svg size W,H dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,H noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title "Verdict per case and checkpoint\n(cell: verdict, distance from baseline_0 in scaled ULP)"
set label 1 "green: as the case expects; blue: a planted bug caught, as the case expects (*);\ngrey: it cannot show here, or no gradients to compare; red: NOT as expected (!)" \
    at screen 0.5, character 1.8 center font ',9'
set xrange [-0.5:nx-0.5]
set yrange [-0.5:ny-0.5]
set xtics rotate by 35 right nomirror scale 0 font ',9'
set ytics nomirror scale 0 font ',9'
set lmargin lm
set bmargin bm
set style fill solid 1.0 border rgb 'white'
set border 0
unset key
unset colorbox

plot data using 1:2:(0.5):(0.5):3:xtic(6):ytic(7) with boxxyerror lc rgb variable, \
     data using 1:2:(strcol(9) eq '-' ? sprintf("%s %s", strcol(5), strcol(4)) : sprintf("%s %s %s", strcol(5), strcol(4), strcol(9))) with labels font ',8'
