/* plot_memory: the memory plots, each a set of curves along one swept case
 * field against the model's prediction: peak vs batch size, memory saved
 * vs segments and vs depth, activation bytes vs depth (log-log, with fitted
 * exponents) and bytes held vs sequence length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fit.h"
#include "plot_internal.h"
#include "policy.h"

#define MAX_GROUPS_SHOWN 3

static double v_peak(const struct rec *r) { return r->peak; }
static double v_base_peak(const struct rec *r) { return r->base_peak; }
static double v_saved_peak(const struct rec *r) { return 100.0 * (1.0 - r->peak / r->base_peak); }
static double v_saved_efb(const struct rec *r) { return 100.0 * (1.0 - r->efb / r->base_efb); }
static double v_efb(const struct rec *r) { return r->efb; }
/* Peak minus the gradients held after backward: what is left of the peak
 * once what grows with the parameter count (gradients; the parameters are
 * live before the step and not in the peak at all) is taken out. */
static double v_peak_minus_grads(const struct rec *r) { return r->peak - r->grad; }
static double v_base_peak_minus_grads(const struct rec *r) { return r->base_peak - r->base_grad; }
static double v_act(const struct rec *r) { return r->act; }
static double v_base_act(const struct rec *r) { return r->base_act; }

int plot_peak_vs_batch(struct plot_env *env, const struct summary_in *s)
{
    struct grouping gr;
    plot_make_groups(s, SWEEP_BATCH, &gr);
    if (!gr.n) {
        plot_skip(env, "peak_vs_batch", "no cases that differ only in batch size");
        return ST_OK;
    }
    const char *impls[MAX_SERIES];
    int n_impls = plot_list_impls(s, 0, impls, MAX_SERIES), pick[MAX_GROUPS_SHOWN + 1];
    int n_groups = plot_pick_groups(&gr, pick, MAX_GROUPS_SHOWN + 1);
    double top = 0;
    for (int i = 0; i < s->n; i++)
        top = fmax(top, fmax(isnan(s->r[i].peak) ? 0 : s->r[i].peak, isnan(s->r[i].base_peak) ? 0 : s->r[i].base_peak));
    struct byte_unit u = plot_byte_unit_for(top);
    struct blockset lines;
    int st = plot_blockset_open(&lines, env, "lines", "peak_vs_batch.dat");
    if (st)
        return st;
    char title[512], vars[8192] = "", drawn[MAX_GROUPS_SHOWN + 1][256];
    int n_drawn = 0;
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[pick[p]];
        struct curve c;
        /* The baseline checkpoints nothing: groups that differ only in
         * segments share one baseline curve. */
        char label[256];
        plot_describe(&s->r[g->first].d, SWEEP_BATCH, gr.varying & ~(1u << F_SEGMENTS), label, sizeof label);
        int seen = 0;
        for (int k = 0; k < n_drawn; k++)
            seen |= strcmp(drawn[k], label) == 0;
        if (!seen) {
            snprintf(drawn[n_drawn++], sizeof drawn[0], "%s", label);
            plot_collect(s, g, SWEEP_BATCH, NULL, v_base_peak, &c);
            snprintf(title, sizeof title, "baseline (no checkpoint)%s%s", label[0] ? ", " : "", label);
            plot_blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, COLOUR_BASELINE, plot_point_filled(p), 1 + p);
        }
        for (int k = 0; k < n_impls; k++) {
            plot_collect(s, g, SWEEP_BATCH, impls[k], v_peak, &c);
            plot_series_title(title, sizeof title, impls[k], g);
            plot_blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, plot_impl_colour(impls[k]), plot_point_filled(p), 1 + p);
        }
    }
    if ((st = plot_blockset_close(&lines, vars, sizeof vars)))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; unit='%s'; common='%s'", u.name, gr.common);
    return plot_gnuplot_run(env, "plot_peak_vs_batch.gp", "peak_vs_batch", vars);
}

/* The x values of a predicted curve from the group's smallest to its
 * largest x: the measured ones, and in between only where the segmenting
 * is regular — segment counts that divide L, depths that are perfect
 * squares for sqrt(L) — since elsewhere the rounding of L / N and of sqrt
 * makes the curve saw-toothed (checkpoint_sequential(9) on 16 layers
 * checkpoints 8 of them). */
