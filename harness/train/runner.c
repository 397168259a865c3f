#include "runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../impls/checkpoint_env.h"
#include "../impls/impl.h"
#include "aten/aten.h"
#include "aten/torch_runtime.h"
#include "autocast.h"
#include "blas_info.h"
#include "case_fit.h"
#include "case_policy.h"
#include "compare.h"
#include "error.h"
#include "h5store.h"
#include "model.h"
#include "op_timing.h"
#include "run_record.h"
#include "run_checks.h"
#include "step_backward.h"
#include "thread_policy.h"

/* Runs one case may hold: baselines, impls and their noise re-runs. When
 * full, no more noise runs are made (the verdict says how many ran). */
#define MAX_RUNS 96

/* nest > 1: the impl and options of the run in progress, with which a
 * segment's function wraps its layers in the next checkpoint. */
struct nest_run {
    const struct checkpoint_impl *impl;
    const struct impl_options *opts;
};

/* The segment function the impls wrap: model layers [begin, end), or
 * (nest) the same layers checkpointed once more, inside. */
struct layer_range {
    const struct model *model;
    int begin, end;
    const struct layer_range *inner; /* NULL: run the layers */
    struct nest_run *run;
};

/* Everything a case's runs share: the model layout, its checkpoint
 * segments (they must outlive every graph: recompute calls them in
 * backward) and the host copies of the initial parameters and inputs that
 * every run starts from. */
struct case_setup {
    const struct ckpt_case *c;
    int device;
    struct model model;
    struct layer_range *segments; /* checkpointed ranges; nest levels of each, outermost first */
    int n_segments;
    struct nest_run *nest_run;    /* what nested levels run: set by each run's forward */
    int plain_from;               /* layers [plain_from, L) run plainly */
    struct segment_plan plan;     /* the same, as model.h describes it */
    int timed_steps;              /* steps timed per run (recorded ones first) */
    struct host_tensor *params_init; /* model.n_params */
    struct host_tensor x, target;
    /* The report being written, or NULL (no report; the warm-up): recorded
     * tensors go into it as they are produced, so a run is never whole in
     * memory. */
    struct h5store *store;
    /* Where the initial parameters are read from for each run when they are
     * not kept in memory (their data freed once in the report's
     * /params_init), or NULL: params_init holds them. */
    const char *params_init_file;
    struct thread_choice threads; /* recorded as threads and threads_reason */
};

static int plan_segments(struct case_setup *s);
static struct segment_fn layer_range_segment(const struct layer_range *r);

/* nest: the layers of r checkpointed once more, by the run's impl. */
static int nested_checkpoint(const struct layer_range *r, struct var *const *in, struct var **out)
{
    struct segment_fn fn = layer_range_segment(r->inner);
    return r->run->impl->run(r->run->impl, r->run->opts, &fn, in, out);
}

static int layer_range_call(void *ctx, struct var *in, struct var **out)
{
    const struct layer_range *r = ctx;
    if (r->inner)
        return nested_checkpoint(r, &in, out);
    return model_layers_forward(r->model, r->begin, r->end, in, out);
}

/* The same for a model of several streams (two_stream): a region of that
 * many tensors in and out, the model's scale as its non-tensor argument. */
static int layer_range_region(void *ctx, struct var *const *in, const struct region_arg *arg, struct var **out)
{
    const struct layer_range *r = ctx;
    if (r->inner)
        return nested_checkpoint(r, in, out);
    return model_layers_forward_streams(r->model, r->begin, r->end, in, arg->scalar, out);
}

/* What a checkpoint wraps for the layers of r: one tensor in and out, or
 * the model's streams. */
static struct segment_fn layer_range_segment(const struct layer_range *r)
{
    int streams = model_streams(r->model);
    if (streams == 1)
        return (struct segment_fn){.call = layer_range_call, .ctx = (void *)r};
    return (struct segment_fn){.call_region = layer_range_region, .ctx = (void *)r, .n_in = streams,
                               .n_out = streams, .arg = {.scalar = model_region_scalar(r->model)}};
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
    free(s->nest_run);
    host_tensor_free(&s->x);
    host_tensor_free(&s->target);
    model_free(&s->model);
}

