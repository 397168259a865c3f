/* The autograd tape: grad mode, the saved-tensor hook stack, the engine's
 * order and accumulation, nested and partial backward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "error.h"
#include "ops.h"
#include "tape.h"

static struct var *leaf_of(double value, int64_t n, int requires_grad)
{
    tensor *t;
    assert_int_equal(tensor_full(&t, DT_F32, 1, &n, DEVICE_CPU, value), ST_OK);
    struct var *v;
    assert_int_equal(var_leaf(&v, t, requires_grad, "leaf"), ST_OK);
    return v;
}

static struct var *randn_leaf(int ndim, const int64_t *shape, int requires_grad)
{
    tensor *t;
    assert_int_equal(tensor_randn(&t, DT_F32, ndim, shape, DEVICE_CPU, 1.0), ST_OK);
    struct var *v;
    assert_int_equal(var_leaf(&v, t, requires_grad, "leaf"), ST_OK);
    return v;
}

static int setup(void **state)
{
    (void)state;
    aten_init();
    grad_mode_set(1);
    return 0;
}

static void test_grad_mode_off_records_no_node(void **state)
{
    (void)state;
    struct var *a = leaf_of(1.0, 4, 1), *b = leaf_of(2.0, 4, 1), *y;
    int previous = grad_mode_set(0);
    assert_int_equal(previous, 1);
    assert_int_equal(op_add(&y, a, b), ST_OK);
    assert_null(y->grad_fn);
    assert_false(y->requires_grad);
    assert_int_equal(grad_mode_set(previous), 0);
    var_release(y);
    assert_int_equal(op_add(&y, a, b), ST_OK);
    assert_non_null(y->grad_fn);
    assert_true(y->requires_grad);
    var_release(y);
    var_release(a);
    var_release(b);
}

/* PyTorch's version counter: a tensor the tape keeps for backward that is
 * changed in place afterwards is refused when backward unpacks it, naming
 * the op, the saved tensor and both versions. */
static void test_saved_tensor_changed_in_place_is_refused_at_backward(void **state)
{
    (void)state;
    struct var *x = leaf_of(0.5, 8, 1), *y;
    assert_int_equal(op_gelu(&y, x, 1), ST_OK);
    long long saved = (long long)tensor_version(x->data);
    assert_int_equal(tensor_add_(x->data, x->data, 1.0), ST_OK);
    assert_int_equal(tape_backward(&y, (tensor *const[]){y->data}, 1), ST_MISMATCH);
    char want[160];
    snprintf(want, sizeof want, "saved tensor #0 of gelu_tanh was modified by an inplace operation after it was saved: "
             "it is at version %lld, saved at version %lld", saved + 1, saved);
    assert_non_null(strstr(error_message(), want));
    assert_null(x->grad);
    var_release(y);
    var_release(x);
}

/* An in-place change before the op saved the tensor is no concern. */
static void test_tensor_changed_in_place_before_it_is_saved_is_fine(void **state)
{
    (void)state;
    struct var *x = leaf_of(0.5, 8, 1), *y;
    assert_int_equal(tensor_add_(x->data, x->data, 1.0), ST_OK);
    assert_int_equal(op_gelu(&y, x, 1), ST_OK);
    assert_int_equal(tape_backward(&y, (tensor *const[]){y->data}, 1), ST_OK);
    assert_non_null(x->grad);
    var_release(y);
    var_release(x);
}

static void test_op_on_inputs_without_grad_records_no_node(void **state)
{
    (void)state;
    struct var *a = leaf_of(1.0, 4, 0), *y;
    assert_int_equal(op_gelu(&y, a, 1), ST_OK);
    assert_null(y->grad_fn);
    var_release(y);
    var_release(a);
}

static void test_without_hook_node_keeps_the_saved_tensor(void **state)
{
    (void)state;
    struct var *x = leaf_of(0.5, 8, 1), *y;
    assert_int_equal(saved_hooks_depth(), 0);
    assert_int_equal(op_gelu(&y, x, 1), ST_OK);
    struct saved_tensor *s = &y->grad_fn->saved[0];
    assert_non_null(s->kept);
    assert_null(s->packed);
    assert_ptr_equal(tensor_storage_id(s->kept), tensor_storage_id(x->data));
    var_release(y);
    var_release(x);
}

/* A hook that records what it packs and unpacks, keeping tensors itself. */
struct recording_hook {
    char log[512];
    int packs, unpacks, frees;
    tensor *store[32];
};

static int recording_pack(void *ctx, const struct node *n, const tensor *t, void **packed)
{
    struct recording_hook *h = ctx;
    size_t len = strlen(h->log);
    snprintf(h->log + len, sizeof h->log - len, "pack:%s ", n->name);
    assert_int_equal(tensor_share(&h->store[h->packs], t), ST_OK);
    *packed = (void *)(intptr_t)(h->packs + 1);
    h->packs++;
    return ST_OK;
}

