/* plot_per_case: the bar plots with one figure per case and reference impl,
 * beside the case's reference value: the step-time overhead (ideal 4/3),
 * the bytes held at end of forward cut (predicted) and the peak cut. */
#include <math.h>
#include <string.h>

#include "../impls/impl.h"
#include "error.h"
#include "plot_internal.h"

/* One figure per case and reference impl, with the case's reference value
 * beside them (the overhead's ideal, the held cut's prediction): the
 * table behind the per-case bar plots. NAN leaves a bar out; *left_out
 * counts the records `value` refused. */
struct per_case_plot {
    const char *name, *script, *reference_title;
    double (*value)(const struct rec *r, int *refused);
    double (*reference)(const struct rec *r);
};

static int plot_per_case(struct plot_env *env, const struct summary_in *s, const struct per_case_plot *p)
{
    const char *impls[MAX_SERIES], *cases[1024];
    int n_impls = plot_list_impls(s, 1, impls, MAX_SERIES), n_cases = 0, refused = 0;
    for (int i = 0; i < s->n && n_cases < 1024; i++) {
        const struct checkpoint_impl *impl = impl_find(s->r[i].impl);
        int ignored;
        if (!impl || !impl->is_reference || impl->run == impl_run_none || isnan(p->value(&s->r[i], &ignored)))
            continue;
        int k = 0;
        while (k < n_cases && strcmp(cases[k], s->r[i].case_name) != 0)
            k++;
        if (k == n_cases)
            cases[n_cases++] = s->r[i].case_name;
    }
    if (!n_impls || !n_cases) {
        plot_skip(env, p->name, "no reference impl results with this figure");
        return ST_OK;
    }
    struct datafile d;
    char file[96];
    snprintf(file, sizeof file, "%s.dat", p->name);
    int st = plot_data_open(&d, env, file);
    if (st)
        return st;
    /* header row: the column titles */
    fprintf(d.f, "index case ");
    plot_put_quoted(d.f, p->reference_title);
    for (int k = 0; k < n_impls; k++) {
        fputc(' ', d.f);
        plot_put_quoted(d.f, impls[k]);
    }
    fputc('\n', d.f);
    for (int c = 0; c < n_cases; c++) {
        double reference = NAN, v[MAX_SERIES];
        for (int k = 0; k < n_impls; k++)
            v[k] = NAN;
        for (int i = 0; i < s->n; i++) {
            const struct rec *r = &s->r[i];
            if (strcmp(r->case_name, cases[c]) != 0)
                continue;
            if (!isnan(p->reference(r)))
                reference = p->reference(r);
            for (int k = 0; k < n_impls; k++)
                if (strcmp(r->impl, impls[k]) == 0) {
                    int no = 0;
                    v[k] = p->value(r, &no);
                    refused += no;
                }
        }
        fprintf(d.f, "%d ", c);
        plot_put_quoted(d.f, cases[c]);
        fprintf(d.f, " %.6g", reference);
        for (int k = 0; k < n_impls; k++)
            fprintf(d.f, " %.6g", v[k]);
        fputc('\n', d.f);
    }
    if ((st = plot_data_close(&d)))
        return st;
    char vars[2048];
    snprintf(vars, sizeof vars, "data='%s'; nimpl=%d; ncase=%d; unstable=%d", d.path, n_impls, n_cases, refused);
    return plot_gnuplot_run(env, p->script, p->name, vars);
}

/* A ratio the baselines' own spread does not support stays off the plot,
 * where it would be read against the ceiling. */
static double overhead_value(const struct rec *r, int *refused)
{
    if (!r->overhead_stable && !isnan(r->overhead)) {
        *refused = 1;
        return NAN;
    }
    return r->overhead;
}

static double overhead_ideal(const struct rec *r) { return r->ideal_overhead; }

/* Only runs that did the case's work (PASS, NOISE) have a saving. */
static double held_cut_value(const struct rec *r, int *refused)
{
    (void)refused;
    if (strcmp(r->verdict, "PASS") && strcmp(r->verdict, "NOISE"))
        return NAN;
    return 100.0 * (1.0 - r->efb / r->base_efb);
}

static double held_cut_predicted(const struct rec *r)
{
    return 100.0 * (1.0 - r->pred_efb / r->pred_base_efb);
}

/* The drop in the step's peak, which small cases' backward buffers can
 * outweigh (a negative cut); only runs that did the case's work. */
static double peak_cut_value(const struct rec *r, int *refused)
{
    (void)refused;
    if (strcmp(r->verdict, "PASS") && strcmp(r->verdict, "NOISE"))
        return NAN;
    return 100.0 * (1.0 - r->peak / r->base_peak);
}

static double no_reference(const struct rec *r)
{
    (void)r;
    return NAN;
}

int plot_peak_per_case(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"peak_per_case", "plot_peak_per_case.gp", "none", peak_cut_value,
                                           no_reference};
    return plot_per_case(env, s, &p);
}

int plot_overhead(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"overhead", "plot_overhead.gp", "(baseline + one forward) / baseline",
                                           overhead_value, overhead_ideal};
    return plot_per_case(env, s, &p);
}

int plot_held_per_case(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"held_per_case", "plot_held_per_case.gp", "predicted", held_cut_value,
                                           held_cut_predicted};
    return plot_per_case(env, s, &p);
}