static int setup_case(struct case_setup *s, const struct ckpt_case *c, const struct run_settings *set)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    int st = aten_parse_device(c->device, &s->device);
    if (st)
        return st;
    if ((st = model_create(&s->model, c, s->device)) || (st = plan_segments(s)))
        return st;
    /* Before any run: every run of the case computes with the same count. */
    thread_policy_choose(c, thread_policy_largest_activation(&s->model, c), aten_parallel_grain(),
                         set->default_threads > 0 ? set->default_threads : aten_get_threads(),
                         set->fit_threads_to_size, &s->threads);
    if ((st = aten_set_threads(s->threads.threads)))
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

/* t recorded under path: written into the report now (only its dtype and
 * shape stay in the record) or, without a report, a host copy kept in the
 * record. */
static int record_tensor(const struct case_setup *s, struct run_record *r, const char *path, const tensor *t)
{
    struct host_tensor h;
    int st = tensor_to_host(t, &h);
    if (st)
        return st;
    if (s->store) {
        static const unsigned char unknown[16];
        char reference[80];
        run_record_reference(r, reference, sizeof reference);
        if (!(st = h5store_write_run_tensor(s->store, r->name, reference, path, &h, NULL)))
            st = run_record_add_stored(r, path, &h, unknown, -1);
    } else {
        st = run_record_add(r, path, &h);
    }
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
    int nest = s->c->nest > 1 ? s->c->nest : 1;
    s->segments = calloc((size_t)m->layers * (size_t)nest, sizeof *s->segments);
    s->nest_run = calloc(1, sizeof *s->nest_run);
    if (!s->segments || !s->nest_run)
        return error_set(ST_RUN, "out of memory planning segments");
    segment_plan_make(&s->plan, m->layers, s->c->segments);
    /* nest = N: segment k is levels k*N .. k*N + N-1, each checkpointing
     * the same layers inside the one before (checkpoint(lambda x:
     * checkpoint(f, x), x)); the impl runs only the outermost itself. */
    for (int k = 0; k < s->plan.count; k++) {
        for (int level = 0; level < nest; level++) {
            struct layer_range *r = &s->segments[k * nest + level];
            *r = (struct layer_range){m, k * s->plan.size, (k + 1) * s->plan.size, NULL, s->nest_run};
            if (level + 1 < nest)
                r->inner = r + 1;
        }
        s->n_segments++;
    }
    s->plain_from = s->plan.plain_from;
    return ST_OK;
}

/* One step's forward: each planned segment through the impl, the rest plainly. */
static int forward_segments(const struct case_setup *s, const struct checkpoint_impl *impl,
                            const struct impl_options *opts, struct var *x, struct var **out)
{
    const struct model *m = &s->model;
    int layers = m->layers, plain_from = s->plain_from, n = model_streams(m);
    int nest = s->c->nest > 1 ? s->c->nest : 1;
    *s->nest_run = (struct nest_run){impl, opts};
    struct var *cur[MODEL_MAX_STREAMS] = {0};
    int st = model_streams_begin(m, x, cur);
    for (int i = 0; i < s->n_segments && !st; i++) {
        struct segment_fn fn = layer_range_segment(&s->segments[i * nest]);
        struct var *next[MODEL_MAX_STREAMS] = {0};
        st = impl->run(impl, opts, &fn, cur, next);
        region_release(cur, n);
        memcpy(cur, next, sizeof cur);
    }
    if (!st && plain_from < layers) {
        struct var *next[MODEL_MAX_STREAMS] = {0};
        st = model_layers_forward_streams(m, plain_from, layers, cur, model_region_scalar(m), next);
        region_release(cur, n);
        memcpy(cur, next, sizeof cur);
    }
    if (!st)
        st = model_streams_end(m, cur, out);
    region_release(cur, n);
    return st;
}

/* What one run measured. Bytes are counted from the live bytes at the
 * start of each step (parameters, inputs and target were allocated before:
 * they are not what checkpointing changes), maxima over the steps; the
 * per-step times are kept for their median. */
