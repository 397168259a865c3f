#include "plot.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../impls/impl.h"
#include "case.h"
#include "case_policy.h"
#include "error.h"
#include "fit.h"
#include "model.h"

extern char **environ;

#define PATH_MAX_LEN 1024
#define MAX_SERIES 64
#define MAX_POINTS 256

/* ---- the summary, as the plots need it ----------------------------------- */

/* A record's case definition (summary.json "case_definition"). */
struct def {
    int ok;
    char model[24], dtype[16], fusion[24], autocast[16];
    char policy[CASE_POLICY_MAX]; /* selective checkpointing's policy; "" for none */
    int layers, hidden, seq, batch, heads, segments; /* segments: 0 = every */
    double dropout;
};

struct rec {
    const char *case_name, *impl, *verdict;
    int expected;       /* the verdict is one the case allows */
    int has_ulp;        /* max_ulp known (null: infinite for a FAIL, unknown otherwise) */
    double ulp;         /* INFINITY when the difference has no ULP distance */
    double scaled;      /* distance at the tensor's scale (max_scaled_ulp; NaN in older summaries) */
    int overhead_stable; /* the baselines' timings agreed (summary overhead_stable; 1 when absent) */
    double overhead, ideal_overhead;
    double peak, base_peak, efb, pred_efb, base_efb, pred_base_efb, grad, base_grad;
    double act, base_act; /* activation peak: live minus the gradients held at the time */
    struct def d;
};

struct summary_in {
    json_t *root;
    int n;
    struct rec *r;
};

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void read_def(const json_t *o, struct def *d)
{
    memset(d, 0, sizeof *d);
    if (!json_is_object(o) || !json_is_string(json_object_get(o, "model")))
        return;
    snprintf(d->model, sizeof d->model, "%s", jstr(o, "model"));
    snprintf(d->dtype, sizeof d->dtype, "%s", jstr(o, "dtype"));
    snprintf(d->fusion, sizeof d->fusion, "%s", jstr(o, "fusion"));
    snprintf(d->autocast, sizeof d->autocast, "%s", jstr(o, "autocast"));
    if (strcmp(jstr(o, "policy"), "none") != 0)
        snprintf(d->policy, sizeof d->policy, "%s", jstr(o, "policy"));
    d->layers = (int)jnum(o, "layers");
    d->hidden = (int)jnum(o, "hidden");
    d->seq = (int)jnum(o, "seq");
    d->batch = (int)jnum(o, "batch");
    d->heads = (int)jnum(o, "heads");
    d->dropout = jnum(o, "dropout");
    /* "every" is a string, a count a number */
    d->segments = json_is_number(json_object_get(o, "segments")) ? (int)jnum(o, "segments") : 0;
    d->ok = d->layers > 0 && d->hidden > 0 && d->seq > 0 && d->batch > 0;
}

static int summary_load(struct summary_in *s, const char *run_dir)
{
    char path[PATH_MAX_LEN];
    json_error_t err;
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    if (!(s->root = json_load_file(path, 0, &err)))
        return error_set(ST_INPUT, "%s: %s", path, err.text);
    const json_t *records = json_object_get(s->root, "records");
    if (!json_is_array(records))
        return error_set(ST_INPUT, "%s: no \"records\" array", path);
    size_t n = json_array_size(records);
    if (!(s->r = calloc(n ? n : 1, sizeof *s->r)))
        return error_set(ST_RUN, "out of memory reading %s", path);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(records, i);
        struct rec *r = &s->r[s->n];
        r->case_name = jstr(o, "case");
        r->impl = jstr(o, "impl");
        r->verdict = jstr(o, "verdict");
        r->expected = json_is_true(json_object_get(o, "expected"));
        if (!*r->case_name || !*r->impl || strcmp(r->impl, "*") == 0)
            continue; /* a case that could not run has no impl column */
        const json_t *ulp = json_object_get(o, "max_ulp");
        r->has_ulp = json_is_number(ulp) || strcmp(r->verdict, "FAIL") == 0 || strcmp(r->verdict, "MEMFAIL") == 0;
        r->ulp = json_is_number(ulp) ? json_number_value(ulp) : INFINITY;
        r->scaled = jnum(o, "max_scaled_ulp");
        r->overhead = jnum(o, "overhead");
        r->overhead_stable = !json_is_false(json_object_get(o, "overhead_stable"));
        r->ideal_overhead = jnum(o, "ideal_overhead");
        r->peak = jnum(o, "peak_bytes");
        r->base_peak = jnum(o, "baseline_peak_bytes");
        r->efb = jnum(o, "end_forward_bytes");
        r->pred_efb = jnum(o, "predicted_end_forward_bytes");
        r->base_efb = jnum(o, "baseline_end_forward_bytes");
        r->pred_base_efb = jnum(o, "predicted_baseline_end_forward_bytes");
        r->grad = jnum(o, "grad_bytes");
        r->base_grad = jnum(o, "baseline_grad_bytes");
        r->act = jnum(o, "activation_peak_bytes");
        r->base_act = jnum(o, "baseline_activation_peak_bytes");
        /* A run that failed or errored did not do the case's work: its
         * bytes and time are no measurement of checkpointing. */
        if (!strcmp(r->verdict, "FAIL") || !strcmp(r->verdict, "ERROR"))
            r->peak = r->efb = r->grad = r->act = r->overhead = NAN;
        read_def(json_object_get(o, "case_definition"), &r->d);
        s->n++;
    }
    return ST_OK;
}

