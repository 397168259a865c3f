/* plot: `ckpt-verify plot RUN_DIR` (plot.h): reads the summary once and
 * draws every plot family from it in turn, stopping at the first failure. */
#include "plot.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "plot_internal.h"

int plot_run_dir(const char *run_dir, const char *scripts_dir, const char *gnuplot, FILE *log)
{
    return plot_run_dir_as(run_dir, NULL, PLOT_PNG | PLOT_SVG, scripts_dir, gnuplot, log);
}

/* plots_dir NULL: RUN_DIR/plots, created when missing. */
int plot_run_dir_as(const char *run_dir, const char *plots_dir, int formats, const char *scripts_dir,
                    const char *gnuplot, FILE *log)
{
    char program[PATH_MAX_LEN];
    if (!plot_find_program(gnuplot, program, sizeof program))
        return error_set(ST_INPUT, "plot: %s not found%s (install gnuplot-nox; scripts/install-deps.sh does)", gnuplot,
                         strchr(gnuplot, '/') ? "" : " on PATH");
    if (strchr(run_dir, '\'') || strchr(scripts_dir, '\'') || (plots_dir && strchr(plots_dir, '\'')))
        return error_set(ST_INPUT, "plot: paths with a single quote cannot be handed to gnuplot: %s", run_dir);
    struct summary_in s;
    int st = plot_summary_load(&s, run_dir);
    if (st) {
        plot_summary_free(&s);
        return st;
    }
    struct plot_env env = {
        .run_dir = run_dir, .scripts_dir = scripts_dir, .gnuplot = program, .log = log, .formats = formats};
    snprintf(env.plots_dir, sizeof env.plots_dir, "%s", plots_dir ? plots_dir : run_dir);
    if (!plots_dir)
        snprintf(env.plots_dir, sizeof env.plots_dir, "%s/plots", run_dir);
    if (!plots_dir && mkdir(env.plots_dir, 0777) != 0 && errno != EEXIST) {
        plot_summary_free(&s);
        return error_set(ST_INPUT, "%s: cannot create: %s", env.plots_dir, strerror(errno));
    }
    fprintf(log, "plots of %s (%d records):\n", run_dir, s.n);
    if (!(st = plot_determinism(&env, &s)) && !(st = plot_peak_vs_batch(&env, &s)) &&
        !(st = plot_saved(&env, &s, SWEEP_SEGMENTS, "saved_vs_segments")) &&
        !(st = plot_saved(&env, &s, SWEEP_LAYERS, "saved_vs_depth")) && !(st = plot_memory_vs_depth(&env, &s)) &&
        !(st = plot_held_vs_seq(&env, &s)))
        if (!(st = plot_overhead(&env, &s)))
            st = plot_held_per_case(&env, &s);
    if (!st)
        fprintf(log, "%d plot(s) drawn, %d skipped, in %s\n", env.drawn, env.skipped, env.plots_dir);
    plot_summary_free(&s);
    return st;
}