struct run_measure {
    int n, cap;                  /* timed steps so far */
    double *forward_ms, *backward_ms, *recompute_ms, *step_ms;
    double *step_cpu_ms;         /* process CPU time of the step (CPU runs): what the step cost, however
                                  * much of the wall time other work on a shared machine took */
    int64_t peak_bytes;          /* forward + backward */
    int64_t forward_peak_bytes;  /* forward through the loss */
    int64_t backward_peak_bytes; /* backward alone (peak reset when it starts) */
    int64_t end_forward_bytes;   /* live when forward ends (step 1): what backward will need */
    int64_t activation_peak_bytes; /* peak of everything but gradients (activation_probe) */
    int64_t grad_bytes;          /* gradients held after backward (step 1) */
    int64_t step_start_bytes;    /* live when step 1 starts */
    int64_t *start_bytes;        /* live when each recorded step starts (run_checks: no leak) */
    struct hook_counts *hooks;   /* each parameter's hook fires per backward call */
    struct op_timing ops;        /* per op: forward time, calls, recompute calls */
};

static int measure_init(struct run_measure *m, int steps)
{
    memset(m, 0, sizeof *m);
    m->cap = steps;
    m->forward_ms = calloc((size_t)steps, sizeof(double));
    m->backward_ms = calloc((size_t)steps, sizeof(double));
    m->recompute_ms = calloc((size_t)steps, sizeof(double));
    m->step_ms = calloc((size_t)steps, sizeof(double));
    m->start_bytes = calloc((size_t)steps, sizeof(int64_t));
    m->step_cpu_ms = calloc((size_t)steps, sizeof(double));
    if (!m->forward_ms || !m->backward_ms || !m->recompute_ms || !m->step_ms || !m->start_bytes || !m->step_cpu_ms)
        return error_set(ST_RUN, "out of memory for %d step timings", steps);
    return ST_OK;
}

static void measure_free(struct run_measure *m)
{
    free(m->forward_ms);
    free(m->backward_ms);
    free(m->recompute_ms);
    free(m->step_ms);
    free(m->start_bytes);
    op_timing_free(&m->ops);
    free(m->step_cpu_ms);
}

/* Process CPU time in ms (all threads): unlike the wall clock, it does not
 * grow while other processes hold the cores. */
static double process_cpu_ms(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t))
        return NAN;
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
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
    struct op_timing *ops;
    struct op_observer previous;
};

