/* The reference checkpoints on regions: several tensors in and out, a
 * non-tensor argument, outputs that need no grad, a region no input
 * gradient reaches, checkpoints nested three deep, and the registry's
 * selective impls and default expectations. Shares impls_fixture with
 * test_impls.c. */
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
        FIXTURE_TEST(test_reentrant_region_of_three_tensors_matches_plain_bitwise),
        FIXTURE_TEST(test_nonreentrant_region_of_three_tensors_matches_plain_bitwise),
        FIXTURE_TEST(test_selective_region_of_three_tensors_matches_plain_bitwise),
        FIXTURE_TEST(test_region_outputs_made_under_no_grad_or_detached_need_no_grad_but_under_reentrant),
        FIXTURE_TEST(test_region_non_tensor_argument_reaches_the_recompute),
        FIXTURE_TEST(test_reentrant_refuses_a_region_with_no_output_that_requires_grad),
        FIXTURE_TEST(test_every_reference_meets_a_region_no_input_gradient_reaches_as_the_plain_run_does),
        FIXTURE_TEST(test_reentrant_nested_three_deep_matches_plain_recomputing_once_per_level),
        FIXTURE_TEST(test_nonreentrant_nested_three_deep_matches_plain_recomputing_each_level_from_the_inside),
        cmocka_unit_test(test_policy_impls_are_the_registry_selective_impls),
        cmocka_unit_test(test_default_expectation_follows_the_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
