/* test_ops: the ops of harness/autograd/ops.h that are ATen's own kernels
 * (linear, GELU, add and scale, unfused bias+GELU, layer norm, causal
 * attention, the losses) and autocast's casts around them, forward and
 * backward through the tape, against libtorch's own autograd
 * (harness/aten/oracle.h) on seeded random inputs: leaves that require
 * grad, the op, tape_backward with a random upstream gradient, then the
 * output and each leaf's ->grad compared with the oracle's through the
 * compare module (tests/ops_oracle_check.h). test_ops_random has the ops
 * that draw from a generator or are held to measured bounds.
 *
 * On CPU both sides end in the same ATen kernels, so every op here is
 * expected to be bitwise equal to torch, and is asserted so. Which CPU
 * kernels exist in float16 (and a few in bfloat16) depends on the
 * libtorch: 1.13 lacks Half addmm, bmm, gelu, softmax/log_softmax, layer
 * norm and mse_loss_backward, and BFloat16 mse_loss; 2.x has most of them.
 * Those tests ask this libtorch (the oracle) what it does on the same
 * inputs and hold the harness to it either way: where torch runs the op,
 * ours is bitwise torch's; where torch errors, ours returns a non-OK
 * status with a message at the same point (forward or backward) instead of
 * crashing.
 *
 * TEST_OPS_REPORT=1 in the environment prints every comparison (bitwise or
 * max ULP). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_support.h"

#include "ops_oracle_check.h"

#include "aten/aten.h"
#include "aten/oracle.h"
#include "autocast.h"
#include "ops.h"
#include "tape.h"

/* ---- linear ------------------------------------------------------------------
 * op_linear runs at::linear, which is what Python's F.linear calls: for a
 * 2-D input, or a contiguous 3-D one, with a bias it is one addmm on the
 * input flattened to [rows, k], the bias added to the accumulator before
 * the one rounding to the output dtype.
 * The oracle calls torch::linear, the same at::linear (the C++ frontend's
 * F::linear would add the bias after a matmul and round twice in bf16).
 * Every case checks the oracle both on the input flattened to 2-D and on
 * the N-D input itself: output and gradients bitwise. */

/* leaf_dt: the leaves' dtype; compute_dt: the dtype linear runs in (they
 * differ under autocast). */
struct linear_spec {
    enum dtype leaf_dt, compute_dt;
    int autocast, with_bias;
};

static tensor *reshaped(const tensor *t, int64_t rows, int64_t cols)
{
    const int64_t shape[2] = {rows, cols};
    tensor *r = NULL;
    assert_ok(tensor_reshape(&r, t, 2, shape));
    return r;
}

static void linear_case(const struct linear_spec *ls, const struct shape *sh, int64_t out_features, uint64_t seed)
{
    int64_t k = sh->s[sh->nd - 1], ws[2] = {out_features, k};
    int n_in = ls->with_bias ? 3 : 2;
    struct var *v[3] = {
        leaf(randn_t(ls->leaf_dt, sh->nd, sh->s, seed, 1.0), "x"),
        leaf(randn_t(ls->leaf_dt, 2, ws, seed + 1, 1.0 / sqrt((double)k)), "w"),
        ls->with_bias ? leaf(randn_t(ls->leaf_dt, 1, ws, seed + 2, 1.0), "b") : NULL,
    };
    struct var *y = NULL;
    if (ls->autocast)
        autocast_set((struct autocast_state){1, ls->compute_dt});
    assert_ok(op_linear(&y, v[0], v[1], v[2]));
    autocast_set((struct autocast_state){0, DT_BF16});
    assert_int_equal(tensor_dtype(y->data), ls->compute_dt);
    tensor *gy = grad_like(y->data, seed + 3);
    assert_ok(tape_backward(&y, &gy, 1));
    for (int i = 0; i < n_in; i++) {
        assert_non_null(v[i]->grad);
        assert_int_equal(tensor_dtype(v[i]->grad), ls->leaf_dt); /* the engine casts autocast's back */
    }

    char label[128], what[192];
    label_of(label, sizeof label,
             ls->autocast ? (ls->with_bias ? "autocast(bf16) linear+bias" : "autocast(bf16) linear")
                          : (ls->with_bias ? "linear+bias" : "linear"),
             ls->leaf_dt, sh->nd, sh->s);
    /* the oracle's inputs: the leaves as autocast casts them */
    tensor *in_t[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n_in; i++)
        in_t[i] = cast(v[i]->data, ls->compute_dt);
    int64_t rows = (int64_t)(tensor_numel(in_t[0]) / (size_t)k);

    /* 1: the input flattened to 2-D */
    tensor *x2 = reshaped(in_t[0], rows, k), *gy2 = reshaped(gy, rows, out_features);
    tensor *y2 = reshaped(y->data, rows, out_features), *dx2 = reshaped(v[0]->grad, rows, k);
    const tensor *in2[3] = {x2, in_t[1], in_t[2]};
    tensor *y_torch = NULL, *g_torch[3] = {NULL, NULL, NULL};
    assert_ok(oracle_run("linear", in2, n_in, NULL, 0, gy2, &y_torch, g_torch));
    snprintf(what, sizeof what, "%s: output (input flattened to 2-D)", label);
    expect_bitwise(what, y2, y_torch);
    for (int i = 0; i < n_in; i++) {
        tensor *g = cast(g_torch[i], ls->leaf_dt);
        snprintf(what, sizeof what, "%s: d%s (input flattened to 2-D)", label, v[i]->name);
        expect_bitwise(what, i == 0 ? dx2 : v[i]->grad, g);
        tensor_free(g);
    }
    tensor *done[] = {x2, gy2, y2, dx2, y_torch};
    free_tensors(done, COUNT(done));
    free_tensors(g_torch, 3);

    /* 2: the N-D input as it is */
    if (sh->nd > 2) {
        const tensor *in[3] = {in_t[0], in_t[1], in_t[2]};
        assert_ok(oracle_run("linear", in, n_in, NULL, 0, gy, &y_torch, g_torch));
        snprintf(what, sizeof what, "%s: output", label);
        expect_bitwise(what, y->data, y_torch);
        for (int i = 0; i < n_in; i++) {
            tensor *g = cast(g_torch[i], ls->leaf_dt);
            snprintf(what, sizeof what, "%s: d%s", label, v[i]->name);
            expect_bitwise(what, v[i]->grad, g);
            tensor_free(g);
        }
        tensor_free(y_torch);
        free_tensors(g_torch, 3);
    }
    free_tensors(in_t, 3);
    tensor_free(gy);
    var_release(y);
    for (int i = 0; i < 3; i++)
        var_release(v[i]);
}

