/* plot_per_case: the bar plots with figures per case and reference impl,
 * beside the case's reference value: the step-time overhead (ideal 4/3),
 * with the spread its baselines allow and unstable ratios marked, and the
 * cuts of the bytes held at end of forward (against the prediction) and of
 * the step's peak side by side. Many cases are drawn as pages, each at most
 * PLOT_MAX_WIDTH pixels wide. */
#include <math.h>
#include <string.h>

#include "error.h"
#include "plot_internal.h"

/* Columns per impl in a plot's data file, and what fills them. */
#define MAX_COLUMNS 4

/* One plot: per case and reference impl `n_columns` figures (NAN for none;
 * the first decides whether the case is drawn at all), and the case's
 * reference value where one value serves every impl of the case
 * (reference NULL: none, and no reference column); a figure that belongs
 * to one impl (its own prediction) is one of its columns, named by
 * prediction_column (-1: none), so it is drawn on that impl's bar. */
struct per_case_plot {
    const char *name, *script, *reference_title;
    int n_columns;
    const char *column_titles[MAX_COLUMNS];
    void (*columns)(const struct rec *r, double *out);
    double (*reference)(const struct rec *r);
    int prediction_column;
    /* > 0: a page whose bars and reference values span more than this
     * factor (largest / smallest, all positive) gets a log y axis, so one outlier does not
     * flatten every other bar; 0: always linear. */
    double log_range;
    /* pixels per case and impl, as the script lays the bars out */
    int px_per_impl;
};

/* The width the scripts give a page of n cases: 360 + n * (px * nimpl + 20). */
static int page_width(const struct per_case_plot *p, int n_impls, int n_cases)
{
    return 360 + n_cases * (p->px_per_impl * n_impls + 20);
}

/* The figures of case c for impls[0..n_impls): v[k][j], NAN where none;
 * *reference the case's reference value. */
static void case_figures(const struct summary_in *s, const struct per_case_plot *p, const char *case_name,
                         const char *const *impls, int n_impls, double v[][MAX_COLUMNS], double *reference)
{
    *reference = NAN;
    for (int k = 0; k < n_impls; k++)
        for (int j = 0; j < p->n_columns; j++)
            v[k][j] = NAN;
    for (int i = 0; i < s->n; i++) {
        const struct rec *r = &s->r[i];
        if (strcmp(r->case_name, case_name) != 0)
            continue;
        if (p->reference && !isnan(p->reference(r)))
            *reference = p->reference(r);
        for (int k = 0; k < n_impls; k++)
            if (strcmp(r->impl, impls[k]) == 0)
                p->columns(r, v[k]);
    }
}