static int predicted_xs(const struct def *d, const struct group *g, enum sweep sw, double *x, int max)
{
    int n = 0;
    int squares = sw == SWEEP_LAYERS && plot_is_sqrt_segments(d);
    /* Segments: the prediction stands only where a case ran, so no point
     * reads as a measurement that was never made. */
    if (sw == SWEEP_SEGMENTS) {
        for (int k = 0; k < g->n_x && n < max; k++)
            x[n++] = g->x[k];
        return n;
    }
    for (int v = (int)g->x[0]; v <= (int)g->x[g->n_x - 1] && n < max; v++) {
        long r = lround(sqrt((double)v));
        int regular = sw == SWEEP_SEGMENTS ? d->layers % v == 0 : !squares || r * r == v;
        if (regular || plot_find_x(g->x, g->n_x, v) >= 0)
            x[n++] = v;
    }
    return n;
}

/* segments for the prediction at x: for the segments sweep x = L stands
 * for `every` when a case ran it. */
static int predicted_segments(const struct def *d, const struct group *g, enum sweep sw, int v)
{
    if (sw == SWEEP_SEGMENTS)
        return v == d->layers && plot_find_x(g->x, g->n_x, d->layers) >= 0 ? 0 : v;
    return plot_segments_at(d, v);
}

/* Memory saved against a swept field: measured per impl (peak as lines,
 * end of forward as points) and the prediction (dashed). */
int plot_saved(struct plot_env *env, const struct summary_in *s, enum sweep sw, const char *name)
{
    struct grouping gr;
    plot_make_groups(s, sw, &gr);
    if (!gr.n) {
        plot_skip(env, name, sw == SWEEP_SEGMENTS ? "no cases that differ only in segments" : "no cases that differ only in layers");
        return ST_OK;
    }
    const char *impls[MAX_SERIES];
    int n_impls = plot_list_impls(s, 1, impls, MAX_SERIES), pick[MAX_GROUPS_SHOWN];
    int n_groups = plot_pick_groups(&gr, pick, MAX_GROUPS_SHOWN);
    if (!n_impls) {
        plot_skip(env, name, "no reference impl results");
        return ST_OK;
    }
    struct blockset lines, points, pred;
    char file[96], title[512], what[160], vars[8192] = "";
    snprintf(file, sizeof file, "%s_peak.dat", name);
    int st = plot_blockset_open(&lines, env, "lines", file);
    if (st)
        return st;
    snprintf(file, sizeof file, "%s_end_forward.dat", name);
    if ((st = plot_blockset_open(&points, env, "points", file))) {
        plot_blockset_abort(&lines);
        return st;
    }
    snprintf(file, sizeof file, "%s_predicted.dat", name);
    if ((st = plot_blockset_open(&pred, env, "pred", file))) {
        plot_blockset_abort(&lines);
        plot_blockset_abort(&points);
        return st;
    }
    /* The predicted saving is a ratio of activation bytes: groups that
     * differ only in batch size (or anything else that scales every
     * activation alike) share one curve, drawn once. */
    double px[MAX_GROUPS_SHOWN][MAX_POINTS], py[MAX_GROUPS_SHOWN][MAX_POINTS];
    int pn[MAX_GROUPS_SHOWN] = {0}, all_same = 1;
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[pick[p]];
        const struct def *d = &s->r[g->first].d;
        pn[p] = predicted_xs(d, g, sw, px[p], MAX_POINTS);
        for (int k = 0; k < pn[p]; k++) {
            int layers = sw == SWEEP_LAYERS ? (int)px[p][k] : d->layers;
            double base = plot_predict(d, layers, SEGMENTS_NONE);
            double ck = plot_predict(d, layers, predicted_segments(d, g, sw, (int)px[p][k]));
            py[p][k] = base > 0 ? 100.0 * (1.0 - ck / base) : NAN;
        }
        all_same &= pn[p] == pn[0] && !memcmp(px[p], px[0], sizeof(double) * (size_t)pn[0]) &&
                    !memcmp(py[p], py[0], sizeof(double) * (size_t)pn[0]);
    }
    for (int p = 0; p < (all_same ? 1 : n_groups); p++) {
        if (all_same)
            snprintf(title, sizeof title, "held at end of forward: predicted%s", n_groups > 1 ? " (every curve alike)" : "");
        else
            plot_series_title(title, sizeof title, "held at end of forward: predicted", &gr.g[pick[p]]);
        plot_blockset_add(&pred, title, px[p], py[p], pn[p], 1.0, COLOUR_PREDICTED, 0, 2 + p);
    }
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[pick[p]];
        for (int k = 0; k < n_impls; k++) {
            struct curve c;
            plot_collect(s, g, sw, impls[k], v_saved_peak, &c);
            snprintf(what, sizeof what, "%s: peak", impls[k]);
            plot_series_title(title, sizeof title, what, g);
            plot_blockset_add(&lines, title, g->x, c.y, g->n_x, 1.0, plot_impl_colour(impls[k]), plot_point_filled(p), 1);
            plot_collect(s, g, sw, impls[k], v_saved_efb, &c);
            snprintf(what, sizeof what, "%s: held at end of forward", impls[k]);
            plot_series_title(title, sizeof title, what, g);
            plot_blockset_add(&points, title, g->x, c.y, g->n_x, 1.0, plot_impl_colour(impls[k]), plot_point_open(p), 1);
        }
    }
    int st1 = plot_blockset_close(&lines, vars, sizeof vars), st2 = plot_blockset_close(&points, vars, sizeof vars);
    if ((st = plot_blockset_close(&pred, vars, sizeof vars)) || (st = st1) || (st = st2))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; common='%s'", gr.common);
    /* Segments = every layer is drawn at N = L: its tic says so. */
    const struct def *d0 = &s->r[gr.g[pick[0]].first].d;
    if (sw == SWEEP_SEGMENTS && plot_find_x(gr.g[pick[0]].x, gr.g[pick[0]].n_x, d0->layers) >= 0) {
        off = strlen(vars);
        snprintf(vars + off, sizeof vars - off, "; every_x=%d", d0->layers);
    }
    char script[64];
    snprintf(script, sizeof script, "plot_%s.gp", name);
    return plot_gnuplot_run(env, script, name, vars);
}

