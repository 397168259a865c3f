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
    struct segment_plan plan;     /* the same, as model.h describes it */
    int timed_steps;              /* steps timed per run (recorded ones first) */
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
    if ((st = draw_host(&s->x, 3, shape, 1.0, s->model.dtype)))
        return error_wrap(st, "initialising inputs/x");
    if ((st = draw_host(&s->target, 3, shape, 1.0, s->model.dtype)))
        return error_wrap(st, "initialising inputs/target");
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
 * segments = every (0): segment_plan_make (model.h), which the memory
 * prediction shares. */
static int plan_segments(struct case_setup *s)
{
    const struct model *m = &s->model;
    s->segments = calloc((size_t)m->layers, sizeof *s->segments);
    if (!s->segments)
        return error_set(ST_RUN, "out of memory planning segments");
    segment_plan_make(&s->plan, m->layers, s->c->segments);
    for (int k = 0; k < s->plan.count; k++)
        s->segments[s->n_segments++] = (struct layer_range){m, k * s->plan.size, (k + 1) * s->plan.size};
    s->plain_from = s->plan.plain_from;
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

/* What one run measured. Bytes are counted from the live bytes at the
 * start of each step (parameters, inputs and target were allocated before:
 * they are not what checkpointing changes), maxima over the steps; the
 * per-step times are kept for their median. */
struct run_measure {
    int n, cap;                  /* timed steps so far */
    double *forward_ms, *backward_ms, *recompute_ms, *step_ms;
    int64_t peak_bytes;          /* forward + backward */
    int64_t forward_peak_bytes;  /* forward through the loss */
    int64_t backward_peak_bytes; /* backward alone (peak reset when it starts) */
    int64_t end_forward_bytes;   /* live when forward ends (step 1): what backward will need */
    int64_t activation_peak_bytes; /* peak of everything but gradients (activation_probe) */
    int64_t grad_bytes;          /* gradients held after backward (step 1) */
    int64_t step_start_bytes;    /* live when step 1 starts */
};

static int measure_init(struct run_measure *m, int steps)
{
    memset(m, 0, sizeof *m);
    m->cap = steps;
    m->forward_ms = calloc((size_t)steps, sizeof(double));
    m->backward_ms = calloc((size_t)steps, sizeof(double));
    m->recompute_ms = calloc((size_t)steps, sizeof(double));
    m->step_ms = calloc((size_t)steps, sizeof(double));
    if (!m->forward_ms || !m->backward_ms || !m->recompute_ms || !m->step_ms)
        return error_set(ST_RUN, "out of memory for %d step timings", steps);
    return ST_OK;
}

static void measure_free(struct run_measure *m)
{
    free(m->forward_ms);
    free(m->backward_ms);
    free(m->recompute_ms);
    free(m->step_ms);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (reorders v); NAN when empty. */
static double median(double *v, int n)
{
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The activation part of the peak. The allocator's peak in backward
 * includes the gradients accumulated so far, which grow with the parameter
 * count whatever the checkpointing, and at the moment of that peak only
 * some of them exist, so "peak - all gradients" undercounts activations.
 * This probe watches every op (forward and each recompute, through the
 * tape's op observer) and keeps the highest live bytes minus the gradients
 * held at that moment. Together with forward's exact peak (no gradient
 * exists in forward: they were dropped when the step began) it gives the
 * peak of what checkpointing acts on; it misses only the transients inside
 * backward kernels, which do not grow with depth. */
struct activation_probe {
    int device;
    struct var *const *params;
    int n_params;
    const struct var *x;
    int64_t base, max;
    struct op_observer previous;
};

static void activation_probe_op(void *ctx, const char *op, struct var *const *inputs, int n_inputs,
                                const struct var *output)
{
    struct activation_probe *p = ctx;
    struct mem_stats now;
    if (aten_mem_stats(p->device, &now) == ST_OK) {
        int64_t grads = p->x->grad ? (int64_t)tensor_nbytes(p->x->grad) : 0;
        for (int i = 0; i < p->n_params; i++)
            if (p->params[i]->grad)
                grads += (int64_t)tensor_nbytes(p->params[i]->grad);
        p->max = max64(p->max, now.live_bytes - p->base - grads);
    }
    if (p->previous.fn)
        p->previous.fn(p->previous.ctx, op, inputs, n_inputs, output);
}

/* One training step: forward (under the case's autocast), loss, backward
 * (outside autocast, as a training loop does), recording loss and grads
 * (rec NULL: a timing-only step, nothing recorded) and measuring memory per
 * phase and wall time (monotonic clock, after waiting for the device). */
static int run_step(const struct case_setup *s, const struct checkpoint_impl *impl,
                    const struct impl_options *opts, struct var **params, struct var *x, struct var *target,
                    int step, struct run_record *rec, struct run_measure *m)
{
    const struct ckpt_case *c = s->c;
    struct var *act = NULL, *loss = NULL;
    struct mem_stats before, after_forward, after_backward;
    /* Marks on the device's own timeline: CUDA events on a GPU (the device
     * time of the queued work, marked before each synchronize), the
     * monotonic clock on the CPU. */
    aten_timer *timer = NULL;
    struct activation_probe probe = {.device = s->device, .params = params, .n_params = s->model.n_params, .x = x};
    int probing = 0;
    char path[RUN_PATH_MAX];
    int st;
    for (int i = 0; i < s->model.n_params; i++)
        var_zero_grad(params[i]);
    var_zero_grad(x);
    if ((st = aten_synchronize(s->device)) || (st = aten_mem_reset_peak(s->device)) ||
        (st = aten_mem_stats(s->device, &before)) || (st = aten_timer_create(&timer, s->device)))
        goto out;
    probe.base = before.live_bytes;
    probe.previous = tape_set_op_observer((struct op_observer){activation_probe_op, &probe});
    probing = 1;
    if ((st = aten_timer_mark(timer)))
        goto out;
    struct autocast_state previous = autocast_set(
        (struct autocast_state){c->autocast != AUTOCAST_OFF, c->autocast == AUTOCAST_F16 ? DT_F16 : DT_BF16});
    st = forward_segments(s, impl, opts, x, &act);
    if (!st)
        st = model_loss(&s->model, act, target, &loss);
    autocast_set(previous);
    var_release(act);
    if (st || (st = aten_timer_mark(timer)))
        goto out;
    if ((st = aten_synchronize(s->device)) || (st = aten_mem_stats(s->device, &after_forward)) ||
        (st = aten_mem_reset_peak(s->device)))
        goto out;
    double recompute_before = opts->stats ? opts->stats->recompute_ms : 0;
    if ((st = tape_backward(&loss, NULL, 1)) || (st = aten_timer_mark(timer)) || (st = aten_synchronize(s->device)))
        goto out;
    double t0 = 0, t1, t2; /* ms since mark 0 */
    if ((st = aten_timer_ms(timer, 0, 1, &t1)) || (st = aten_timer_ms(timer, 0, 2, &t2)))
        goto out;
    if ((st = aten_mem_stats(s->device, &after_backward)))
        goto out;
    tape_set_op_observer(probe.previous);
    probing = 0;
    if (m->n < m->cap) {
        m->forward_ms[m->n] = t1 - t0;
        m->backward_ms[m->n] = t2 - t1;
        m->step_ms[m->n] = t2 - t0;
        m->recompute_ms[m->n] = opts->stats ? opts->stats->recompute_ms - recompute_before : 0;
        m->n++;
    }
    m->forward_peak_bytes = max64(m->forward_peak_bytes, after_forward.peak_bytes - before.live_bytes);
    m->backward_peak_bytes = max64(m->backward_peak_bytes, after_backward.peak_bytes - before.live_bytes);
    m->peak_bytes = max64(m->forward_peak_bytes, m->backward_peak_bytes);
    m->activation_peak_bytes = max64(m->activation_peak_bytes, max64(m->forward_peak_bytes, probe.max));
    if (step == 1) {
        m->end_forward_bytes = after_forward.live_bytes - before.live_bytes;
        m->step_start_bytes = before.live_bytes;
        for (int i = 0; i < s->model.n_params; i++)
            if (params[i]->grad)
                m->grad_bytes += (int64_t)tensor_nbytes(params[i]->grad);
        if (x->grad)
            m->grad_bytes += (int64_t)tensor_nbytes(x->grad);
    }
    if (!rec)
        goto update;
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
update:
    /* SGD, outside the tape: p ← p − lr · grad. */
    for (int i = 0; i < s->model.n_params && !st; i++)
        if (params[i]->grad)
            st = tensor_add_(params[i]->data, params[i]->grad, -c->lr);
out:
    if (probing)
        tape_set_op_observer(probe.previous);
    aten_timer_free(timer);
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
    struct run_measure measure;
    char path[RUN_PATH_MAX];
    int timed = s->timed_steps > c->steps ? s->timed_steps : c->steps;
    int st = measure_init(&measure, timed);
    if (!params && !st)
        st = error_set(ST_RUN, "out of memory for run %s", rec->name);
    if (st) {
        measure_free(&measure);
        free(params);
        return st;
    }
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
    if (!st && m->draw_device != s->device)
        st = seed_generators(m->draw_device, c->seed);
    struct impl_options opts = {
        .preserve_rng_state = c->preserve_rng_state,
        .rng_devices = c->rng_devices,
        .current_device = m->draw_device, /* the segment's draws run there: the current device */
        .verify_values = c->verify_values,
        .stats = stats,
    };
    for (int step = 1; step <= c->steps && !st; step++)
        if ((st = run_step(s, impl, &opts, params, x, target, step, rec, &measure)) == ST_MISMATCH)
            error_wrap(st, "step %d", step); /* the verdict names the step the check fired in */
    for (int i = 0; i < m->n_params && !st; i++) {
        snprintf(path, sizeof path, "final_params/%s", m->params[i].name);
        st = record_tensor(rec, path, params[i]->data);
    }
    /* Timing-only steps (benchmark repeats): more samples for the medians,
     * nothing recorded, and their own stats so that the run's recompute
     * counts stay those of the recorded steps. */
    struct impl_stats timing_stats = {0};
    opts.stats = &timing_stats;
    for (int step = c->steps + 1; step <= timed && !st; step++)
        st = run_step(s, impl, &opts, params, x, target, step, NULL, &measure);
    if (!st) {
        run_record_set_attr(rec, "memory.peak_bytes", (double)measure.peak_bytes);
        run_record_set_attr(rec, "memory.forward_peak_bytes", (double)measure.forward_peak_bytes);
        run_record_set_attr(rec, "memory.backward_peak_bytes", (double)measure.backward_peak_bytes);
        run_record_set_attr(rec, "memory.end_forward_bytes", (double)measure.end_forward_bytes);
        run_record_set_attr(rec, "memory.grad_bytes", (double)measure.grad_bytes);
        run_record_set_attr(rec, "memory.activation_peak_bytes", (double)measure.activation_peak_bytes);
        run_record_set_attr(rec, "memory.step_start_bytes", (double)measure.step_start_bytes);
        run_record_set_attr(rec, "timing.forward_ms", median(measure.forward_ms, measure.n));
        run_record_set_attr(rec, "timing.backward_ms", median(measure.backward_ms, measure.n));
        run_record_set_attr(rec, "timing.recompute_ms", median(measure.recompute_ms, measure.n));
        run_record_set_attr(rec, "timing.step_ms", median(measure.step_ms, measure.n));
        run_record_set_attr(rec, "timing.timed_steps", measure.n);
        run_record_set_attr(rec, "timing.steps", c->steps);
        run_record_set_attr(rec, "recompute.count", stats->recomputes);
        run_record_set_attr(rec, "recompute.tensors", stats->recomputed_tensors);
    }
    measure_free(&measure);
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

/* The median over the run's timed steps of one step's forward + backward. */
static double step_ms(const struct run_record *r) { return run_record_attr(r, "timing.step_ms"); }

/* The first run of a process pays for warm-up; the fastest baseline is the
 * fair reference for overhead. */
static const struct run_record *fastest_baseline(const struct case_state *cs)
{
    const struct run_record *best = NULL;
    for (int i = 0; i < cs->n_runs; i++)
        if (strncmp(cs->runs[i].name, "baseline_", 9) == 0 && (!best || step_ms(&cs->runs[i]) < step_ms(best)))
            best = &cs->runs[i];
    return best;
}

static double fastest_baseline_ms(const struct case_state *cs)
{
    const struct run_record *b = fastest_baseline(cs);
    return b ? step_ms(b) : NAN;
}

/* A planted bug that its own rule says cannot show in this case, and that
 * indeed matched the baseline (PASS, or NOISE: within the kernels' own
 * spread), is NOT_OBSERVABLE rather than a PASS that reads as "missed". If
 * it differed anyway, the verdict stands and the
 * reason says the rule was wrong. */
static void apply_observability(const struct ckpt_case *c, const struct checkpoint_impl *impl,
                                struct impl_result *res)
{
    char why[200];
    if (impl->is_reference || !impl->observable || impl->observable(c, why, sizeof why))
        return;
    size_t len = strlen(res->reason);
    if (res->verdict == V_PASS || res->verdict == V_NOISE) {
        char was[RESULT_TEXT_MAX];
        snprintf(was, sizeof was, "%s", res->reason);
        res->verdict = V_NOT_OBSERVABLE;
        snprintf(res->reason, sizeof res->reason, "planted bug cannot show here (%s); the run matched: %s", why, was);
    } else if (res->verdict == V_FAIL) {
        snprintf(res->reason + len, sizeof res->reason - len, " [its rule said it could not show here: %s]", why);
    }
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
    res->forward_peak_bytes = run_record_attr(run, "memory.forward_peak_bytes");
    res->backward_peak_bytes = run_record_attr(run, "memory.backward_peak_bytes");
    res->grad_bytes = run_record_attr(run, "memory.grad_bytes");
    res->activation_peak_bytes = run_record_attr(run, "memory.activation_peak_bytes");
    res->forward_ms = run_record_attr(run, "timing.forward_ms");
    res->backward_ms = run_record_attr(run, "timing.backward_ms");
    res->recompute_ms = run_record_attr(run, "timing.recompute_ms");
    res->step_ms = step_ms(run);
    /* The baseline impl checkpoints nothing; any other is predicted to keep
     * what the references keep (a planted bug that keeps more shows as a
     * gap between prediction and measurement). */
    const struct case_setup *su = &cs->setup;
    struct segment_plan none;
    segment_plan_make(&none, su->model.layers, SEGMENTS_NONE);
    res->predicted_end_forward_bytes =
        (double)model_predict_saved_bytes(&su->model, impl->run == impl_run_none ? &none : &su->plan);
    res->memory_saved = base_peak > 0 && !isnan(res->peak_bytes) ? 1.0 - res->peak_bytes / base_peak : NAN;
    res->overhead = step_ms(run) / fastest_baseline_ms(cs);
    if ((res->verdict == V_PASS || res->verdict == V_NOISE) && c->min_memory_saving >= 0 &&
        !(res->memory_saved >= c->min_memory_saving)) {
        res->verdict = V_MEMFAIL;
        snprintf(res->reason, sizeof res->reason,
                 "gradients right, but memory saved %.1f%% < required %.1f%% (peak %.0f bytes vs baseline %.0f)",
                 100 * res->memory_saved, 100 * c->min_memory_saving, res->peak_bytes, base_peak);
    }
    apply_observability(c, impl, res);
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

/* The case's memory and time figures that do not belong to one impl. */
static void case_figures(const struct case_state *cs, struct case_result *result)
{
    const struct case_setup *su = &cs->setup;
    const struct run_record *base = &cs->runs[0], *fastest = fastest_baseline(cs);
    struct segment_plan none;
    segment_plan_make(&none, su->model.layers, SEGMENTS_NONE);
    result->baseline_end_forward_bytes = run_record_attr(base, "memory.end_forward_bytes");
    result->baseline_grad_bytes = run_record_attr(base, "memory.grad_bytes");
    result->baseline_activation_peak_bytes = run_record_attr(base, "memory.activation_peak_bytes");
    result->predicted_baseline_end_forward_bytes = (double)model_predict_saved_bytes(&su->model, &none);
    result->predicted_checkpointed_end_forward_bytes = (double)model_predict_saved_bytes(&su->model, &su->plan);
    result->param_bytes = 0;
    for (int i = 0; i < su->model.n_params; i++)
        result->param_bytes += (double)host_tensor_bytes(&su->params_init[i]);
    if (fastest) {
        result->baseline_forward_ms = run_record_attr(fastest, "timing.forward_ms");
        result->baseline_step_ms = step_ms(fastest);
        /* Recomputing every checkpointed layer once costs one more forward. */
        result->ideal_overhead = (result->baseline_step_ms + result->baseline_forward_ms) / result->baseline_step_ms;
        result->timed_steps = (int)run_record_attr(fastest, "timing.timed_steps");
    }
    /* The baselines are the same work: their spread says how much the
     * machine disturbed this case's timings. */
    for (int i = 0; i < cs->n_runs; i++)
        if (strncmp(cs->runs[i].name, "baseline_", 9) == 0 && step_ms(&cs->runs[i]) > result->slowest_baseline_step_ms)
            result->slowest_baseline_step_ms = step_ms(&cs->runs[i]);
}

int runner_run_case(const struct ckpt_case *c, const struct run_settings *s, struct case_result *result)
{
    struct case_state *cs = calloc(1, sizeof *cs);
    memset(result, 0, sizeof *result);
    snprintf(result->name, sizeof result->name, "%s", c->name);
    if (!s->skip_h5)
        snprintf(result->h5_path, sizeof result->h5_path, "%s/%s.h5", s->out_dir, c->name);
    result->definition = *c;
    if (!cs)
        return error_set(ST_RUN, "out of memory running case %s", c->name);
    int st = setup_case(&cs->setup, c);
    cs->setup.timed_steps = s->repeats;
    for (int i = 0; i < 2 && !st; i++)
        st = add_baseline(cs);
    for (int i = 0; i < c->n_impls && !st; i++)
        st = run_impl(cs, c->impls[i], &result->results[result->n_results++]);
    result->noise_floor_ulp = cs->noise_floor;
    result->baseline_runs = cs->baselines;
    if (cs->n_runs)
        result->baseline_peak_bytes = run_record_attr(&cs->runs[0], "memory.peak_bytes");
    if (cs->n_runs && !st)
        case_figures(cs, result);
    if (!st && !s->skip_h5)
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
