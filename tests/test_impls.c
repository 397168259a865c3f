/* The reference checkpoints: RNG device sets, replay under a forked RNG,
 * reentrant's partial-backward refusal and no-grad warning, non-reentrant's
 * single recompute, early stop, metadata and value checks, and the context
 * hooks that mark exactly the tensors entering a recompute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "case.h"
#include "checkpoint_env.h"
#include "error.h"
#include "impl.h"
#include "ops.h"
#include "policy.h"
#include "rng_stash.h"
#include "tape.h"

#define HIDDEN 8

/* ---- device sets (plain C, fake device ids) ------------------------------------ */

static void test_device_set_puts_cpu_first_then_args_then_current(void **state)
{
    (void)state;
    struct rng_device_set set;
    int args[2] = {3, 1};
    rng_device_set_build(&set, args, 2, 2, RNG_ARGS_AND_CURRENT);
    assert_int_equal(set.n, 4);
    assert_int_equal(set.devices[0], DEVICE_CPU);
    assert_int_equal(set.devices[1], 1);
    assert_int_equal(set.devices[2], 2);
    assert_int_equal(set.devices[3], 3);
}

static void test_device_set_args_only_leaves_out_the_current_device(void **state)
{
    (void)state;
    struct rng_device_set set;
    int args[1] = {0};
    rng_device_set_build(&set, args, 1, 1, RNG_ARGS_ONLY);
    assert_int_equal(set.n, 2);
    assert_int_equal(set.devices[0], DEVICE_CPU);
    assert_int_equal(set.devices[1], 0);
}

static void test_device_set_deduplicates_and_always_has_cpu(void **state)
{
    (void)state;
    struct rng_device_set set;
    int args[3] = {DEVICE_CPU, DEVICE_CPU, 0};
    rng_device_set_build(&set, args, 3, 0, RNG_ARGS_AND_CURRENT);
    assert_int_equal(set.n, 2);
    rng_device_set_build(&set, NULL, 0, DEVICE_CPU, RNG_ARGS_ONLY);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.devices[0], DEVICE_CPU);
}

/* Under rng_devices = args a segment with only CPU arguments does not stash
 * the current GPU: that device is what the forward check watches. */
static void test_unstashed_devices_are_those_the_policy_leaves_out(void **state)
{
    (void)state;
    struct rng_device_set stashed, unstashed;
    int cpu_arg = DEVICE_CPU, current = 0;
    rng_device_set_build(&stashed, &cpu_arg, 1, current, RNG_ARGS_ONLY);
    rng_device_set_unstashed(&unstashed, &stashed, &current, 1);
    assert_int_equal(unstashed.n, 1);
    assert_int_equal(unstashed.devices[0], 0);
    rng_device_set_build(&stashed, &cpu_arg, 1, current, RNG_ARGS_AND_CURRENT);
    rng_device_set_unstashed(&unstashed, &stashed, &current, 1);
    assert_int_equal(unstashed.n, 0);
    int watched[3] = {DEVICE_CPU, 5, 2};
    rng_device_set_unstashed(&unstashed, &stashed, watched, 3); /* CPU is always stashed */
    assert_int_equal(unstashed.n, 2);
    assert_int_equal(unstashed.devices[0], 2);
    assert_int_equal(unstashed.devices[1], 5);
}

/* Fake states for fake devices: which generator drew between two stashes. */
static void fake_stash(struct rng_stash *s, const int *devices, const uint8_t *first_bytes, int n)
{
    memset(s, 0, sizeof *s);
    s->set.n = n;
    for (int i = 0; i < n; i++) {
        s->set.devices[i] = devices[i];
        s->len[i] = 16;
        s->state[i] = calloc(16, 1);
        s->state[i][0] = first_bytes[i];
    }
}

static void test_first_changed_names_the_generator_that_drew(void **state)
{
    (void)state;
    int devices[3] = {0, 1, 3};
    struct rng_stash before, same, drew;
    fake_stash(&before, devices, (const uint8_t[]){1, 2, 3}, 3);
    fake_stash(&same, devices, (const uint8_t[]){1, 2, 3}, 3);
    fake_stash(&drew, devices, (const uint8_t[]){1, 2, 4}, 3);
    assert_int_equal(rng_stash_first_changed(&before, &same), -1);
    assert_int_equal(rng_stash_first_changed(&before, &drew), 2);
    assert_int_equal(drew.set.devices[2], 3);
    rng_stash_free(&before);
    rng_stash_free(&same);
    rng_stash_free(&drew);
}

/* ---- a small segment: y = dropout(gelu(x·Wᵀ + b)) + extra ----------------------- */

struct seg_state {
    struct var *w, *b;
    double p;
    int calls;
    /* Test switches: change what the n-th call computes. */
    int cast_on_call;      /* on this call, compute in bfloat16 */
    int shift_on_call;     /* on this call, add 1e-3 before gelu */
    int trailing_add;      /* end with an op that saves nothing */
    int trailing_adds_run;
    int skip_dropout_on_call; /* on this call, end after gelu: one saved tensor fewer */
    int extra_gelu_on_call;   /* on this call, end with another gelu: one saved tensor more */
};

static int seg_call(void *ctx, struct var *in, struct var **out)
{
    struct seg_state *s = ctx;
    struct var *y = NULL, *h = NULL, *x = var_retain(in);
    int st;
    s->calls++;
    if (s->cast_on_call == s->calls) {
        struct var *cast;
        if ((st = op_to_dtype(&cast, x, DT_BF16)))
            goto out;
        var_release(x);
        x = cast;
    }
    struct var *w = s->w, *b = s->b, *cw = NULL, *cb = NULL;
    if (tensor_dtype(x->data) != tensor_dtype(w->data)) {
        if ((st = op_to_dtype(&cw, w, tensor_dtype(x->data))) || (st = op_to_dtype(&cb, b, tensor_dtype(x->data))))
            goto out;
        w = cw;
        b = cb;
    }
    st = op_linear(&y, x, w, b);
    var_release(cw);
    var_release(cb);
    if (st)
        goto out;
    if (s->shift_on_call == s->calls) {
        tensor *c;
        struct var *cv, *shifted;
        int64_t one = 1;
        if ((st = tensor_full(&c, tensor_dtype(y->data), 1, &one, DEVICE_CPU, 1e-3)) || (st = var_constant(&cv, c)))
            goto out;
        st = op_add(&shifted, y, cv);
        var_release(cv);
        if (st)
            goto out;
        var_release(y);
        y = shifted;
    }
    if ((st = op_gelu(&h, y, 1)))
        goto out;
    if (s->skip_dropout_on_call == s->calls) {
        *out = var_retain(h);
        goto out;
    }
    if ((st = op_dropout(out, h, s->p)))
        goto out;
    if (s->extra_gelu_on_call == s->calls) {
        struct var *g2;
        if ((st = op_gelu(&g2, *out, 1))) {
            var_release(*out);
            *out = NULL;
            goto out;
        }
        var_release(*out);
        *out = g2;
    }
    if (s->trailing_add) {
        struct var *sum;
        s->trailing_adds_run++;
        if ((st = op_add(&sum, *out, *out))) {
            var_release(*out);
            goto out;
        }
        var_release(*out);
        *out = sum;
    }
out:
    var_release(x);
    var_release(y);
    var_release(h);
    return st;
}

