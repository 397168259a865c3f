#include "runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../impls/checkpoint_env.h"
#include "../impls/impl.h"
#include "aten/aten.h"
#include "autocast.h"
#include "compare.h"
#include "error.h"
#include "h5store.h"
#include "model.h"
#include "run_record.h"

/* Runs one case may hold: baselines, impls and their noise re-runs. When
 * full, no more noise runs are made (the verdict says how many ran). */
#define MAX_RUNS 96
/* An impl run is one more sample of the same non-deterministic kernels, so
 * with k baselines it lands beyond all of them 1 time in k+1 by chance.
 * NOISE therefore allows this factor over the measured spread: a checkpoint
 * bug (a different dropout mask, a stale tensor) moves results by ~1e6-1e9
 * ULP, reduction-order noise by tens to hundreds. */
#define NOISE_MARGIN 16

/* The segment function the impls wrap: model layers [begin, end). */
struct layer_range {
    const struct model *model;
    int begin, end;
};

/* Everything a case's runs share: the model layout, its checkpoint
 * segments (they must outlive every graph: recompute calls them in
 * backward) and the host copies of the initial parameters and inputs that
 * every run starts from. */
struct case_setup {
    const struct ckpt_case *c;
    int device;
    struct model model;
    struct layer_range *segments; /* checkpointed ranges */
    int n_segments;
    int plain_from;               /* layers [plain_from, L) run plainly */
    struct host_tensor *params_init; /* model.n_params */
    struct host_tensor x, target;
};

static int plan_segments(struct case_setup *s);

static int layer_range_call(void *ctx, struct var *in, struct var **out)
{
    const struct layer_range *r = ctx;
    return model_layers_forward(r->model, r->begin, r->end, in, out);
}

static int seed_generators(int device, uint64_t seed)
{
    int st = aten_rng_manual_seed(DEVICE_CPU, seed);
    if (!st && device != DEVICE_CPU)
        st = aten_rng_manual_seed(device, seed);
    return st;
}

/* A host tensor drawn from the default generator: normal(0, std), or ones
 * (std == 0) or zeros (std < 0); drawn in float32, then cast to dtype. */
static int draw_host(struct host_tensor *out, int ndim, const int64_t *shape, double std, enum dtype dt)
{
    tensor *f = NULL, *cast = NULL;
    int st;
    if (std > 0)
        st = tensor_randn(&f, DT_F32, ndim, shape, DEVICE_CPU, std);
    else
        st = tensor_full(&f, DT_F32, ndim, shape, DEVICE_CPU, std == 0 ? 1.0 : 0.0);
    if (!st && !(st = tensor_to_dtype(&cast, f, dt)))
        st = tensor_to_host(cast, out);
    tensor_free(f);
    tensor_free(cast);
    return st;
}

static void setup_free(struct case_setup *s)
{
    if (s->params_init)
        for (int i = 0; i < s->model.n_params; i++)
            host_tensor_free(&s->params_init[i]);
    free(s->params_init);
    free(s->segments);
    host_tensor_free(&s->x);
    host_tensor_free(&s->target);
    model_free(&s->model);
}

static int setup_case(struct case_setup *s, const struct ckpt_case *c)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    int st = aten_parse_device(c->device, &s->device);
    if (st)
        return st;
    if (c->threads > 0 && (st = aten_set_threads(c->threads)))
        return st;
    if ((st = model_create(&s->model, c, s->device)) || (st = plan_segments(s)))
        return st;
    if (!(s->params_init = calloc((size_t)s->model.n_params, sizeof *s->params_init)))
        return error_set(ST_RUN, "out of memory for initial parameters");
    /* Parameters and inputs come from the CPU generator seeded with the
     * case seed, in layout order: any framework can redraw or just read
     * them from /params_init and /inputs. */
    if ((st = seed_generators(DEVICE_CPU, c->seed)))
        return st;
    for (int i = 0; i < s->model.n_params; i++) {
        const struct model_param *p = &s->model.params[i];
        if ((st = draw_host(&s->params_init[i], p->ndim, p->shape, p->init_std, s->model.dtype)))
            return error_wrap(st, "initialising %s", p->name);
    }
    int64_t shape[3];
    model_input_shape(&s->model, shape);
    if ((st = draw_host(&s->x, 3, shape, 1.0, s->model.dtype)) ||
        (st = draw_host(&s->target, 3, shape, 1.0, s->model.dtype)))
        return st;
    return ST_OK;
}