static int recording_unpack(void *ctx, void *packed, tensor **out)
{
    struct recording_hook *h = ctx;
    int k = (int)(intptr_t)packed - 1;
    size_t len = strlen(h->log);
    snprintf(h->log + len, sizeof h->log - len, "unpack:%d ", k);
    h->unpacks++;
    return tensor_share(out, h->store[k]);
}

static void recording_free(void *ctx, void *packed)
{
    struct recording_hook *h = ctx;
    int k = (int)(intptr_t)packed - 1;
    tensor_free(h->store[k]);
    h->store[k] = NULL;
    h->frees++;
}

/* A pack hook that stops a recompute at its first tensor, and an op
 * observer that logs what it is told. */
static int stopping_pack(void *ctx, const struct node *n, const tensor *t, void **packed)
{
    (void)ctx, (void)n, (void)t, (void)packed;
    return ST_STOP;
}

struct observed {
    char log[128];
};

static void log_op(void *ctx, const char *op, struct var *const *inputs, int n_inputs, const struct var *output)
{
    struct observed *o = ctx;
    (void)inputs, (void)n_inputs;
    size_t len = strlen(o->log);
    snprintf(o->log + len, sizeof o->log - len, "%s:%s ", op, output->grad_fn ? "recorded" : "constant");
}

static void test_observer_sees_an_op_whose_saving_stopped_a_recompute(void **state)
{
    (void)state;
    struct saved_hooks hooks = {stopping_pack, recording_unpack, NULL, NULL};
    struct observed seen = {0};
    int64_t xs[2] = {3, 4}, ws[2] = {4, 4};
    struct var *x = randn_leaf(2, xs, 1), *w = randn_leaf(2, ws, 1), *y = NULL;
    struct op_observer previous = tape_set_op_observer((struct op_observer){log_op, &seen});
    assert_int_equal(saved_hooks_push(&hooks), ST_OK);
    /* The op ran (it was computed before saving): observers count it. */
    assert_int_equal(op_linear(&y, x, w, NULL), ST_STOP);
    saved_hooks_pop();
    tape_set_op_observer(previous);
    assert_null(y);
    assert_string_equal(seen.log, "linear:constant ");
    var_release(x);
    var_release(w);
}

static void test_hooks_pack_in_forward_order_and_unpack_in_backward_order(void **state)
{
    (void)state;
    struct recording_hook rec = {0};
    struct saved_hooks hooks = {recording_pack, recording_unpack, recording_free, &rec};
    int64_t xs[2] = {3, 4}, ws[2] = {4, 4};
    struct var *x = randn_leaf(2, xs, 1), *w = randn_leaf(2, ws, 1), *y, *g, *loss, *target;
    tensor *tt;
    assert_int_equal(tensor_zeros(&tt, DT_F32, 2, xs, DEVICE_CPU), ST_OK);
    assert_int_equal(var_constant(&target, tt), ST_OK);
    assert_int_equal(saved_hooks_push(&hooks), ST_OK);
    assert_int_equal(op_linear(&y, x, w, NULL), ST_OK);
    assert_int_equal(op_gelu(&g, y, 1), ST_OK);
    saved_hooks_pop();
    assert_int_equal(op_mse_loss(&loss, g, target), ST_OK);
    assert_string_equal(rec.log, "pack:linear pack:linear pack:gelu_tanh ");
    assert_int_equal(tape_backward(&loss, NULL, 1), ST_OK);
    /* gelu runs before linear in backward; linear unpacks x then w. */
    assert_string_equal(rec.log, "pack:linear pack:linear pack:gelu_tanh unpack:2 unpack:0 unpack:1 ");
    /* Saved tensors are freed right after their node ran. */
    assert_int_equal(rec.frees, 3);
    assert_non_null(w->grad);
    var_release(loss);
    var_release(g);
    var_release(y);
    var_release(x);
    var_release(w);
    var_release(target);
}

static void test_only_the_innermost_hook_applies(void **state)
{
    (void)state;
    struct recording_hook outer = {0}, inner = {0};
    struct saved_hooks h_outer = {recording_pack, recording_unpack, recording_free, &outer};
    struct saved_hooks h_inner = {recording_pack, recording_unpack, recording_free, &inner};
    struct var *x = leaf_of(0.25, 4, 1), *a, *b, *c;
    assert_int_equal(saved_hooks_push(&h_outer), ST_OK);
    assert_int_equal(op_gelu(&a, x, 1), ST_OK);
    assert_int_equal(saved_hooks_push(&h_inner), ST_OK);
    assert_int_equal(saved_hooks_depth(), 2);
    assert_int_equal(op_gelu(&b, x, 1), ST_OK);
    saved_hooks_pop();
    assert_int_equal(op_gelu(&c, x, 1), ST_OK);
    saved_hooks_pop();
    assert_int_equal(outer.packs, 2);
    assert_int_equal(inner.packs, 1);
    assert_int_equal(saved_hooks_depth(), 0);
    var_release(a);
    var_release(b);
    var_release(c);
    assert_int_equal(outer.frees, 2);
    assert_int_equal(inner.frees, 1);
    var_release(x);
}

