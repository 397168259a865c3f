/* The tape's backward API in the image of PyTorch's: autograd.grad,
 * backward(inputs=), retain_graph, gradient hooks on leaves; the reference
 * checkpoints under each call, the runner's step backward and hook counts,
 * and the two planted bugs that the hook and leak checks exist for. */
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
#include "error.h"
#include "impl.h"
#include "ops.h"
#include "step_backward.h"
#include "tape.h"
#include "test_support.h"

#define HIDDEN 8

static struct var *randn_leaf(int ndim, const int64_t *shape, int requires_grad, const char *name)
{
    tensor *t;
    assert_ok(tensor_randn(&t, DT_F32, ndim, shape, DEVICE_CPU, 0.5));
    struct var *v;
    assert_ok(var_leaf(&v, t, requires_grad, name));
    return v;
}

/* A layer's worth of graph: loss = mean((gelu(x·Wᵀ + b))²), as a var. */
struct layer {
    struct var *w, *b, *x;
};

static int layer_call(void *ctx, struct var *in, struct var **out)
{
    struct layer *l = ctx;
    struct var *y = NULL;
    int st = op_linear(&y, in, l->w, l->b);
    if (!st)
        st = op_gelu(out, y, 1);
    var_release(y);
    return st;
}

static struct var *loss_of(struct var *h)
{
    struct var *loss = NULL;
    assert_ok(op_mse_loss(&loss, h, h));
    return loss;
}

static int setup(void **state)
{
    aten_init();
    grad_mode_set(1);
    aten_rng_manual_seed(DEVICE_CPU, 11);
    struct layer *l = calloc(1, sizeof *l);
    int64_t ws[2] = {HIDDEN, HIDDEN}, bs[1] = {HIDDEN}, xs[2] = {4, HIDDEN};
    l->w = randn_leaf(2, ws, 1, "w");
    l->b = randn_leaf(1, bs, 1, "b");
    l->x = randn_leaf(2, xs, 1, "x");
    *state = l;
    return 0;
}

static int teardown(void **state)
{
    struct layer *l = *state;
    var_release(l->w);
    var_release(l->b);
    var_release(l->x);
    free(l);
    return 0;
}

static void zero_grads(struct layer *l)
{
    var_zero_grad(l->w);
    var_zero_grad(l->b);
    var_zero_grad(l->x);
}

/* loss of the layer through impl ("none" runs it plainly); a target of
 * zeros makes the mse a mean of squares. */
static struct var *forward(struct layer *l, const char *impl_name, struct impl_stats *stats)
{
    const struct checkpoint_impl *impl = impl_find(impl_name);
    struct impl_options opts = {.preserve_rng_state = 1, .rng_devices = RNG_ARGS_AND_CURRENT,
                                .current_device = DEVICE_CPU, .stats = stats};
    struct segment_fn fn = {.call = layer_call, .ctx = l};
    struct var *h = NULL, *target = NULL, *loss = NULL;
    tensor *z;
    assert_ok(impl->run(impl, &opts, &fn, &l->x, &h));
    assert_ok(tensor_zeros_like(&z, h->data));
    assert_ok(var_constant(&target, z));
    assert_ok(op_mse_loss(&loss, h, target));
    var_release(h);
    var_release(target);
    return loss;
}

static tensor *clone_of(const tensor *t)
{
    tensor *c;
    assert_ok(tensor_clone(&c, t));
    return c;
}

/* The gradients of w, b, x from a plain loss.backward(). */
static void plain_grads(struct layer *l, tensor *out[3])
{
    zero_grads(l);
    struct var *loss = forward(l, "none", NULL);
    assert_ok(tape_backward(&loss, NULL, 1));
    var_release(loss);
    out[0] = clone_of(l->w->grad);
    out[1] = clone_of(l->b->grad);
    out[2] = clone_of(l->x->grad);
    zero_grads(l);
}

static void free3(tensor *t[3])
{
    for (int i = 0; i < 3; i++)
        tensor_free(t[i]);
}

/* ---- the engine -------------------------------------------------------------- */