static int draw_page(struct plot_env *env, const struct summary_in *s, const struct per_case_plot *p,
                     const char *const *all_impls, int n_all, const char *const *cases, int c0, int c1,
                     const char *page, int page_no, int n_pages)
{
    /* The page's impls: those with a figure in one of its cases, each in
     * its colour of every plot (plot_impl_colour). */
    const char *impls[MAX_SERIES];
    int n_impls = 0;
    char colours[MAX_SERIES * 10] = "";
    for (int k = 0; k < n_all; k++) {
        int any = 0;
        for (int c = c0; c < c1 && !any; c++) {
            double v[MAX_SERIES][MAX_COLUMNS], reference;
            case_figures(s, p, cases[c], all_impls, n_all, v, &reference);
            for (int j = 0; j < p->n_columns && j < 2; j++)
                any |= !isnan(v[k][j]);
        }
        if (!any)
            continue;
        impls[n_impls++] = all_impls[k];
        size_t used = strlen(colours);
        snprintf(colours + used, sizeof colours - used, "%s%s", used ? " " : "", plot_impl_colour(all_impls[k]));
    }
    struct datafile d;
    char file[96];
    snprintf(file, sizeof file, "%s.dat", page);
    int st = plot_data_open(&d, env, file);
    if (st)
        return st;
    /* header row: the column titles */
    fprintf(d.f, "index case");
    if (p->reference) {
        fputc(' ', d.f);
        plot_put_quoted(d.f, p->reference_title);
    }
    for (int k = 0; k < n_impls; k++)
        for (int j = 0; j < p->n_columns; j++) {
            char title[160];
            snprintf(title, sizeof title, "%s%s%s", impls[k], p->column_titles[j][0] ? " " : "", p->column_titles[j]);
            fputc(' ', d.f);
            plot_put_quoted(d.f, title);
        }
    fputc('\n', d.f);
    int marked = 0, references = 0, predicted[MAX_SERIES] = {0};
    double smallest = INFINITY, largest = 0;
    for (int c = c0; c < c1; c++) {
        double reference, v[MAX_SERIES][MAX_COLUMNS];
        case_figures(s, p, cases[c], impls, n_impls, v, &reference);
        references += !isnan(reference);
        for (int k = 0; k < n_impls && p->prediction_column >= 0; k++)
            predicted[k] |= !isnan(v[k][p->prediction_column]);
        /* the bars (first columns) and the reference decide the axis; a
         * whisker's reach does not: it is clipped, never a reason to squash */
        for (int k = 0; k <= n_impls; k++) {
            double x = k < n_impls ? v[k][0] : reference;
            if (isnan(x) || isinf(x))
                continue;
            smallest = x < smallest ? x : smallest;
            largest = x > largest ? x : largest;
        }
        fprintf(d.f, "%d ", c - c0);
        plot_put_quoted(d.f, cases[c]);
        if (p->reference)
            fprintf(d.f, " %.6g", reference);
        for (int k = 0; k < n_impls; k++)
            for (int j = 0; j < p->n_columns; j++)
                fprintf(d.f, " %.6g", v[k][j]);
        fputc('\n', d.f);
        /* overhead: the fourth column is 1 for a stable ratio, 0 unstable */
        for (int k = 0; k < n_impls && p->n_columns == 4; k++)
            marked += !isnan(v[k][0]) && v[k][3] == 0;
    }
    if ((st = plot_data_close(&d)))
        return st;
    /* The impls (1-based) with a prediction on this page: only those get
     * dots (an iteration over no point would warn). */
    char with_prediction[MAX_SERIES * 4] = "";
    for (int k = 0; k < n_impls; k++)
        if (predicted[k]) {
            size_t used = strlen(with_prediction);
            snprintf(with_prediction + used, sizeof with_prediction - used, "%s%d", used ? " " : "", k + 1);
        }
    /* Rows the case names, rotated by 40 degrees in a 9-point font, drop
     * under the axis: about a third of a row per character, and one for
     * the tick; at most 60 (a page stays under 2000 pixels tall). */
    size_t longest = 0;
    for (int c = c0; c < c1; c++)
        longest = strlen(cases[c]) > longest ? strlen(cases[c]) : longest;
    int bm = (int)ceil(0.33 * (double)longest) + 1;
    bm = bm < 3 ? 3 : bm > 60 ? 60 : bm;
    int logy = p->log_range > 0 && smallest > 0 && largest > p->log_range * smallest;
    char vars[2048];
    snprintf(vars, sizeof vars, "data='%s'; nimpl=%d; ncase=%d; unstable=%d; page=%d; pages=%d; W=%d; colours='%s'; "
             "hasref=%d; predicted='%s'; logy=%d; smallest=%.6g; largest=%.6g; bm=%d", d.path, n_impls, c1 - c0,
             marked, page_no + 1, n_pages, page_width(p, n_impls, c1 - c0), colours,
             references > 0 || with_prediction[0], with_prediction, logy, logy ? smallest : 0, logy ? largest : 0, bm);
    if (logy && env->log)
        fprintf(env->log, "  %s: log y axis: its figures span %.3g to %.3g\n", page, smallest, largest);
    return plot_gnuplot_run(env, p->script, page, vars);
}

