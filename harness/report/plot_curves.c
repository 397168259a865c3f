/* plot_curves: records grouped into curves along one swept case field
 * (batch, segments, layers or seq): groups of records that differ only in
 * that field, labelled by what tells them apart; and the model's predicted
 * bytes for a definition, drawn beside the measured ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plot_internal.h"
#include "case_policy.h"

/* segments = round(sqrt(layers)), as the case key `sqrt` resolves. */
int plot_is_sqrt_segments(const struct def *d)
{
    long r = lround(sqrt((double)d->layers));
    return d->segments > 0 && d->segments == (r < 1 ? 1 : r);
}

static void segments_text(const struct def *d, enum sweep sw, char *buf, size_t len)
{
    if (d->segments == 0)
        snprintf(buf, len, "every");
    else if (sw == SWEEP_LAYERS && plot_is_sqrt_segments(d))
        snprintf(buf, len, "sqrt(L)");
    else
        snprintf(buf, len, "%d", d->segments);
}

/* One field of a definition as a reader sees it ("L=16", "seg=every"). */
static void field_text(const struct def *d, enum field f, enum sweep sw, char *buf, size_t len)
{
    char seg[24];
    switch (f) {
    case F_MODEL: snprintf(buf, len, "%s", d->model); break;
    case F_LAYERS: snprintf(buf, len, "L=%d", d->layers); break;
    case F_HIDDEN: snprintf(buf, len, "hidden %d", d->hidden); break;
    case F_SEQ: snprintf(buf, len, "seq %d", d->seq); break;
    case F_BATCH: snprintf(buf, len, "batch %d", d->batch); break;
    case F_HEADS: snprintf(buf, len, strcmp(d->model, "gpt_block") == 0 ? "heads %d" : "", d->heads); break;
    case F_SEGMENTS:
        segments_text(d, sw, seg, sizeof seg);
        snprintf(buf, len, "seg=%s", seg);
        break;
    case F_DTYPE: snprintf(buf, len, "%s", d->dtype); break;
    case F_FUSION: snprintf(buf, len, "fusion %s", d->fusion); break;
    case F_AUTOCAST: snprintf(buf, len, strcmp(d->autocast, "off") == 0 ? "" : "autocast %s", d->autocast); break;
    case F_DROPOUT: snprintf(buf, len, "p=%g", d->dropout); break;
    case F_POLICY: snprintf(buf, len, d->policy[0] ? "policy %s" : "", d->policy); break;
    default: buf[0] = '\0';
    }
}

static int swept_field(enum sweep sw, enum field f)
{
    return (sw == SWEEP_BATCH && f == F_BATCH) || (sw == SWEEP_SEGMENTS && f == F_SEGMENTS) ||
           (sw == SWEEP_LAYERS && f == F_LAYERS) || (sw == SWEEP_SEQ && (f == F_SEQ || f == F_POLICY));
}

/* Fields joined with ", ", those in `mask` only. */
void plot_describe(const struct def *d, enum sweep sw, unsigned mask, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int f = 0; f < F_COUNT && off < len; f++) {
        char t[64];
        if (!(mask & (1u << f)) || swept_field(sw, (enum field)f))
            continue;
        field_text(d, (enum field)f, sw, t, sizeof t);
        if (t[0])
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", t);
    }
}

static void group_key(const struct def *d, enum sweep sw, char *buf, size_t len)
{
    plot_describe(d, sw, ~0u, buf, len);
}

static double sweep_x(const struct def *d, enum sweep sw)
{
    switch (sw) {
    case SWEEP_BATCH: return d->batch;
    case SWEEP_SEGMENTS: return d->segments ? d->segments : d->layers; /* every = one segment per layer */
    case SWEEP_SEQ: return d->seq;
    default: return d->layers;
    }
}