static void test_grad_returns_the_inputs_gradients_and_accumulates_nothing(void **state)
{
    struct layer *l = *state;
    tensor *want[3], *got[2];
    plain_grads(l, want);
    struct var *loss = forward(l, "none", NULL), *inputs[2] = {l->w, l->x};
    struct backward_options plain = {0};
    assert_ok(tape_grad_with(&loss, NULL, 1, inputs, 2, got, &plain));
    assert_true(tensor_bitwise_equal(got[0], want[0]));
    assert_true(tensor_bitwise_equal(got[1], want[2]));
    assert_null(l->w->grad);
    assert_null(l->b->grad);
    assert_null(l->x->grad);
    tensor_free(got[0]);
    tensor_free(got[1]);
    var_release(loss);
    free3(want);
}

static void test_backward_with_inputs_accumulates_only_into_the_listed_leaves(void **state)
{
    struct layer *l = *state;
    tensor *want[3];
    plain_grads(l, want);
    struct var *loss = forward(l, "none", NULL), *inputs[1] = {l->b};
    struct backward_options o = {.inputs = inputs, .n_inputs = 1};
    assert_ok(tape_backward_with(&loss, NULL, 1, &o));
    assert_true(tensor_bitwise_equal(l->b->grad, want[1]));
    assert_null(l->w->grad);
    assert_null(l->x->grad);
    var_release(loss);
    free3(want);
    zero_grads(l);
}

static int partial_seen;
static int partial_probe(struct node *n, tensor *const *g, tensor **gi)
{
    (void)n;
    partial_seen = tape_engine_is_partial();
    return tensor_share(&gi[0], g[0]);
}

static void test_backward_with_inputs_is_a_partial_pass_as_grad_is(void **state)
{
    struct layer *l = *state;
    struct var *in = l->b, *y;
    struct node *n;
    tensor *copy;
    assert_ok(node_create(&n, "probe", partial_probe, &in, 1, 1));
    assert_ok(tensor_clone(&copy, in->data));
    assert_ok(var_from_op(&y, copy, n, 0));
    node_release(n);
    tensor *ones;
    assert_ok(tensor_full(&ones, DT_F32, 1, (int64_t[]){HIDDEN}, DEVICE_CPU, 1.0));
    struct backward_options o = {.inputs = &in, .n_inputs = 1, .retain_graph = 1};
    partial_seen = -1;
    assert_ok(tape_backward_with(&y, &ones, 1, &o));
    assert_int_equal(partial_seen, 1);
    struct backward_options full = {0};
    assert_ok(tape_backward_with(&y, &ones, 1, &full));
    assert_int_equal(partial_seen, 0);
    tensor_free(ones);
    var_release(y);
    zero_grads(l);
}

static void test_backward_with_inputs_refuses_an_input_that_is_not_a_leaf(void **state)
{
    struct layer *l = *state;
    struct var *h = NULL;
    assert_ok(layer_call(l, l->x, &h));
    struct var *loss = loss_of(h);
    struct backward_options o = {.inputs = &h, .n_inputs = 1};
    assert_int_equal(tape_backward_with(&loss, NULL, 1, &o), ST_INTERNAL);
    assert_non_null(strstr(error_message(), "is not a leaf"));
    var_release(loss);
    var_release(h);
}

static void test_retain_graph_lets_a_graph_be_backwarded_again_and_gradients_sum(void **state)
{
    struct layer *l = *state;
    tensor *want[3], *twice;
    plain_grads(l, want);
    struct var *loss = forward(l, "none", NULL);
    struct backward_options retain = {.retain_graph = 1};
    assert_ok(tape_backward_with(&loss, NULL, 1, &retain));
    assert_ok(tape_backward(&loss, NULL, 1));
    assert_ok(tensor_add(&twice, want[0], want[0]));
    assert_true(tensor_bitwise_equal(l->w->grad, twice));
    /* the second call freed the saved tensors: a third one is an error */
    assert_int_equal(tape_backward(&loss, NULL, 1), ST_INTERNAL);
    assert_non_null(strstr(error_message(), "already freed"));
    tensor_free(twice);
    var_release(loss);
    free3(want);
    zero_grads(l);
}