static struct var *random_leaf(int ndim, const int64_t *shape, int requires_grad, const char *name)
{
    tensor *t;
    assert_int_equal(tensor_randn(&t, DT_F32, ndim, shape, DEVICE_CPU, 0.5), ST_OK);
    struct var *v;
    assert_int_equal(var_leaf(&v, t, requires_grad, name), ST_OK);
    return v;
}

struct fixture {
    struct seg_state seg;
    struct var *x;
    struct impl_stats stats;
    struct impl_options opts;
};

static int setup(void **state)
{
    aten_init();
    aten_rng_manual_seed(DEVICE_CPU, 7);
    struct fixture *f = calloc(1, sizeof *f);
    int64_t ws[2] = {HIDDEN, HIDDEN}, bs[1] = {HIDDEN}, xs[2] = {4, HIDDEN};
    f->seg.w = random_leaf(2, ws, 1, "w");
    f->seg.b = random_leaf(1, bs, 1, "b");
    f->seg.p = 0.5;
    f->x = random_leaf(2, xs, 1, "x");
    f->opts = (struct impl_options){.preserve_rng_state = 1, .rng_devices = RNG_ARGS_AND_CURRENT,
                                    .current_device = DEVICE_CPU, .stats = &f->stats};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    impl_stats_release_held(&f->stats); /* what leaked_recompute_frame held for the "run" */
    var_release(f->seg.w);
    var_release(f->seg.b);
    var_release(f->x);
    free(f);
    return 0;
}

/* A one-tensor segment: y = fn(ctx, x). */
static struct segment_fn segment_of(int (*fn)(void *ctx, struct var *in, struct var **out), void *ctx)
{
    return (struct segment_fn){.call = fn, .ctx = ctx};
}

/* Forward through impl, sum-of-squares loss, full backward. Returns the
 * backward's status; the caller reads ->grad. */

static int run_segment(struct fixture *f, const char *impl_name, struct segment_fn fn, int *forward_status)
{
    const struct checkpoint_impl *impl = impl_find(impl_name);
    struct var *y = NULL, *loss = NULL, *target = NULL;
    tensor *t;
    int64_t xs[2] = {4, HIDDEN};
    assert_int_equal(tensor_zeros(&t, DT_F32, 2, xs, DEVICE_CPU), ST_OK);
    assert_int_equal(var_constant(&target, t), ST_OK);
    var_zero_grad(f->seg.w);
    var_zero_grad(f->seg.b);
    var_zero_grad(f->x);
    int st = impl->run(impl, &f->opts, &fn, &f->x, &y);
    if (forward_status)
        *forward_status = st;
    if (!st)
        st = op_mse_loss(&loss, y, target);
    if (!st)
        st = tape_backward(&loss, NULL, 1);
    var_release(loss);
    var_release(y);
    var_release(target);
    return st;
}

static int run_checkpointed(struct fixture *f, const char *impl_name, int *forward_status)
{
    return run_segment(f, impl_name, segment_of(seg_call, &f->seg), forward_status);
}

static tensor *clone_of(const tensor *t)
{
    tensor *c;
    assert_int_equal(tensor_clone(&c, t), ST_OK);
    return c;
}

static void assert_same_grads(struct fixture *f, tensor *const ref[3])
{
    assert_true(tensor_bitwise_equal(f->seg.w->grad, ref[0]));
    assert_true(tensor_bitwise_equal(f->seg.b->grad, ref[1]));
    assert_true(tensor_bitwise_equal(f->x->grad, ref[2]));
}

static void reference_grads(struct fixture *f, uint64_t seed, tensor *ref[3])
{
    aten_rng_manual_seed(DEVICE_CPU, seed);
    assert_int_equal(run_checkpointed(f, "none", NULL), ST_OK);
    ref[0] = clone_of(f->seg.w->grad);
    ref[1] = clone_of(f->seg.b->grad);
    ref[2] = clone_of(f->x->grad);
}

static void free3(tensor *t[3])
{
    for (int i = 0; i < 3; i++)
        tensor_free(t[i]);
}

static void test_reentrant_replays_dropout_and_matches_plain_bitwise(void **state)
{
    struct fixture *f = *state;
    tensor *ref[3];
    reference_grads(f, 11, ref);
    aten_rng_manual_seed(DEVICE_CPU, 11);
    assert_int_equal(run_checkpointed(f, "reentrant", NULL), ST_OK);
    assert_same_grads(f, ref);
    assert_int_equal(f->stats.recomputes, 1);
    free3(ref);
}

static void test_nonreentrant_replays_dropout_and_matches_plain_bitwise(void **state)
{
    struct fixture *f = *state;
    tensor *ref[3];
    reference_grads(f, 12, ref);
    aten_rng_manual_seed(DEVICE_CPU, 12);
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    assert_same_grads(f, ref);
    assert_int_equal(f->stats.recomputes, 1);
    free3(ref);
}

/* The RNG stream after backward is where the forward left it: recompute ran
 * under a forked generator. The draw after the segment matters: without it
 * an unforked replay would end exactly where the forward ended. */
static void expect_surrounding_stream_untouched(struct fixture *f, const char *impl_name)
{
    const struct checkpoint_impl *impl = impl_find(impl_name);
    struct segment_fn fn = {.call = seg_call, .ctx = &f->seg};
    struct var *y = NULL, *loss = NULL;
    uint8_t *after_forward, *after_backward;
    size_t len_f, len_b;
    aten_rng_manual_seed(DEVICE_CPU, 13);
    assert_int_equal(impl->run(impl, &f->opts, &fn, &f->x, &y), ST_OK);
    assert_int_equal(op_mse_loss(&loss, y, y), ST_OK);
    tensor *later_draw;
    int64_t n = 16;
    assert_int_equal(tensor_randn(&later_draw, DT_F32, 1, &n, DEVICE_CPU, 1.0), ST_OK);
    tensor_free(later_draw);
    assert_int_equal(aten_rng_get_state(DEVICE_CPU, &after_forward, &len_f), ST_OK);
    assert_int_equal(tape_backward(&loss, NULL, 1), ST_OK);
    assert_int_equal(aten_rng_get_state(DEVICE_CPU, &after_backward, &len_b), ST_OK);
    assert_int_equal(len_f, len_b);
    assert_memory_equal(after_forward, after_backward, len_f);
    assert_true(f->stats.recomputes >= 1);
    free(after_forward);
    free(after_backward);
    var_release(loss);
    var_release(y);
}