static void summary_in_free(struct summary_in *s)
{
    free(s->r);
    json_decref(s->root);
}

/* ---- data files and gnuplot ------------------------------------------------ */

struct plot_env {
    const char *run_dir, *scripts_dir, *gnuplot;
    char plots_dir[PATH_MAX_LEN];
    FILE *log;
    int drawn, skipped;
};

struct datafile {
    FILE *f;
    char path[PATH_MAX_LEN], tmp[PATH_MAX_LEN + 8];
};

static int data_open(struct datafile *d, const struct plot_env *env, const char *name)
{
    snprintf(d->path, sizeof d->path, "%s/%s", env->plots_dir, name);
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp", d->path);
    if (!(d->f = fopen(d->tmp, "w")))
        return error_set(ST_INPUT, "%s: cannot write: %s", d->tmp, strerror(errno));
    return ST_OK;
}

static int data_close(struct datafile *d)
{
    int bad = ferror(d->f);
    if (fclose(d->f) != 0 || bad) {
        remove(d->tmp);
        return error_set(ST_INPUT, "%s: write failed", d->tmp);
    }
    if (rename(d->tmp, d->path) != 0) {
        remove(d->tmp);
        return error_set(ST_INPUT, "%s: cannot rename into place: %s", d->path, strerror(errno));
    }
    return ST_OK;
}

/* The program's path: as given when it has a '/', else the first
 * executable of that name on PATH. */
static int find_program(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(out, len, "%.*s/%s", (int)n, n ? path : ".", name);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 1;
        path = colon ? colon + 1 : NULL;
    }
    return 0;
}

/* gnuplot -e "<vars>; term='png'; out='<plots>/<name>.png'" scripts/<script>,
 * then the same for SVG. Values in vars are quoted with single quotes, so
 * paths may not hold one (plot_run_dir checks). */
static int gnuplot_run(struct plot_env *env, const char *script, const char *name, const char *vars)
{
    static const char *const terms[] = {"png", "svg"};
    char script_path[PATH_MAX_LEN], expr[16384];
    snprintf(script_path, sizeof script_path, "%s/%s", env->scripts_dir, script);
    if (access(script_path, R_OK) != 0)
        return error_set(ST_INPUT, "%s: cannot read the gnuplot script: %s", script_path, strerror(errno));
    for (size_t t = 0; t < sizeof terms / sizeof terms[0]; t++) {
        snprintf(expr, sizeof expr, "%s; term='%s'; out='%s/%s.%s'", vars, terms[t], env->plots_dir, name, terms[t]);
        char *argv[] = {(char *)env->gnuplot, "-e", expr, script_path, NULL};
        pid_t pid;
        int rc = posix_spawn(&pid, env->gnuplot, NULL, NULL, argv, environ);
        if (rc != 0)
            return error_set(ST_RUN, "cannot start %s: %s", env->gnuplot, strerror(rc));
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR)
                return error_set(ST_RUN, "waiting for gnuplot: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return error_set(ST_RUN, "gnuplot failed on %s (%s output); its messages are above", script, terms[t]);
    }
    fprintf(env->log, "  %s/%s.png, .svg\n", env->plots_dir, name);
    env->drawn++;
    return ST_OK;
}

static void skip(struct plot_env *env, const char *name, const char *why)
{
    fprintf(env->log, "  %s: skipped (%s)\n", name, why);
    env->skipped++;
}

/* A quoted string for a data file: gnuplot reads "..." as one column. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        fputc(*s == '"' ? '\'' : *s, f);
    fputc('"', f);
}

/* The unit that shows the largest value as a number of at least 1. */
struct byte_unit {
    double scale;
    const char *name;
};

static struct byte_unit unit_for(double max_bytes)
{
    if (max_bytes >= 1024.0 * 1024 * 1024)
        return (struct byte_unit){1024.0 * 1024 * 1024, "GiB"};
    if (max_bytes >= 1024.0 * 1024)
        return (struct byte_unit){1024.0 * 1024, "MiB"};
    if (max_bytes >= 1024.0)
        return (struct byte_unit){1024.0, "KiB"};
    return (struct byte_unit){1.0, "bytes"};
}

/* ---- grouping records into curves ------------------------------------------ */

/* SWEEP_SEQ: records that differ in seq and in the selective policy
 * (one curve per policy). */
enum sweep { SWEEP_BATCH, SWEEP_SEGMENTS, SWEEP_LAYERS, SWEEP_SEQ };

/* segments = round(sqrt(layers)), as the case key `sqrt` resolves. */
static int is_sqrt_segments(const struct def *d)
{
    long r = lround(sqrt((double)d->layers));
    return d->segments > 0 && d->segments == (r < 1 ? 1 : r);
}

static void segments_text(const struct def *d, enum sweep sw, char *buf, size_t len)
{
    if (d->segments == 0)
        snprintf(buf, len, "every");
    else if (sw == SWEEP_LAYERS && is_sqrt_segments(d))
        snprintf(buf, len, "sqrt(L)");
    else
        snprintf(buf, len, "%d", d->segments);
}

