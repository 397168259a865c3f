/* The reference checkpoints, one region of one tensor: RNG device sets,
 * replay under a forked RNG, reentrant's partial-backward refusal and
 * no-grad warning, non-reentrant's single recompute, early stop, metadata
 * and value checks, the context hooks that mark exactly the tensors
 * entering a recompute, selective's cache and the version counter.
 * Regions of several tensors, nesting and the registry: test_impls_regions.c. */
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

#include "impls_fixture.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_selective_keeping_linear_replays_dropout_and_matches_plain_bitwise),
        FIXTURE_TEST(test_selective_keeping_every_op_never_recomputes),
        FIXTURE_TEST(test_reentrant_refuses_an_input_changed_in_place_after_forward),
        FIXTURE_TEST(test_nonreentrant_refuses_an_input_changed_in_place_after_forward),
        FIXTURE_TEST(test_selective_refuses_a_cached_tensor_changed_in_place_after_forward),
        cmocka_unit_test(test_device_set_puts_cpu_first_then_args_then_current),
        cmocka_unit_test(test_device_set_args_only_leaves_out_the_current_device),
        cmocka_unit_test(test_device_set_deduplicates_and_always_has_cpu),
        cmocka_unit_test(test_unstashed_devices_are_those_the_policy_leaves_out),
        cmocka_unit_test(test_first_changed_names_the_generator_that_drew),
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
