/* html: DIR/report.html, the page people open from a run directory. One
 * self-contained file read from DIR/summary.json alone: the run's facts,
 * the verdict counts (unexpected first), the verdict table (every row,
 * linking to its case; sortable and filterable when scripts run, whole and
 * readable when they do not), a section per case (definition, each impl's
 * verdict, reason, first divergence, memory against the prediction,
 * overhead and its stability, regressions, per-tensor distances as the
 * judge recorded them, the plots that show it) and the plots inlined as
 * SVG (html_plots.h). No network, no external script, font or image; every
 * text from the summary is escaped (html_text.h). Written to a temporary
 * name and renamed. */
#ifndef CKPT_HTML_H
#define CKPT_HTML_H

/* scripts_dir and gnuplot as for plot_run_dir (plot.h); plots that cannot
 * be drawn leave a line on the page saying why, never an error. ST_INPUT
 * when DIR/summary.json is missing or no summary, or the page cannot be
 * written. */
int html_write_run_dir(const char *run_dir, const char *scripts_dir, const char *gnuplot);

#endif