enum field { F_MODEL, F_LAYERS, F_HIDDEN, F_SEQ, F_BATCH, F_HEADS, F_SEGMENTS, F_DTYPE, F_FUSION, F_AUTOCAST,
             F_DROPOUT, F_POLICY, F_COUNT };

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
static void describe(const struct def *d, enum sweep sw, unsigned mask, char *buf, size_t len)
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
    describe(d, sw, ~0u, buf, len);
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

/* Groups: records that differ only in the swept field, with at least two
 * distinct values of it. */
struct group {
    char key[256], label[256];
    int first;          /* a record of the group, for its definition */
    int n_x;
    double x[MAX_POINTS];
};

struct grouping {
    int n;
    struct group g[MAX_SERIES];
    char common[256];   /* what all groups share, for the title */
    unsigned varying;   /* fields (1 << enum field) that tell the groups apart */
};

static int find_x(const double *x, int n, double v)
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

static void make_groups(const struct summary_in *s, enum sweep sw, struct grouping *out)
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
        if (find_x(gr->x, gr->n_x, x) < 0 && gr->n_x < MAX_POINTS)
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
        describe(&s->r[out->g[g].first].d, sw, varying, out->g[g].label, sizeof out->g[g].label);
    if (out->n)
        describe(&s->r[out->g[0].first].d, sw, ~varying, out->common, sizeof out->common);
}

static int in_group(const struct rec *r, const struct group *g, enum sweep sw)
{
    char key[256];
    if (!r->d.ok)
        return 0;
    group_key(&r->d, sw, key, sizeof key);
    return strcmp(key, g->key) == 0;
}

/* Distinct impls of the records, in order of appearance. */
static int list_impls(const struct summary_in *s, int references_only, const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        const char *name = s->r[i].impl;
        if (references_only) {
            const struct checkpoint_impl *impl = impl_find(name);
            if (!impl || !impl->is_reference || impl->run == impl_run_none)
                continue;
        }
        int k = 0;
        while (k < n && strcmp(out[k], name) != 0)
            k++;
        if (k == n && n < max)
            out[n++] = name;
    }
    return n;
}

/* One curve: y at each x of the group (NAN where the run has none). */
struct curve {
    double y[MAX_POINTS];
    int any;
};

typedef double (*rec_value_fn)(const struct rec *r);

static void collect(const struct summary_in *s, const struct group *g, enum sweep sw, const char *impl,
                    rec_value_fn value, struct curve *c)
{
    c->any = 0;
    for (int k = 0; k < g->n_x; k++)
        c->y[k] = NAN;
    for (int i = 0; i < s->n; i++) {
        const struct rec *r = &s->r[i];
        if ((impl && strcmp(r->impl, impl) != 0) || !in_group(r, g, sw))
            continue;
        int k = find_x(g->x, g->n_x, sweep_x(&r->d, sw));
        double v = value(r);
        if (k >= 0 && !isnan(v) && isnan(c->y[k])) {
            c->y[k] = v;
            c->any = 1;
        }
    }
}

/* A set of curves drawn alike (lines, or points only), in one data file:
 * per curve a block (its title line, then "x y" rows, then two blank
 * lines: gnuplot's index separator) and its style, handed to gnuplot as
 * word lists <name>_lc (colours), <name>_pt (point types), <name>_dt (dash
 * types), one word per block. */
struct blockset {
    struct datafile file;
    char name[16];
    int n;
    char lc[2048], pt[512], dt[512];
};

static int blockset_open(struct blockset *b, const struct plot_env *env, const char *var, const char *file)
{
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", var);
    return data_open(&b->file, env, file);
}

static void blockset_add(struct blockset *b, const char *title, const double *x, const double *y, int n, double scale,
                         const char *colour, int pt, int dt)
{
    int any = 0;
    for (int k = 0; k < n; k++)
        any |= !isnan(y[k]);
    if (!any || strlen(b->lc) + 16 > sizeof b->lc)
        return;
    put_quoted(b->file.f, title);
    fputs(" \"\"\n", b->file.f);
    for (int k = 0; k < n; k++)
        if (!isnan(y[k]))
            fprintf(b->file.f, "%.10g %.10g\n", x[k], y[k] / scale);
    fputs("\n\n", b->file.f);
    size_t l = strlen(b->lc), p = strlen(b->pt), d = strlen(b->dt);
    snprintf(b->lc + l, sizeof b->lc - l, "%s%s", l ? " " : "", colour);
    snprintf(b->pt + p, sizeof b->pt - p, "%s%d", p ? " " : "", pt);
    snprintf(b->dt + d, sizeof b->dt - d, "%s%d", d ? " " : "", dt);
    b->n++;
}

/* Closes the file and appends its gnuplot variables to vars. */
static int blockset_close(struct blockset *b, char *vars, size_t len)
{
    int st = data_close(&b->file);
    size_t off = strlen(vars);
    snprintf(vars + off, len - off, "%s%s='%s'; %s_n=%d; %s_lc='%s'; %s_pt='%s'; %s_dt='%s'", off ? "; " : "",
             b->name, b->file.path, b->name, b->n, b->name, b->lc, b->name, b->pt, b->name, b->dt);
    return st;
}

static void blockset_abort(struct blockset *b)
{
    if (b->file.f) {
        fclose(b->file.f);
        remove(b->file.tmp);
        b->file.f = NULL;
    }
}

/* Colours: one per impl, the same in every plot; grey for the baseline
 * and for predictions. */