/* A host copy of t appended to the record under path. */
static int record_tensor(struct run_record *r, const char *path, const tensor *t)
{
    struct host_tensor h;
    int st = tensor_to_host(t, &h);
    if (st)
        return st;
    st = run_record_add(r, path, &h);
    host_tensor_free(&h);
    return st;
}

static int leaf_from_host(struct var **out, const struct host_tensor *h, int device, int requires_grad,
                          const char *name)
{
    tensor *t;
    int st = tensor_from_host(&t, h, device);
    if (st)
        return st;
    return var_leaf(out, t, requires_grad, name);
}

/* Segments as torch's checkpoint_sequential cuts them (segment_size =
 * L / N; the last N-th runs plainly), or every layer checkpointed when
 * segments = every (0). */
static int plan_segments(struct case_setup *s)
{
    const struct model *m = &s->model;
    int layers = m->layers, segments = s->c->segments;
    s->segments = calloc((size_t)layers, sizeof *s->segments);
    if (!s->segments)
        return error_set(ST_RUN, "out of memory planning segments");
    s->plain_from = layers;
    if (segments == 0) {
        for (int i = 0; i < layers; i++)
            s->segments[s->n_segments++] = (struct layer_range){m, i, i + 1};
    } else {
        int size = layers / segments;
        for (int start = 0; start < size * (segments - 1); start += size)
            s->segments[s->n_segments++] = (struct layer_range){m, start, start + size};
        s->plain_from = size * (segments - 1);
    }
    return ST_OK;
}

/* One step's forward: each planned segment through the impl, the rest plainly. */
static int forward_segments(const struct case_setup *s, const struct checkpoint_impl *impl,
                            const struct impl_options *opts, struct var *x, struct var **out)
{
    const struct model *m = &s->model;
    int layers = m->layers, plain_from = s->plain_from;
    struct var *cur = var_retain(x);
    int st = ST_OK;
    for (int i = 0; i < s->n_segments && !st; i++) {
        struct segment_fn fn = {layer_range_call, &s->segments[i]};
        struct var *next = NULL;
        st = impl->run(impl, opts, &fn, cur, &next);
        var_release(cur);
        cur = next;
    }
    if (!st && plain_from < layers) {
        struct var *next = NULL;
        st = model_layers_forward(m, plain_from, layers, cur, &next);
        var_release(cur);
        cur = next;
    }
    if (st) {
        var_release(cur);
        return st;
    }
    *out = cur;
    return ST_OK;
}

struct run_measure {
    double forward_ms, backward_ms;
    int64_t peak_bytes, end_forward_bytes;
};

/* One training step: forward (under the case's autocast), loss, backward
 * (outside autocast, as a training loop does), recording loss and grads. */
