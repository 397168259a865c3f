/* Module state (harness/autograd/module_state.h) and the ops that read and
 * update it: where a recompute's reads and writes go under each replay
 * mode, and what batch norm, fake quantisation and delayed scaling do to
 * their buffers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "module_state.h"
#include "ops.h"
#include "tape.h"
#include "test_support.h"

/* Two one-element float32 buffers: "a" = 1, "b" = 2. */
static const struct module_buffer layout[2] = {
    {.name = "a", .ndim = 1, .shape = {1}, .dtype = DT_F32, .init = 1.0},
    {.name = "b", .ndim = 1, .shape = {1}, .dtype = DT_F32, .init = 2.0},
};

static double value(tensor *t)
{
    return tensor_item(t);
}

/* An update as a forward makes it: every buffer it writes moves by +10. */
static void forward_updates(struct module_state *s)
{
    for (int i = 0; i < s->n; i++)
        assert_ok(tensor_fill_(module_state_write(s, i), value(module_state_write(s, i)) + 10));
}

static void test_buffers_start_at_their_initial_values(void **state)
{
    (void)state;
    struct module_state s;
    assert_ok(module_state_init(&s, layout, 2, DEVICE_CPU));
    assert_true(value(module_state_read(&s, 0)) == 1.0);
    assert_true(value(module_state_read(&s, 1)) == 2.0);
    assert_ptr_equal(module_state_read(&s, 0), module_state_write(&s, 0));
    module_state_free(&s);
}

static void test_snapshot_keeps_the_state_of_when_it_was_taken(void **state)
{
    (void)state;
    struct module_state s;
    struct state_snapshot snap;
    assert_ok(module_state_init(&s, layout, 2, DEVICE_CPU));
    assert_ok(module_state_snapshot(&s, &snap));
    forward_updates(&s);
    assert_true(value(snap.buffers[0]) == 1.0);
    assert_true(value(module_state_read(&s, 0)) == 11.0);
    state_snapshot_free(&snap);
    module_state_free(&s);
}

/* Enters a recompute with `how` after a forward that moved the state by
 * +10 from the snapshot, records what the recompute reads, lets it update
 * (+10 on what it reads, into what it writes) and exits. */
static void recompute(enum state_replay how, double *read_in_recompute, double *live_after)
{
    struct module_state s;
    struct state_snapshot snap;
    struct state_recompute frame;
    assert_ok(module_state_init(&s, layout, 2, DEVICE_CPU));
    assert_ok(module_state_snapshot(&s, &snap));
    forward_updates(&s);
    tensor *const *live = s.live;
    assert_ok(module_state_recompute_enter(&s, &snap, how, &frame));
    *read_in_recompute = value(module_state_read(&s, 0));
    forward_updates(&s);
    module_state_recompute_exit(&s, &frame);
    assert_ptr_equal(s.read, live);
    assert_ptr_equal(s.write, live);
    *live_after = value(module_state_read(&s, 0));
    state_snapshot_free(&snap);
    module_state_free(&s);
}

static void test_replay_reads_the_forward_state_and_discards_updates(void **state)
{
    (void)state;
    double read, live;
    recompute(STATE_REPLAY, &read, &live);
    assert_true(read == 1.0);
    assert_true(live == 11.0);
}

static void test_read_live_reads_the_updated_state(void **state)
{
    (void)state;
    double read, live;
    recompute(STATE_READ_LIVE, &read, &live);
    assert_true(read == 11.0);
    assert_true(live == 11.0);
}

static void test_write_live_lands_the_recompute_update_in_the_live_state(void **state)
{
    (void)state;
    double read, live;
    recompute(STATE_WRITE_LIVE, &read, &live);
    assert_true(read == 1.0);
    assert_true(live == 21.0);
}

static void test_live_reads_and_updates_the_live_state_twice(void **state)
{
    (void)state;
    double read, live;
    recompute(STATE_LIVE, &read, &live);
    assert_true(read == 11.0);
    assert_true(live == 21.0);
}