static void test_reentrant_recompute_leaves_the_rng_stream_untouched(void **state)
{
    expect_surrounding_stream_untouched(*state, "reentrant");
}

static void test_nonreentrant_recompute_leaves_the_rng_stream_untouched(void **state)
{
    expect_surrounding_stream_untouched(*state, "nonreentrant");
}

static void test_without_preserve_rng_state_recompute_draws_a_new_mask(void **state)
{
    struct fixture *f = *state;
    tensor *ref[3];
    reference_grads(f, 14, ref);
    f->opts.preserve_rng_state = 0;
    aten_rng_manual_seed(DEVICE_CPU, 14);
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    assert_false(tensor_bitwise_equal(f->seg.w->grad, ref[0]));
    free3(ref);
}

static void test_reentrant_refuses_a_partial_backward(void **state)
{
    struct fixture *f = *state;
    const struct checkpoint_impl *impl = impl_find("reentrant");
    struct segment_fn fn = {.call = seg_call, .ctx = &f->seg};
    struct var *y = NULL, *loss = NULL;
    tensor *grads[1];
    assert_int_equal(impl->run(impl, &f->opts, &fn, &f->x, &y), ST_OK);
    assert_int_equal(op_mse_loss(&loss, y, y), ST_OK);
    int st = tape_grad(&loss, NULL, 1, &f->x, 1, grads);
    assert_int_equal(st, ST_RUN);
    assert_non_null(strstr(error_message(), "not compatible with grad()"));
    var_release(loss);
    var_release(y);
}

static void test_reentrant_warns_and_gives_no_param_grads_when_no_input_requires_grad(void **state)
{
    struct fixture *f = *state;
    f->x->requires_grad = 0;
    int forward_st;
    run_checkpointed(f, "reentrant", &forward_st);
    assert_int_equal(forward_st, ST_OK);
    assert_int_equal(f->stats.warnings, 1);
    assert_non_null(strstr(f->stats.warning, "none of the inputs requires grad"));
    assert_null(f->seg.w->grad);
    f->x->requires_grad = 1;
}

static void test_nonreentrant_gives_param_grads_when_no_input_requires_grad(void **state)
{
    struct fixture *f = *state;
    f->x->requires_grad = 0;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    assert_non_null(f->seg.w->grad);
    assert_non_null(f->seg.b->grad);
    assert_int_equal(f->stats.recomputes, 1);
    f->x->requires_grad = 1;
}

static void test_nonreentrant_recomputes_once_for_all_unpacks(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    /* linear saves x and w, gelu its input, dropout its mask: 4 handles,
     * one recompute pass filling all of them. */
    assert_int_equal(f->stats.recomputes, 1);
    assert_int_equal(f->stats.recomputed_tensors, 4);
    assert_int_equal(f->seg.calls, 2);
}

static void test_nonreentrant_recompute_stops_after_the_last_saved_tensor(void **state)
{
    struct fixture *f = *state;
    f->seg.trailing_add = 1;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    /* The trailing add saves nothing, so the recompute stops before it. */
    assert_int_equal(f->seg.calls, 2);
    assert_int_equal(f->seg.trailing_adds_run, 1);
    f->seg.trailing_add = 0;
}

static void test_nonreentrant_reports_recomputed_dtype_mismatch(void **state)
{
    struct fixture *f = *state;
    f->seg.cast_on_call = 2; /* the recompute is the second call */
    int st = run_checkpointed(f, "nonreentrant", NULL);
    assert_int_equal(st, ST_MISMATCH);
    assert_non_null(strstr(error_message(), "recomputed saved tensor #0 (op linear) has dtype bfloat16"));
    f->seg.cast_on_call = 0;
}

static void test_verify_values_names_the_first_recomputed_tensor_that_differs(void **state)
{
    struct fixture *f = *state;
    f->seg.shift_on_call = 2;
    f->opts.determinism_check = DETERMINISM_VALUES;
    int st = run_checkpointed(f, "nonreentrant", NULL);
    assert_int_equal(st, ST_MISMATCH);
    /* x and w are the same; the gelu input (handle #2) is the first that moved. */
    assert_non_null(strstr(error_message(), "recomputed saved tensor #2 (op gelu_tanh) differs"));
    f->opts.determinism_check = DETERMINISM_METADATA;
    f->seg.calls = 0;
    /* Without the value check the same bug slips through the metadata check. */
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    f->seg.shift_on_call = 0;
}

/* ---- every check of the non-reentrant checkpoint fires ---------------------------- */

/* A test op, y = x, that saves x — or only its first row on call
 * `narrow_on_call` — and whose backward reads its saved tensor `reads`
 * times (an op breaking the engine's one-unpack-per-backward contract). */
struct probe {
    int calls;
    int narrow_on_call;
    int move_on_call; /* on this call, save a copy on cuda:0 */
    int reads;
};

static int probe_backward(struct node *n, tensor *const *g, tensor **gi)
{
    struct probe *p = n->ctx;
    for (int i = 0; i < p->reads; i++) {
        tensor *saved = NULL;
        int st = node_saved(n, 0, &saved);
        tensor_free(saved);
        if (st)
            return st;
    }
    return n->next[0].node ? tensor_share(&gi[0], g[0]) : ST_OK;
}

static int probe_segment(void *ctx, struct var *in, struct var **out)
{
    struct probe *p = ctx;
    p->calls++;
    struct node *n = NULL;
    tensor *y = NULL, *kept = NULL;
    int st = tensor_share(&y, in->data);
    if (!st && (st = node_create(&n, "probe", probe_backward, &in, 1, 1)))
        tensor_free(y);
    if (st)
        return st;
    n->ctx = p;
    int cuda0 = 0;
    if (p->move_on_call == p->calls && !(st = aten_parse_device("cuda:0", &cuda0)))
        st = tensor_to_device(&kept, in->data, cuda0);
    else if (p->narrow_on_call == p->calls)
        st = tensor_narrow(&kept, in->data, 0, 0, 1);
    else
        st = tensor_share(&kept, in->data);
    if (!st)
        st = node_save(n, kept);
    tensor_free(kept);
    if (!st)
        st = var_from_op(out, y, n, 0);
    else
        tensor_free(y);
    node_release(n);
    return st;
}

static void test_nonreentrant_reports_a_recomputed_shape_mismatch_with_the_op_log(void **state)
{
    struct fixture *f = *state;
    struct probe p = {.narrow_on_call = 2, .reads = 1};
    assert_int_equal(run_segment(f, "nonreentrant", segment_of(probe_segment, &p), NULL), ST_MISMATCH);
    assert_non_null(strstr(error_message(), "recomputed saved tensor #0 (op probe) has a different shape"));
    assert_null(strchr(error_message(), '\n'));
    assert_string_equal(f->stats.op_log, "saved tensor | forward op | recompute op\n"
                                          "#0 | probe | probe <- recomputed tensor differs\n");
}