static void test_leaf_used_twice_accumulates_both_gradients(void **state)
{
    (void)state;
    struct var *x = leaf_of(3.0, 1, 1), *y;
    assert_int_equal(op_add(&y, x, x), ST_OK);
    assert_int_equal(tape_backward(&y, NULL, 1), ST_OK);
    assert_true(tensor_item(x->grad) == 2.0);
    /* A second graph adds to the existing grad. */
    var_release(y);
    assert_int_equal(op_add(&y, x, x), ST_OK);
    assert_int_equal(tape_backward(&y, NULL, 1), ST_OK);
    assert_true(tensor_item(x->grad) == 4.0);
    var_release(y);
    var_release(x);
}

static void test_second_backward_through_freed_graph_is_an_error(void **state)
{
    (void)state;
    struct var *x = leaf_of(0.5, 1, 1), *y;
    assert_int_equal(op_gelu(&y, x, 0), ST_OK);
    assert_int_equal(tape_backward(&y, NULL, 1), ST_OK);
    int st = tape_backward(&y, NULL, 1);
    assert_int_not_equal(st, ST_OK);
    assert_non_null(strstr(error_message(), "already freed"));
    var_release(y);
    var_release(x);
}

/* A node whose backward runs a whole backward of its own. */
struct nested_ctx {
    struct var *inner_leaf;
    uint64_t outer_id, inner_id;
};

static int nested_backward(struct node *n, tensor *const *g, tensor **gi)
{
    struct nested_ctx *c = n->ctx;
    struct var *y;
    c->outer_id = tape_engine_current_id();
    assert_int_equal(op_add(&y, c->inner_leaf, c->inner_leaf), ST_OK);
    int st = tape_backward(&y, NULL, 1);
    var_release(y);
    if (!st)
        st = tensor_mul_scalar(&gi[0], g[0], 3.0);
    return st;
}

static void test_backward_can_run_a_nested_backward(void **state)
{
    (void)state;
    struct nested_ctx ctx = {0};
    ctx.inner_leaf = leaf_of(1.0, 1, 1);
    struct var *x = leaf_of(2.0, 1, 1), *y;
    struct node *n;
    assert_int_equal(node_create(&n, "nested", nested_backward, &x, 1, 1), ST_OK);
    n->ctx = &ctx;
    tensor *t;
    assert_int_equal(tensor_share(&t, x->data), ST_OK);
    assert_int_equal(var_from_op(&y, t, n, 0), ST_OK);
    node_release(n);
    assert_int_equal(tape_engine_current_id(), 0);
    assert_int_equal(tape_backward(&y, NULL, 1), ST_OK);
    assert_true(tensor_item(x->grad) == 3.0);
    assert_true(tensor_item(ctx.inner_leaf->grad) == 2.0);
    assert_int_not_equal(ctx.outer_id, 0);
    var_release(y);
    var_release(x);
    var_release(ctx.inner_leaf);
}

static void test_partial_grad_returns_gradients_without_accumulating(void **state)
{
    (void)state;
    struct var *x = leaf_of(1.5, 1, 1), *w = leaf_of(2.0, 1, 1), *y;
    struct var *inputs[1];
    tensor *grads[1];
    assert_int_equal(op_add(&y, x, w), ST_OK);
    inputs[0] = x;
    assert_int_equal(tape_grad(&y, NULL, 1, inputs, 1, grads), ST_OK);
    assert_non_null(grads[0]);
    assert_true(tensor_item(grads[0]) == 1.0);
    assert_null(x->grad);
    assert_null(w->grad);
    tensor_free(grads[0]);
    var_release(y);
    var_release(x);
    var_release(w);
}

static int partial_probe(struct node *n, tensor *const *g, tensor **gi)
{
    *(int *)n->ctx = tape_engine_is_partial();
    return tensor_share(&gi[0], g[0]);
}