static void linear_all_shapes(const struct linear_spec *ls)
{
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (uint64_t seed = 100; seed < 300; seed += 100)
            linear_case(ls, &k_shapes[i], i % 2 ? 24 : 17, seed + (uint64_t)i);
}

static void test_linear_with_bias_float32_is_bitwise_torch(void **state)
{
    (void)state;
    linear_all_shapes(&(struct linear_spec){DT_F32, DT_F32, 0, 1});
}

static void test_linear_without_bias_float32_is_bitwise_torch(void **state)
{
    (void)state;
    linear_all_shapes(&(struct linear_spec){DT_F32, DT_F32, 0, 0});
}

static void test_linear_with_bias_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    linear_all_shapes(&(struct linear_spec){DT_BF16, DT_BF16, 0, 1});
}

static void test_linear_without_bias_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    linear_all_shapes(&(struct linear_spec){DT_BF16, DT_BF16, 0, 0});
}

static int apply_linear(struct var **y, const struct probe *p) { return op_linear(y, p->v[0], p->v[1], p->v[2]); }

/* 1.13 CPU: "addmm_impl_cpu_" not implemented for 'Half'; 2.x has it. */
static void test_linear_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[3] = {2, 3, 8}, ws[2] = {4, 8};
    struct probe p = {.what = "linear float16", .oracle_op = "linear", .n_v = 3, .n_in = 3};
    p.v[0] = leaf(randn_t(DT_F16, 3, xs, 1, 1.0), "x");
    p.v[1] = leaf(randn_t(DT_F16, 2, ws, 2, 1.0), "w");
    p.v[2] = leaf(randn_t(DT_F16, 1, ws, 3, 1.0), "b");
    for (int i = 0; i < 3; i++)
        p.in[i] = p.v[i]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_linear)) {
        linear_all_shapes(&(struct linear_spec){DT_F16, DT_F16, 0, 1});
        linear_all_shapes(&(struct linear_spec){DT_F16, DT_F16, 0, 0});
    }
    probe_release(&p);
}

/* ---- GELU ------------------------------------------------------------------ */

static void gelu_all_shapes(enum dtype dt, int tanh_approx)
{
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (uint64_t seed = 10; seed < 30; seed += 10) {
            /* std 3: the tails, where 1 + tanh and erfc are small, too. */
            struct var *x = leaf(randn_t(dt, k_shapes[i].nd, k_shapes[i].s, seed + (uint64_t)i, 3.0), "x");
            struct var *y = NULL;
            assert_ok(op_gelu(&y, x, tanh_approx));
            assert_string_equal(op_name_of(y->grad_fn), tanh_approx ? "gelu_tanh" : "gelu");
            struct oracle_case c = {.op = tanh_approx ? "gelu_tanh" : "gelu", .in = {x}, .n_in = 1};
            label_of(c.label, sizeof c.label, c.op, dt, k_shapes[i].nd, k_shapes[i].s);
            check_bitwise_against_torch(&c, y, seed + 5);
            var_release(y);
            var_release(x);
        }
}

static void test_gelu_exact_float32_is_bitwise_torch(void **state)
{
    (void)state;
    gelu_all_shapes(DT_F32, 0);
}

static void test_gelu_tanh_float32_is_bitwise_torch(void **state)
{
    (void)state;
    gelu_all_shapes(DT_F32, 1);
}

static void test_gelu_exact_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    gelu_all_shapes(DT_BF16, 0);
}

static void test_gelu_tanh_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    gelu_all_shapes(DT_BF16, 1);
}

static int apply_gelu(struct var **y, const struct probe *p) { return op_gelu(y, p->v[0], p->arg); }

/* 1.13 CPU: "GeluKernelImpl" not implemented for 'Half'; 2.x has it. */
static void test_gelu_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    for (int tanh_approx = 0; tanh_approx < 2; tanh_approx++) {
        struct probe p = {.what = tanh_approx ? "gelu_tanh float16" : "gelu float16",
                          .oracle_op = tanh_approx ? "gelu_tanh" : "gelu", .n_v = 1, .n_in = 1, .arg = tanh_approx};
        p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "x");
        p.in[0] = p.v[0]->data;
        if (torch_runs_else_ours_fails_alike(&p, apply_gelu))
            gelu_all_shapes(DT_F16, tanh_approx);
        probe_release(&p);
    }
}