#define COLOUR_BASELINE "#424242"
#define COLOUR_PREDICTED "#9e9e9e"
static const char *impl_colour(const char *impl)
{
    static const char *const palette[] = {"#1e88e5", "#e53935", "#fb8c00", "#43a047", "#8e24aa", "#00acc1"};
    if (strcmp(impl, "reentrant") == 0)
        return "#7b1fa2";
    if (strcmp(impl, "nonreentrant") == 0)
        return "#00897b";
    unsigned h = 0;
    for (const char *c = impl; *c; c++)
        h = h * 31 + (unsigned char)*c;
    return palette[h % (sizeof palette / sizeof palette[0])];
}

static const char *policy_colour(const char *policy)
{
    if (strcmp(policy, "attention_core") == 0)
        return "#fb8c00";
    if (strcmp(policy, "save_matmuls") == 0)
        return "#e53935";
    return impl_colour(policy);
}

/* Point types per group: filled for lines, open for points only. */
static int point_filled(int group) { return (int[]){7, 5, 9, 11, 13, 15}[group % 6]; }
static int point_open(int group) { return (int[]){6, 4, 8, 10, 12, 14}[group % 6]; }

static void series_title(char *buf, size_t len, const char *what, const struct group *g)
{
    snprintf(buf, len, "%s%s%s", what, g->label[0] ? ", " : "", g->label);
}

/* At most `max` groups, spread over the list (first, ..., last): more
 * curves than that are not readable in one plot. */
static int pick_groups(const struct grouping *gr, int *pick, int max)
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

/* ---- the model's prediction for a definition ------------------------------- */

/* Predicted bytes held at end of forward for d with `segments` (0 every,
 * SEGMENTS_NONE baseline) at `layers` and `seq`, checkpointed selectively
 * when `policy` is not ""; NAN when d names something this build does not
 * know. */
static double predict_at(const struct def *d, int layers, int segments, int seq, const char *policy)
{
    struct ckpt_case c;
    case_defaults(&c);
    int model = case_model_from_name(d->model), fusion = case_fusion_from_name(d->fusion);
    int autocast = case_autocast_from_name(d->autocast), dtype = dtype_from_name(d->dtype);
    if (model < 0 || fusion < 0 || autocast < 0 || dtype < 0)
        return NAN;
    c.model = (enum model_kind)model;
    c.fusion = (enum fusion_kind)fusion;
    c.autocast = (enum autocast_kind)autocast;
    c.dtype = dtype;
    c.layers = layers;
    c.hidden = d->hidden;
    c.seq = seq;
    c.batch = d->batch;
    c.heads = d->heads;
    c.dropout = d->dropout;
    snprintf(c.policy, sizeof c.policy, "%s", policy);
    struct model m;
    if (model_create(&m, &c, DEVICE_CPU) != ST_OK)
        return NAN;
    struct segment_plan plan;
    segment_plan_make(&plan, layers, segments);
    double bytes = (double)model_predict_saved_bytes_keeping(&m, &plan, policy_of_case(&c));
    model_free(&m);
    return bytes;
}

static double predict(const struct def *d, int layers, int segments)
{
    return predict_at(d, layers, segments, d->seq, "");
}

/* segments of d carried to another depth: every stays every, sqrt(L)
 * follows L, a count stays (at most L). */
static int segments_at(const struct def *d, int layers)
{
    if (d->segments == 0)
        return 0;
    if (is_sqrt_segments(d)) {
        long r = lround(sqrt((double)layers));
        return r < 1 ? 1 : (int)r;
    }
    return d->segments < layers ? d->segments : layers;
}

/* ---- determinism heatmap --------------------------------------------------- */