static void activation_probe_op(void *ctx, const char *op, struct var *const *inputs, int n_inputs,
                                const struct var *output)
{
    struct activation_probe *p = ctx;
    struct mem_stats now;
    op_timing_note(p->ops, op);
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
    struct activation_probe probe = {
        .device = s->device, .params = params, .n_params = s->model.n_params, .x = x, .ops = &m->ops};
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
    if (step <= m->cap)
        m->start_bytes[step - 1] = before.live_bytes;
    probe.previous = tape_set_op_observer((struct op_observer){activation_probe_op, &probe});
    probing = 1;
    double cpu_start = process_cpu_ms();
    if ((st = aten_timer_mark(timer)))
        goto out;
    op_timing_phase(&m->ops, OP_PHASE_FORWARD);
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
    op_timing_phase(&m->ops, OP_PHASE_RECOMPUTE);
    if ((st = step_backward(c->backward, loss, params, s->model.n_params, x, m->hooks, step)) ||
        (st = aten_timer_mark(timer)) || (st = aten_synchronize(s->device)))
        goto out;
    double cpu_ms = process_cpu_ms() - cpu_start;
    double t0 = 0, t1, t2; /* ms since mark 0 */
    if ((st = aten_timer_ms(timer, 0, 1, &t1)) || (st = aten_timer_ms(timer, 0, 2, &t2)))
        goto out;
    if ((st = aten_mem_stats(s->device, &after_backward)))
        goto out;
    tape_set_op_observer(probe.previous);
    probing = 0;
    op_timing_phase(&m->ops, OP_PHASE_IDLE);
    if (m->n < m->cap) {
        m->forward_ms[m->n] = t1 - t0;
        m->backward_ms[m->n] = t2 - t1;
        m->step_ms[m->n] = t2 - t0;
        m->step_cpu_ms[m->n] = cpu_ms;
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
    if ((st = record_tensor(s, rec, path, loss->data)))
        goto out;
    /* A parameter without a gradient is left out: compare reports it as
     * missing, as PyTorch's None would be. */
    for (int i = 0; i < s->model.n_params; i++) {
        if (!params[i]->grad)
            continue;
        snprintf(path, sizeof path, "steps/%d/grads/%s", step, s->model.params[i].name);
        if ((st = record_tensor(s, rec, path, params[i]->grad)))
            goto out;
    }
    if (x->grad) {
        snprintf(path, sizeof path, "steps/%d/grads/input.x", step);
        if ((st = record_tensor(s, rec, path, x->grad)))
            goto out;
    }
    /* Buffers as this step's forward (and any recompute) left them. */
    for (int i = 0; i < s->model.n_buffers; i++) {
        snprintf(path, sizeof path, "steps/%d/buffers/%s", step, s->model.buffers[i].name);
        if ((st = record_tensor(s, rec, path, module_state_read(s->model.state, i))))
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
    op_timing_phase(&m->ops, OP_PHASE_IDLE);
    aten_timer_free(timer);
    var_release(loss);
    return st;
}

/* Parameter i's leaf at its initial value: from memory, or read back from
 * the report's /params_init (so that a real-width model's initial
 * parameters are not held beside each run's own). */
static int init_param(const struct case_setup *s, int i, struct var **out)
{
    if (!s->params_init_file)
        return leaf_from_host(out, &s->params_init[i], s->device, 1, s->model.params[i].name);
    char path[RUN_PATH_MAX + 16];
    struct host_tensor h;
    snprintf(path, sizeof path, "/params_init/%s", s->model.params[i].name);
    int st = h5store_read_tensor(s->params_init_file, path, &h);
    if (!st)
        st = leaf_from_host(out, &h, s->device, 1, s->model.params[i].name);
    host_tensor_free(&h);
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
    struct hook_counts hooks = {0};
    int st = measure_init(&measure, timed);
    measure.hooks = &hooks;
    op_timing_init(&measure.ops, s->device);
    if (!params && !st)
        st = error_set(ST_RUN, "out of memory for run %s", rec->name);
    if (st) {
        measure_free(&measure);
        free(params);
        return st;
    }
    for (int i = 0; i < m->n_params && !st; i++) {
        st = init_param(s, i, &params[i]);
        if (!st)
            m->params[i].var = params[i];
    }
    if (!st)
        st = hook_counts_init(&hooks, params, m->n_params, c->steps, c->backward);
    if (!st)
        st = leaf_from_host(&x, &s->x, s->device, c->input_requires_grad, "input.x");
    if (!st)
        st = leaf_from_host(&target, &s->target, s->device, 0, "input.target");
    /* Every run starts from the buffers' initial values, as from the parameters'. */
    if (!st && m->n_buffers)
        st = module_state_init(m->state, m->buffers, m->n_buffers, s->device);
    if (!st)
        st = seed_generators(s->device, c->seed);
    if (!st && m->draw_device != s->device)
        st = seed_generators(m->draw_device, c->seed);
    struct impl_options opts = {
        .preserve_rng_state = c->preserve_rng_state,
        .rng_devices = c->rng_devices,
        .current_device = m->draw_device, /* the segment's draws run there: the current device */
        .determinism_check = c->determinism_check,
        .disable_early_stop = !c->early_stop,
        .stats = stats,
        .policy = policy_of_case(c),
        .state = m->state,
    };
    for (int step = 1; step <= c->steps && !st; step++)
        if ((st = run_step(s, impl, &opts, params, x, target, step, rec, &measure)) == ST_MISMATCH)
            error_wrap(st, "step %d", step); /* the verdict names the step the check fired in */
    for (int i = 0; i < m->n_params && !st; i++) {
        snprintf(path, sizeof path, "final_params/%s", m->params[i].name);
        st = record_tensor(s, rec, path, params[i]->data);
    }
    if (!st)
        st = hook_counts_record(&hooks, rec);
    if (!st)
        st = run_checks_record_start_bytes(rec, measure.start_bytes, c->steps);
    /* Timing-only steps (benchmark repeats): more samples for the medians,
     * nothing recorded, and their own stats so that the run's recompute
     * counts stay those of the recorded steps. */
    struct impl_stats timing_stats = {0};
    opts.stats = &timing_stats;
    for (int step = c->steps + 1; step <= timed && !st; step++)
        st = run_step(s, impl, &opts, params, x, target, step, NULL, &measure);
    /* What the impl kept past its steps (a planted leak) dies with the run. */
    impl_stats_release_held(&timing_stats);
    impl_stats_release_held(stats);
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
        /* The run's own spread: a median over steps that spread widely is
         * no steadier than baselines that disagree (judge.c marks it). */
        if (measure.n > 1) {
            double fastest = measure.step_ms[0], slowest = measure.step_ms[0];
            for (int i = 1; i < measure.n; i++) {
                fastest = measure.step_ms[i] < fastest ? measure.step_ms[i] : fastest;
                slowest = measure.step_ms[i] > slowest ? measure.step_ms[i] : slowest;
            }
            run_record_set_attr(rec, "timing.fastest_step_ms", fastest);
            run_record_set_attr(rec, "timing.slowest_step_ms", slowest);
        }
        if (s->device == DEVICE_CPU)
            run_record_set_attr(rec, "timing.step_cpu_ms", median(measure.step_cpu_ms, measure.n));
        run_record_set_attr(rec, "timing.timed_steps", measure.n);
        run_record_set_attr(rec, "timing.steps", c->steps);
        run_record_set_attr(rec, "recompute.count", stats->recomputes);
        if (stats->ops_packed) {
            run_record_set_attr(rec, "selective.ops_packed", stats->ops_packed);
            run_record_set_attr(rec, "selective.ops_kept", stats->ops_kept);
        }
        run_record_set_attr(rec, "recompute.tensors", stats->recomputed_tensors);
        st = op_timing_record(&measure.ops, rec);
    }
    measure_free(&measure);
    for (int i = 0; i < m->n_params; i++) {
        var_release(params[i]);
        m->params[i].var = NULL;
    }
    free(params);
    var_release(x);
    var_release(target);
    if (m->state)
        module_state_free(m->state);
    hook_counts_free(&hooks);
    return st;
}

/* ---- runs and verdicts ------------------------------------------------------ */

struct case_state {
    struct case_setup setup;
    struct run_record runs[MAX_RUNS];
    int n_runs;
    int baselines;
    double one_time_bytes;
    const struct run_settings *settings;
};

static struct run_record *new_run(struct case_state *cs, const char *name)
{
    if (cs->n_runs == MAX_RUNS)
        return NULL;
    struct run_record *r = &cs->runs[cs->n_runs++];
    run_record_init(r, name);
    return r;
}

/* Facts of a run that only the harness knows (the model's predictions and
 * sizes), recorded beside the measurements so that judge can report them
 * from the file alone. */
static void record_predictions(const struct case_setup *su, const struct checkpoint_impl *impl,
                               struct run_record *r)
{
    struct segment_plan none;
    segment_plan_make(&none, su->model.layers, SEGMENTS_NONE);
    double params = 0;
    for (int i = 0; i < su->model.n_params; i++)
        params += (double)host_tensor_bytes(&su->params_init[i]);
    /* The baseline checkpoints nothing; selective (and its planted bugs)
     * keeps what its policy names; any other impl is predicted to keep
     * what the references keep (a planted bug that keeps more shows as a
     * gap between prediction and measurement). */
    unsigned keep = impl->run == impl_run_selective ? policy_of_case(su->c) : 0;
    run_record_set_attr(r, "memory.predicted_end_forward_bytes",
                        (double)model_predict_saved_bytes_keeping(
                            &su->model, impl->run == impl_run_none ? &none : &su->plan, keep));
    run_record_set_attr(r, "memory.predicted_checkpointed_end_forward_bytes",
                        (double)model_predict_saved_bytes(&su->model, &su->plan));
    run_record_set_attr(r, "memory.param_bytes", params);
}

/* Runs impl once into a new run named name. A run that fails, whatever
 * the failure (a checkpoint's error, a library's complaint about its
 * input, an internal error of the harness), is recorded as such (its
 * outcome and message), not returned as an error: the verdict says it, and
 * the case and the suite go on. Options an impl refuses are checked before
 * any run (cli/run.c). */
/* A finished run into the report: its attributes and what it kept in
 * memory (hook counts, step-start bytes), its streamed tensors being there
 * already; then the record becomes the file's view of the run (stored
 * tensors with their object identities), which is what judging reads. */
static int store_run(struct case_state *cs, struct run_record *r)
{
    struct h5store *store = cs->setup.store;
    int st = h5store_write_run(store, r);
    if (!st)
        st = h5store_flush(store);
    if (st)
        return st;
    char name[sizeof r->name];
    snprintf(name, sizeof name, "%s", r->name);
    run_record_free(r);
    return h5store_read_run_stored(h5store_temp_path(store), name, r);
}

/* What the impl is, and whether its bug can show in this case, beside its
 * tensors (run_record.h role): the judge then needs none of the impls'
 * code to decide (the torch-free judge reads them from the file). */
static void record_role(const struct ckpt_case *c, const struct checkpoint_impl *impl, struct run_record *r)
{
    if (impl->run == impl_run_none)
        snprintf(r->role, sizeof r->role, "%s", RUN_ROLE_PLAIN);
    else
        snprintf(r->role, sizeof r->role, "%s", impl->is_reference ? RUN_ROLE_REFERENCE : RUN_ROLE_PLANTED_BUG);
    char why[200];
    if (!impl->is_reference && impl->observable && !impl->observable(c, why, sizeof why))
        text_set(&r->not_observable, why);
}

static int add_run(struct case_state *cs, const struct checkpoint_impl *impl, const char *name,
                   struct impl_stats *stats)
{
    struct run_record *r = new_run(cs, name);
    if (!r)
        return error_set(ST_INTERNAL, "case %s: more than %d runs", cs->setup.c->name, MAX_RUNS);
    error_clear();
    const struct run_settings *set = cs->settings;
    if (set && set->run_started)
        set->run_started(set->run_started_ctx, cs->setup.c->name, name);
    int st = run_once(&cs->setup, impl, r, stats);
    if (st) {
        snprintf(r->outcome, sizeof r->outcome, "%s", st == ST_MISMATCH ? RUN_OUTCOME_CHECK_FAILED : RUN_OUTCOME_ERROR);
        int text_st = text_set(&r->message, error_message());
        if (st == ST_MISMATCH && !text_st)
            text_st = text_set(&r->op_log, stats->op_log);
        if (text_st)
            return text_st;
        error_clear();
    }
    if (stats->warnings && (st = text_set(&r->warning, stats->warning)))
        return st;
    run_record_sort(r); /* the order a reader of the file sees */
    record_predictions(&cs->setup, impl, r);
    record_role(cs->setup.c, impl, r);
    if (judge_is_baseline(name) && cs->baselines == 0)
        run_record_set_attr(r, "memory.one_time_bytes", cs->one_time_bytes);
    return cs->setup.store ? store_run(cs, r) : ST_OK;
}

/* One more baseline: a wider envelope. A baseline that cannot run stops
 * the case (nothing can be judged without it). */
static int add_baseline(struct case_state *cs)
{
    char name[32];
    struct impl_stats stats = {0};
    snprintf(name, sizeof name, "baseline_%d", cs->baselines);
    int st = add_run(cs, impl_find("none"), name, &stats);
    if (st)
        return st;
    const struct run_record *r = &cs->runs[cs->n_runs - 1];
    if (r->outcome[0])
        return error_set(ST_RUN, "baseline run %s: %s", name, text_str(&r->message));
    int violated;
    /* run_checks' figures and tensor paths: bounded by construction. */
    char why[8192], where[8192];
    /* The harness's own models allocate nothing lazily: a baseline's steps all start alike. */
    if ((st = run_checks_judge(r, NULL, &violated, why, sizeof why, where, sizeof where)))
        return st;
    if (violated)
        return error_set(ST_RUN, "baseline run %s: %s", name, why);
    cs->baselines++;
    return ST_OK;
}

/* Process and device warm-up, unrecorded: the first matmul of a process
 * allocates library workspaces (cuBLAS's, through the caching allocator)
 * and lazy state that would otherwise land in the first run's figures.
 * What it leaves allocated is reported on its own. */
static int warm_up(struct case_state *cs)
{
    struct mem_stats before, after;
    struct run_record scratch;
    struct impl_stats stats = {0};
    struct case_setup warm = cs->setup;
    warm.store = NULL; /* nothing of the warm-up is recorded */
    struct ckpt_case one_step = *cs->setup.c;
    one_step.steps = 1;
    warm.c = &one_step;
    warm.timed_steps = 0;
    run_record_init(&scratch, "warm_up");
    int st = aten_synchronize(cs->setup.device);
    if (!st)
        st = aten_mem_stats(cs->setup.device, &before);
    if (!st)
        st = run_once(&warm, impl_find("none"), &scratch, &stats);
    run_record_free(&scratch);
    if (!st)
        st = aten_synchronize(cs->setup.device);
    if (!st)
        st = aten_mem_stats(cs->setup.device, &after);
    /* The warm-up is a plain run: its failure is the case's ERROR, never
     * an input error that would stop the suite. */
    if (st)
        return error_wrap(st == ST_INPUT ? ST_RUN : st, "warm-up run");
    cs->one_time_bytes = (double)(after.live_bytes - before.live_bytes);
    return ST_OK;
}

/* Runs an impl and, while judge finds a tensor outside its envelope, more
 * samples: baselines first (a wider envelope), then re-runs of the impl
 * (a correct impl on non-deterministic kernels lands inside in some run;
 * a checkpoint bug never does). The verdict itself is judge's, made again
 * over every run once the case is done. */
static int run_impl(struct case_state *cs, const char *name)
{
    const struct ckpt_case *c = cs->setup.c;
    const struct checkpoint_impl *impl = impl_find(name);
    if (!impl)
        return error_set(ST_INPUT, "%s:%d: case %s: unknown impl '%s'", c->file, c->line, c->name, name);
    struct impl_stats stats = {0};
    int st = add_run(cs, impl, name, &stats), reruns = 0;
    while (!st) {
        struct impl_result res;
        st = judge_run(c, cs->runs, cs->n_runs, name, &res);
        int outside = res.outside_envelope;
        impl_result_free(&res);
        if (st || !outside)
            break;
        if (cs->baselines < 2 + c->noise_runs && cs->n_runs < MAX_RUNS) {
            st = add_baseline(cs);
        } else if (reruns < c->noise_runs && cs->n_runs < MAX_RUNS) {
            char rerun[64];
            struct impl_stats rerun_stats = {0};
            snprintf(rerun, sizeof rerun, "%s_rerun_%d", name, ++reruns);
            st = add_run(cs, impl, rerun, &rerun_stats);
        } else {
            break;
        }
    }
    return st;
}

/* ---- the HDF5 file -------------------------------------------------------------- */

struct attr_writer {
    struct h5store *store;
    int st;
};

/* Numbers as numbers (docs/schema.md): whole numbers that fit int64 as
 * integers, other numbers as reals, the rest (names, lists, "every") as
 * strings; a reader formats them back into the same case-file values. */
static void write_case_attr(void *ctx, const char *key, const char *value)
{
    struct attr_writer *w = ctx;
    long long i;
    double d;
    if (w->st)
        return;
    enum case_value_kind kind = case_value_kind(value, &i, &d);
    if (kind == CASE_VALUE_INT)
        w->st = h5store_attr_int(w->store, "/case", key, i);
    else if (kind == CASE_VALUE_REAL)
        w->st = h5store_attr_double(w->store, "/case", key, d);
    else
        w->st = h5store_attr_str(w->store, "/case", key, value);
}

static int write_header(struct h5store *h5, const struct case_state *cs, const struct run_settings *s)
{
    const struct ckpt_case *c = cs->setup.c;
    char buf[8192], dev[64], when[32];
    struct blas_info blas;
    blas_info_detect(&blas);
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
        (st = h5store_attr_str(h5, "/", "torch_cuda", torch_compiled_cuda())) ||
        (st = h5store_attr_str(h5, "/", "torch_pinned", torch_pinned_version())) ||
        (st = h5store_attr_str(h5, "/", "blas", blas.name)) ||
        (st = h5store_attr_str(h5, "/", "blas_library", blas.path)) ||
        (st = h5store_attr_str(h5, "/", "device", aten_device_str(cs->setup.device, dev, sizeof dev))) ||
        (st = h5store_attr_str(h5, "/", "device_name", aten_device_name(cs->setup.device, buf, sizeof buf))) ||
        (st = h5store_attr_str(h5, "/", "dtype", dtype_name((enum dtype)c->dtype))) ||
        (st = h5store_attr_int(h5, "/", "seed", (long long)c->seed)) ||
        (st = h5store_attr_int(h5, "/", "steps", c->steps)) ||
        (st = h5store_attr_int(h5, "/", "threads", aten_get_threads())) ||
        (st = h5store_attr_str(h5, "/", "threads_reason", cs->setup.threads.why)) ||
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
        (st = h5store_attr_str(h5, group, "reason", text_str(&r->reason))) ||
        (st = h5store_attr_str(h5, group, "first_divergence", text_str(&r->first_divergence))) ||
        (st = h5store_attr_int(h5, group, "expected", r->expected)) ||
        (st = h5store_attr_double(h5, group, "max_ulp", r->max_ulp == ULP_INFINITE ? INFINITY : (double)r->max_ulp)) ||
        (st = h5store_attr_double(h5, group, "memory_saved", r->memory_saved)) ||
        (st = h5store_attr_double(h5, group, "overhead", r->overhead)))
        return st;
    return ST_OK;
}