/* ---- add (broadcasting) ---------------------------------------------------- */

struct add_shapes {
    const char *what;
    int nda, ndb;
    int64_t a[3], b[3];
};

static const struct add_shapes k_add_shapes[] = {
    {"bias add", 3, 1, {3, 5, 16}, {16}},
    {"bias add, batch 1", 3, 1, {1, 1, 33}, {33}},
    {"bias add, 2-D", 2, 1, {1, 16}, {16}},
    {"residual add", 3, 3, {2, 7, 16}, {2, 7, 16}},
    {"both broadcast", 3, 3, {2, 1, 16}, {1, 5, 16}},
};

static void add_case(enum dtype da, enum dtype db, const struct add_shapes *s, uint64_t seed)
{
    struct var *a = leaf(randn_t(da, s->nda, s->a, seed, 1.0), "a");
    struct var *b = leaf(randn_t(db, s->ndb, s->b, seed + 1, 1.0), "b");
    struct var *y = NULL;
    assert_ok(op_add(&y, a, b));
    struct oracle_case c = {.op = "add", .in = {a, b}, .n_in = 2};
    char shapes[64], sa[32], sb[32];
    snprintf(shapes, sizeof shapes, "%s + %s", shape_str(s->nda, s->a, sa, sizeof sa),
             shape_str(s->ndb, s->b, sb, sizeof sb));
    snprintf(c.label, sizeof c.label, "add (%s) %s+%s %s", s->what, dtype_name(da), dtype_name(db), shapes);
    check_bitwise_against_torch(&c, y, seed + 2);
    /* the engine hands each input its own dtype back */
    assert_int_equal(tensor_dtype(a->grad), da);
    assert_int_equal(tensor_dtype(b->grad), db);
    var_release(y);
    var_release(a);
    var_release(b);
}

static void add_all_shapes(enum dtype da, enum dtype db)
{
    for (int i = 0; i < COUNT(k_add_shapes); i++)
        add_case(da, db, &k_add_shapes[i], 40 + 10 * (uint64_t)i);
}

/* x · s by a number: the two-stream model's residual scale. */
static void test_scale_by_a_number_is_bitwise_torch(void **state)
{
    (void)state;
    const int64_t shape[3] = {2, 3, 5};
    struct var *x = leaf(randn_t(DT_F32, 3, shape, 90, 1.0), "x");
    struct var *y = NULL;
    assert_ok(op_scale(&y, x, 0.37));
    struct oracle_case c = {.op = "scale", .in = {x}, .n_in = 1, .params = {0.37}, .n_params = 1};
    snprintf(c.label, sizeof c.label, "scale float32 [2, 3, 5] by 0.37");
    check_bitwise_against_torch(&c, y, 91);
    var_release(y);
    var_release(x);
}

static void test_add_broadcasting_float32_is_bitwise_torch(void **state)
{
    (void)state;
    add_all_shapes(DT_F32, DT_F32);
}

static void test_add_broadcasting_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    add_all_shapes(DT_BF16, DT_BF16);
}

/* Half add has a CPU kernel in 1.13 (and sum_to: sum does too). */
static void test_add_broadcasting_float16_is_bitwise_torch(void **state)
{
    (void)state;
    add_all_shapes(DT_F16, DT_F16);
}

/* bf16 + f32 promotes to f32; the bf16 input's gradient is summed in f32
 * and cast back, as torch's engine casts it. */
static void test_add_mixed_dtypes_promotes_and_casts_gradients_back_like_torch(void **state)
{
    (void)state;
    add_all_shapes(DT_BF16, DT_F32);
    add_all_shapes(DT_F32, DT_BF16);
}

/* ---- unfused bias + GELU ------------------------------------------------------ */

static void bias_gelu_unfused_all_shapes(enum dtype dt)
{
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (uint64_t seed = 60; seed < 80; seed += 10) {
            const struct shape *sh = &k_shapes[i];
            struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed + (uint64_t)i, 2.0), "x");
            struct var *b = leaf(randn_t(dt, 1, &sh->s[sh->nd - 1], seed + 1, 1.0), "b");
            struct var *y = NULL;
            assert_ok(op_bias_gelu_unfused(&y, x, b));
            struct oracle_case c = {.op = "bias_gelu_tanh", .in = {x, b}, .n_in = 2};
            label_of(c.label, sizeof c.label, "bias_gelu_unfused", dt, sh->nd, sh->s);
            check_bitwise_against_torch(&c, y, seed + 2);
            var_release(y);
            var_release(x);
            var_release(b);
        }
}

static void test_bias_gelu_unfused_float32_is_bitwise_torch(void **state)
{
    (void)state;
    bias_gelu_unfused_all_shapes(DT_F32);
}

static void test_bias_gelu_unfused_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    bias_gelu_unfused_all_shapes(DT_BF16);
}

static int apply_bias_gelu_unfused(struct var **y, const struct probe *p)
{
    return op_bias_gelu_unfused(y, p->v[0], p->v[1]);
}