static int plot_determinism(struct plot_env *env, const struct summary_in *s)
{
    const char *impls[MAX_SERIES], *cases[1024];
    int n_impls = list_impls(s, 0, impls, MAX_SERIES), n_cases = 0;
    for (int i = 0; i < s->n && n_cases < 1024; i++) {
        int k = 0;
        while (k < n_cases && strcmp(cases[k], s->r[i].case_name) != 0)
            k++;
        if (k == n_cases)
            cases[n_cases++] = s->r[i].case_name;
    }
    if (!n_impls) {
        skip(env, "determinism", "no impl results in the summary");
        return ST_OK;
    }
    struct datafile d;
    int st = data_open(&d, env, "determinism.dat");
    if (st)
        return st;
    fprintf(d.f, "# impl_index case_index rgb max_ulp verdict impl case known mark\n"
                 "# rgb: the cell colour, by whether the verdict is the one the case expects;\n"
                 "# max_ulp: ULP distance to baseline_0 over every recorded tensor; inf: no ULP distance\n"
                 "# (NaN or Inf against a number); known = 0: no figure (the run errored, or the\n"
                 "# checkpoint's own check stopped it before any gradient); mark: * a bad verdict the\n"
                 "# case expects (a planted bug caught), ! an unexpected verdict, - neither\n");
    size_t longest_impl = 0, longest_case = 0;
    for (int c = 0; c < n_cases; c++)
        for (int k = 0; k < n_impls; k++) {
            const struct rec *r = NULL;
            for (int i = 0; i < s->n && !r; i++)
                if (strcmp(s->r[i].case_name, cases[c]) == 0 && strcmp(s->r[i].impl, impls[k]) == 0)
                    r = &s->r[i];
            if (!r)
                continue;
            /* A FAIL or ERROR with no divergence recorded was stopped before
             * its gradients existed (the checkpoint's own check): no figure. */
            int stopped = (!strcmp(r->verdict, "FAIL") || !strcmp(r->verdict, "ERROR")) && r->ulp == 0;
            int known = r->has_ulp && !stopped;
            char ulp[32];
            /* The distance at the tensor's scale where the summary has it:
             * raw ULPs of elements crossing zero are ~2^31 for noise too. */
            double at_scale = r->ulp == 0 ? 0 : r->scaled;
            if (!known)
                snprintf(ulp, sizeof ulp, "-");
            else if (!isnan(at_scale))
                snprintf(ulp, sizeof ulp, isinf(at_scale) ? "inf" : at_scale >= 1e5 ? "%.1e" : "%.3g", at_scale);
            else if (isinf(r->ulp))
                snprintf(ulp, sizeof ulp, "inf");
            else if (r->ulp >= 1e5)
                snprintf(ulp, sizeof ulp, "%.1e", r->ulp);
            else
                snprintf(ulp, sizeof ulp, "%.0f", r->ulp);
            /* A FAIL the case expects (a planted bug caught) is not a finding;
             * anything unexpected is. */
            const char *note = !r->expected ? "!"
                               : strcmp(r->verdict, "PASS") && strcmp(r->verdict, "NOISE") &&
                                         strcmp(r->verdict, "NOT_OBSERVABLE")
                                   ? "*"
                                   : "-";
            /* short enough for a cell */
            const char *verdict = strcmp(r->verdict, "NOT_OBSERVABLE") == 0 ? "NOT_OBS" : r->verdict;
            /* Colour says "as expected or not", never "good or bad": an
             * expected catch of a planted bug is not a finding, an
             * unexpected PASS of one is. */
            unsigned rgb = !r->expected                                 ? 0xef5350u
                           : note[0] == '*'                              ? 0x90caf9u
                           : !known || !strcmp(r->verdict, "NOT_OBSERVABLE") ? 0xdededeu
                                                                         : 0xa5d6a7u;
            if (strlen(impls[k]) > longest_impl)
                longest_impl = strlen(impls[k]);
            if (strlen(cases[c]) > longest_case)
                longest_case = strlen(cases[c]);
            /* rows from the top: the first case at the top */
            fprintf(d.f, "%d %d %u %s %s ", k, n_cases - 1 - c, rgb, ulp, verdict);
            put_quoted(d.f, impls[k]);
            fputc(' ', d.f);
            put_quoted(d.f, cases[c]);
            fprintf(d.f, " %d %s\n", known, note);
        }
    if ((st = data_close(&d)))
        return st;
    char vars[2048];
    /* Margins in character cells: the rotated impl names drop about 0.6 of
     * their length below the axis; the legend needs two more rows. */
    snprintf(vars, sizeof vars, "data='%s'; nx=%d; ny=%d; bm=%d; lm=%d", d.path, n_impls, n_cases,
             (int)(0.45 * (double)longest_impl) + 4, (int)longest_case + 3);
    return gnuplot_run(env, "plot_determinism.gp", "determinism", vars);
}

/* ---- memory plots ---------------------------------------------------------- */

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

static int plot_peak_vs_batch(struct plot_env *env, const struct summary_in *s)
{
    struct grouping gr;
    make_groups(s, SWEEP_BATCH, &gr);
    if (!gr.n) {
        skip(env, "peak_vs_batch", "no cases that differ only in batch size");
        return ST_OK;
    }
    const char *impls[MAX_SERIES];
    int n_impls = list_impls(s, 0, impls, MAX_SERIES), pick[MAX_GROUPS_SHOWN + 1];
    int n_groups = pick_groups(&gr, pick, MAX_GROUPS_SHOWN + 1);
    double top = 0;
    for (int i = 0; i < s->n; i++)
        top = fmax(top, fmax(isnan(s->r[i].peak) ? 0 : s->r[i].peak, isnan(s->r[i].base_peak) ? 0 : s->r[i].base_peak));
    struct byte_unit u = unit_for(top);
    struct blockset lines;
    int st = blockset_open(&lines, env, "lines", "peak_vs_batch.dat");
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
        describe(&s->r[g->first].d, SWEEP_BATCH, gr.varying & ~(1u << F_SEGMENTS), label, sizeof label);
        int seen = 0;
        for (int k = 0; k < n_drawn; k++)
            seen |= strcmp(drawn[k], label) == 0;
        if (!seen) {
            snprintf(drawn[n_drawn++], sizeof drawn[0], "%s", label);
            collect(s, g, SWEEP_BATCH, NULL, v_base_peak, &c);
            snprintf(title, sizeof title, "baseline (no checkpoint)%s%s", label[0] ? ", " : "", label);
            blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, COLOUR_BASELINE, point_filled(p), 1 + p);
        }
        for (int k = 0; k < n_impls; k++) {
            collect(s, g, SWEEP_BATCH, impls[k], v_peak, &c);
            series_title(title, sizeof title, impls[k], g);
            blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, impl_colour(impls[k]), point_filled(p), 1 + p);
        }
    }
    if ((st = blockset_close(&lines, vars, sizeof vars)))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; unit='%s'; common='%s'", u.name, gr.common);
    return gnuplot_run(env, "plot_peak_vs_batch.gp", "peak_vs_batch", vars);
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
    int squares = sw == SWEEP_LAYERS && is_sqrt_segments(d);
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
        if (regular || find_x(g->x, g->n_x, v) >= 0)
            x[n++] = v;
    }
    return n;
}