static void test_engine_tells_a_node_it_runs_in_a_partial_pass(void **state)
{
    (void)state;
    int seen = -1;
    struct var *x = leaf_of(1.0, 1, 1), *y;
    struct node *n;
    assert_int_equal(node_create(&n, "probe", partial_probe, &x, 1, 1), ST_OK);
    n->ctx = &seen;
    tensor *t;
    assert_int_equal(tensor_share(&t, x->data), ST_OK);
    assert_int_equal(var_from_op(&y, t, n, 0), ST_OK);
    node_release(n);
    tensor *grads[1];
    struct var *inputs[1] = {x};
    assert_int_equal(tape_grad(&y, NULL, 1, inputs, 1, grads), ST_OK);
    assert_int_equal(seen, 1);
    tensor_free(grads[0]);
    var_release(y);
    assert_int_equal(tape_engine_is_partial(), 0);
    var_release(x);
}

/* Ready nodes run highest sequence number first: the branch recorded last
 * runs first, so its gradient reaches a shared input first. */
static int order_probe(struct node *n, tensor *const *g, tensor **gi)
{
    char *log = n->ctx;
    size_t len = strlen(log);
    snprintf(log + len, 64 - len, "%s ", n->name);
    return tensor_share(&gi[0], g[0]);
}

static void test_ready_nodes_run_in_decreasing_sequence_order(void **state)
{
    (void)state;
    char log[64] = "";
    struct var *x = leaf_of(1.0, 1, 1), *a, *b, *s;
    struct node *na, *nb;
    tensor *t;
    assert_int_equal(node_create(&na, "first", order_probe, &x, 1, 1), ST_OK);
    na->ctx = log;
    assert_int_equal(tensor_share(&t, x->data), ST_OK);
    assert_int_equal(var_from_op(&a, t, na, 0), ST_OK);
    assert_int_equal(node_create(&nb, "second", order_probe, &x, 1, 1), ST_OK);
    nb->ctx = log;
    assert_int_equal(tensor_share(&t, x->data), ST_OK);
    assert_int_equal(var_from_op(&b, t, nb, 0), ST_OK);
    node_release(na);
    node_release(nb);
    assert_int_equal(op_add(&s, a, b), ST_OK);
    assert_int_equal(tape_backward(&s, NULL, 1), ST_OK);
    assert_string_equal(log, "second first ");
    assert_true(tensor_item(x->grad) == 2.0);
    var_release(s);
    var_release(a);
    var_release(b);
    var_release(x);
}

static void test_leaf_keeps_a_name_of_the_longest_length_whole(void **state)
{
    (void)state;
    char name[VAR_NAME_MAX];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    tensor *t;
    int64_t n = 1;
    assert_int_equal(tensor_full(&t, DT_F32, 1, &n, DEVICE_CPU, 1.0), ST_OK);
    struct var *v, *d;
    assert_int_equal(var_leaf(&v, t, 1, name), ST_OK);
    assert_string_equal(v->name, name);
    assert_int_equal(var_detach(&d, v, 0), ST_OK);
    assert_string_equal(d->name, name);
    var_release(d);
    var_release(v);
}

static void test_leaf_name_too_long_is_an_error_not_cut(void **state)
{
    (void)state;
    char name[VAR_NAME_MAX + 1];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    tensor *t;
    int64_t n = 1;
    assert_int_equal(tensor_full(&t, DT_F32, 1, &n, DEVICE_CPU, 1.0), ST_OK);
    struct var *v = (struct var *)&n;
    assert_int_not_equal(var_leaf(&v, t, 1, name), ST_OK);
    assert_null(v);
    assert_non_null(strstr(error_message(), "is 64 characters long; at most 63"));
    error_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_mode_off_records_no_node),
        cmocka_unit_test(test_saved_tensor_changed_in_place_is_refused_at_backward),
        cmocka_unit_test(test_tensor_changed_in_place_before_it_is_saved_is_fine),
        cmocka_unit_test(test_leaf_keeps_a_name_of_the_longest_length_whole),
        cmocka_unit_test(test_leaf_name_too_long_is_an_error_not_cut),
        cmocka_unit_test(test_op_on_inputs_without_grad_records_no_node),
        cmocka_unit_test(test_without_hook_node_keeps_the_saved_tensor),
        cmocka_unit_test(test_hooks_pack_in_forward_order_and_unpack_in_backward_order),
        cmocka_unit_test(test_only_the_innermost_hook_applies),
        cmocka_unit_test(test_leaf_used_twice_accumulates_both_gradients),
        cmocka_unit_test(test_second_backward_through_freed_graph_is_an_error),
        cmocka_unit_test(test_backward_can_run_a_nested_backward),
        cmocka_unit_test(test_partial_grad_returns_gradients_without_accumulating),
        cmocka_unit_test(test_engine_tells_a_node_it_runs_in_a_partial_pass),
        cmocka_unit_test(test_ready_nodes_run_in_decreasing_sequence_order),
        cmocka_unit_test(test_observer_sees_an_op_whose_saving_stopped_a_recompute),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