/* 1.13: the add works in Half; the gelu after it does not ("GeluKernelImpl"). */
static void test_bias_gelu_unfused_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    struct probe p = {.what = "bias_gelu_unfused float16", .oracle_op = "bias_gelu_tanh", .n_v = 2, .n_in = 2};
    p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "x");
    p.v[1] = leaf(randn_t(DT_F16, 1, &xs[1], 2, 1.0), "b");
    for (int i = 0; i < 2; i++)
        p.in[i] = p.v[i]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_bias_gelu_unfused))
        bias_gelu_unfused_all_shapes(DT_F16);
    probe_release(&p);
}

/* ---- layer norm ---------------------------------------------------------------------- */

static void layer_norm_case(enum dtype dt, const struct shape *sh, uint64_t seed)
{
    const int64_t *c = &sh->s[sh->nd - 1];
    const double eps = 1e-5;
    /* an offset mean and a spread so the normalisation does some work */
    struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed, 3.0), "x");
    struct var *w = leaf(randn_t(dt, 1, c, seed + 1, 1.0), "w"), *b = leaf(randn_t(dt, 1, c, seed + 2, 1.0), "b");
    struct var *y = NULL;
    assert_ok(op_layer_norm(&y, x, w, b, eps));
    assert_int_equal(tensor_dtype(y->data), dt);
    struct oracle_case oc = {.op = "layer_norm", .in = {x, w, b}, .n_in = 3, .params = {eps}, .n_params = 1};
    label_of(oc.label, sizeof oc.label, "layer_norm", dt, sh->nd, sh->s);
    check_bitwise_against_torch(&oc, y, seed + 3);
    var_release(y);
    var_release(x);
    var_release(w);
    var_release(b);
}

static void layer_norm_all_shapes(enum dtype dt)
{
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (uint64_t seed = 400; seed < 420; seed += 10)
            layer_norm_case(dt, &k_shapes[i], seed + (uint64_t)i);
}

static void test_layer_norm_float32_is_bitwise_torch(void **state)
{
    (void)state;
    layer_norm_all_shapes(DT_F32);
}

static void test_layer_norm_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    layer_norm_all_shapes(DT_BF16);
}

static int apply_layer_norm(struct var **y, const struct probe *p)
{
    return op_layer_norm(y, p->v[0], p->v[1], p->v[2], p->params[0]);
}

/* 1.13 CPU: "LayerNormKernelImpl" not implemented for 'Half'. */
static void test_layer_norm_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    struct probe p = {.what = "layer_norm float16", .oracle_op = "layer_norm", .n_v = 3, .n_in = 3,
                      .params = {1e-5}, .n_params = 1};
    p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "x");
    p.v[1] = leaf(randn_t(DT_F16, 1, &xs[1], 2, 1.0), "w");
    p.v[2] = leaf(randn_t(DT_F16, 1, &xs[1], 3, 1.0), "b");
    for (int i = 0; i < 3; i++)
        p.in[i] = p.v[i]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_layer_norm))
        layer_norm_all_shapes(DT_F16);
    probe_release(&p);
}

/* ---- causal attention --------------------------------------------------------------------
 * Ours takes qkv [B, T, 3C]; the oracle takes q, k, v [B, H, T, d]. They are
 * cut from the same qkv here, and our dqkv is cut the same way to compare
 * with torch's dq, dk, dv; torch's output is merged back to [B, T, C]. */

/* [B, T, *] slice [start, start + c) of the last dim -> [B, H, T, d], contiguous. */
static tensor *heads_of(const tensor *t, int64_t start, int64_t c, int heads)
{
    tensor *part = NULL, *r = NULL, *tr = NULL, *out = NULL;
    int64_t shape[4] = {tensor_size(t, 0), tensor_size(t, 1), heads, c / heads};
    assert_ok(tensor_narrow(&part, t, 2, start, c));
    assert_ok(tensor_reshape(&r, part, 4, shape));
    assert_ok(tensor_transpose(&tr, r, 1, 2));
    assert_ok(tensor_contiguous(&out, tr));
    tensor *all[] = {part, r, tr};
    free_tensors(all, 3);
    return out;
}

/* [B, H, T, d] -> [B, T, H d] */
static tensor *merged(const tensor *t)
{
    tensor *tr = NULL, *c = NULL, *out = NULL;
    int64_t shape[3] = {tensor_size(t, 0), tensor_size(t, 2), tensor_size(t, 1) * tensor_size(t, 3)};
    assert_ok(tensor_transpose(&tr, t, 1, 2));
    assert_ok(tensor_contiguous(&c, tr));
    assert_ok(tensor_reshape(&out, c, 3, shape));
    tensor_free(tr);
    tensor_free(c);
    return out;
}

struct attn_shape {
    int64_t b, t, c;
    int heads;
};

static const struct attn_shape k_attn_shapes[] = {
    {1, 1, 8, 2},  /* batch 1, a single token */
    {1, 7, 16, 2}, /* batch 1 */
    {3, 5, 24, 4},
    {2, 9, 32, 1},
};

