/* plot: `ckpt-verify plot RUN_DIR`. Reads RUN_DIR/summary.json, writes the
 * numbers each plot shows as plain whitespace-separated data files under
 * RUN_DIR/plots/ (*.dat: one block per curve, its title on the block's
 * first line, so any tool can re-plot them), and runs the gnuplot scripts
 * scripts/plot_*.gp on them, once for PNG and once for SVG:
 *
 *   determinism      case × impl, colour = max ULP vs baseline_0, verdict marks
 *   peak_vs_batch    peak memory vs batch size, per impl and the baseline
 *   saved_vs_segments  memory saved vs checkpoint segments, with the prediction
 *   saved_vs_depth   memory saved vs layers, with the prediction
 *   memory_vs_depth  activation bytes vs layers (log-log) with fitted exponents
 *   overhead         step-time overhead per case and impl, with the ideal 4/3
 *
 * A plot whose data the run lacks (no cases that differ only in batch size,
 * say) is skipped, and the log says so. Data files are written to a
 * temporary name and renamed. The scripts take their inputs as gnuplot
 * variables (data, out, term, ...; see each script's header), so users can
 * restyle them and re-run gnuplot on the .dat files by hand.
 * plot.c runs the families (plot_determinism.c, plot_memory.c,
 * plot_per_case.c) over plot_summary.c, plot_curves.c and plot_gnuplot.c. */
#ifndef CKPT_PLOT_H
#define CKPT_PLOT_H

#include <stdio.h>

/* gnuplot: the program to run ("gnuplot": searched on PATH). scripts_dir:
 * where plot_*.gp live. Progress and skipped plots go to log. Returns
 * ST_INPUT when gnuplot cannot be found (before anything is written) or
 * RUN_DIR/summary.json is missing or malformed, ST_RUN when gnuplot fails. */
int plot_run_dir(const char *run_dir, const char *scripts_dir, const char *gnuplot, FILE *log);

#endif