/* The report's end: the verdicts, then the rename into place. */
static int finish_file(struct h5store *h5, const struct case_state *cs, const struct case_result *result)
{
    int st;
    if ((st = h5store_attr_int(h5, "/verdicts", "baseline_runs", cs->baselines)) ||
        (st = h5store_attr_double(h5, "/verdicts", "noise_floor_ulp", (double)result->noise_floor_ulp)) ||
        (st = h5store_attr_double(h5, "/verdicts", "noise_floor_scaled_ulp", result->noise_floor_scaled)))
        return st;
    for (int i = 0; i < result->n_results; i++)
        if ((st = write_verdict(h5, &result->results[i])))
            return st;
    return ST_OK;
}

/* The initial parameters, now in the report, are read from it for each
 * run: only their dtypes and shapes stay in memory. */
static void forget_params_init(struct case_setup *su)
{
    for (int i = 0; i < su->model.n_params; i++) {
        free(su->params_init[i].data);
        su->params_init[i].data = NULL;
    }
    su->params_init_file = h5store_temp_path(su->store);
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
    cs->settings = s;
    int st = s->skip_h5 ? ST_OK : case_fit_check_disk(c, s->out_dir);
    if (!st)
        st = setup_case(&cs->setup, c, s);
    cs->setup.timed_steps = s->repeats;
    /* The report is opened before any run (an unusable --out is found
     * before the work) and each run streams into it. */
    if (!st && !s->skip_h5 && !(st = h5store_create(&cs->setup.store, result->h5_path)) &&
        !(st = write_header(cs->setup.store, cs, s)) && !(st = h5store_flush(cs->setup.store)))
        forget_params_init(&cs->setup);
    if (!st)
        st = warm_up(cs);
    for (int i = 0; i < 2 && !st; i++)
        st = add_baseline(cs);
    for (int i = 0; i < c->n_impls && !st; i++)
        st = run_impl(cs, c->impls[i]);
    if (!st)
        st = judge_case(c, cs->runs, cs->n_runs, (const char (*)[CASE_WORD_MAX])c->impls, c->n_impls, result);
    if (!st && cs->setup.store)
        st = finish_file(cs->setup.store, cs, result);
    if (cs->setup.store) {
        if (st)
            h5store_abort(cs->setup.store);
        else
            st = h5store_commit(cs->setup.store);
        cs->setup.store = NULL;
    }
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