static void attention_case(enum dtype dt, const struct attn_shape *s, uint64_t seed)
{
    int64_t shape[3] = {s->b, s->t, 3 * s->c};
    struct var *qkv = leaf(randn_t(dt, 3, shape, seed, 1.0), "qkv"), *y = NULL;
    assert_ok(op_causal_attention(&y, qkv, s->heads));
    assert_int_equal(tensor_dtype(y->data), dt);
    assert_int_equal(tensor_size(y->data, 2), s->c);
    tensor *gy = grad_like(y->data, seed + 1);
    assert_ok(tape_backward(&y, &gy, 1));

    tensor *q = heads_of(qkv->data, 0, s->c, s->heads), *k = heads_of(qkv->data, s->c, s->c, s->heads);
    tensor *v = heads_of(qkv->data, 2 * s->c, s->c, s->heads), *go = heads_of(gy, 0, s->c, s->heads);
    const tensor *in[3] = {q, k, v};
    tensor *o_torch = NULL, *g_torch[3] = {NULL, NULL, NULL};
    assert_ok(oracle_run("causal_attention", in, 3, NULL, 0, go, &o_torch, g_torch));

    char label[128], what[192];
    char op[48];
    snprintf(op, sizeof op, "causal_attention H=%d", s->heads);
    label_of(label, sizeof label, op, dt, 3, shape);
    tensor *y_torch = merged(o_torch);
    snprintf(what, sizeof what, "%s: output", label);
    expect_bitwise(what, y->data, y_torch);
    static const char *const names[3] = {"dq", "dk", "dv"};
    assert_non_null(qkv->grad);
    for (int i = 0; i < 3; i++) {
        tensor *ours = heads_of(qkv->grad, i * s->c, s->c, s->heads);
        snprintf(what, sizeof what, "%s: %s", label, names[i]);
        expect_bitwise(what, ours, g_torch[i]);
        tensor_free(ours);
    }
    tensor *all[] = {gy, q, k, v, go, o_torch, y_torch};
    free_tensors(all, COUNT(all));
    free_tensors(g_torch, 3);
    var_release(y);
    var_release(qkv);
}

static void attention_all_shapes(enum dtype dt)
{
    for (int i = 0; i < COUNT(k_attn_shapes); i++)
        for (uint64_t seed = 500; seed < 520; seed += 10)
            attention_case(dt, &k_attn_shapes[i], seed + (uint64_t)i);
}

static void test_causal_attention_float32_is_bitwise_torch(void **state)
{
    (void)state;
    attention_all_shapes(DT_F32);
}

static void test_causal_attention_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    attention_all_shapes(DT_BF16);
}

static int apply_causal_attention(struct var **y, const struct probe *p)
{
    return op_causal_attention(y, p->v[0], p->arg);
}

/* 1.13 CPU: "bmm" not implemented for 'Half' (nor Half softmax). */
static void test_causal_attention_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const struct attn_shape s = {2, 3, 8, 2};
    int64_t shape[3] = {s.b, s.t, 3 * s.c};
    struct probe p = {.what = "causal_attention float16", .oracle_op = "causal_attention", .n_v = 1, .n_in = 3,
                      .arg = s.heads};
    p.v[0] = leaf(randn_t(DT_F16, 3, shape, 1, 1.0), "qkv");
    tensor *q = heads_of(p.v[0]->data, 0, s.c, s.heads), *k = heads_of(p.v[0]->data, s.c, s.c, s.heads);
    tensor *v = heads_of(p.v[0]->data, 2 * s.c, s.c, s.heads);
    p.in[0] = q;
    p.in[1] = k;
    p.in[2] = v;
    /* (Were only torch's backward missing, the forward check would need its
     * [B, H, T, d] output merged back; neither 1.13 nor 2.x is so.) */
    if (torch_runs_else_ours_fails_alike(&p, apply_causal_attention))
        attention_all_shapes(DT_F16);
    tensor *all[] = {q, k, v};
    free_tensors(all, 3);
    probe_release(&p);
}

/* ---- losses ----------------------------------------------------------------------------- */

static void mse_case(enum dtype dt, const struct shape *sh, uint64_t seed)
{
    struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed, 1.0), "x");
    struct var *t = leaf(randn_t(dt, sh->nd, sh->s, seed + 1, 1.0), "target"), *y = NULL;
    assert_ok(op_mse_loss(&y, x, t));
    assert_int_equal(tensor_ndim(y->data), 0);
    struct oracle_case c = {.op = "mse_loss", .in = {x, t}, .n_in = 2};
    label_of(c.label, sizeof c.label, "mse_loss", dt, sh->nd, sh->s);
    check_bitwise_against_torch(&c, y, seed + 2); /* a random scalar upstream gradient */
    var_release(y);
    var_release(x);
    var_release(t);
}

static void mse_all_shapes(enum dtype dt)
{
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (uint64_t seed = 600; seed < 620; seed += 10)
            mse_case(dt, &k_shapes[i], seed + (uint64_t)i);
}

static void test_mse_loss_float32_is_bitwise_torch(void **state)
{
    (void)state;
    mse_all_shapes(DT_F32);
}

/* Where x == target exactly, dtarget is a zero whose sign depends on how it
 * is computed: torch's derivative is mse_loss_backward(grad, target, x),
 * +0 there, and negating dx would give -0. Bitwise, signs included. */
