/* plot: `ckpt-verify plot RUN_DIR`. Reads RUN_DIR/summary.json, writes the
 * numbers each plot shows as plain whitespace-separated data files under
 * RUN_DIR/plots/ (*.dat: one block per curve, its title on the block's
 * first line, so any tool can re-plot them), and runs the gnuplot scripts
 * scripts/plot_*.gp on them, once for PNG and once for SVG:
 *
 *   determinism      case × impl, colour = verdict as expected or not, cell =
 *                    verdict and its distance from baseline_0 in scaled ULP
 *   peak_vs_batch    peak memory vs batch size, per impl and the baseline
 *   saved_vs_segments  memory saved vs checkpoint segments, with the prediction
 *   saved_vs_depth   memory saved vs layers, with the prediction
 *   memory_vs_depth  activation bytes vs layers (log-log) with fitted exponents
 *   held_vs_seq      bytes held at end of forward vs sequence length, per policy
 *   overhead         step-time overhead per case and impl, with the ideal 4/3,
 *                    the baselines' spread as whiskers, unstable ratios marked
 *   held_per_case    held-at-end-of-forward cut and peak cut per case and impl
 *
 * The per-case plots (determinism, overhead, held_per_case) are drawn as
 * pages when one image would be wider than PLOT_MAX_WIDTH pixels (or, for
 * determinism, taller than 40 cases): NAME_1.png, NAME_2.png, ..., each
 * listed in the log; NAME.png when one page holds them all.
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
 * RUN_DIR/summary.json is missing or malformed, ST_RUN when gnuplot fails
 * or does not finish: each gnuplot run may take CKPT_CHILD_TIMEOUT seconds
 * (default PLOT_CHILD_TIMEOUT_DEFAULT_S); past it gnuplot and anything it
 * started are killed, no further plot is drawn and the error says "plots
 * not drawn: gnuplot did not finish in N s". */
#define PLOT_CHILD_TIMEOUT_DEFAULT_S 20.0
int plot_run_dir(const char *run_dir, const char *scripts_dir, const char *gnuplot, FILE *log);
/* The same plots in the formats asked (PLOT_PNG, PLOT_SVG or both) into
 * plots_dir, which must exist (the HTML report draws SVG into a directory
 * of its own, leaving RUN_DIR/plots as `plot` drew it). */
enum { PLOT_PNG = 1, PLOT_SVG = 2 };
int plot_run_dir_as(const char *run_dir, const char *plots_dir, int formats, const char *scripts_dir,
                    const char *gnuplot, FILE *log);

#endif