static int run_step(const struct case_setup *s, const struct checkpoint_impl *impl,
                    const struct impl_options *opts, struct var **params, struct var *x, struct var *target,
                    int step, struct run_record *rec, struct run_measure *m)
{
    const struct ckpt_case *c = s->c;
    struct var *act = NULL, *loss = NULL;
    struct mem_stats before, after_forward, after_backward;
    char path[RUN_PATH_MAX];
    int st;
    for (int i = 0; i < s->model.n_params; i++)
        var_zero_grad(params[i]);
    var_zero_grad(x);
    if ((st = aten_synchronize(s->device)) || (st = aten_mem_reset_peak(s->device)) ||
        (st = aten_mem_stats(s->device, &before)))
        return st;
    double t0 = monotonic_ms();
    struct autocast_state previous = autocast_set(
        (struct autocast_state){c->autocast != AUTOCAST_OFF, c->autocast == AUTOCAST_F16 ? DT_F16 : DT_BF16});
    st = forward_segments(s, impl, opts, x, &act);
    if (!st)
        st = model_loss(&s->model, act, target, &loss);
    autocast_set(previous);
    var_release(act);
    if (st)
        return st;
    if ((st = aten_synchronize(s->device)) || (st = aten_mem_stats(s->device, &after_forward)))
        goto out;
    double t1 = monotonic_ms();
    if ((st = tape_backward(&loss, NULL, 1)) || (st = aten_synchronize(s->device)))
        goto out;
    double t2 = monotonic_ms();
    if ((st = aten_mem_stats(s->device, &after_backward)))
        goto out;
    m->forward_ms += t1 - t0;
    m->backward_ms += t2 - t1;
    if (after_backward.peak_bytes - before.live_bytes > m->peak_bytes)
        m->peak_bytes = after_backward.peak_bytes - before.live_bytes;
    if (step == 1)
        m->end_forward_bytes = after_forward.live_bytes - before.live_bytes;
    snprintf(path, sizeof path, "steps/%d/loss", step);
    if ((st = record_tensor(rec, path, loss->data)))
        goto out;
    /* A parameter without a gradient is left out: compare reports it as
     * missing, as PyTorch's None would be. */
    for (int i = 0; i < s->model.n_params; i++) {
        if (!params[i]->grad)
            continue;
        snprintf(path, sizeof path, "steps/%d/grads/%s", step, s->model.params[i].name);
        if ((st = record_tensor(rec, path, params[i]->grad)))
            goto out;
    }
    if (x->grad) {
        snprintf(path, sizeof path, "steps/%d/grads/input.x", step);
        if ((st = record_tensor(rec, path, x->grad)))
            goto out;
    }
    /* SGD, outside the tape: p ← p − lr · grad. */
    for (int i = 0; i < s->model.n_params && !st; i++)
        if (params[i]->grad)
            st = tensor_add_(params[i]->data, params[i]->grad, -c->lr);
out:
    var_release(loss);
    return st;
}

/* One run of the case with one impl, into rec. */
static int run_once(const struct case_setup *s, const struct checkpoint_impl *impl, struct run_record *rec,
                    struct impl_stats *stats)
{
    const struct ckpt_case *c = s->c;
    const struct model *m = &s->model;
    struct var **params = calloc((size_t)m->n_params, sizeof *params);
    struct var *x = NULL, *target = NULL;
    struct run_measure measure = {0};
    char path[RUN_PATH_MAX];
    int st = ST_OK;
    if (!params)
        return error_set(ST_RUN, "out of memory for run %s", rec->name);
    for (int i = 0; i < m->n_params && !st; i++) {
        st = leaf_from_host(&params[i], &s->params_init[i], s->device, 1, m->params[i].name);
        if (!st)
            m->params[i].var = params[i];
    }
    if (!st)
        st = leaf_from_host(&x, &s->x, s->device, c->input_requires_grad, "input.x");
    if (!st)
        st = leaf_from_host(&target, &s->target, s->device, 0, "input.target");
    if (!st)
        st = seed_generators(s->device, c->seed);
    struct impl_options opts = {
        .preserve_rng_state = c->preserve_rng_state,
        .rng_policy = c->rng_policy,
        .current_device = s->device,
        .verify_values = c->verify_values,
        .stats = stats,
    };
    for (int step = 1; step <= c->steps && !st; step++)
        st = run_step(s, impl, &opts, params, x, target, step, rec, &measure);
    for (int i = 0; i < m->n_params && !st; i++) {
        snprintf(path, sizeof path, "final_params/%s", m->params[i].name);
        st = record_tensor(rec, path, params[i]->data);
    }
    if (!st) {
        run_record_set_attr(rec, "memory.peak_bytes", (double)measure.peak_bytes);
        run_record_set_attr(rec, "memory.end_forward_bytes", (double)measure.end_forward_bytes);
        run_record_set_attr(rec, "timing.forward_ms", measure.forward_ms);
        run_record_set_attr(rec, "timing.backward_ms", measure.backward_ms);
        run_record_set_attr(rec, "timing.recompute_ms", stats->recompute_ms);
        run_record_set_attr(rec, "timing.steps", c->steps);
        run_record_set_attr(rec, "recompute.count", stats->recomputes);
        run_record_set_attr(rec, "recompute.tensors", stats->recomputed_tensors);
    }
    for (int i = 0; i < m->n_params; i++) {
        var_release(params[i]);
        m->params[i].var = NULL;
    }
    free(params);
    var_release(x);
    var_release(target);
    return st;
}

/* ---- verdicts ---------------------------------------------------------------- */