static void test_grad_with_retain_graph_leaves_the_graph_for_a_backward(void **state)
{
    struct layer *l = *state;
    tensor *want[3], *got;
    plain_grads(l, want);
    struct var *loss = forward(l, "none", NULL);
    struct backward_options retain = {.retain_graph = 1};
    assert_ok(tape_grad_with(&loss, NULL, 1, &l->w, 1, &got, &retain));
    assert_ok(tape_backward(&loss, NULL, 1));
    assert_true(tensor_bitwise_equal(got, want[0]));
    assert_true(tensor_bitwise_equal(l->w->grad, want[0]));
    tensor_free(got);
    var_release(loss);
    free3(want);
    zero_grads(l);
}

/* ---- gradient hooks ------------------------------------------------------------ */

struct hook_log {
    int fires;
    int grad_was_set; /* the leaf's ->grad already held something when it fired */
    tensor *last;
};

static void log_hook(void *ctx, struct var *leaf, const tensor *grad)
{
    struct hook_log *h = ctx;
    h->fires++;
    h->grad_was_set = leaf->grad != NULL;
    tensor_free(h->last);
    assert_ok(tensor_clone(&h->last, grad));
}

static void test_hook_fires_once_per_backward_with_the_gradient_before_it_accumulates(void **state)
{
    struct layer *l = *state;
    tensor *want[3];
    plain_grads(l, want);
    struct hook_log log = {0};
    assert_ok(var_register_hook(l->w, log_hook, &log));
    struct var *loss = forward(l, "none", NULL);
    assert_ok(tape_backward(&loss, NULL, 1));
    assert_int_equal(log.fires, 1);
    assert_false(log.grad_was_set);
    assert_true(tensor_bitwise_equal(log.last, want[0]));
    var_release(loss);
    tensor_free(log.last);
    free3(want);
    zero_grads(l);
}

static void test_hook_fires_for_a_leaf_grad_captures_and_not_for_one_it_leaves_out(void **state)
{
    struct layer *l = *state;
    struct hook_log on_w = {0}, on_b = {0};
    assert_ok(var_register_hook(l->w, log_hook, &on_w));
    assert_ok(var_register_hook(l->b, log_hook, &on_b));
    struct var *loss = forward(l, "none", NULL);
    tensor *g;
    struct backward_options retain = {.retain_graph = 1};
    assert_ok(tape_grad_with(&loss, NULL, 1, &l->w, 1, &g, &retain));
    assert_int_equal(on_w.fires, 1);
    assert_int_equal(on_b.fires, 0);
    assert_true(tensor_bitwise_equal(on_w.last, g));
    struct backward_options only_b = {.inputs = &l->b, .n_inputs = 1};
    assert_ok(tape_backward_with(&loss, NULL, 1, &only_b));
    assert_int_equal(on_w.fires, 1);
    assert_int_equal(on_b.fires, 1);
    tensor_free(g);
    tensor_free(on_w.last);
    tensor_free(on_b.last);
    var_release(loss);
    zero_grads(l);
}

static void test_hook_on_an_ops_output_is_refused(void **state)
{
    struct layer *l = *state;
    struct var *h = NULL;
    struct hook_log log = {0};
    assert_ok(layer_call(l, l->x, &h));
    assert_int_equal(var_register_hook(h, log_hook, &log), ST_INTERNAL);
    var_release(h);
}

/* ---- checkpoints under each call ------------------------------------------------ */

static void test_nonreentrant_matches_plain_under_grad_and_backward_inputs(void **state)
{
    struct layer *l = *state;
    tensor *want[3], *got[3];
    plain_grads(l, want);
    struct var *loss = forward(l, "nonreentrant", NULL), *inputs[3] = {l->w, l->b, l->x};
    struct backward_options plain = {0};
    assert_ok(tape_grad_with(&loss, NULL, 1, inputs, 3, got, &plain));
    for (int i = 0; i < 3; i++)
        assert_true(tensor_bitwise_equal(got[i], want[i]));
    assert_null(l->w->grad);
    var_release(loss);
    free3(got);
    loss = forward(l, "nonreentrant", NULL);
    struct backward_options only = {.inputs = inputs, .n_inputs = 2};
    assert_ok(tape_backward_with(&loss, NULL, 1, &only));
    assert_true(tensor_bitwise_equal(l->w->grad, want[0]));
    assert_true(tensor_bitwise_equal(l->b->grad, want[1]));
    assert_null(l->x->grad);
    var_release(loss);
    free3(want);
    zero_grads(l);
}