static int plot_per_case(struct plot_env *env, const struct summary_in *s, const struct per_case_plot *p)
{
    const char *impls[MAX_SERIES], *cases[1024];
    int n_impls = plot_list_impls(s, 1, impls, MAX_SERIES), n_cases = 0;
    for (int i = 0; i < s->n && n_cases < 1024; i++) {
        double v[MAX_COLUMNS];
        if (!plot_is_measured_impl(&s->r[i]))
            continue;
        p->columns(&s->r[i], v);
        if (isnan(v[0]))
            continue;
        int k = 0;
        while (k < n_cases && strcmp(cases[k], s->r[i].case_name) != 0)
            k++;
        if (k == n_cases)
            cases[n_cases++] = s->r[i].case_name;
    }
    plot_remove_pages(env, p->name);
    if (!n_impls || !n_cases) {
        plot_skip(env, p->name, "no reference impl results with this figure");
        return ST_OK;
    }
    int per_page = 1;
    while (per_page < n_cases && page_width(p, n_impls, per_page + 1) <= PLOT_MAX_WIDTH)
        per_page++;
    int pages = plot_page_count(n_cases, per_page), st = ST_OK;
    per_page = (n_cases + pages - 1) / pages; /* as even as can be */
    for (int pg = 0; pg < pages && !st; pg++) {
        char page[64];
        plot_page_name(page, sizeof page, p->name, pg, pages);
        int c1 = (pg + 1) * per_page;
        st = draw_page(env, s, p, impls, n_impls, cases, pg * per_page, c1 < n_cases ? c1 : n_cases, page, pg, pages);
    }
    return st;
}

/* The overhead and the range the baselines' own spread allows it, from
 * step / slowest baseline to step / fastest baseline (the overhead), and
 * whether that spread is within JUDGE_STABLE_TIMING_SPREAD: an unstable
 * ratio is drawn and marked, never dropped. */
static void overhead_columns(const struct rec *r, double *out)
{
    out[0] = r->overhead;
    out[1] = r->overhead * r->baseline_step_ms / r->slowest_baseline_step_ms;
    out[2] = r->overhead;
    out[3] = r->overhead_stable ? 1 : 0;
    if (!(out[1] > 0) || isinf(out[1]))
        out[1] = r->overhead; /* the spread is unknown: a bar without a range */
}

static double overhead_ideal(const struct rec *r) { return r->ideal_overhead; }

/* The held cut and the peak cut; only runs that did the case's work
 * (PASS, NOISE) have them. The peak also holds backward's buffers and
 * gradients, which can outweigh a small case's saving (a negative cut).
 * Third, the impl's own predicted held cut (impls of one case may plan
 * differently: selective keeps what its policy saves), drawn on its bar. */
static void cut_columns(const struct rec *r, double *out)
{
    int worked = !strcmp(r->verdict, "PASS") || !strcmp(r->verdict, "NOISE");
    out[0] = worked ? 100.0 * (1.0 - r->efb / r->base_efb) : NAN;
    out[1] = worked ? 100.0 * (1.0 - r->peak / r->base_peak) : NAN;
    out[2] = worked && r->pred_base_efb > 0 ? 100.0 * (1.0 - r->pred_efb / r->pred_base_efb) : NAN;
}

int plot_overhead(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"overhead",
                                           "plot_overhead.gp",
                                           "(baseline + one forward) / baseline",
                                           4,
                                           {"", "low", "high", "stable"},
                                           overhead_columns,
                                           overhead_ideal,
                                           -1,
                                           10,
                                           24};
    return plot_per_case(env, s, &p);
}

int plot_held_per_case(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"held_per_case",
                                           "plot_held_per_case.gp",
                                           NULL,
                                           3,
                                           {"held cut", "peak cut", "predicted held cut"},
                                           cut_columns,
                                           NULL,
                                           2,
                                           0,
                                           28};
    return plot_per_case(env, s, &p);
}