/* Needs a GPU (skipped without one; scripts/gpu-build.sh runs it): the
 * recompute saves a copy on cuda:0 of what forward saved on the CPU. */
static void test_nonreentrant_reports_a_recomputed_tensor_on_another_device(void **state)
{
    struct fixture *f = *state;
    if (!aten_cuda_available())
        skip();
    struct probe p = {.move_on_call = 2, .reads = 1};
    assert_int_equal(run_segment(f, "nonreentrant", segment_of(probe_segment, &p), NULL), ST_MISMATCH);
    assert_non_null(strstr(error_message(), "recomputed saved tensor #0 (op probe) is on another device than in "
                                            "forward"));
}

static void test_nonreentrant_reports_a_saved_tensor_unpacked_twice_in_one_backward(void **state)
{
    struct fixture *f = *state;
    struct probe p = {.reads = 2};
    assert_int_equal(run_segment(f, "nonreentrant", segment_of(probe_segment, &p), NULL), ST_MISMATCH);
    assert_non_null(strstr(error_message(), "saved tensor #0 (op probe) was unpacked twice in one backward"));
    assert_int_equal(p.calls, 2); /* one recompute, not one per read */
}

static void test_nonreentrant_reports_fewer_tensors_recomputed_than_saved(void **state)
{
    struct fixture *f = *state;
    f->seg.skip_dropout_on_call = 2;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_MISMATCH);
    assert_non_null(strstr(error_message(), "recompute saved 3 tensors; the forward saved 4 (saved tensor #3, op "
                                            "dropout, was not recomputed)"));
    /* The op log stops at the first difference: the dropout only forward ran. */
    assert_non_null(strstr(f->stats.op_log, "#2 | gelu_tanh | gelu_tanh\n"
                                            "#3 | dropout | (none: recompute saved no more) <- not recomputed\n"));
    f->seg.skip_dropout_on_call = 0;
}

/* The extra tensor comes after the last one forward saved: early stop never
 * runs that far, so only early_stop = false sees it (as in PyTorch). */
static void test_more_tensors_recomputed_than_saved_fire_only_without_early_stop(void **state)
{
    struct fixture *f = *state;
    f->seg.extra_gelu_on_call = 2;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    f->seg.calls = 0;
    f->opts.disable_early_stop = 1;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_MISMATCH);
    assert_non_null(strstr(error_message(), "recompute saved more tensors (5) than the forward did (4; the extra one "
                                            "by op gelu_tanh)"));
    assert_non_null(strstr(f->stats.op_log, "#4 | (none: forward saved no more) | gelu_tanh <- saved by the recompute only\n"));
    f->opts.disable_early_stop = 0;
    f->seg.extra_gelu_on_call = 0;
}

/* Without early stop the whole segment reruns, and a segment that saves
 * the same tensors still passes. */
static void test_without_early_stop_the_recompute_runs_to_the_end(void **state)
{
    struct fixture *f = *state;
    f->seg.trailing_add = 1;
    f->opts.disable_early_stop = 1;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    assert_int_equal(f->seg.trailing_adds_run, 2);
    f->opts.disable_early_stop = 0;
    f->seg.trailing_add = 0;
}

/* determinism_check = none: the recomputed tensors' metadata is not
 * compared (the count still is, as in PyTorch). */
static void test_determinism_check_none_skips_the_metadata_check(void **state)
{
    struct fixture *f = *state;
    struct probe p = {.narrow_on_call = 2, .reads = 1};
    f->opts.determinism_check = DETERMINISM_NONE;
    assert_int_equal(run_segment(f, "nonreentrant", segment_of(probe_segment, &p), NULL), ST_OK);
    f->seg.skip_dropout_on_call = 2;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_MISMATCH);
    assert_non_null(strstr(error_message(), "was not recomputed"));
    f->seg.skip_dropout_on_call = 0;
    f->opts.determinism_check = DETERMINISM_METADATA;
}

/* A segment whose output is cut from its input (detached). */
static int detaching_segment(void *ctx, struct var *in, struct var **out)
{
    (void)ctx;
    return var_detach(out, in, 0);
}

/* The reentrant checkpoint records a node because its input requires grad;
 * its recompute finds an output that does not, and says the checkpoint has
 * nothing to do (PyTorch's "none of output has requires_grad=True"). */
static void test_reentrant_refuses_a_recompute_whose_output_needs_no_grad(void **state)
{
    struct fixture *f = *state;
    int forward = -1;
    assert_int_equal(run_segment(f, "reentrant", segment_of(detaching_segment, NULL), &forward), ST_RUN);
    assert_int_equal(forward, ST_OK);
    assert_non_null(strstr(error_message(), "no output of the segment requires grad"));
}

/* Every built-in reentrant impl refuses the value check when it runs, and
 * impl_is_reentrant (what the CLI checks before any run) names exactly
 * those. */
static void test_reentrant_impls_refuse_the_value_check(void **state)
{
    struct fixture *f = *state;
    f->opts.determinism_check = DETERMINISM_VALUES;
    const struct checkpoint_impl *const *all = impl_all();
    for (int i = 0; all[i]; i++) {
        if (strcmp(all[i]->name, "none") == 0 || all[i]->run == impl_run_selective)
            continue; /* no checkpoint / needs a policy */
        int forward = -1;
        run_checkpointed(f, all[i]->name, &forward);
        if (impl_is_reentrant(all[i])) {
            assert_int_equal(forward, ST_INPUT);
            assert_non_null(strstr(error_message(), "determinism_check = values"));
        } else {
            assert_int_equal(forward, ST_OK);
        }
    }
    assert_true(impl_is_reentrant(impl_find("reentrant")));
    assert_true(impl_is_reentrant(impl_find("stale_input")));
    assert_false(impl_is_reentrant(impl_find("nonreentrant")));
    f->opts.determinism_check = DETERMINISM_METADATA;
}

/* ---- context hooks: what enters the recompute region ------------------------------- */

#define MAX_MARKS 64
struct marks {
    int active;
    const void *produced[MAX_MARKS]; /* storages made inside the region */
    int n_produced;
    const void *entered[MAX_MARKS];  /* storages used but not made inside */
    int n_entered;
    struct op_observer previous;
};

static int contains(const void *const *set, int n, const void *id)
{
    for (int i = 0; i < n; i++)
        if (set[i] == id)
            return 1;
    return 0;
}