/* PyTorch's non-reentrant checkpoint recomputes once per graph task: the
 * second backward of a retained graph recomputes again. */
static void test_nonreentrant_recomputes_again_on_the_second_backward_of_a_retained_graph(void **state)
{
    struct layer *l = *state;
    tensor *want[3], *twice;
    plain_grads(l, want);
    struct impl_stats stats = {0};
    struct var *loss = forward(l, "nonreentrant", &stats);
    struct backward_options retain = {.retain_graph = 1};
    assert_ok(tape_backward_with(&loss, NULL, 1, &retain));
    assert_int_equal(stats.recomputes, 1);
    assert_true(tensor_bitwise_equal(l->w->grad, want[0]));
    assert_ok(tape_backward(&loss, NULL, 1));
    assert_int_equal(stats.recomputes, 2);
    assert_ok(tensor_add(&twice, want[0], want[0]));
    assert_true(tensor_bitwise_equal(l->w->grad, twice));
    tensor_free(twice);
    var_release(loss);
    free3(want);
    zero_grads(l);
}

static void test_reentrant_refuses_backward_with_inputs(void **state)
{
    struct layer *l = *state;
    struct var *loss = forward(l, "reentrant", NULL), *inputs[1] = {l->w};
    struct backward_options o = {.inputs = inputs, .n_inputs = 1};
    assert_int_equal(tape_backward_with(&loss, NULL, 1, &o), ST_RUN);
    assert_non_null(strstr(error_message(), "not compatible with grad() or backward(inputs=...)"));
    var_release(loss);
    zero_grads(l);
}

static void test_reentrant_survives_a_second_backward_of_a_retained_graph(void **state)
{
    struct layer *l = *state;
    tensor *want[3], *twice;
    plain_grads(l, want);
    struct var *loss = forward(l, "reentrant", NULL);
    struct backward_options retain = {.retain_graph = 1};
    assert_ok(tape_backward_with(&loss, NULL, 1, &retain));
    assert_ok(tape_backward(&loss, NULL, 1));
    assert_ok(tensor_add(&twice, want[1], want[1]));
    assert_true(tensor_bitwise_equal(l->b->grad, twice));
    tensor_free(twice);
    var_release(loss);
    free3(want);
    zero_grads(l);
}

/* ---- the runner's step backward and its hook counts ------------------------------ */

static void test_step_backward_counts_each_hook_per_call_and_twice_makes_two_calls(void **state)
{
    struct layer *l = *state;
    struct var *params[2] = {l->w, l->b};
    struct hook_counts h;
    assert_ok(hook_counts_init(&h, params, 2, 1, BACKWARD_TWICE));
    struct var *loss = forward(l, "nonreentrant", NULL);
    assert_ok(step_backward(BACKWARD_TWICE, loss, params, 2, l->x, &h, 1));
    /* [step 1][call 1..2][w, b] */
    for (int k = 0; k < 4; k++)
        assert_int_equal(h.fires[k], 1);
    struct run_record rec;
    run_record_init(&rec, "r");
    assert_ok(hook_counts_record(&h, &rec));
    const struct run_tensor *t = run_record_find(&rec, "checks/hook_fires/w");
    assert_non_null(t);
    assert_int_equal(t->t.dtype, DT_I64);
    assert_int_equal(t->t.shape[0], 1);
    assert_int_equal(t->t.shape[1], 2);
    run_record_free(&rec);
    var_release(loss);
    hook_counts_free(&h);
    zero_grads(l);
}