static void test_mse_loss_dtarget_where_x_equals_target_has_torchs_sign_of_zero(void **state)
{
    (void)state;
    const int64_t xs[2] = {4, 8}, half_shape[2] = {2, 8};
    tensor *xt = randn_t(DT_F32, 2, xs, 630, 1.0), *tt = NULL, *top = NULL, *rest = NULL, *fresh = NULL;
    /* target: x's first two rows, then fresh values */
    assert_ok(tensor_narrow(&top, xt, 0, 0, 2));
    fresh = randn_t(DT_F32, 2, half_shape, 631, 1.0);
    const tensor *parts[2] = {top, fresh};
    assert_ok(tensor_cat(&tt, parts, 2, 0));
    struct var *x = leaf(xt, "x"), *t = leaf(tt, "target"), *y = NULL;
    assert_ok(op_mse_loss(&y, x, t));
    tensor *gy = grad_like(y->data, 632);
    assert_ok(tape_backward(&y, &gy, 1));
    const tensor *in[2] = {x->data, t->data};
    tensor *l_torch = NULL, *g_torch[2] = {NULL, NULL};
    assert_ok(oracle_run("mse_loss", in, 2, NULL, 0, gy, &l_torch, g_torch));
    expect_bitwise("mse_loss x == target rows: loss", y->data, l_torch);
    expect_bitwise("mse_loss x == target rows: dx", x->grad, g_torch[0]);
    expect_bitwise("mse_loss x == target rows: dtarget", t->grad, g_torch[1]);
    /* the rows where x != target are bitwise */
    tensor *ours_rest = NULL;
    assert_ok(tensor_narrow(&ours_rest, t->grad, 0, 2, 2));
    assert_ok(tensor_narrow(&rest, g_torch[1], 0, 2, 2));
    expect_bitwise("mse_loss x != target rows: dtarget", ours_rest, rest);
    tensor *all[] = {top, fresh, rest, ours_rest, gy, l_torch};
    free_tensors(all, COUNT(all));
    free_tensors(g_torch, 2);
    var_release(y);
    var_release(x);
    var_release(t);
}

static int apply_mse_loss(struct var **y, const struct probe *p) { return op_mse_loss(y, p->v[0], p->v[1]); }

static void mse_loss_bitwise_torch_or_an_error_as_in_torch(enum dtype dt, const char *what)
{
    const int64_t xs[2] = {3, 8};
    struct probe p = {.what = what, .oracle_op = "mse_loss", .n_v = 2, .n_in = 2};
    p.v[0] = leaf(randn_t(dt, 2, xs, 1, 1.0), "x");
    p.v[1] = leaf(randn_t(dt, 2, xs, 2, 1.0), "target");
    for (int i = 0; i < 2; i++)
        p.in[i] = p.v[i]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_mse_loss))
        mse_all_shapes(dt);
    probe_release(&p);
}

/* 1.13 CPU: "mse_cpu" not implemented for 'BFloat16' (forward already). */
static void test_mse_loss_bfloat16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    mse_loss_bitwise_torch_or_an_error_as_in_torch(DT_BF16, "mse_loss bfloat16");
}

/* 1.13 CPU: the Half forward exists, "mse_backward_cpu_out" does not: the
 * forward succeeds and the tape's backward returns the error. */
static void test_mse_loss_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    mse_loss_bitwise_torch_or_an_error_as_in_torch(DT_F16, "mse_loss float16");
}

static void cross_entropy_case(enum dtype dt, const struct shape *sh, uint64_t seed)
{
    tensor *target_t = NULL;
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed + 1));
    assert_ok(tensor_randint(&target_t, sh->s[sh->nd - 1], sh->nd - 1, sh->s, DEVICE_CPU));
    struct var *logits = leaf(randn_t(dt, sh->nd, sh->s, seed, 2.0), "logits"), *target = constant(target_t);
    struct var *y = NULL;
    assert_ok(op_cross_entropy(&y, logits, target));
    assert_int_equal(tensor_ndim(y->data), 0);
    struct oracle_case c = {.op = "cross_entropy", .in = {logits, target}, .n_in = 2};
    label_of(c.label, sizeof c.label, "cross_entropy", dt, sh->nd, sh->s);
    check_bitwise_against_torch(&c, y, seed + 2);
    assert_null(target->grad);
    var_release(y);
    var_release(logits);
    var_release(target);
}

static void cross_entropy_all_shapes(enum dtype dt)
{
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (uint64_t seed = 700; seed < 720; seed += 10)
            cross_entropy_case(dt, &k_shapes[i], seed + (uint64_t)i);
}

static void test_cross_entropy_float32_is_bitwise_torch(void **state)
{
    (void)state;
    cross_entropy_all_shapes(DT_F32);
}

static void test_cross_entropy_bfloat16_is_bitwise_torch(void **state)
{
    (void)state;
    cross_entropy_all_shapes(DT_BF16);
}

static int apply_cross_entropy(struct var **y, const struct probe *p)
{
    return op_cross_entropy(y, p->v[0], p->v[1]);
}

/* 1.13 CPU: "log_softmax_lastdim_kernel_impl" not implemented for 'Half'. */
static void test_cross_entropy_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    tensor *target_t = NULL;
    assert_ok(tensor_randint(&target_t, 8, 1, xs, DEVICE_CPU));
    struct probe p = {.what = "cross_entropy float16", .oracle_op = "cross_entropy", .n_v = 2, .n_in = 2};
    p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "logits");
    p.v[1] = constant(target_t);
    for (int i = 0; i < 2; i++)
        p.in[i] = p.v[i]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_cross_entropy))
        cross_entropy_all_shapes(DT_F16);
    probe_release(&p);
}

/* ---- autocast -----------------------------------------------------------------------------
 * torch's autocast inserts differentiable casts; the oracle has none, so it
 * runs on inputs cast the way autocast casts them and its gradients are cast
 * back to each input's dtype (what the cast's backward does). */

static void autocast_bf16_on(void) { autocast_set((struct autocast_state){1, DT_BF16}); }

/* Float32 x, w, b: linear runs in bf16, its output is bf16, and the leaves'
 * gradients come back float32, bitwise torch's bf16 gradients widened. */