static void test_nested_recompute_restores_the_outer_recompute_state(void **state)
{
    (void)state;
    struct module_state s;
    struct state_snapshot snap;
    struct state_recompute outer, inner;
    assert_ok(module_state_init(&s, layout, 2, DEVICE_CPU));
    assert_ok(module_state_snapshot(&s, &snap));
    assert_ok(module_state_recompute_enter(&s, &snap, STATE_REPLAY, &outer));
    tensor **outer_read = s.read;
    assert_ok(module_state_recompute_enter(&s, &snap, STATE_REPLAY, &inner));
    assert_ptr_not_equal(s.read, outer_read);
    module_state_recompute_exit(&s, &inner);
    assert_ptr_equal(s.read, outer_read);
    module_state_recompute_exit(&s, &outer);
    assert_ptr_equal(s.read, s.live);
    state_snapshot_free(&snap);
    module_state_free(&s);
}

static void test_state_bytes_sum_every_buffer(void **state)
{
    (void)state;
    const struct module_buffer two[2] = {
        {.name = "h", .ndim = 1, .shape = {4}, .dtype = DT_F32},
        {.name = "m", .ndim = 2, .shape = {3, 5}, .dtype = DT_BF16},
    };
    assert_int_equal(module_state_bytes(two, 2), 4 * 4 + 15 * 2);
}

/* ---- the ops ------------------------------------------------------------------ */

static tensor *filled(int ndim, const int64_t *shape, double v)
{
    tensor *t;
    assert_ok(tensor_full(&t, DT_F32, ndim, shape, DEVICE_CPU, v));
    return t;
}

/* Batch norm in training: running_mean moves by momentum toward the batch
 * mean, running_var toward the unbiased batch variance. */
static void test_batch_norm_updates_running_statistics_with_momentum(void **state)
{
    (void)state;
    int64_t shape[3] = {1, 2, 1}, c[1] = {1};
    /* x = [1, 3] over one channel: mean 2, unbiased variance 2. */
    tensor *two = filled(3, shape, 1.0);
    float *p = tensor_data(two);
    p[1] = 3.0f;
    struct var *xv, *w, *b, *y;
    assert_ok(var_leaf(&xv, two, 1, "x"));
    assert_ok(var_leaf(&w, filled(1, c, 1.0), 1, "w"));
    assert_ok(var_leaf(&b, filled(1, c, 0.0), 1, "b"));
    tensor *rm = filled(1, c, 0.0), *rv = filled(1, c, 1.0);
    assert_ok(op_batch_norm(&y, xv, w, b, rm, rv, 0.1, 1e-5));
    assert_true(fabs(value(rm) - 0.2) < 1e-7);
    assert_true(fabs(value(rv) - (0.9 + 0.1 * 2.0)) < 1e-6);
    var_release(y);
    var_release(xv);
    var_release(w);
    var_release(b);
    tensor_free(rm);
    tensor_free(rv);
}

/* A power-of-two scale below the clamp: the value is just rounded to
 * bfloat16 (scaling by 2^k commutes with rounding). */
static void test_fake_quantize_rounds_to_bfloat16(void **state)
{
    (void)state;
    int64_t shape[1] = {1}, one[1] = {1};
    tensor *x = filled(1, shape, 1.0 + 1.0 / 512), *s = filled(1, one, 4.0), *q;
    assert_ok(tensor_fake_quantize(&q, x, s, 448.0));
    assert_true(value(q) == 1.0); /* 1 + 2^-9 is below bfloat16's half ULP at 1 (2^-8) */
    tensor_free(q);
    tensor_free(x);
    tensor_free(s);
}

static void test_fake_quantize_saturates_at_the_format_maximum(void **state)
{
    (void)state;
    int64_t shape[1] = {1}, one[1] = {1};
    tensor *x = filled(1, shape, 1000.0), *s = filled(1, one, 1.0), *q;
    assert_ok(tensor_fake_quantize(&q, x, s, 448.0));
    assert_true(value(q) == 448.0);
    tensor_free(q);
    tensor_free(x);
    tensor_free(s);
}

