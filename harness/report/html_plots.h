/* html_plots: a run's plots for report.html, as SVG to inline. They are
 * drawn by the plot code itself (plot.h, SVG only, the same scripts and
 * data as the PNGs, every page of a paged plot) into a temporary directory
 * under $TMPDIR (never the run directory, which a run killed while drawing
 * would leave a stray folder in), read back in the plots' order, and made
 * fit to share one page: the XML prolog dropped, every id prefixed per
 * plot. When none can be drawn, `why` says why in one line. */
#ifndef CKPT_HTML_PLOTS_H
#define CKPT_HTML_PLOTS_H

#include <stddef.h>

struct html_plot {
    char name[64];   /* "determinism", "overhead_2", ... */
    char *svg;       /* <svg ...>...</svg>, ids prefixed */
    size_t len;
};

struct html_plots {
    int n;
    struct html_plot *p;
    char why[512];     /* n == 0: why no plot is shown */
    char *skipped;     /* the plot code's "NAME: skipped (why)" lines, or NULL */
};

/* Never fails the page: whatever goes wrong is in `why`. gnuplot NULL:
 * plots switched off (CKPT_GNUPLOT=none), nothing drawn. */
void html_plots_draw(const char *run_dir, const char *scripts_dir, const char *gnuplot, struct html_plots *out);
void html_plots_free(struct html_plots *p);

#endif