static void mark_op(void *ctx, const char *op, struct var *const *inputs, int n_inputs, const struct var *output)
{
    (void)op;
    struct marks *m = ctx;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i])
            continue;
        const void *id = tensor_storage_id(inputs[i]->data);
        if (!contains(m->produced, m->n_produced, id) && !contains(m->entered, m->n_entered, id))
            m->entered[m->n_entered++] = id;
    }
    m->produced[m->n_produced++] = tensor_storage_id(output->data);
}

static void recompute_enter(void *ctx)
{
    struct marks *m = ctx;
    m->active++;
    m->previous = tape_set_op_observer((struct op_observer){mark_op, m});
}

static void recompute_exit(void *ctx)
{
    struct marks *m = ctx;
    tape_set_op_observer(m->previous);
}

static void expect_recompute_marks_exactly_inputs_and_params(struct fixture *f, const char *impl_name)
{
    struct marks m = {0};
    struct context_hooks hooks = {.recompute_enter = recompute_enter, .recompute_exit = recompute_exit, .ctx = &m};
    f->opts.context = &hooks;
    assert_int_equal(run_checkpointed(f, impl_name, NULL), ST_OK);
    f->opts.context = NULL;
    assert_int_equal(m.active, 1);
    assert_int_equal(m.n_entered, 3);
    assert_true(contains(m.entered, m.n_entered, tensor_storage_id(f->x->data)));
    assert_true(contains(m.entered, m.n_entered, tensor_storage_id(f->seg.w->data)));
    assert_true(contains(m.entered, m.n_entered, tensor_storage_id(f->seg.b->data)));
}

static void test_reentrant_recompute_context_sees_only_segment_inputs_and_params(void **state)
{
    expect_recompute_marks_exactly_inputs_and_params(*state, "reentrant");
}

static void test_nonreentrant_recompute_context_sees_only_segment_inputs_and_params(void **state)
{
    expect_recompute_marks_exactly_inputs_and_params(*state, "nonreentrant");
}

static void count_call(void *ctx) { (*(int *)ctx)++; }

static void test_forward_context_wraps_the_original_forward_once(void **state)
{
    struct fixture *f = *state;
    int entered = 0;
    struct context_hooks hooks = {.forward_enter = count_call, .ctx = &entered};
    f->opts.context = &hooks;
    assert_int_equal(run_checkpointed(f, "nonreentrant", NULL), ST_OK);
    assert_int_equal(run_checkpointed(f, "reentrant", NULL), ST_OK);
    f->opts.context = NULL;
    assert_int_equal(entered, 2);
}

/* ---- selective ------------------------------------------------------------- */

/* The fixture's segment: linear (saves x, w) -> gelu_tanh (saves x·wᵀ + b)
 * -> dropout (saves its mask). */
static void test_selective_keeping_linear_replays_dropout_and_matches_plain_bitwise(void **state)
{
    struct fixture *f = *state;
    tensor *ref[3];
    reference_grads(f, 21, ref);
    f->opts.policy = POLICY_BIT(POP_LINEAR);
    aten_rng_manual_seed(DEVICE_CPU, 21);
    assert_int_equal(run_checkpointed(f, "selective", NULL), ST_OK);
    assert_same_grads(f, ref);
    assert_int_equal(f->stats.recomputes, 1);
    assert_int_equal(f->stats.recomputed_tensors, 2); /* gelu's input and the mask; linear's two kept */
    free3(ref);
}

static void test_selective_keeping_every_op_never_recomputes(void **state)
{
    struct fixture *f = *state;
    tensor *ref[3];
    reference_grads(f, 22, ref);
    f->opts.policy = POLICY_BIT(POP_LINEAR) | POLICY_BIT(POP_GELU_TANH) | POLICY_BIT(POP_DROPOUT);
    aten_rng_manual_seed(DEVICE_CPU, 22);
    assert_int_equal(run_checkpointed(f, "selective", NULL), ST_OK);
    assert_same_grads(f, ref);
    assert_int_equal(f->stats.recomputes, 0);
    free3(ref);
}

/* PyTorch's saved-tensor version check, for the cache: linear keeps the
 * segment's input x; an in-place op on x after forward is refused. Every
 * op is kept, so nothing is recomputed and the cache's check is the one
 * that fires (a recompute would refuse the changed input first). */
static void test_selective_refuses_a_cached_tensor_changed_in_place_after_forward(void **state)
{
    struct fixture *f = *state;
    const struct checkpoint_impl *impl = impl_find("selective");
    struct segment_fn fn = {.call = seg_call, .ctx = &f->seg};
    struct var *y = NULL, *loss = NULL, *target = NULL;
    tensor *t;
    int64_t xs[2] = {4, HIDDEN};
    assert_int_equal(tensor_zeros(&t, DT_F32, 2, xs, DEVICE_CPU), ST_OK);
    assert_int_equal(var_constant(&target, t), ST_OK);
    f->opts.policy = POLICY_BIT(POP_LINEAR) | POLICY_BIT(POP_GELU_TANH) | POLICY_BIT(POP_DROPOUT);
    assert_int_equal(impl->run(impl, &f->opts, &fn, &f->x, &y), ST_OK);
    assert_int_equal(op_mse_loss(&loss, y, target), ST_OK);
    long long v = (long long)tensor_version(f->x->data);
    assert_int_equal(tensor_add_(f->x->data, f->x->data, 1.0), ST_OK);
    assert_int_equal(tape_backward(&loss, NULL, 1), ST_MISMATCH);
    char want[192];
    snprintf(want, sizeof want, "(op linear, call 0) kept by the selective policy was modified by an inplace "
             "operation after it was saved: it is at version %lld, saved at version %lld", v + 1, v);
    assert_non_null(strstr(error_message(), want));
    var_release(loss);
    var_release(y);
    var_release(target);
}

/* ---- version counter on a checkpoint's inputs ------------------------------------ */

/* The tape's version-check message for `what`, saved at `version` and
 * changed once since. */
static const char *version_error(const char *what, long long version)
{
    static char msg[192];
    snprintf(msg, sizeof msg, "%s was modified by an inplace operation after it was saved: it is at version %lld, "
             "saved at version %lld", what, version + 1, version);
    return msg;
}

/* Forward through impl, an in-place op on the input x, then backward;
 * version: x's version counter at forward. */
static int backward_after_changing_the_input(struct fixture *f, const char *impl_name, long long *version)
{
    const struct checkpoint_impl *impl = impl_find(impl_name);
    struct segment_fn fn = segment_of(seg_call, &f->seg);
    struct var *y = NULL, *loss = NULL, *target = NULL;
    tensor *t;
    int64_t xs[2] = {4, HIDDEN};
    assert_int_equal(tensor_zeros(&t, DT_F32, 2, xs, DEVICE_CPU), ST_OK);
    assert_int_equal(var_constant(&target, t), ST_OK);
    assert_int_equal(impl->run(impl, &f->opts, &fn, &f->x, &y), ST_OK);
    assert_int_equal(op_mse_loss(&loss, y, target), ST_OK);
    *version = (long long)tensor_version(f->x->data);
    assert_int_equal(tensor_add_(f->x->data, f->x->data, 1.0), ST_OK);
    int st = tape_backward(&loss, NULL, 1);
    var_release(loss);
    var_release(y);
    var_release(target);
    return st;
}

