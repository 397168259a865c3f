# plot_determinism.gp: heatmap of how far each impl's gradients are from the
# baseline's, one cell per case x impl, written by `ckpt-verify plot`.
#
# Variables (gnuplot -e "..."):
#   data   determinism.dat, one row per cell: impl_index case_index
#          log10(1+max_ulp) max_ulp verdict "impl" "case" known mark
#          (known 0: no figure; mark * expected bad verdict, ! unexpected)
#   out    output file;  term  'png' or 'svg'
#   nx, ny number of impls and cases;  cbmax  top of the colour scale
# Re-run by hand, e.g.:
#   gnuplot -e "data='RUN/plots/determinism.dat'; out='d.png'; term='png'; nx=2; ny=40; cbmax=10" scripts/plot_determinism.gp
if (!exists("term")) term = 'png'
if (!exists("cbmax")) cbmax = 1
W = 330 + 165 * nx
W = W < 820 ? 820 : W
H = 190 + 24 * ny
if (term eq 'svg') {
    set terminal svg size W,H dynamic noenhanced font 'Sans,11' background rgb 'white'
} else {
    set terminal pngcairo size W,H noenhanced font 'Sans,10' background rgb 'white'
}
set output out

set title "Gradient determinism: max ULP distance to baseline_0 over all gradients\ncell: verdict and max ULP (0 = bitwise identical; inf = NaN/Inf vs a number)\n* the case expects this bad verdict (a planted bug caught);  ! an UNEXPECTED verdict\ngrey: no figure (the run errored, or the checkpoint's own check stopped it); NOT_OBS: the planted bug cannot show in this case"
set xrange [-0.5:nx-0.5]
set yrange [-0.5:ny-0.5]
set xlabel "checkpoint implementation"
set xtics rotate by -25 nomirror scale 0
set ytics nomirror scale 0 font ',9'
set cbrange [0:cbmax]
set cblabel "log10(1 + max ULP)   (0 = bitwise identical)"
set palette defined (0 '#c8e6c9', 0.15 '#fff59d', 0.5 '#ffb74d', 1 '#c62828')
set style fill solid 1.0 noborder
set border 0
unset key
set lmargin 32

plot data using 1:2:(0.48):(0.48):(column(8) == 1 ? $3 : NaN):xtic(6):ytic(7) with boxxyerror lc palette, \
     data using (column(8) == 0 ? $1 : NaN):2:(0.48):(0.48) with boxxyerror lc rgb '#bdbdbd', \
     data using 1:2:(strcol(9) eq '-' ? sprintf("%s %s", strcol(5), strcol(4)) : sprintf("%s %s %s", strcol(5), strcol(4), strcol(9))) with labels font ',8'