/* Bytes against depth on log-log axes, each measured curve with its fitted
 * exponent: at segments = sqrt(L) the activations should grow like sqrt(L). */
int plot_memory_vs_depth(struct plot_env *env, const struct summary_in *s)
{
    struct grouping gr;
    plot_make_groups(s, SWEEP_LAYERS, &gr);
    if (!gr.n) {
        plot_skip(env, "memory_vs_depth", "no cases that differ only in layers");
        return ST_OK;
    }
    const char *impls[MAX_SERIES];
    int n_impls = plot_list_impls(s, 1, impls, MAX_SERIES), pick[MAX_GROUPS_SHOWN];
    int n_groups = plot_pick_groups(&gr, pick, MAX_GROUPS_SHOWN);
    double top = 0;
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->r[i].base_peak))
            top = fmax(top, s->r[i].base_peak);
    struct byte_unit u = plot_byte_unit_for(top);
    struct blockset lines, points, pred;
    int st = plot_blockset_open(&lines, env, "lines", "memory_vs_depth_peak.dat");
    if (st)
        return st;
    if ((st = plot_blockset_open(&points, env, "points", "memory_vs_depth_end_forward.dat"))) {
        plot_blockset_abort(&lines);
        return st;
    }
    if ((st = plot_blockset_open(&pred, env, "pred", "memory_vs_depth_predicted.dat"))) {
        plot_blockset_abort(&lines);
        plot_blockset_abort(&points);
        return st;
    }
    char title[512], what[200], vars[8192] = "";
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[pick[p]];
        const struct def *d = &s->r[g->first].d;
        struct curve c;
        plot_collect(s, g, SWEEP_LAYERS, NULL, v_base_act, &c);
        snprintf(what, sizeof what, "baseline: activation peak (k = %.2f)", fit_loglog_slope(g->x, c.y, g->n_x));
        plot_series_title(title, sizeof title, what, g);
        plot_blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, COLOUR_BASELINE, plot_point_filled(p), 1);
        plot_collect(s, g, SWEEP_LAYERS, NULL, v_base_peak_minus_grads, &c);
        snprintf(what, sizeof what, "baseline: peak - all gradients (k = %.2f)", fit_loglog_slope(g->x, c.y, g->n_x));
        plot_series_title(title, sizeof title, what, g);
        plot_blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, COLOUR_BASELINE, plot_point_open(p), 3);
        for (int k = 0; k < n_impls; k++) {
            plot_collect(s, g, SWEEP_LAYERS, impls[k], v_act, &c);
            snprintf(what, sizeof what, "%s: activation peak (k = %.2f)", impls[k], fit_loglog_slope(g->x, c.y, g->n_x));
            plot_series_title(title, sizeof title, what, g);
            plot_blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, plot_impl_colour(impls[k]), plot_point_filled(p), 1 + k);
            plot_collect(s, g, SWEEP_LAYERS, impls[k], v_peak_minus_grads, &c);
            snprintf(what, sizeof what, "%s: peak - all gradients (k = %.2f)", impls[k],
                     fit_loglog_slope(g->x, c.y, g->n_x));
            plot_series_title(title, sizeof title, what, g);
            plot_blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, plot_impl_colour(impls[k]), plot_point_open(p), 3);
            plot_collect(s, g, SWEEP_LAYERS, impls[k], v_efb, &c);
            snprintf(what, sizeof what, "%s: held at end of forward (k = %.2f)", impls[k],
                     fit_loglog_slope(g->x, c.y, g->n_x));
            plot_series_title(title, sizeof title, what, g);
            plot_blockset_add(&points, title, g->x, c.y, g->n_x, u.scale, plot_impl_colour(impls[k]), plot_point_open(p) + 0, 1);
        }
        double x[MAX_POINTS], y[MAX_POINTS], mx[MAX_POINTS], my[MAX_POINTS];
        int n = predicted_xs(d, g, SWEEP_LAYERS, x, MAX_POINTS);
        for (int k = 0; k < n; k++)
            y[k] = plot_predict(d, (int)x[k], plot_segments_at(d, (int)x[k]));
        for (int k = 0; k < g->n_x; k++) {
            mx[k] = g->x[k];
            my[k] = plot_predict(d, (int)g->x[k], plot_segments_at(d, (int)g->x[k]));
        }
        snprintf(what, sizeof what, "held at end of forward: predicted (k = %.2f)", fit_loglog_slope(mx, my, g->n_x));
        plot_series_title(title, sizeof title, what, g);
        plot_blockset_add(&pred, title, x, y, n, u.scale, COLOUR_PREDICTED, 0, 2 + p);
    }
    int st1 = plot_blockset_close(&lines, vars, sizeof vars), st2 = plot_blockset_close(&points, vars, sizeof vars);
    if ((st = plot_blockset_close(&pred, vars, sizeof vars)) || (st = st1) || (st = st2))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; unit='%s'; common='%s'", u.name, gr.common);
    return plot_gnuplot_run(env, "plot_memory_vs_depth.gp", "memory_vs_depth", vars);
}