/* Reentrant keeps its input as a saved tensor of its node: the tape's
 * version check refuses the recompute from a changed input. */
static void test_reentrant_refuses_an_input_changed_in_place_after_forward(void **state)
{
    struct fixture *f = *state;
    long long v;
    assert_int_equal(backward_after_changing_the_input(f, "reentrant", &v), ST_MISMATCH);
    assert_non_null(strstr(error_message(), version_error("saved tensor #0 of checkpoint_reentrant", v)));
    assert_int_equal(f->stats.recomputes, 0);
}

/* Non-reentrant keeps its inputs on a node of their own (PyTorch's
 * _NoopSaveInputs), so the same version check refuses them. */
static void test_nonreentrant_refuses_an_input_changed_in_place_after_forward(void **state)
{
    struct fixture *f = *state;
    long long v;
    assert_int_equal(backward_after_changing_the_input(f, "nonreentrant", &v), ST_MISMATCH);
    assert_non_null(strstr(error_message(), version_error("saved tensor #0 of checkpoint_nonreentrant_inputs", v)));
    assert_int_equal(f->stats.recomputes, 0);
}

/* ---- regions: several tensors in and out, a non-tensor argument ------------------- */

/* (x, r, c; s) -> (y, r', c', d):
 *   h = gelu_tanh(x·Wᵀ + b);  r' = r + s·h;  y = dropout(h + c, p);
 *   c' = gelu_tanh(r') computed under no_grad; d = h detached. */
struct region_state {
    struct seg_state *seg;
    int calls;
    double args_seen[8];
};

static int region_call(void *ctx, struct var *const *in, const struct region_arg *arg, struct var **out)
{
    struct region_state *rs = ctx;
    if (rs->calls < 8)
        rs->args_seen[rs->calls] = arg->scalar;
    rs->calls++;
    struct var *a = NULL, *h = NULL, *sh = NULL, *hc = NULL;
    int st = op_linear(&a, in[0], rs->seg->w, rs->seg->b);
    if (!st)
        st = op_gelu(&h, a, 1);
    if (!st)
        st = op_scale(&sh, h, arg->scalar);
    if (!st)
        st = op_add(&out[1], in[1], sh);
    if (!st)
        st = op_add(&hc, h, in[2]);
    if (!st)
        st = op_dropout(&out[0], hc, rs->seg->p);
    if (!st) {
        int grad = grad_mode_set(0);
        st = op_gelu(&out[2], out[1], 1);
        grad_mode_set(grad);
    }
    if (!st)
        st = var_detach(&out[3], h, 0);
    var_release(a);
    var_release(h);
    var_release(sh);
    var_release(hc);
    return st;
}

struct region_run {
    struct var *r, *c;
    tensor *grads[4]; /* w, b, x, r */
    int out_requires_grad[4];
};

/* Forward through impl with x, r (requires grad) and c (does not), losses
 * mse(y), mse(r'), mse(c'), mse(d), full backward; keeps copies of the
 * grads. */
static int run_region(struct fixture *f, const char *impl_name, struct region_state *rs, uint64_t seed,
                      struct region_run *run)
{
    const struct checkpoint_impl *impl = impl_find(impl_name);
    int64_t xs[2] = {4, HIDDEN};
    aten_rng_manual_seed(DEVICE_CPU, 99);
    run->r = random_leaf(2, xs, 1, "r");
    run->c = random_leaf(2, xs, 0, "c");
    var_zero_grad(f->seg.w);
    var_zero_grad(f->seg.b);
    var_zero_grad(f->x);
    struct segment_fn fn = {.call_region = region_call, .ctx = rs, .n_in = 3, .n_out = 4, .arg = {.scalar = 0.375}};
    struct var *in[3] = {f->x, run->r, run->c}, *out[4] = {0}, *loss[4] = {0}, *target = NULL;
    tensor *t;
    assert_int_equal(tensor_zeros(&t, DT_F32, 2, xs, DEVICE_CPU), ST_OK);
    assert_int_equal(var_constant(&target, t), ST_OK);
    aten_rng_manual_seed(DEVICE_CPU, seed);
    int st = impl->run(impl, &f->opts, &fn, in, out);
    for (int k = 0; k < 4 && !st; k++) {
        run->out_requires_grad[k] = out[k]->requires_grad;
        st = op_mse_loss(&loss[k], out[k], target);
    }
    if (!st)
        st = tape_backward(loss, NULL, 4);
    struct var *with_grads[4] = {f->seg.w, f->seg.b, f->x, run->r};
    for (int i = 0; i < 4 && !st; i++)
        run->grads[i] = with_grads[i]->grad ? clone_of(with_grads[i]->grad) : NULL;
    region_release(loss, 4);
    region_release(out, 4);
    var_release(target);
    return st;
}

static void region_run_free(struct region_run *run)
{
    for (int i = 0; i < 4; i++)
        tensor_free(run->grads[i]);
    var_release(run->r);
    var_release(run->c);
}

/* Each reference checkpoints the region with the plain run's gradients,
 * bitwise, for the parameters and both inputs that require grad; the input
 * that requires none gets none. */
static void expect_region_matches_plain(struct fixture *f, const char *impl_name)
{
    struct seg_state seg = f->seg;
    struct region_state plain_rs = {.seg = &seg}, rs = {.seg = &seg};
    struct region_run plain = {0}, ckpt = {0};
    assert_int_equal(run_region(f, "none", &plain_rs, 31, &plain), ST_OK);
    assert_int_equal(run_region(f, impl_name, &rs, 31, &ckpt), ST_OK);
    for (int i = 0; i < 4; i++) {
        assert_non_null(ckpt.grads[i]);
        assert_true(tensor_bitwise_equal(ckpt.grads[i], plain.grads[i]));
    }
    assert_null(ckpt.c->grad);
    assert_int_equal(f->stats.recomputes, 1);
    region_run_free(&plain);
    region_run_free(&ckpt);
}

static void test_reentrant_region_of_three_tensors_matches_plain_bitwise(void **state)
{
    expect_region_matches_plain(*state, "reentrant");
}

static void test_nonreentrant_region_of_three_tensors_matches_plain_bitwise(void **state)
{
    expect_region_matches_plain(*state, "nonreentrant");
}

static void test_selective_region_of_three_tensors_matches_plain_bitwise(void **state)
{
    struct fixture *f = *state;
    f->opts.policy = POLICY_BIT(POP_LINEAR);
    expect_region_matches_plain(f, "selective");
}