int plot_find_x(const double *x, int n, double v)
{
    for (int i = 0; i < n; i++)
        if (x[i] == v)
            return i;
    return -1;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void plot_make_groups(const struct summary_in *s, enum sweep sw, struct grouping *out)
{
    struct grouping all;
    memset(&all, 0, sizeof all);
    for (int i = 0; i < s->n; i++) {
        const struct rec *r = &s->r[i];
        if (!r->d.ok)
            continue;
        char key[256];
        group_key(&r->d, sw, key, sizeof key);
        int g = 0;
        while (g < all.n && strcmp(all.g[g].key, key) != 0)
            g++;
        if (g == all.n) {
            if (all.n == MAX_SERIES)
                continue;
            snprintf(all.g[g].key, sizeof all.g[g].key, "%s", key);
            all.g[g].first = i;
            all.n++;
        }
        struct group *gr = &all.g[g];
        double x = sweep_x(&r->d, sw);
        if (plot_find_x(gr->x, gr->n_x, x) < 0 && gr->n_x < MAX_POINTS)
            gr->x[gr->n_x++] = x;
    }
    memset(out, 0, sizeof *out);
    for (int g = 0; g < all.n; g++)
        if (all.g[g].n_x >= 2) {
            out->g[out->n] = all.g[g];
            qsort(out->g[out->n].x, (size_t)out->g[out->n].n_x, sizeof(double), compare_doubles);
            out->n++;
        }
    /* Label each group by the fields that tell it from the others; the
     * fields they share go to the title. */
    unsigned varying = 0;
    for (int f = 0; f < F_COUNT; f++) {
        char a[64], b[64];
        field_text(&s->r[out->g[0].first].d, (enum field)f, sw, a, sizeof a);
        for (int g = 1; g < out->n; g++) {
            field_text(&s->r[out->g[g].first].d, (enum field)f, sw, b, sizeof b);
            if (strcmp(a, b) != 0)
                varying |= 1u << f;
        }
    }
    out->varying = varying;
    for (int g = 0; g < out->n; g++)
        plot_describe(&s->r[out->g[g].first].d, sw, varying, out->g[g].label, sizeof out->g[g].label);
    if (out->n)
        plot_describe(&s->r[out->g[0].first].d, sw, ~varying, out->common, sizeof out->common);
}

int plot_in_group(const struct rec *r, const struct group *g, enum sweep sw)
{
    char key[256];
    if (!r->d.ok)
        return 0;
    group_key(&r->d, sw, key, sizeof key);
    return strcmp(key, g->key) == 0;
}

void plot_collect(const struct summary_in *s, const struct group *g, enum sweep sw, const char *impl,
                  rec_value_fn value, struct curve *c)
{
    c->any = 0;
    for (int k = 0; k < g->n_x; k++)
        c->y[k] = NAN;
    for (int i = 0; i < s->n; i++) {
        const struct rec *r = &s->r[i];
        if ((impl && strcmp(r->impl, impl) != 0) || !plot_in_group(r, g, sw))
            continue;
        int k = plot_find_x(g->x, g->n_x, sweep_x(&r->d, sw));
        double v = value(r);
        if (k >= 0 && !isnan(v) && isnan(c->y[k])) {
            c->y[k] = v;
            c->any = 1;
        }
    }
}

void plot_series_title(char *buf, size_t len, const char *what, const struct group *g)
{
    snprintf(buf, len, "%s%s%s", what, g->label[0] ? ", " : "", g->label);
}

/* At most `max` groups, spread over the list (first, ..., last): more
 * curves than that are not readable in one plot. */
int plot_pick_groups(const struct grouping *gr, int *pick, int max)
{
    if (gr->n <= max) {
        for (int g = 0; g < gr->n; g++)
            pick[g] = g;
        return gr->n;
    }
    for (int k = 0; k < max; k++)
        pick[k] = (int)lround((double)k * (gr->n - 1) / (max - 1));
    return max;
}

double plot_predict(const struct def *d, int layers, int segments)
{
    return plot_predict_at(d, layers, segments, d->seq, "");
}

/* segments of d carried to another depth: every stays every, sqrt(L)
 * follows L, a count stays (at most L). */
int plot_segments_at(const struct def *d, int layers)
{
    if (d->segments == 0)
        return 0;
    if (plot_is_sqrt_segments(d)) {
        long r = lround(sqrt((double)layers));
        return r < 1 ? 1 : (int)r;
    }
    return d->segments < layers ? d->segments : layers;
}

