/* impls_fixture: see impls_fixture.h. */
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
/* ---- a small segment: y = dropout(gelu(x·Wᵀ + b)) + extra ----------------------- */



int seg_call(void *ctx, struct var *in, struct var **out)
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

struct var *random_leaf(int ndim, const int64_t *shape, int requires_grad, const char *name)
{
    tensor *t;
    assert_int_equal(tensor_randn(&t, DT_F32, ndim, shape, DEVICE_CPU, 0.5), ST_OK);
    struct var *v;
    assert_int_equal(var_leaf(&v, t, requires_grad, name), ST_OK);
    return v;
}



int impls_fixture_setup(void **state)
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

int impls_fixture_teardown(void **state)
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
struct segment_fn segment_of(int (*fn)(void *ctx, struct var *in, struct var **out), void *ctx)
{
    return (struct segment_fn){.call = fn, .ctx = ctx};
}

/* Forward through impl, sum-of-squares loss, full backward. Returns the
 * backward's status; the caller reads ->grad. */

int run_segment(struct fixture *f, const char *impl_name, struct segment_fn fn, int *forward_status)
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

int run_checkpointed(struct fixture *f, const char *impl_name, int *forward_status)
{
    return run_segment(f, impl_name, segment_of(seg_call, &f->seg), forward_status);
}

tensor *clone_of(const tensor *t)
{
    tensor *c;
    assert_int_equal(tensor_clone(&c, t), ST_OK);
    return c;
}

void assert_same_grads(struct fixture *f, tensor *const ref[3])
{
    assert_true(tensor_bitwise_equal(f->seg.w->grad, ref[0]));
    assert_true(tensor_bitwise_equal(f->seg.b->grad, ref[1]));
    assert_true(tensor_bitwise_equal(f->x->grad, ref[2]));
}

void reference_grads(struct fixture *f, uint64_t seed, tensor *ref[3])
{
    aten_rng_manual_seed(DEVICE_CPU, seed);
    assert_int_equal(run_checkpointed(f, "none", NULL), ST_OK);
    ref[0] = clone_of(f->seg.w->grad);
    ref[1] = clone_of(f->seg.b->grad);
    ref[2] = clone_of(f->x->grad);
}

void free3(tensor *t[3])
{
    for (int i = 0; i < 3; i++)
        tensor_free(t[i]);
}