/* The outputs computed under no_grad or detached stay constants under
 * non-reentrant, as in the plain run; reentrant's outputs are all its
 * node's, as a custom Function's are in PyTorch (the gradients reaching
 * those two are dropped). */
static void test_region_outputs_made_under_no_grad_or_detached_need_no_grad_but_under_reentrant(void **state)
{
    struct fixture *f = *state;
    struct region_state rs = {.seg = &f->seg};
    const char *impls[3] = {"none", "nonreentrant", "reentrant"};
    for (int i = 0; i < 3; i++) {
        struct region_run run = {0};
        assert_int_equal(run_region(f, impls[i], &rs, 5, &run), ST_OK);
        assert_true(run.out_requires_grad[0] && run.out_requires_grad[1]);
        assert_int_equal(run.out_requires_grad[2], i == 2);
        assert_int_equal(run.out_requires_grad[3], i == 2);
        region_run_free(&run);
    }
}

/* The non-tensor argument reaches the forward and the recompute unchanged. */
static void test_region_non_tensor_argument_reaches_the_recompute(void **state)
{
    struct fixture *f = *state;
    const char *impls[2] = {"reentrant", "nonreentrant"};
    for (int i = 0; i < 2; i++) {
        struct region_state rs = {.seg = &f->seg};
        struct region_run run = {0};
        assert_int_equal(run_region(f, impls[i], &rs, 5, &run), ST_OK);
        assert_int_equal(rs.calls, 2);
        assert_true(rs.args_seen[0] == 0.375 && rs.args_seen[1] == 0.375);
        region_run_free(&run);
    }
}

/* Reentrant needs some output that requires grad in the recompute to
 * backward from; a region whose outputs all come from no_grad is refused. */
static int all_no_grad_region(void *ctx, struct var *const *in, const struct region_arg *arg, struct var **out)
{
    (void)ctx;
    (void)arg;
    int grad = grad_mode_set(0);
    int st = op_gelu(&out[0], in[0], 1);
    if (!st)
        st = op_gelu(&out[1], in[1], 1);
    grad_mode_set(grad);
    return st;
}

static void test_reentrant_refuses_a_region_with_no_output_that_requires_grad(void **state)
{
    struct fixture *f = *state;
    const struct checkpoint_impl *impl = impl_find("reentrant");
    struct segment_fn fn = {.call_region = all_no_grad_region, .n_in = 2, .n_out = 2};
    struct var *in[2] = {f->x, f->x}, *out[2] = {0}, *loss = NULL, *sum = NULL;
    assert_int_equal(impl->run(impl, &f->opts, &fn, in, out), ST_OK);
    assert_int_equal(op_add(&sum, out[0], out[1]), ST_OK);
    assert_int_equal(op_mse_loss(&loss, sum, out[0]), ST_OK);
    assert_int_equal(tape_backward(&loss, NULL, 1), ST_RUN);
    assert_non_null(strstr(error_message(), "no output of the segment requires grad"));
    var_release(loss);
    var_release(sum);
    region_release(out, 2);
}

/* ---- a region that no input gradient reaches ---------------------------------------- */

/* y = seg(detach(x)): the segment cuts its input from the graph, so x
 * requires grad and no gradient reaches it; the parameters get theirs. */
static int detached_input_call(void *ctx, struct var *in, struct var **out)
{
    struct var *cut = NULL;
    int st = var_detach(&cut, in, 0);
    if (!st)
        st = seg_call(ctx, cut, out);
    var_release(cut);
    return st;
}

/* Every reference checkpoints such a region as the plain run trains it:
 * the parameters' gradients bitwise, and none for x, as in PyTorch (an
 * accumulate-grad node reached by no gradient leaves its leaf alone). */
static void test_every_reference_meets_a_region_no_input_gradient_reaches_as_the_plain_run_does(void **state)
{
    struct fixture *f = *state;
    const char *impls[3] = {"reentrant", "nonreentrant", "selective"};
    f->opts.policy = POLICY_BIT(POP_LINEAR);
    aten_rng_manual_seed(DEVICE_CPU, 23);
    assert_int_equal(run_segment(f, "none", segment_of(detached_input_call, &f->seg), NULL), ST_OK);
    assert_null(f->x->grad);
    tensor *w = clone_of(f->seg.w->grad), *b = clone_of(f->seg.b->grad);
    for (int i = 0; i < 3; i++) {
        aten_rng_manual_seed(DEVICE_CPU, 23);
        int st = run_segment(f, impls[i], segment_of(detached_input_call, &f->seg), NULL);
        if (st)
            fail_msg("%s: %s", impls[i], error_message());
        assert_true(tensor_bitwise_equal(f->seg.w->grad, w));
        assert_true(tensor_bitwise_equal(f->seg.b->grad, b));
        assert_null(f->x->grad);
    }
    tensor_free(w);
    tensor_free(b);
}

/* ---- nested checkpoints ------------------------------------------------------------ */

/* One level of checkpoint(lambda x: checkpoint(...)): the level's function
 * checkpoints the next level with the same impl; the last runs the segment.
 * Levels live as long as the graph: recompute calls them in backward. */
struct nest_level {
    struct fixture *f;
    const struct checkpoint_impl *impl;
    struct nest_level *inner; /* NULL: run seg_call */
};

static int nested_call(void *ctx, struct var *in, struct var **out)
{
    struct nest_level *l = ctx;
    if (!l->inner)
        return seg_call(&l->f->seg, in, out);
    struct segment_fn fn = segment_of(nested_call, l->inner);
    return l->impl->run(l->impl, &l->f->opts, &fn, &in, out);
}

/* Three checkpoints of impl_name, one inside the other, against the plain
 * run; *forwards: checkpoint forwards run (recomputes included). Returns
 * the recomputes they made. */
static int nested_three_deep_matches_plain(struct fixture *f, const char *impl_name, int *forwards)
{
    tensor *ref[3];
    reference_grads(f, 41, ref);
    const struct checkpoint_impl *impl = impl_find(impl_name);
    struct nest_level levels[3] = {{f, impl, &levels[1]}, {f, impl, &levels[2]}, {f, impl, NULL}};
    aten_rng_manual_seed(DEVICE_CPU, 41);
    assert_int_equal(run_segment(f, impl_name, segment_of(nested_call, &levels[0]), NULL), ST_OK);
    assert_same_grads(f, ref);
    free3(ref);
    *forwards = f->stats.checkpoints;
    return f->stats.recomputes;
}

/* Reentrant inside reentrant works through the nested backward: the outer
 * recompute runs the inner checkpoints' forwards again, and the node of the
 * next one recomputes in its turn — one recompute per level, and 3 + 2 + 1
 * checkpoint forwards. */