struct case_state {
    struct case_setup setup;
    struct run_record runs[MAX_RUNS];
    int n_runs;
    int baselines;
    uint64_t noise_floor;
};

static struct run_record *new_run(struct case_state *cs, const char *name)
{
    if (cs->n_runs == MAX_RUNS)
        return NULL;
    struct run_record *r = &cs->runs[cs->n_runs++];
    run_record_init(r, name);
    return r;
}

/* Runs one more baseline and widens the noise floor with its distance to
 * baseline_0. */
static int add_baseline(struct case_state *cs)
{
    char name[32];
    snprintf(name, sizeof name, "baseline_%d", cs->baselines);
    struct run_record *r = new_run(cs, name);
    struct impl_stats stats = {0};
    if (!r)
        return error_set(ST_INTERNAL, "case %s: more than %d runs", cs->setup.c->name, MAX_RUNS);
    int st = run_once(&cs->setup, impl_find("none"), r, &stats);
    if (st)
        return error_wrap(st, "baseline run %s", name);
    cs->baselines++;
    if (cs->baselines > 1) {
        struct run_diff d;
        if ((st = compare_runs(&cs->runs[0], r, "steps/", &d)))
            return st;
        if (d.n_missing || d.incomparable)
            return error_set(ST_INTERNAL, "baseline runs disagree on which tensors exist (%s)", d.first_missing);
        if (d.max_ulp > cs->noise_floor)
            cs->noise_floor = d.max_ulp;
    }
    return ST_OK;
}

static void describe_divergence(const struct run_diff *d, char *buf, size_t len)
{
    if (d->incomparable) {
        snprintf(buf, len, "%s: %s", d->incomparable_path, d->incomparable_why);
        return;
    }
    if (d->has_divergence) {
        snprintf(buf, len, "%s %s (%.9g vs %.9g; %zu of %zu elements differ)", d->first_path,
                 d->first_index_str, d->first.first_a, d->first.first_b, d->first.n_differ, d->first.count);
        return;
    }
    if (d->n_missing) {
        snprintf(buf, len, "%s missing", d->first_missing);
        return;
    }
    buf[0] = '\0';
}

static int within_noise(uint64_t ulp, uint64_t floor)
{
    if (floor == 0 || ulp == ULP_INFINITE)
        return 0;
    return floor >= ULP_INFINITE / NOISE_MARGIN || ulp <= floor * NOISE_MARGIN;
}

/* PASS / NOISE / FAIL for an impl run against baseline_0, re-running the
 * baseline before any FAIL to be sure the difference is beyond its own
 * spread. */
/* Re-runs the impl (up to noise_runs times) and reports the first re-run
 * that reproduces baseline_0 bitwise or within the noise margin: an impl
 * that can land on the baseline's result is right and the difference was
 * the kernels' (rare non-determinism can hide from a handful of baselines),
 * while a checkpoint bug differs on every run. *found = 0 if none does. */
static int impl_reproduces_baseline(struct case_state *cs, const struct checkpoint_impl *impl,
                                    const char *name, int *found, uint64_t *found_ulp)
{
    const struct ckpt_case *c = cs->setup.c;
    *found = 0;
    for (int k = 1; k <= c->noise_runs && cs->n_runs < MAX_RUNS; k++) {
        char rerun_name[64];
        snprintf(rerun_name, sizeof rerun_name, "%s_rerun_%d", name, k);
        struct run_record *r = new_run(cs, rerun_name);
        struct impl_stats stats = {0};
        struct run_diff d;
        if (!r || run_once(&cs->setup, impl, r, &stats))
            return ST_OK; /* a failing re-run reproduces nothing */
        int st = compare_runs(&cs->runs[0], r, NULL, &d);
        if (st)
            return st;
        if (!d.n_missing && !d.incomparable && (!d.has_divergence || within_noise(d.max_ulp, cs->noise_floor))) {
            *found = k;
            *found_ulp = d.has_divergence ? d.max_ulp : 0;
            return ST_OK;
        }
    }
    return ST_OK;
}