static void test_autocast_linear_runs_in_bfloat16_and_returns_float32_gradients(void **state)
{
    (void)state;
    linear_all_shapes(&(struct linear_spec){DT_F32, DT_BF16, 1, 1});
    linear_all_shapes(&(struct linear_spec){DT_F32, DT_BF16, 1, 0});
}

/* bf16 x (a bf16 linear's output) with float32 w, b: layer norm runs in
 * float32, gives float32, and x's gradient comes back bf16. */
static void test_autocast_layer_norm_runs_in_float32(void **state)
{
    (void)state;
    const double eps = 1e-5;
    for (int i = 0; i < COUNT(k_shapes); i++) {
        const struct shape *sh = &k_shapes[i];
        const int64_t *c = &sh->s[sh->nd - 1];
        uint64_t seed = 1200 + 10 * (uint64_t)i;
        struct var *x = leaf(randn_t(DT_BF16, sh->nd, sh->s, seed, 3.0), "x");
        struct var *w = leaf(randn_t(DT_F32, 1, c, seed + 1, 1.0), "w"), *b = leaf(randn_t(DT_F32, 1, c, seed + 2, 1.0), "b");
        struct var *y = NULL;
        autocast_bf16_on();
        assert_ok(op_layer_norm(&y, x, w, b, eps));
        autocast_set((struct autocast_state){0, DT_BF16});
        assert_int_equal(tensor_dtype(y->data), DT_F32);
        tensor *gy = grad_like(y->data, seed + 3);
        assert_ok(tape_backward(&y, &gy, 1));

        tensor *x32 = cast(x->data, DT_F32);
        const tensor *in[3] = {x32, w->data, b->data};
        tensor *y_torch = NULL, *g_torch[3] = {NULL, NULL, NULL};
        assert_ok(oracle_run("layer_norm", in, 3, &eps, 1, gy, &y_torch, g_torch));
        char label[128], what[192];
        label_of(label, sizeof label, "autocast(bf16) layer_norm", DT_BF16, sh->nd, sh->s);
        snprintf(what, sizeof what, "%s: output", label);
        expect_bitwise(what, y->data, y_torch);
        assert_int_equal(tensor_dtype(x->grad), DT_BF16);
        tensor *dx = cast(g_torch[0], DT_BF16);
        snprintf(what, sizeof what, "%s: dx", label);
        expect_bitwise(what, x->grad, dx);
        snprintf(what, sizeof what, "%s: dw", label);
        expect_bitwise(what, w->grad, g_torch[1]);
        snprintf(what, sizeof what, "%s: db", label);
        expect_bitwise(what, b->grad, g_torch[2]);
        tensor *all[] = {gy, x32, y_torch, dx};
        free_tensors(all, COUNT(all));
        free_tensors(g_torch, 3);
        var_release(y);
        var_release(x);
        var_release(w);
        var_release(b);
    }
}

/* bf16 x and target: mse runs in float32 (where 1.13 has the kernel that
 * bf16 lacks), the loss is float32, the gradients come back bf16. */
static void test_autocast_mse_loss_runs_in_float32(void **state)
{
    (void)state;
    for (int i = 0; i < COUNT(k_shapes); i++) {
        const struct shape *sh = &k_shapes[i];
        uint64_t seed = 1300 + 10 * (uint64_t)i;
        struct var *x = leaf(randn_t(DT_BF16, sh->nd, sh->s, seed, 1.0), "x");
        struct var *t = leaf(randn_t(DT_BF16, sh->nd, sh->s, seed + 1, 1.0), "target"), *y = NULL;
        autocast_bf16_on();
        assert_ok(op_mse_loss(&y, x, t));
        autocast_set((struct autocast_state){0, DT_BF16});
        assert_int_equal(tensor_dtype(y->data), DT_F32);
        tensor *gy = grad_like(y->data, seed + 2);
        assert_ok(tape_backward(&y, &gy, 1));

        tensor *in_t[2] = {cast(x->data, DT_F32), cast(t->data, DT_F32)};
        const tensor *in[2] = {in_t[0], in_t[1]};
        tensor *l_torch = NULL, *g_torch[2] = {NULL, NULL};
        assert_ok(oracle_run("mse_loss", in, 2, NULL, 0, gy, &l_torch, g_torch));
        char label[128], what[192];
        label_of(label, sizeof label, "autocast(bf16) mse_loss", DT_BF16, sh->nd, sh->s);
        snprintf(what, sizeof what, "%s: loss", label);
        expect_bitwise(what, y->data, l_torch);
        struct var *leaves[2] = {x, t};
        for (int j = 0; j < 2; j++) {
            assert_int_equal(tensor_dtype(leaves[j]->grad), DT_BF16);
            tensor *narrowed = cast(g_torch[j], DT_BF16);
            snprintf(what, sizeof what, "%s: d%s", label, leaves[j]->name);
            expect_bitwise(what, leaves[j]->grad, narrowed);
            tensor_free(narrowed);
        }
        free_tensors(in_t, 2);
        free_tensors(g_torch, 2);
        tensor_free(l_torch);
        tensor_free(gy);
        var_release(y);
        var_release(x);
        var_release(t);
    }
}