static void test_reentrant_nested_three_deep_matches_plain_recomputing_once_per_level(void **state)
{
    int forwards;
    assert_int_equal(nested_three_deep_matches_plain(*state, "reentrant", &forwards), 3);
    assert_int_equal(forwards, 6);
}

/* Non-reentrant, PyTorch's nesting: only the innermost saved-tensor hook
 * applies, so the innermost frame holds the segment's saved tensors; each
 * inner checkpoint saved its inputs through the enclosing one's hook. The
 * innermost recompute unpacks its input, which recomputes the enclosing
 * checkpoint — whose recompute re-runs the inner checkpoint's forward only
 * up to its input save (early stop, before that forward counts) — and so
 * on outward: one recompute per level, 3 checkpoint forwards. */
static void test_nonreentrant_nested_three_deep_matches_plain_recomputing_each_level_from_the_inside(void **state)
{
    int forwards;
    assert_int_equal(nested_three_deep_matches_plain(*state, "nonreentrant", &forwards), 3);
    assert_int_equal(forwards, 3);
}

/* The case loader's list of the impls that take a policy (policy.c) and
 * the registry agree: exactly the impls that run selective. */
static void test_policy_impls_are_the_registry_selective_impls(void **state)
{
    (void)state;
    int n = 0;
    for (const struct checkpoint_impl *const *i = impl_all(); *i; i++) {
        int selective = (*i)->run == impl_run_selective;
        assert_int_equal(policy_impl_uses_policy((*i)->name), selective);
        n += selective;
    }
    assert_int_equal(n, 6);
}

#define FIXTURE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* The case loader's default expectation (PASS|NOISE for a reference,
 * FAIL|MEMFAIL for a planted bug) must follow the registry's is_reference. */
static void test_default_expectation_follows_the_registry(void **state)
{
    (void)state;
    struct ckpt_case c;
    memset(&c, 0, sizeof c);
    const unsigned caught = (1u << V_FAIL) | (1u << V_MEMFAIL);
    int references = 0;
    for (const struct checkpoint_impl *const *i = impl_all(); *i; i++) {
        unsigned mask = case_expected_mask(&c, (*i)->name);
        if ((*i)->is_reference) {
            references++;
            assert_true(mask & (1u << V_PASS));
            assert_false(mask & caught);
        } else {
            assert_true(mask & (1u << V_FAIL));
            assert_false(mask & (1u << V_PASS));
        }
    }
    assert_int_equal(references, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_selective_keeping_linear_replays_dropout_and_matches_plain_bitwise),
        FIXTURE_TEST(test_selective_keeping_every_op_never_recomputes),
        FIXTURE_TEST(test_reentrant_refuses_an_input_changed_in_place_after_forward),
        FIXTURE_TEST(test_nonreentrant_refuses_an_input_changed_in_place_after_forward),
        FIXTURE_TEST(test_reentrant_region_of_three_tensors_matches_plain_bitwise),
        FIXTURE_TEST(test_nonreentrant_region_of_three_tensors_matches_plain_bitwise),
        FIXTURE_TEST(test_selective_region_of_three_tensors_matches_plain_bitwise),
        FIXTURE_TEST(test_region_outputs_made_under_no_grad_or_detached_need_no_grad_but_under_reentrant),
        FIXTURE_TEST(test_region_non_tensor_argument_reaches_the_recompute),
        FIXTURE_TEST(test_reentrant_refuses_a_region_with_no_output_that_requires_grad),
        FIXTURE_TEST(test_every_reference_meets_a_region_no_input_gradient_reaches_as_the_plain_run_does),
        FIXTURE_TEST(test_reentrant_nested_three_deep_matches_plain_recomputing_once_per_level),
        FIXTURE_TEST(test_nonreentrant_nested_three_deep_matches_plain_recomputing_each_level_from_the_inside),
        FIXTURE_TEST(test_selective_refuses_a_cached_tensor_changed_in_place_after_forward),
        cmocka_unit_test(test_policy_impls_are_the_registry_selective_impls),
        cmocka_unit_test(test_device_set_puts_cpu_first_then_args_then_current),
        cmocka_unit_test(test_device_set_args_only_leaves_out_the_current_device),
        cmocka_unit_test(test_device_set_deduplicates_and_always_has_cpu),
        cmocka_unit_test(test_unstashed_devices_are_those_the_policy_leaves_out),
        cmocka_unit_test(test_first_changed_names_the_generator_that_drew),
        cmocka_unit_test(test_default_expectation_follows_the_registry),
        FIXTURE_TEST(test_reentrant_replays_dropout_and_matches_plain_bitwise),
        FIXTURE_TEST(test_nonreentrant_replays_dropout_and_matches_plain_bitwise),
        FIXTURE_TEST(test_reentrant_recompute_leaves_the_rng_stream_untouched),
        FIXTURE_TEST(test_nonreentrant_recompute_leaves_the_rng_stream_untouched),
        FIXTURE_TEST(test_without_preserve_rng_state_recompute_draws_a_new_mask),
        FIXTURE_TEST(test_reentrant_refuses_a_partial_backward),
        FIXTURE_TEST(test_reentrant_warns_and_gives_no_param_grads_when_no_input_requires_grad),
        FIXTURE_TEST(test_nonreentrant_gives_param_grads_when_no_input_requires_grad),
        FIXTURE_TEST(test_nonreentrant_recomputes_once_for_all_unpacks),
        FIXTURE_TEST(test_nonreentrant_recompute_stops_after_the_last_saved_tensor),
        FIXTURE_TEST(test_nonreentrant_reports_recomputed_dtype_mismatch),
        FIXTURE_TEST(test_verify_values_names_the_first_recomputed_tensor_that_differs),
        FIXTURE_TEST(test_nonreentrant_reports_a_recomputed_shape_mismatch_with_the_op_log),
        FIXTURE_TEST(test_nonreentrant_reports_a_recomputed_tensor_on_another_device),
        FIXTURE_TEST(test_nonreentrant_reports_a_saved_tensor_unpacked_twice_in_one_backward),
        FIXTURE_TEST(test_nonreentrant_reports_fewer_tensors_recomputed_than_saved),
        FIXTURE_TEST(test_more_tensors_recomputed_than_saved_fire_only_without_early_stop),
        FIXTURE_TEST(test_without_early_stop_the_recompute_runs_to_the_end),
        FIXTURE_TEST(test_determinism_check_none_skips_the_metadata_check),
        FIXTURE_TEST(test_reentrant_impls_refuse_the_value_check),
        FIXTURE_TEST(test_reentrant_refuses_a_recompute_whose_output_needs_no_grad),
        FIXTURE_TEST(test_reentrant_recompute_context_sees_only_segment_inputs_and_params),
        FIXTURE_TEST(test_nonreentrant_recompute_context_sees_only_segment_inputs_and_params),
        FIXTURE_TEST(test_forward_context_wraps_the_original_forward_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