static int decide(struct case_state *cs, const struct checkpoint_impl *impl, const struct run_record *run,
                  struct impl_result *res)
{
    const struct ckpt_case *c = cs->setup.c;
    struct run_diff d;
    char ulp_a[32], ulp_b[32], ulp_c[32];
    int st = compare_runs(&cs->runs[0], run, NULL, &d);
    if (st)
        return st;
    res->max_ulp = d.max_ulp;
    describe_divergence(&d, res->first_divergence, sizeof res->first_divergence);
    if (d.n_missing) {
        res->verdict = V_FAIL;
        snprintf(res->reason, sizeof res->reason,
                 "gradient %s present in baseline_0 but missing in %s (or the reverse): %d tensors missing",
                 d.first_missing, run->name, d.n_missing);
        return ST_OK;
    }
    if (d.incomparable) {
        res->verdict = V_FAIL;
        snprintf(res->reason, sizeof res->reason, "%s differs in dtype or shape: %s", d.incomparable_path,
                 d.incomparable_why);
        return ST_OK;
    }
    if (!d.has_divergence) {
        res->verdict = V_PASS;
        snprintf(res->reason, sizeof res->reason, "bitwise identical to baseline_0: %d tensors over %d steps",
                 d.n_tensors, c->steps);
        return ST_OK;
    }
    if (c->tolerance > 0 && (double)d.max_ulp <= c->tolerance) {
        res->verdict = V_PASS;
        snprintf(res->reason, sizeof res->reason, "within the case's tolerance: max %s ULP <= %g ULP (%s)",
                 ulp_format(d.max_ulp, ulp_a, sizeof ulp_a), c->tolerance, d.max_ulp_path);
        return ST_OK;
    }
    /* Widen the noise floor with more baselines before blaming the impl. */
    while (!within_noise(d.max_ulp, cs->noise_floor) && cs->baselines < 2 + c->noise_runs && cs->n_runs < MAX_RUNS)
        if ((st = add_baseline(cs)))
            return st;
    if (within_noise(d.max_ulp, cs->noise_floor)) {
        res->verdict = V_NOISE;
        snprintf(res->reason, sizeof res->reason,
                 "differs from baseline_0 by max %s ULP (%s), within %dx the baseline's own run-to-run spread of %s "
                 "ULP over %d runs: kernel non-determinism, not the checkpoint",
                 ulp_format(d.max_ulp, ulp_a, sizeof ulp_a), d.max_ulp_path, NOISE_MARGIN,
                 ulp_format(cs->noise_floor, ulp_b, sizeof ulp_b), cs->baselines);
        return ST_OK;
    }
    int reproduced;
    uint64_t reproduced_ulp = 0;
    if ((st = impl_reproduces_baseline(cs, impl, run->name, &reproduced, &reproduced_ulp)))
        return st;
    if (reproduced) {
        res->verdict = V_NOISE;
        snprintf(res->reason, sizeof res->reason,
                 "differs from baseline_0 by max %s ULP (%s), but re-run %d of %s reproduces baseline_0 (%s ULP): "
                 "kernel non-determinism (baseline spread %s ULP over %d runs), not the checkpoint",
                 ulp_format(d.max_ulp, ulp_a, sizeof ulp_a), d.max_ulp_path, reproduced, run->name,
                 ulp_format(reproduced_ulp, ulp_b, sizeof ulp_b), ulp_format(cs->noise_floor, ulp_c, sizeof ulp_c),
                 cs->baselines);
        return ST_OK;
    }
    res->verdict = V_FAIL;
    snprintf(res->reason, sizeof res->reason,
             "differs beyond the noise floor: first at %s; max %s ULP (%s) vs baseline spread %s ULP over %d runs "
             "(NOISE allows %dx); no re-run of the impl reproduced baseline_0",
             res->first_divergence, ulp_format(d.max_ulp, ulp_a, sizeof ulp_a), d.max_ulp_path,
             ulp_format(cs->noise_floor, ulp_b, sizeof ulp_b), cs->baselines, NOISE_MARGIN);
    return ST_OK;
}

static double step_ms(const struct run_record *r)
{
    return run_record_attr(r, "timing.forward_ms") + run_record_attr(r, "timing.backward_ms");
}

/* The first run of a process pays for warm-up; the fastest baseline is the
 * fair reference for overhead. */