/* segments for the prediction at x: for the segments sweep x = L stands
 * for `every` when a case ran it. */
static int predicted_segments(const struct def *d, const struct group *g, enum sweep sw, int v)
{
    if (sw == SWEEP_SEGMENTS)
        return v == d->layers && find_x(g->x, g->n_x, d->layers) >= 0 ? 0 : v;
    return segments_at(d, v);
}

/* Memory saved against a swept field: measured per impl (peak as lines,
 * end of forward as points) and the prediction (dashed). */
static int plot_saved(struct plot_env *env, const struct summary_in *s, enum sweep sw, const char *name)
{
    struct grouping gr;
    make_groups(s, sw, &gr);
    if (!gr.n) {
        skip(env, name, sw == SWEEP_SEGMENTS ? "no cases that differ only in segments" : "no cases that differ only in layers");
        return ST_OK;
    }
    const char *impls[MAX_SERIES];
    int n_impls = list_impls(s, 1, impls, MAX_SERIES), pick[MAX_GROUPS_SHOWN];
    int n_groups = pick_groups(&gr, pick, MAX_GROUPS_SHOWN);
    if (!n_impls) {
        skip(env, name, "no reference impl results");
        return ST_OK;
    }
    struct blockset lines, points, pred;
    char file[96], title[512], what[160], vars[8192] = "";
    snprintf(file, sizeof file, "%s_peak.dat", name);
    int st = blockset_open(&lines, env, "lines", file);
    if (st)
        return st;
    snprintf(file, sizeof file, "%s_end_forward.dat", name);
    if ((st = blockset_open(&points, env, "points", file))) {
        blockset_abort(&lines);
        return st;
    }
    snprintf(file, sizeof file, "%s_predicted.dat", name);
    if ((st = blockset_open(&pred, env, "pred", file))) {
        blockset_abort(&lines);
        blockset_abort(&points);
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
            double base = predict(d, layers, SEGMENTS_NONE);
            double ck = predict(d, layers, predicted_segments(d, g, sw, (int)px[p][k]));
            py[p][k] = base > 0 ? 100.0 * (1.0 - ck / base) : NAN;
        }
        all_same &= pn[p] == pn[0] && !memcmp(px[p], px[0], sizeof(double) * (size_t)pn[0]) &&
                    !memcmp(py[p], py[0], sizeof(double) * (size_t)pn[0]);
    }
    for (int p = 0; p < (all_same ? 1 : n_groups); p++) {
        if (all_same)
            snprintf(title, sizeof title, "held at end of forward: predicted%s", n_groups > 1 ? " (every curve alike)" : "");
        else
            series_title(title, sizeof title, "held at end of forward: predicted", &gr.g[pick[p]]);
        blockset_add(&pred, title, px[p], py[p], pn[p], 1.0, COLOUR_PREDICTED, 0, 2 + p);
    }
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[pick[p]];
        for (int k = 0; k < n_impls; k++) {
            struct curve c;
            collect(s, g, sw, impls[k], v_saved_peak, &c);
            snprintf(what, sizeof what, "%s: peak", impls[k]);
            series_title(title, sizeof title, what, g);
            blockset_add(&lines, title, g->x, c.y, g->n_x, 1.0, impl_colour(impls[k]), point_filled(p), 1);
            collect(s, g, sw, impls[k], v_saved_efb, &c);
            snprintf(what, sizeof what, "%s: held at end of forward", impls[k]);
            series_title(title, sizeof title, what, g);
            blockset_add(&points, title, g->x, c.y, g->n_x, 1.0, impl_colour(impls[k]), point_open(p), 1);
        }
    }
    int st1 = blockset_close(&lines, vars, sizeof vars), st2 = blockset_close(&points, vars, sizeof vars);
    if ((st = blockset_close(&pred, vars, sizeof vars)) || (st = st1) || (st = st2))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; common='%s'", gr.common);
    /* Segments = every layer is drawn at N = L: its tic says so. */
    const struct def *d0 = &s->r[gr.g[pick[0]].first].d;
    if (sw == SWEEP_SEGMENTS && find_x(gr.g[pick[0]].x, gr.g[pick[0]].n_x, d0->layers) >= 0) {
        off = strlen(vars);
        snprintf(vars + off, sizeof vars - off, "; every_x=%d", d0->layers);
    }
    char script[64];
    snprintf(script, sizeof script, "plot_%s.gp", name);
    return gnuplot_run(env, script, name, vars);
}

/* Bytes against depth on log-log axes, each measured curve with its fitted
 * exponent: at segments = sqrt(L) the activations should grow like sqrt(L). */