static void test_fake_quantize_passes_the_gradient_straight_through(void **state)
{
    (void)state;
    int64_t shape[1] = {3}, one[1] = {1};
    struct var *x, *zero, *q, *loss;
    tensor *s = filled(1, one, 3.0);
    assert_ok(var_leaf(&x, filled(1, shape, 1000.0), 1, "x")); /* saturated: the STE passes it anyway */
    assert_ok(var_constant(&zero, filled(1, shape, 0.0)));
    assert_ok(op_fake_quantize(&q, x, s, 448.0));
    assert_ok(op_mse_loss(&loss, q, zero));
    assert_ok(tape_backward(&loss, NULL, 1));
    assert_non_null(x->grad);
    /* d mean(q^2) / dq = 2q/3, handed to x unchanged */
    float q0 = ((float *)tensor_data(q->data))[0], g0 = ((float *)tensor_data(x->grad))[0];
    assert_true(q0 == 448.0f / 3.0f);
    assert_true(fabs(g0 - 2.0 * q0 / 3.0) <= 1e-6 * fabs(g0));
    var_release(loss);
    var_release(q);
    var_release(zero);
    var_release(x);
    tensor_free(s);
}

/* Delayed scaling: the history shifts and takes max|x| first; the scale
 * becomes 448 / max(history). */
static void test_delayed_scaling_shifts_the_history_and_rescales(void **state)
{
    (void)state;
    int64_t shape[1] = {2}, h4[1] = {4}, one[1] = {1};
    tensor *x = filled(1, shape, -7.0), *hist = filled(1, h4, 0.0), *s = filled(1, one, 1.0);
    ((float *)tensor_data(hist))[0] = 5.0f;
    assert_ok(tensor_delayed_scaling_update_(hist, s, x, 448.0));
    float *h = tensor_data(hist);
    assert_true(h[0] == 7.0f && h[1] == 5.0f && h[2] == 0.0f && h[3] == 0.0f);
    assert_true(value(s) == (double)(448.0f / 7.0f));
    tensor_free(x);
    tensor_free(hist);
    tensor_free(s);
}

static void test_delayed_scaling_keeps_the_scale_while_the_history_is_zero(void **state)
{
    (void)state;
    int64_t shape[1] = {2}, h4[1] = {4}, one[1] = {1};
    tensor *x = filled(1, shape, 0.0), *hist = filled(1, h4, 0.0), *s = filled(1, one, 3.0);
    assert_ok(tensor_delayed_scaling_update_(hist, s, x, 448.0));
    assert_true(value(s) == 3.0);
    tensor_free(x);
    tensor_free(hist);
    tensor_free(s);
}

int main(void)
{
    if (aten_init() != ST_OK) {
        fprintf(stderr, "aten_init: %s\n", error_message());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffers_start_at_their_initial_values),
        cmocka_unit_test(test_snapshot_keeps_the_state_of_when_it_was_taken),
        cmocka_unit_test(test_replay_reads_the_forward_state_and_discards_updates),
        cmocka_unit_test(test_read_live_reads_the_updated_state),
        cmocka_unit_test(test_write_live_lands_the_recompute_update_in_the_live_state),
        cmocka_unit_test(test_live_reads_and_updates_the_live_state_twice),
        cmocka_unit_test(test_nested_recompute_restores_the_outer_recompute_state),
        cmocka_unit_test(test_state_bytes_sum_every_buffer),
        cmocka_unit_test(test_batch_norm_updates_running_statistics_with_momentum),
        cmocka_unit_test(test_fake_quantize_rounds_to_bfloat16),
        cmocka_unit_test(test_fake_quantize_saturates_at_the_format_maximum),
        cmocka_unit_test(test_fake_quantize_passes_the_gradient_straight_through),
        cmocka_unit_test(test_delayed_scaling_shifts_the_history_and_rescales),
        cmocka_unit_test(test_delayed_scaling_keeps_the_scale_while_the_history_is_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