static double fastest_baseline_ms(const struct case_state *cs)
{
    double best = INFINITY;
    for (int i = 0; i < cs->n_runs; i++)
        if (strncmp(cs->runs[i].name, "baseline_", 9) == 0 && step_ms(&cs->runs[i]) < best)
            best = step_ms(&cs->runs[i]);
    return best;
}

static int run_impl(struct case_state *cs, const char *name, struct impl_result *res)
{
    const struct ckpt_case *c = cs->setup.c;
    memset(res, 0, sizeof *res);
    snprintf(res->impl, sizeof res->impl, "%s", name);
    const struct checkpoint_impl *impl = impl_find(name);
    if (!impl)
        return error_set(ST_INPUT, "%s:%d: case %s: unknown impl '%s'", c->file, c->line, c->name, name);
    struct run_record *run = new_run(cs, name);
    struct impl_stats stats = {0};
    if (!run)
        return error_set(ST_INTERNAL, "case %s: more than %d runs", c->name, MAX_RUNS);
    error_clear();
    int st = run_once(&cs->setup, impl, run, &stats);
    res->recomputes = stats.recomputes;
    if (st == ST_MISMATCH) {
        res->verdict = V_FAIL;
        snprintf(res->reason, sizeof res->reason, "the checkpoint's own check failed: %s", error_message());
        snprintf(res->first_divergence, sizeof res->first_divergence, "%s", error_message());
    } else if (st) {
        res->verdict = V_ERROR;
        snprintf(res->reason, sizeof res->reason, "%s", error_message());
    } else if ((st = decide(cs, impl, run, res))) {
        return st;
    }
    if (stats.warnings && res->verdict != V_PASS) {
        size_t len = strlen(res->reason);
        snprintf(res->reason + len, sizeof res->reason - len, " [warning: %s]", stats.warning);
    }
    double base_peak = run_record_attr(&cs->runs[0], "memory.peak_bytes");
    res->peak_bytes = run_record_attr(run, "memory.peak_bytes");
    res->end_forward_bytes = run_record_attr(run, "memory.end_forward_bytes");
    res->memory_saved = base_peak > 0 && !isnan(res->peak_bytes) ? 1.0 - res->peak_bytes / base_peak : NAN;
    res->overhead = step_ms(run) / fastest_baseline_ms(cs);
    if ((res->verdict == V_PASS || res->verdict == V_NOISE) && c->min_memory_saving >= 0 &&
        !(res->memory_saved >= c->min_memory_saving)) {
        res->verdict = V_MEMFAIL;
        snprintf(res->reason, sizeof res->reason,
                 "gradients right, but memory saved %.1f%% < required %.1f%% (peak %.0f bytes vs baseline %.0f)",
                 100 * res->memory_saved, 100 * c->min_memory_saving, res->peak_bytes, base_peak);
    }
    res->expected = (case_expected_mask(c, name) >> res->verdict) & 1u;
    return ST_OK;
}

/* ---- the HDF5 file -------------------------------------------------------------- */

struct attr_writer {
    struct h5store *store;
    int st;
};

static void write_case_attr(void *ctx, const char *key, const char *value)
{
    struct attr_writer *w = ctx;
    if (!w->st)
        w->st = h5store_attr_str(w->store, "/case", key, value);
}

static int write_header(struct h5store *h5, const struct case_state *cs, const struct run_settings *s)
{
    const struct ckpt_case *c = cs->setup.c;
    char buf[8192], dev[64], when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int st;
    if ((st = h5store_attr_int(h5, "/", "schema_version", H5STORE_SCHEMA_VERSION)) ||
        (st = h5store_attr_str(h5, "/", "case", c->name)) ||
        (st = h5store_attr_str(h5, "/", "harness_version", s->harness_version)) ||
        (st = h5store_attr_str(h5, "/", "git_rev", s->git_rev)) ||
        (st = h5store_attr_str(h5, "/", "libtorch_version", aten_libtorch_version())) ||
        (st = h5store_attr_str(h5, "/", "device", aten_device_str(cs->setup.device, dev, sizeof dev))) ||
        (st = h5store_attr_str(h5, "/", "device_name", aten_device_name(cs->setup.device, buf, sizeof buf))) ||
        (st = h5store_attr_str(h5, "/", "dtype", dtype_name((enum dtype)c->dtype))) ||
        (st = h5store_attr_int(h5, "/", "seed", (long long)c->seed)) ||
        (st = h5store_attr_int(h5, "/", "steps", c->steps)) ||
        (st = h5store_attr_int(h5, "/", "threads", aten_get_threads())) ||
        (st = h5store_attr_str(h5, "/", "created_utc", when)))
        return st;
    struct attr_writer w = {h5, ST_OK};
    case_foreach_attr(c, write_case_attr, &w);
    if (w.st)
        return w.st;
    model_describe(&cs->setup.model, buf, sizeof buf);
    if ((st = h5store_attr_str(h5, "/case", "model_definition", buf)))
        return st;
    if ((st = h5store_write_tensor(h5, "/inputs/x", &cs->setup.x)) ||
        (st = h5store_write_tensor(h5, "/inputs/target", &cs->setup.target)))
        return st;
    for (int i = 0; i < cs->setup.model.n_params; i++) {
        snprintf(buf, sizeof buf, "/params_init/%s", cs->setup.model.params[i].name);
        if ((st = h5store_write_tensor(h5, buf, &cs->setup.params_init[i])))
            return st;
    }
    return ST_OK;
}