static int plot_memory_vs_depth(struct plot_env *env, const struct summary_in *s)
{
    struct grouping gr;
    make_groups(s, SWEEP_LAYERS, &gr);
    if (!gr.n) {
        skip(env, "memory_vs_depth", "no cases that differ only in layers");
        return ST_OK;
    }
    const char *impls[MAX_SERIES];
    int n_impls = list_impls(s, 1, impls, MAX_SERIES), pick[MAX_GROUPS_SHOWN];
    int n_groups = pick_groups(&gr, pick, MAX_GROUPS_SHOWN);
    double top = 0;
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->r[i].base_peak))
            top = fmax(top, s->r[i].base_peak);
    struct byte_unit u = unit_for(top);
    struct blockset lines, points, pred;
    int st = blockset_open(&lines, env, "lines", "memory_vs_depth_peak.dat");
    if (st)
        return st;
    if ((st = blockset_open(&points, env, "points", "memory_vs_depth_end_forward.dat"))) {
        blockset_abort(&lines);
        return st;
    }
    if ((st = blockset_open(&pred, env, "pred", "memory_vs_depth_predicted.dat"))) {
        blockset_abort(&lines);
        blockset_abort(&points);
        return st;
    }
    char title[512], what[200], vars[8192] = "";
    for (int p = 0; p < n_groups; p++) {
        const struct group *g = &gr.g[pick[p]];
        const struct def *d = &s->r[g->first].d;
        struct curve c;
        collect(s, g, SWEEP_LAYERS, NULL, v_base_act, &c);
        snprintf(what, sizeof what, "baseline: activation peak (k = %.2f)", fit_loglog_slope(g->x, c.y, g->n_x));
        series_title(title, sizeof title, what, g);
        blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, COLOUR_BASELINE, point_filled(p), 1);
        collect(s, g, SWEEP_LAYERS, NULL, v_base_peak_minus_grads, &c);
        snprintf(what, sizeof what, "baseline: peak - all gradients (k = %.2f)", fit_loglog_slope(g->x, c.y, g->n_x));
        series_title(title, sizeof title, what, g);
        blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, COLOUR_BASELINE, point_open(p), 3);
        for (int k = 0; k < n_impls; k++) {
            collect(s, g, SWEEP_LAYERS, impls[k], v_act, &c);
            snprintf(what, sizeof what, "%s: activation peak (k = %.2f)", impls[k], fit_loglog_slope(g->x, c.y, g->n_x));
            series_title(title, sizeof title, what, g);
            blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, impl_colour(impls[k]), point_filled(p), 1 + k);
            collect(s, g, SWEEP_LAYERS, impls[k], v_peak_minus_grads, &c);
            snprintf(what, sizeof what, "%s: peak - all gradients (k = %.2f)", impls[k],
                     fit_loglog_slope(g->x, c.y, g->n_x));
            series_title(title, sizeof title, what, g);
            blockset_add(&lines, title, g->x, c.y, g->n_x, u.scale, impl_colour(impls[k]), point_open(p), 3);
            collect(s, g, SWEEP_LAYERS, impls[k], v_efb, &c);
            snprintf(what, sizeof what, "%s: held at end of forward (k = %.2f)", impls[k],
                     fit_loglog_slope(g->x, c.y, g->n_x));
            series_title(title, sizeof title, what, g);
            blockset_add(&points, title, g->x, c.y, g->n_x, u.scale, impl_colour(impls[k]), point_open(p) + 0, 1);
        }
        double x[MAX_POINTS], y[MAX_POINTS], mx[MAX_POINTS], my[MAX_POINTS];
        int n = predicted_xs(d, g, SWEEP_LAYERS, x, MAX_POINTS);
        for (int k = 0; k < n; k++)
            y[k] = predict(d, (int)x[k], segments_at(d, (int)x[k]));
        for (int k = 0; k < g->n_x; k++) {
            mx[k] = g->x[k];
            my[k] = predict(d, (int)g->x[k], segments_at(d, (int)g->x[k]));
        }
        snprintf(what, sizeof what, "held at end of forward: predicted (k = %.2f)", fit_loglog_slope(mx, my, g->n_x));
        series_title(title, sizeof title, what, g);
        blockset_add(&pred, title, x, y, n, u.scale, COLOUR_PREDICTED, 0, 2 + p);
    }
    int st1 = blockset_close(&lines, vars, sizeof vars), st2 = blockset_close(&points, vars, sizeof vars);
    if ((st = blockset_close(&pred, vars, sizeof vars)) || (st = st1) || (st = st2))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; unit='%s'; common='%s'", u.name, gr.common);
    return gnuplot_run(env, "plot_memory_vs_depth.gp", "memory_vs_depth", vars);
}

/* Selective checkpointing: bytes held at the end of forward against seq on
 * log-log axes, one line per policy — the baseline, full recompute, each
 * selective policy — measured (points) and predicted (lines). */