/* bf16 logits: cross entropy runs in float32. */
static void test_autocast_cross_entropy_runs_in_float32(void **state)
{
    (void)state;
    for (int i = 0; i < COUNT(k_shapes); i++) {
        const struct shape *sh = &k_shapes[i];
        uint64_t seed = 1400 + 10 * (uint64_t)i;
        tensor *target_t = NULL;
        assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed + 1));
        assert_ok(tensor_randint(&target_t, sh->s[sh->nd - 1], sh->nd - 1, sh->s, DEVICE_CPU));
        struct var *logits = leaf(randn_t(DT_BF16, sh->nd, sh->s, seed, 2.0), "logits"), *target = constant(target_t);
        struct var *y = NULL;
        autocast_bf16_on();
        assert_ok(op_cross_entropy(&y, logits, target));
        autocast_set((struct autocast_state){0, DT_BF16});
        assert_int_equal(tensor_dtype(y->data), DT_F32);
        tensor *gy = grad_like(y->data, seed + 2);
        assert_ok(tape_backward(&y, &gy, 1));

        tensor *l32 = cast(logits->data, DT_F32);
        const tensor *in[2] = {l32, target->data};
        tensor *l_torch = NULL, *g_torch[2] = {NULL, NULL};
        assert_ok(oracle_run("cross_entropy", in, 2, NULL, 0, gy, &l_torch, g_torch));
        char label[128], what[192];
        label_of(label, sizeof label, "autocast(bf16) cross_entropy", DT_BF16, sh->nd, sh->s);
        snprintf(what, sizeof what, "%s: loss", label);
        expect_bitwise(what, y->data, l_torch);
        assert_int_equal(tensor_dtype(logits->grad), DT_BF16);
        tensor *dl = cast(g_torch[0], DT_BF16);
        snprintf(what, sizeof what, "%s: dlogits", label);
        expect_bitwise(what, logits->grad, dl);
        tensor *all[] = {gy, l32, l_torch, dl};
        free_tensors(all, COUNT(all));
        free_tensors(g_torch, 2);
        var_release(y);
        var_release(logits);
        var_release(target);
    }
}

/* Float32 qkv: the attention products run in bf16 (output bf16) and the
 * gradient of qkv comes back float32. Dtypes only: the oracle's attention
 * has no autocast casts inside. */
static void test_autocast_attention_gives_bfloat16_output_and_float32_gradient(void **state)
{
    (void)state;
    const int64_t shape[3] = {2, 5, 48};
    struct var *qkv = leaf(randn_t(DT_F32, 3, shape, 1500, 1.0), "qkv"), *y = NULL;
    autocast_bf16_on();
    assert_ok(op_causal_attention(&y, qkv, 4));
    autocast_set((struct autocast_state){0, DT_BF16});
    assert_int_equal(tensor_dtype(y->data), DT_BF16);
    tensor *gy = grad_like(y->data, 1501);
    assert_ok(tape_backward(&y, &gy, 1));
    assert_non_null(qkv->grad);
    assert_int_equal(tensor_dtype(qkv->grad), DT_F32);
    assert_int_equal(tensor_size(qkv->grad, 2), 48);
    tensor_free(gy);
    var_release(y);
    var_release(qkv);
}

/* ---- main ---------------------------------------------------------------------------------- */

#define T(name) cmocka_unit_test_setup(name, reset_state)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_linear_with_bias_float32_is_bitwise_torch),
        T(test_linear_without_bias_float32_is_bitwise_torch),
        T(test_linear_with_bias_bfloat16_is_bitwise_torch),
        T(test_linear_without_bias_bfloat16_is_bitwise_torch),
        T(test_linear_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_gelu_exact_float32_is_bitwise_torch),
        T(test_gelu_tanh_float32_is_bitwise_torch),
        T(test_gelu_exact_bfloat16_is_bitwise_torch),
        T(test_gelu_tanh_bfloat16_is_bitwise_torch),
        T(test_gelu_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_add_broadcasting_float32_is_bitwise_torch),
        T(test_scale_by_a_number_is_bitwise_torch),
        T(test_add_broadcasting_bfloat16_is_bitwise_torch),
        T(test_add_broadcasting_float16_is_bitwise_torch),
        T(test_add_mixed_dtypes_promotes_and_casts_gradients_back_like_torch),
        T(test_bias_gelu_unfused_float32_is_bitwise_torch),
        T(test_bias_gelu_unfused_bfloat16_is_bitwise_torch),
        T(test_bias_gelu_unfused_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_layer_norm_float32_is_bitwise_torch),
        T(test_layer_norm_bfloat16_is_bitwise_torch),
        T(test_layer_norm_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_causal_attention_float32_is_bitwise_torch),
        T(test_causal_attention_bfloat16_is_bitwise_torch),
        T(test_causal_attention_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_mse_loss_float32_is_bitwise_torch),
        T(test_mse_loss_dtarget_where_x_equals_target_has_torchs_sign_of_zero),
        T(test_mse_loss_bfloat16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_mse_loss_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_cross_entropy_float32_is_bitwise_torch),
        T(test_cross_entropy_bfloat16_is_bitwise_torch),
        T(test_cross_entropy_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_autocast_linear_runs_in_bfloat16_and_returns_float32_gradients),
        T(test_autocast_layer_norm_runs_in_float32),
        T(test_autocast_mse_loss_runs_in_float32),
        T(test_autocast_cross_entropy_runs_in_float32),
        T(test_autocast_attention_gives_bfloat16_output_and_float32_gradient),
    };
    return cmocka_run_group_tests(tests, setup_group, NULL);
}