static int write_verdict(struct h5store *h5, const struct impl_result *r)
{
    char group[96];
    snprintf(group, sizeof group, "/verdicts/%s", r->impl);
    int st;
    if ((st = h5store_attr_str(h5, group, "verdict", verdict_name(r->verdict))) ||
        (st = h5store_attr_str(h5, group, "reason", r->reason)) ||
        (st = h5store_attr_str(h5, group, "first_divergence", r->first_divergence)) ||
        (st = h5store_attr_int(h5, group, "expected", r->expected)) ||
        (st = h5store_attr_double(h5, group, "max_ulp", r->max_ulp == ULP_INFINITE ? INFINITY : (double)r->max_ulp)) ||
        (st = h5store_attr_double(h5, group, "memory_saved", r->memory_saved)) ||
        (st = h5store_attr_double(h5, group, "overhead", r->overhead)))
        return st;
    return ST_OK;
}

static int write_file(const struct case_state *cs, const struct case_result *result, const struct run_settings *s)
{
    struct h5store *h5;
    int st = h5store_create(&h5, result->h5_path);
    if (st)
        return st;
    if ((st = write_header(h5, cs, s)))
        goto fail;
    for (int i = 0; i < cs->n_runs; i++)
        if ((st = h5store_write_run(h5, &cs->runs[i])))
            goto fail;
    if ((st = h5store_attr_int(h5, "/verdicts", "baseline_runs", cs->baselines)) ||
        (st = h5store_attr_double(h5, "/verdicts", "noise_floor_ulp", (double)cs->noise_floor)))
        goto fail;
    for (int i = 0; i < result->n_results; i++)
        if ((st = write_verdict(h5, &result->results[i])))
            goto fail;
    return h5store_commit(h5);
fail:
    h5store_abort(h5);
    return st;
}

int runner_run_case(const struct ckpt_case *c, const struct run_settings *s, struct case_result *result)
{
    struct case_state *cs = calloc(1, sizeof *cs);
    memset(result, 0, sizeof *result);
    snprintf(result->name, sizeof result->name, "%s", c->name);
    snprintf(result->h5_path, sizeof result->h5_path, "%s/%s.h5", s->out_dir, c->name);
    if (!cs)
        return error_set(ST_RUN, "out of memory running case %s", c->name);
    int st = setup_case(&cs->setup, c);
    for (int i = 0; i < 2 && !st; i++)
        st = add_baseline(cs);
    for (int i = 0; i < c->n_impls && !st; i++)
        st = run_impl(cs, c->impls[i], &result->results[result->n_results++]);
    result->noise_floor_ulp = cs->noise_floor;
    result->baseline_runs = cs->baselines;
    if (cs->n_runs)
        result->baseline_peak_bytes = run_record_attr(&cs->runs[0], "memory.peak_bytes");
    if (!st)
        st = write_file(cs, result, s);
    if (st) {
        result->status = st;
        snprintf(result->error, sizeof result->error, "%s", error_message());
    }
    for (int i = 0; i < cs->n_runs; i++)
        run_record_free(&cs->runs[i]);
    setup_free(&cs->setup);
    free(cs);
    return st;
}