/* Selective checkpointing: bytes held at the end of forward against seq on
 * log-log axes, one line per policy — the baseline, full recompute, each
 * selective policy — measured (points) and predicted (lines). */
#define SEQ_PREDICTED_POINTS 48
int plot_held_vs_seq(struct plot_env *env, const struct summary_in *s)
{
    struct grouping gr;
    plot_make_groups(s, SWEEP_SEQ, &gr);
    int with_policy[MAX_SERIES], n_groups = 0;
    for (int g = 0; g < gr.n && n_groups < MAX_GROUPS_SHOWN - 1; g++)
        for (int i = 0; i < s->n; i++)
            if (s->r[i].d.policy[0] && plot_in_group(&s->r[i], &gr.g[g], SWEEP_SEQ)) {
                with_policy[n_groups++] = g;
                break;
            }
    if (!n_groups) {
        plot_skip(env, "held_vs_seq", "no selective-checkpointing cases that differ only in seq and policy");
        return ST_OK;
    }
    double top = 0;
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->r[i].base_efb))
            top = fmax(top, s->r[i].base_efb);
    struct byte_unit u = plot_byte_unit_for(top);
    struct blockset points, pred;
    int st = plot_blockset_open(&points, env, "points", "held_vs_seq_measured.dat");
    if (st)
        return st;
    if ((st = plot_blockset_open(&pred, env, "pred", "held_vs_seq_predicted.dat"))) {
        plot_blockset_abort(&points);
        return st;
    }
    char title[512], what[200], vars[8192] = "";
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[with_policy[p]];
        const struct def *d = &s->r[g->first].d;
        /* The curves: baseline, full recompute (a reference impl without
         * a policy), then each policy, in order of appearance. */
        enum { MAX_CURVES = 12 };
        const char *impl[MAX_CURVES], *policy[MAX_CURVES];
        int n_curves = 1;
        impl[0] = NULL; /* the baseline */
        policy[0] = "";
        for (int i = 0; i < s->n && n_curves < MAX_CURVES; i++) {
            const struct rec *r = &s->r[i];
            /* Reference impls only: a curve per reference the harness ran. */
            if (strcmp(r->role, RUN_ROLE_REFERENCE) != 0 || !plot_in_group(r, g, SWEEP_SEQ))
                continue;
            const char *pol = policy_impl_uses_policy(r->impl) ? r->d.policy : "";
            int k = 1;
            while (k < n_curves && !(strcmp(impl[k], r->impl) == 0 && strcmp(policy[k], pol) == 0))
                k++;
            if (k == n_curves) {
                impl[n_curves] = r->impl;
                policy[n_curves++] = pol;
            }
        }
        double px[SEQ_PREDICTED_POINTS + MAX_POINTS];
        int npx = 0;
        double lo = g->x[0], hi = g->x[g->n_x - 1];
        for (int k = 0; k < SEQ_PREDICTED_POINTS; k++) {
            double v = round(lo * pow(hi / lo, (double)k / (SEQ_PREDICTED_POINTS - 1)));
            if (!npx || v > px[npx - 1])
                px[npx++] = v;
        }
        for (int c = 0; c < n_curves; c++) {
            struct curve m;
            for (int k = 0; k < g->n_x; k++)
                m.y[k] = NAN;
            for (int i = 0; i < s->n; i++) {
                const struct rec *r = &s->r[i];
                if (!plot_in_group(r, g, SWEEP_SEQ))
                    continue;
                int k = plot_find_x(g->x, g->n_x, r->d.seq);
                double v = NAN;
                if (!impl[c])
                    v = r->base_efb;
                else if (strcmp(r->impl, impl[c]) == 0 &&
                         strcmp(policy_impl_uses_policy(r->impl) ? r->d.policy : "", policy[c]) == 0 &&
                         strcmp(r->verdict, "PASS") == 0)
                    v = r->efb;
                if (k >= 0 && !isnan(v) && isnan(m.y[k]))
                    m.y[k] = v;
            }
            double py[SEQ_PREDICTED_POINTS + MAX_POINTS];
            int segments = impl[c] ? d->segments : SEGMENTS_NONE;
            for (int k = 0; k < npx; k++)
                py[k] = plot_predict_at(d, d->layers, segments, (int)px[k], policy[c]);
            const char *colour = !impl[c] ? COLOUR_BASELINE : policy[c][0] ? plot_policy_colour(policy[c]) : plot_impl_colour(impl[c]);
            if (!impl[c])
                snprintf(what, sizeof what, "baseline (no checkpoint)");
            else if (policy[c][0])
                snprintf(what, sizeof what, "%s, policy %s", impl[c], policy[c]);
            else
                snprintf(what, sizeof what, "%s (full recompute)", impl[c]);
            plot_series_title(title, sizeof title, what, g);
            plot_blockset_add(&points, title, g->x, m.y, g->n_x, u.scale, colour, plot_point_filled(c), 1);
            snprintf(title, sizeof title, "%s: predicted", what);
            plot_blockset_add(&pred, title, px, py, npx, u.scale, colour, 0, 1 + p);
            if (!impl[c]) { /* bench's attention_core target is below this */
                for (int k = 0; k < npx; k++)
                    py[k] /= 2;
                plot_series_title(title, sizeof title, "half of the baseline (predicted)", g);
                plot_blockset_add(&pred, title, px, py, npx, u.scale, COLOUR_PREDICTED, 0, 2);
            }
        }
    }
    int st1 = plot_blockset_close(&points, vars, sizeof vars);
    if ((st = plot_blockset_close(&pred, vars, sizeof vars)) || (st = st1))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; unit='%s'; common='%s'", u.name, gr.common);
    return plot_gnuplot_run(env, "plot_held_vs_seq.gp", "held_vs_seq", vars);
}