static void test_step_backward_by_grad_sets_each_leafs_grad(void **state)
{
    struct layer *l = *state;
    tensor *want[3];
    plain_grads(l, want);
    struct var *params[2] = {l->w, l->b};
    struct var *loss = forward(l, "selective", NULL);
    assert_ok(step_backward(BACKWARD_GRAD, loss, params, 2, l->x, NULL, 1));
    for (int i = 0; i < 3; i++)
        assert_true(tensor_bitwise_equal((i == 0 ? l->w : i == 1 ? l->b : l->x)->grad, want[i]));
    var_release(loss);
    free3(want);
    zero_grads(l);
}

/* ---- the planted bugs these checks exist for ------------------------------------- */

static void test_hook_fires_twice_fires_each_segment_parameter_twice_with_right_gradients(void **state)
{
    struct layer *l = *state;
    tensor *want[3];
    plain_grads(l, want);
    struct var *params[2] = {l->w, l->b};
    struct hook_counts h;
    assert_ok(hook_counts_init(&h, params, 2, 1, BACKWARD_LOSS));
    struct var *loss = forward(l, "hook_fires_twice", NULL);
    assert_ok(step_backward(BACKWARD_LOSS, loss, params, 2, l->x, &h, 1));
    assert_int_equal(h.fires[0], 2);
    assert_int_equal(h.fires[1], 2);
    /* halving is exact: the gradients alone cannot tell */
    for (int i = 0; i < 3; i++)
        assert_true(tensor_bitwise_equal((i == 0 ? l->w : i == 1 ? l->b : l->x)->grad, want[i]));
    var_release(loss);
    hook_counts_free(&h);
    free3(want);
    zero_grads(l);
}

static int64_t live_bytes(void)
{
    struct mem_stats m;
    assert_ok(aten_mem_stats(DEVICE_CPU, &m));
    return m.live_bytes;
}

static void test_leaked_recompute_frame_keeps_its_tensors_until_the_run_releases_them(void **state)
{
    struct layer *l = *state;
    int64_t before = live_bytes();
    struct impl_stats stats = {0};
    struct var *loss = forward(l, "leaked_recompute_frame", &stats);
    assert_ok(tape_backward(&loss, NULL, 1));
    var_release(loss);
    zero_grads(l);
    assert_non_null(stats.held);
    assert_true(live_bytes() > before);
    impl_stats_release_held(&stats);
    assert_null(stats.held);
    assert_int_equal(live_bytes(), before);
}

static void test_the_reference_nonreentrant_leaves_nothing_after_backward(void **state)
{
    struct layer *l = *state;
    int64_t before = live_bytes();
    struct impl_stats stats = {0};
    struct var *loss = forward(l, "nonreentrant", &stats);
    assert_ok(tape_backward(&loss, NULL, 1));
    var_release(loss);
    zero_grads(l);
    assert_null(stats.held);
    assert_int_equal(live_bytes(), before);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_grad_returns_the_inputs_gradients_and_accumulates_nothing),
        T(test_backward_with_inputs_accumulates_only_into_the_listed_leaves),
        T(test_backward_with_inputs_is_a_partial_pass_as_grad_is),
        T(test_backward_with_inputs_refuses_an_input_that_is_not_a_leaf),
        T(test_retain_graph_lets_a_graph_be_backwarded_again_and_gradients_sum),
        T(test_grad_with_retain_graph_leaves_the_graph_for_a_backward),
        T(test_hook_fires_once_per_backward_with_the_gradient_before_it_accumulates),
        T(test_hook_fires_for_a_leaf_grad_captures_and_not_for_one_it_leaves_out),
        T(test_hook_on_an_ops_output_is_refused),
        T(test_nonreentrant_matches_plain_under_grad_and_backward_inputs),
        T(test_nonreentrant_recomputes_again_on_the_second_backward_of_a_retained_graph),
        T(test_reentrant_refuses_backward_with_inputs),
        T(test_reentrant_survives_a_second_backward_of_a_retained_graph),
        T(test_step_backward_counts_each_hook_per_call_and_twice_makes_two_calls),
        T(test_step_backward_by_grad_sets_each_leafs_grad),
        T(test_hook_fires_twice_fires_each_segment_parameter_twice_with_right_gradients),
        T(test_leaked_recompute_frame_keeps_its_tensors_until_the_run_releases_them),
        T(test_the_reference_nonreentrant_leaves_nothing_after_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