#define SEQ_PREDICTED_POINTS 48
static int plot_held_vs_seq(struct plot_env *env, const struct summary_in *s)
{
    struct grouping gr;
    make_groups(s, SWEEP_SEQ, &gr);
    int with_policy[MAX_SERIES], n_groups = 0;
    for (int g = 0; g < gr.n && n_groups < MAX_GROUPS_SHOWN - 1; g++)
        for (int i = 0; i < s->n; i++)
            if (s->r[i].d.policy[0] && in_group(&s->r[i], &gr.g[g], SWEEP_SEQ)) {
                with_policy[n_groups++] = g;
                break;
            }
    if (!n_groups) {
        skip(env, "held_vs_seq", "no selective-checkpointing cases that differ only in seq and policy");
        return ST_OK;
    }
    double top = 0;
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->r[i].base_efb))
            top = fmax(top, s->r[i].base_efb);
    struct byte_unit u = unit_for(top);
    struct blockset points, pred;
    int st = blockset_open(&points, env, "points", "held_vs_seq_measured.dat");
    if (st)
        return st;
    if ((st = blockset_open(&pred, env, "pred", "held_vs_seq_predicted.dat"))) {
        blockset_abort(&points);
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
            const struct checkpoint_impl *ci = impl_find(r->impl);
            if (!ci || !ci->is_reference || ci->run == impl_run_none || !in_group(r, g, SWEEP_SEQ))
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
                if (!in_group(r, g, SWEEP_SEQ))
                    continue;
                int k = find_x(g->x, g->n_x, r->d.seq);
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
                py[k] = predict_at(d, d->layers, segments, (int)px[k], policy[c]);
            const char *colour = !impl[c] ? COLOUR_BASELINE : policy[c][0] ? policy_colour(policy[c]) : impl_colour(impl[c]);
            if (!impl[c])
                snprintf(what, sizeof what, "baseline (no checkpoint)");
            else if (policy[c][0])
                snprintf(what, sizeof what, "%s, policy %s", impl[c], policy[c]);
            else
                snprintf(what, sizeof what, "%s (full recompute)", impl[c]);
            series_title(title, sizeof title, what, g);
            blockset_add(&points, title, g->x, m.y, g->n_x, u.scale, colour, point_filled(c), 1);
            snprintf(title, sizeof title, "%s: predicted", what);
            blockset_add(&pred, title, px, py, npx, u.scale, colour, 0, 1 + p);
            if (!impl[c]) { /* bench's attention_core target is below this */
                for (int k = 0; k < npx; k++)
                    py[k] /= 2;
                series_title(title, sizeof title, "half of the baseline (predicted)", g);
                blockset_add(&pred, title, px, py, npx, u.scale, COLOUR_PREDICTED, 0, 2);
            }
        }
    }
    int st1 = blockset_close(&points, vars, sizeof vars);
    if ((st = blockset_close(&pred, vars, sizeof vars)) || (st = st1))
        return st;
    size_t off = strlen(vars);
    snprintf(vars + off, sizeof vars - off, "; unit='%s'; common='%s'", u.name, gr.common);
    return gnuplot_run(env, "plot_held_vs_seq.gp", "held_vs_seq", vars);
}

/* ---- time overhead --------------------------------------------------------- */

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
    int n_impls = list_impls(s, 1, impls, MAX_SERIES), n_cases = 0, refused = 0;
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
        skip(env, p->name, "no reference impl results with this figure");
        return ST_OK;
    }
    struct datafile d;
    char file[96];
    snprintf(file, sizeof file, "%s.dat", p->name);
    int st = data_open(&d, env, file);
    if (st)
        return st;
    /* header row: the column titles */
    fprintf(d.f, "index case ");
    put_quoted(d.f, p->reference_title);
    for (int k = 0; k < n_impls; k++) {
        fputc(' ', d.f);
        put_quoted(d.f, impls[k]);
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
        put_quoted(d.f, cases[c]);
        fprintf(d.f, " %.6g", reference);
        for (int k = 0; k < n_impls; k++)
            fprintf(d.f, " %.6g", v[k]);
        fputc('\n', d.f);
    }
    if ((st = data_close(&d)))
        return st;
    char vars[2048];
    snprintf(vars, sizeof vars, "data='%s'; nimpl=%d; ncase=%d; unstable=%d", d.path, n_impls, n_cases, refused);
    return gnuplot_run(env, p->script, p->name, vars);
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

static int plot_overhead(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"overhead", "plot_overhead.gp", "(baseline + one forward) / baseline",
                                           overhead_value, overhead_ideal};
    return plot_per_case(env, s, &p);
}

static int plot_held_per_case(struct plot_env *env, const struct summary_in *s)
{
    static const struct per_case_plot p = {"held_per_case", "plot_held_per_case.gp", "predicted", held_cut_value,
                                           held_cut_predicted};
    return plot_per_case(env, s, &p);
}

/* ---- entry ----------------------------------------------------------------- */

int plot_run_dir(const char *run_dir, const char *scripts_dir, const char *gnuplot, FILE *log)
{
    char program[PATH_MAX_LEN];
    if (!find_program(gnuplot, program, sizeof program))
        return error_set(ST_INPUT, "plot: %s not found%s (install gnuplot-nox; scripts/install-deps.sh does)", gnuplot,
                         strchr(gnuplot, '/') ? "" : " on PATH");
    if (strchr(run_dir, '\'') || strchr(scripts_dir, '\''))
        return error_set(ST_INPUT, "plot: paths with a single quote cannot be handed to gnuplot: %s", run_dir);
    struct summary_in s;
    int st = summary_load(&s, run_dir);
    if (st) {
        summary_in_free(&s);
        return st;
    }
    struct plot_env env = {.run_dir = run_dir, .scripts_dir = scripts_dir, .gnuplot = program, .log = log};
    snprintf(env.plots_dir, sizeof env.plots_dir, "%s/plots", run_dir);
    if (mkdir(env.plots_dir, 0777) != 0 && errno != EEXIST) {
        summary_in_free(&s);
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
    summary_in_free(&s);
    return st;
}
