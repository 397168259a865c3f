/* test_ops_random: the ops of harness/autograd/ops.h that draw from a
 * generator (dropout, bias+dropout+add, RReLU) or are the harness's own
 * kernel held to measured bounds (the fused bias+GELU), with the dtype cast
 * and the backward memory checks, forward and backward through the tape
 * against libtorch's own autograd (harness/aten/oracle.h) on seeded random
 * inputs, as test_ops does (the shared checks: tests/ops_oracle_check.h).
 *
 * The random ops are bitwise torch's from the same generator state: each
 * side seeds the CPU generator identically right before it draws. The
 * fused bias+GELU, a scalar C kernel, cannot be bitwise and is held to
 * measured bounds, below. Which CPU kernels exist in float16 depends on the
 * libtorch (1.13 lacks Half bernoulli and rrelu; 2.x has them): those tests
 * ask this libtorch (the oracle) what it does on the same inputs and hold
 * the harness to it either way: where torch runs the op, ours is bitwise
 * torch's; where torch errors, ours returns a non-OK status with a message
 * at the same point (forward or backward) instead of crashing.
 *
 * TEST_OPS_REPORT=1 in the environment prints every comparison (bitwise or
 * max ULP), which is how the bounds below were measured. */
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

/* ---- fused bias + GELU (the harness's own kernel) ----------------------------
 *
 * Not ATen: a scalar C kernel in float32 with libm's tanhf, where ATen's CPU
 * GELU is vectorised with its own tanh, so it cannot be bitwise. It is
 * compared element by element (v = x + b, formed in float32 as the kernel
 * does) with bounds of the form
 *     |ours - torch| <= a * ulp_dt(value) + c * scale
 * absolute rather than in ULP, because both sides lose relative accuracy
 * where the formula cancels: in 1 + tanh(u) below v = -0.5 (float32 tanh
 * near -1 has an ULP of 2^-25, far above 1 + tanh there, and the output,
 * v (1 + tanh u) / 2, is tiny: float32 outputs near v = -8 differ in sign),
 * and, for dx, in 1 - tanh^2 for large |v| and around gelu' = 0 at
 * v = -0.75. Where nothing cancels the max ULP is asserted as well.
 * dbias is not measured but bounded by summation error analysis (the sides
 * sum different dx in different orders, each within (rows - 1) 2^-24 Σ|dx|):
 *     |Δdbias_c| <= Σ_r |Δdx_rc| + 2 rows 2^-24 Σ_r |dx_rc|
 * (+ 1 ULP of dbias in a 16-bit dtype, + half an ULP of each dx when torch
 * sums unrounded float32 dx).
 *
 * Against torch bfloat16 the reference itself is the inaccurate side:
 * libtorch 1.13's bf16 GELU (Vectorized<BFloat16>) rounds every
 * intermediate to bf16 (x^3, the inner product, tanh, 1 + tanh, ...), and
 * torch rounds x + b to bf16 first, so near v = -2 its 1 + tanh is off by
 * ~6% (ours -0.03540, torch -0.03735 at one element): there the scales are
 * |v| 2^-8 for y and |dy| max(1, |v|)^3 2^-8 for dx. Against torch float32
 * on the widened inputs, rounded to the dtype (the kernel's own math), bf16
 * and f16 are within 1 ULP plus the float32 error.
 *
 * Every constant below is the max measured with TEST_OPS_REPORT=1 over
 * seeds 1..200 of fused_against_torch (-DFUSED_SEEDS=200; the test runs
 * FUSED_SEEDS = 5) on glibc 2.36 tanhf, x86-64 (ATen CPU capability AVX2),
 * Debian libtorch 1.13.1:
 *   float32 vs torch float32: y  3 ULP where v >= -0.5, c_y = 3.48
 *                                (scale max(1, |v|) 2^-24; the kernel's
 *                                header says 3 ULP and 3.5 from 2M elements)
 *                             dx 8 ULP where -0.5 <= v <= 1, c_dx = 18.94
 *                                (scale |dy| 2^-24; the header says 19)
 *   bf16 vs torch bf16:       y  2 ULP where v >= -0.5, c_y = 1.60
 *                             dx 6 ULP where -0.5 <= v <= 1, c_dx = 2.01
 *   bf16 / f16 vs torch f32 rounded: y and dx within 1 ULP where nothing
 *                                cancels; needs c_y 0.5, c_dx 18.24 (f16 18.03)
 *                                on top of 1 ULP elsewhere (the float32 terms). */
#define BOUND_F32_YULP 3
#define BOUND_F32_CY 3.5
#define BOUND_F32_DXULP 8
#define BOUND_F32_CDX 19.0
#define BOUND_BF16_YULP 2
#define BOUND_BF16_CY 1.6
#define BOUND_BF16_DXULP 6
#define BOUND_BF16_CDX 2.05

/* Everything one fused comparison needs, on the host as float32. */
struct fused_run {
    enum dtype dt;
    size_t rows, cols;
    struct floats x, b, dy, y, dx, db; /* ours (and the inputs) */
    float *v;                          /* x + b in float32, as the kernel forms it */
};

static void fused_run_free(struct fused_run *f)
{
    free(f->x.v);
    free(f->b.v);
    free(f->dy.v);
    free(f->y.v);
    free(f->dx.v);
    free(f->db.v);
    free(f->v);
}

/* Runs op_bias_gelu_fused forward and backward on x [shape] (std 2), b
 * [cols] (std 1), dy (std 1); keeps the tensors for the oracle. */
static void fused_forward_backward(struct fused_run *f, enum dtype dt, const struct shape *sh, uint64_t seed,
                                   enum fused_variant variant, tensor **x_t, tensor **b_t, tensor **dy_t)
{
    memset(f, 0, sizeof *f);
    f->dt = dt;
    f->cols = (size_t)sh->s[sh->nd - 1];
    struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed, 2.0), "x");
    struct var *b = leaf(randn_t(dt, 1, &sh->s[sh->nd - 1], seed + 1, 1.0), "b");
    struct var *y = NULL;
    assert_ok(op_bias_gelu_fused(&y, x, b, variant));
    assert_string_equal(op_name_of(y->grad_fn),
                        variant == FUSED_ATOMIC ? "bias_gelu_fused_atomic" : "bias_gelu_fused");
    assert_int_equal(tensor_dtype(y->data), dt);
    tensor *gy = grad_like(y->data, seed + 2);
    assert_ok(tape_backward(&y, &gy, 1));
    f->x = host_floats(x->data);
    f->b = host_floats(b->data);
    f->dy = host_floats(gy);
    f->y = host_floats(y->data);
    f->dx = host_floats(x->grad);
    f->db = host_floats(b->grad);
    f->rows = f->x.n / f->cols;
    f->v = malloc(f->x.n * sizeof *f->v);
    assert_non_null(f->v);
    for (size_t i = 0; i < f->x.n; i++)
        f->v[i] = f->x.v[i] + f->b.v[i % f->cols];
    assert_ok(tensor_share(x_t, x->data));
    assert_ok(tensor_share(b_t, b->data));
    *dy_t = gy;
    var_release(y);
    var_release(x);
    var_release(b);
}

/* The reference: torch's "bias_gelu_tanh" on the inputs in `ref_dt`, its
 * results rounded to f->dt (a no-op when ref_dt is f->dt). */
static void fused_reference(const struct fused_run *f, const tensor *x, const tensor *b, const tensor *dy,
                            enum dtype ref_dt, struct floats *y, struct floats *dx, struct floats *db)
{
    tensor *in_t[3] = {cast(x, ref_dt), cast(b, ref_dt), cast(dy, ref_dt)};
    const tensor *in[2] = {in_t[0], in_t[1]};
    tensor *yt = NULL, *g[2] = {NULL, NULL};
    assert_ok(oracle_run("bias_gelu_tanh", in, 2, NULL, 0, in_t[2], &yt, g));
    tensor *r[3] = {cast(yt, f->dt), cast(g[0], f->dt), cast(g[1], f->dt)};
    *y = host_floats(r[0]);
    *dx = host_floats(r[1]);
    *db = host_floats(r[2]);
    free_tensors(in_t, 3);
    free_tensors(r, 3);
    tensor_free(yt);
    free_tensors(g, 2);
}

struct fused_bounds {
    /* y: |Δ| <= y_ulps * ulp_dt + c_y * scale_y; dx likewise with scale_dx.
     * Scales: against an accurate (float32) torch, max(1, |v|) 2^-24 and
     * |dy| 2^-24; against torch's bfloat16 GELU (torch_bf16_steps), which
     * rounds every intermediate to bf16, |v| 2^-8 and |dy| max(1, |v|)^3 2^-8. */
    double y_ulps, c_y;
    double dx_ulps, c_dx;
    /* max ULP of y where v >= -0.5 and of dx where -0.5 <= v <= 1 */
    uint64_t y_ulp_upper, dx_ulp_upper;
    int torch_bf16_steps;
};

static void fused_check(const char *label, const struct fused_run *f, const struct floats *ry,
                        const struct floats *rdx, const struct floats *rdb, const struct fused_bounds *bd)
{
    size_t n = f->x.n;
    float *sy = malloc(n * sizeof *sy), *sdx = malloc(n * sizeof *sdx);
    unsigned char *upper = malloc(n), *upper_dx = malloc(n);
    assert_true(sy && sdx && upper && upper_dx);
    for (size_t i = 0; i < n; i++) {
        double v = f->v[i], dy = fabs(f->dy.v[i]), big = fmax(1.0, fabs(v));
        if (bd->torch_bf16_steps) {
            sy[i] = (float)(fabs(v) * 0x1p-8);
            sdx[i] = (float)(dy * big * big * big * 0x1p-8);
        } else {
            sy[i] = (float)(big * TWO_M24);
            sdx[i] = (float)(dy * TWO_M24);
        }
        upper[i] = v >= -0.5;
        upper_dx[i] = v >= -0.5 && v <= 1.0;
    }
    char what[192];
    snprintf(what, sizeof what, "%s: y", label);
    struct elem_check ky = {what, f->dt, bd->y_ulps, bd->c_y, f->y.v, ry->v, sy, NULL, upper, n};
    struct elem_result r = elem_compare(&ky);
    if (r.ulp_upper > bd->y_ulp_upper)
        fail_msg("%s: %llu ULP from torch where v >= -0.5 (bound %llu)", what, (unsigned long long)r.ulp_upper,
                 (unsigned long long)bd->y_ulp_upper);
    snprintf(what, sizeof what, "%s: dx", label);
    struct elem_check kdx = {what, f->dt, bd->dx_ulps, bd->c_dx, f->dx.v, rdx->v, sdx, NULL, upper_dx, n};
    r = elem_compare(&kdx);
    if (r.ulp_upper > bd->dx_ulp_upper)
        fail_msg("%s: %llu ULP from torch where -0.5 <= v <= 1 (bound %llu)", what, (unsigned long long)r.ulp_upper,
                 (unsigned long long)bd->dx_ulp_upper);

    /* dbias: summation error analysis, nothing measured. */
    size_t cols = f->cols;
    float *zero = calloc(cols, sizeof *zero), *edb = calloc(cols, sizeof *edb);
    assert_true(zero && edb);
    for (size_t c = 0; c < cols; c++) {
        double sum_abs = 0.0, sum_diff = 0.0;
        for (size_t r0 = 0; r0 < f->rows; r0++) {
            sum_abs += fabs(f->dx.v[r0 * cols + c]);
            sum_diff += fabs((double)f->dx.v[r0 * cols + c] - rdx->v[r0 * cols + c]);
        }
        /* a float32 torch sums unrounded dx: up to half an ULP of dt each */
        double rounding = f->dt == DT_F32 || bd->torch_bf16_steps ? 0.0 : ldexp(sum_abs, -mantissa_bits(f->dt) - 1);
        edb[c] = (float)(sum_diff + 2.0 * (double)f->rows * TWO_M24 * sum_abs + rounding);
    }
    snprintf(what, sizeof what, "%s: dbias", label);
    struct elem_check kdb = {what, f->dt, f->dt == DT_F32 ? 0.0 : 1.0, 0.0, f->db.v, rdb->v, zero, edb, NULL, cols};
    elem_compare(&kdb);
    free(sy);
    free(sdx);
    free(upper);
    free(upper_dx);
    free(zero);
    free(edb);
}

static const struct shape k_fused_shapes[] = {
    {2, {1, 33}},
    {3, {1, 7, 64}},
    {3, {4, 16, 96}},
};

#ifndef FUSED_SEEDS
#define FUSED_SEEDS 5
#endif

/* Our fused kernel vs torch's bias_gelu_tanh in ref_dt (results rounded to dt). */
static void fused_against_torch(enum dtype dt, enum dtype ref_dt, const struct fused_bounds *bd)
{
    for (int i = 0; i < COUNT(k_fused_shapes); i++)
        for (uint64_t seed = 1; seed <= FUSED_SEEDS; seed++) {
            struct fused_run f;
            tensor *x = NULL, *b = NULL, *dy = NULL;
            fused_forward_backward(&f, dt, &k_fused_shapes[i], 1000 * seed + (uint64_t)i, FUSED_DETERMINISTIC, &x, &b,
                                   &dy);
            struct floats ry, rdx, rdb;
            fused_reference(&f, x, b, dy, ref_dt, &ry, &rdx, &rdb);
            char label[128], op[64];
            snprintf(op, sizeof op, "bias_gelu_fused vs torch %s", dtype_name(ref_dt));
            label_of(label, sizeof label, op, dt, k_fused_shapes[i].nd, k_fused_shapes[i].s);
            fused_check(label, &f, &ry, &rdx, &rdb, bd);
            free(ry.v);
            free(rdx.v);
            free(rdb.v);
            fused_run_free(&f);
            tensor_free(x);
            tensor_free(b);
            tensor_free(dy);
        }
}

/* float32 against torch float32. */
static void test_bias_gelu_fused_float32_is_within_measured_bounds_of_torch(void **state)
{
    (void)state;
    const struct fused_bounds bd = {
        .y_ulps = 0, .c_y = BOUND_F32_CY, .dx_ulps = 0, .c_dx = BOUND_F32_CDX,
        .y_ulp_upper = BOUND_F32_YULP, .dx_ulp_upper = BOUND_F32_DXULP,
    };
    fused_against_torch(DT_F32, DT_F32, &bd);
}

/* bfloat16 against torch bfloat16 (the unfused semantics: torch rounds x + b
 * to bf16 before GELU, the fused kernel does not). */
static void test_bias_gelu_fused_bfloat16_is_within_measured_bounds_of_torch_bfloat16(void **state)
{
    (void)state;
    const struct fused_bounds bd = {
        .y_ulps = 1, .c_y = BOUND_BF16_CY, .dx_ulps = 1, .c_dx = BOUND_BF16_CDX,
        .y_ulp_upper = BOUND_BF16_YULP, .dx_ulp_upper = BOUND_BF16_DXULP, .torch_bf16_steps = 1,
    };
    fused_against_torch(DT_BF16, DT_BF16, &bd);
}

/* bfloat16 against torch float32 on the widened inputs, rounded to bf16:
 * the same math as the kernel (f32 sum, f32 GELU, one rounding). */
static void test_bias_gelu_fused_bfloat16_is_within_one_ulp_of_torch_float32_rounded(void **state)
{
    (void)state;
    const struct fused_bounds bd = {
        .y_ulps = 1, .c_y = BOUND_F32_CY, .dx_ulps = 1, .c_dx = BOUND_F32_CDX,
        .y_ulp_upper = 1, .dx_ulp_upper = 1,
    };
    fused_against_torch(DT_BF16, DT_F32, &bd);
}

/* float16: the reference is torch in float32 on the widened inputs,
 * rounded to f16 (every libtorch has it; 1.13 CPU has no Half GELU). */
static void test_bias_gelu_fused_float16_is_within_one_ulp_of_torch_float32_rounded(void **state)
{
    (void)state;
    const struct fused_bounds bd = {
        .y_ulps = 1, .c_y = BOUND_F32_CY, .dx_ulps = 1, .c_dx = BOUND_F32_CDX,
        .y_ulp_upper = 1, .dx_ulp_upper = 1,
    };
    fused_against_torch(DT_F16, DT_F32, &bd);
}

/* The atomic variant: y and dx are bitwise the deterministic variant's (dx
 * does not depend on the reduction); dbias differs only by summation order:
 * each side's error is at most (rows - 1) 2^-24 Σ|dx|, plus one rounding to
 * dt for the 16-bit dtypes. */
static void atomic_vs_deterministic(enum dtype dt)
{
    const struct shape sh = {3, {8, 64, 96}};
    struct fused_run det, at;
    tensor *x = NULL, *b = NULL, *dy = NULL;
    fused_forward_backward(&det, dt, &sh, 77, FUSED_DETERMINISTIC, &x, &b, &dy);
    free_tensors((tensor *[]){x, b, dy}, 3);
    size_t differing = 0;
    for (int rep = 0; rep < 3; rep++) {
        fused_forward_backward(&at, dt, &sh, 77, FUSED_ATOMIC, &x, &b, &dy);
        assert_memory_equal(at.y.v, det.y.v, det.y.n * sizeof(float));
        assert_memory_equal(at.dx.v, det.dx.v, det.dx.n * sizeof(float));
        float *zero = calloc(det.cols, sizeof *zero), *bound = calloc(det.cols, sizeof *bound);
        assert_true(zero && bound);
        for (size_t c = 0; c < det.cols; c++) {
            double sum_abs = 0.0;
            for (size_t r = 0; r < det.rows; r++)
                sum_abs += fabs(det.dx.v[r * det.cols + c]);
            bound[c] = (float)(2.0 * (double)(det.rows - 1) * TWO_M24 * sum_abs);
            differing += at.db.v[c] != det.db.v[c];
        }
        char what[128];
        snprintf(what, sizeof what, "bias_gelu_fused atomic vs deterministic %s: dbias", dtype_name(dt));
        struct elem_check k = {what, dt, dt == DT_F32 ? 0.0 : 1.0, 0.0, at.db.v, det.db.v, zero, bound, NULL, det.cols};
        elem_compare(&k);
        free(zero);
        free(bound);
        fused_run_free(&at);
        free_tensors((tensor *[]){x, b, dy}, 3);
    }
    if (ops_report())
        print_message("  atomic %s: %zu of %zu dbias values differed over 3 runs\n", dtype_name(dt), differing,
                      3 * det.cols);
    fused_run_free(&det);
}

static void test_bias_gelu_fused_atomic_float32_dx_bitwise_dbias_within_summation_bound(void **state)
{
    (void)state;
    atomic_vs_deterministic(DT_F32);
}

static void test_bias_gelu_fused_atomic_bfloat16_dx_bitwise_dbias_within_summation_bound(void **state)
{
    (void)state;
    atomic_vs_deterministic(DT_BF16);
}

/* ---- dropout ------------------------------------------------------------------- */

static void dropout_all_shapes(enum dtype dt)
{
    static const double ps[2] = {0.1, 0.5};
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (int j = 0; j < 2; j++) {
            const struct shape *sh = &k_shapes[i];
            uint64_t seed = 200 + 10 * (uint64_t)i + (uint64_t)j;
            struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed, 1.0), "x"), *y = NULL;
            assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed + 1));
            assert_ok(op_dropout(&y, x, ps[j]));
            struct oracle_case c = {.op = "dropout", .in = {x}, .n_in = 1, .params = {ps[j]}, .n_params = 1,
                                    .reseed = 1, .seed = seed + 1};
            char op[32];
            snprintf(op, sizeof op, "dropout p=%.1f", ps[j]);
            label_of(c.label, sizeof c.label, op, dt, sh->nd, sh->s);
            check_bitwise_against_torch(&c, y, seed + 2);
            var_release(y);
            var_release(x);
        }
}

static void test_dropout_float32_is_bitwise_torch_from_the_same_generator_state(void **state)
{
    (void)state;
    dropout_all_shapes(DT_F32);
}

static void test_dropout_bfloat16_is_bitwise_torch_from_the_same_generator_state(void **state)
{
    (void)state;
    dropout_all_shapes(DT_BF16);
}

static int apply_dropout(struct var **y, const struct probe *p) { return op_dropout(y, p->v[0], p->params[0]); }

/* 1.13 CPU: "bernoulli_scalar_cpu_" not implemented for 'Half'. */
static void test_dropout_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    struct probe p = {.what = "dropout float16", .oracle_op = "dropout", .n_v = 1, .n_in = 1, .params = {0.3},
                      .n_params = 1};
    p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "x");
    p.in[0] = p.v[0]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_dropout))
        dropout_all_shapes(DT_F16);
    probe_release(&p);
}

/* The CPU generator's state, to tell whether an op drew. */
static void rng_state(uint8_t **st, size_t *len)
{
    assert_ok(aten_rng_get_state(DEVICE_CPU, st, len));
}

static void assert_rng_state_is(const uint8_t *st, size_t len)
{
    uint8_t *now = NULL;
    size_t now_len = 0;
    rng_state(&now, &now_len);
    assert_int_equal(now_len, len);
    assert_memory_equal(now, st, len);
    free(now);
}

/* p = 0: x itself, no node, nothing drawn (as torch, which returns its
 * input and draws nothing). */
static void test_dropout_p0_is_the_input_itself_and_draws_nothing(void **state)
{
    (void)state;
    const int64_t xs[3] = {2, 3, 8};
    struct var *x = leaf(randn_t(DT_F32, 3, xs, 5, 1.0), "x"), *y = NULL;
    uint8_t *before = NULL;
    size_t len = 0;
    rng_state(&before, &len);
    assert_ok(op_dropout(&y, x, 0.0));
    assert_ptr_equal(y, x);
    assert_rng_state_is(before, len);
    free(before);
    var_release(y);
    var_release(x);
}

/* p = 1: all zeros, zero gradients, bitwise torch's (x * 0 keeps x's sign),
 * and like torch nothing is drawn. */
static void test_dropout_p1_zeroes_everything_and_draws_nothing_like_torch(void **state)
{
    (void)state;
    const int64_t xs[3] = {2, 3, 8};
    struct var *x = leaf(randn_t(DT_F32, 3, xs, 6, 1.0), "x"), *y = NULL;
    uint8_t *before = NULL;
    size_t len = 0;
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, 7));
    rng_state(&before, &len);
    assert_ok(op_dropout(&y, x, 1.0));
    assert_rng_state_is(before, len);
    struct oracle_case c = {.op = "dropout", .in = {x}, .n_in = 1, .params = {1.0}, .n_params = 1,
                            .reseed = 1, .seed = 7};
    label_of(c.label, sizeof c.label, "dropout p=1", DT_F32, 3, xs);
    check_bitwise_against_torch(&c, y, 8);
    free(before);
    var_release(y);
    var_release(x);
}

/* ---- bias + dropout + residual add ------------------------------------------------ */

static void bias_dropout_add_all_shapes(enum dtype dt)
{
    static const double ps[3] = {0.0, 0.1, 0.5};
    for (int i = 0; i < COUNT(k_shapes); i++)
        for (int j = 0; j < 3; j++) {
            const struct shape *sh = &k_shapes[i];
            uint64_t seed = 300 + 10 * (uint64_t)i + (uint64_t)j;
            struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed, 1.0), "x");
            struct var *b = leaf(randn_t(dt, 1, &sh->s[sh->nd - 1], seed + 1, 1.0), "b");
            struct var *r = leaf(randn_t(dt, sh->nd, sh->s, seed + 2, 1.0), "residual"), *y = NULL;
            assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed + 3));
            assert_ok(op_bias_dropout_add(&y, x, b, r, ps[j]));
            struct oracle_case c = {.op = "bias_dropout_add", .in = {x, b, r}, .n_in = 3, .params = {ps[j]},
                                    .n_params = 1, .reseed = 1, .seed = seed + 3};
            char op[40];
            snprintf(op, sizeof op, "bias_dropout_add p=%.1f", ps[j]);
            label_of(c.label, sizeof c.label, op, dt, sh->nd, sh->s);
            check_bitwise_against_torch(&c, y, seed + 4);
            var_release(y);
            var_release(x);
            var_release(b);
            var_release(r);
        }
}

static void test_bias_dropout_add_float32_is_bitwise_torch_from_the_same_generator_state(void **state)
{
    (void)state;
    bias_dropout_add_all_shapes(DT_F32);
}

static void test_bias_dropout_add_bfloat16_is_bitwise_torch_from_the_same_generator_state(void **state)
{
    (void)state;
    bias_dropout_add_all_shapes(DT_BF16);
}

static int apply_bias_dropout_add(struct var **y, const struct probe *p)
{
    return op_bias_dropout_add(y, p->v[0], p->v[1], p->v[2], p->params[0]);
}

/* 1.13: the adds work in Half; the bernoulli draw does not. */
static void test_bias_dropout_add_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    struct probe p = {.what = "bias_dropout_add float16", .oracle_op = "bias_dropout_add", .n_v = 3, .n_in = 3,
                      .params = {0.3}, .n_params = 1};
    p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "x");
    p.v[1] = leaf(randn_t(DT_F16, 1, &xs[1], 2, 1.0), "b");
    p.v[2] = leaf(randn_t(DT_F16, 2, xs, 3, 1.0), "residual");
    for (int i = 0; i < 3; i++)
        p.in[i] = p.v[i]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_bias_dropout_add))
        bias_dropout_add_all_shapes(DT_F16);
    probe_release(&p);
}

/* ---- RReLU ------------------------------------------------------------------------------- */

static void rrelu_all_shapes(enum dtype dt)
{
    for (int i = 0; i < COUNT(k_shapes); i++) {
        const struct shape *sh = &k_shapes[i];
        uint64_t seed = 800 + 10 * (uint64_t)i;
        struct var *x = leaf(randn_t(dt, sh->nd, sh->s, seed, 1.0), "x"), *y = NULL;
        assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed + 1));
        assert_ok(op_rrelu(&y, x, 0.1, 0.3));
        struct oracle_case c = {.op = "rrelu", .in = {x}, .n_in = 1, .params = {0.1, 0.3}, .n_params = 2,
                                .reseed = 1, .seed = seed + 1};
        label_of(c.label, sizeof c.label, "rrelu", dt, sh->nd, sh->s);
        check_bitwise_against_torch(&c, y, seed + 2);
        var_release(y);
        var_release(x);
    }
}

static void test_rrelu_float32_is_bitwise_torch_from_the_same_generator_state(void **state)
{
    (void)state;
    rrelu_all_shapes(DT_F32);
}

static void test_rrelu_bfloat16_is_bitwise_torch_from_the_same_generator_state(void **state)
{
    (void)state;
    rrelu_all_shapes(DT_BF16);
}

static int apply_rrelu(struct var **y, const struct probe *p)
{
    return op_rrelu(y, p->v[0], p->params[0], p->params[1]);
}

/* 1.13 CPU: "rrelu_with_noise_out_cpu" not implemented for 'Half'. */
static void test_rrelu_float16_is_bitwise_torch_or_an_error_as_in_torch(void **state)
{
    (void)state;
    const int64_t xs[2] = {3, 8};
    struct probe p = {.what = "rrelu float16", .oracle_op = "rrelu", .n_v = 1, .n_in = 1, .params = {0.1, 0.3},
                      .n_params = 2};
    p.v[0] = leaf(randn_t(DT_F16, 2, xs, 1, 1.0), "x");
    p.in[0] = p.v[0]->data;
    if (torch_runs_else_ours_fails_alike(&p, apply_rrelu))
        rrelu_all_shapes(DT_F16);
    probe_release(&p);
}

/* ---- dtype cast ------------------------------------------------------------------------ */

static void test_to_dtype_every_float_pair_is_bitwise_torch(void **state)
{
    (void)state;
    static const enum dtype dts[3] = {DT_F32, DT_BF16, DT_F16};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) {
                const struct shape *sh = &k_shapes[k == 0 ? 0 : 3];
                uint64_t seed = 900 + 10 * (uint64_t)(3 * i + j) + (uint64_t)k;
                /* std 100: values that round differently in each format */
                struct var *x = leaf(randn_t(dts[i], sh->nd, sh->s, seed, 100.0), "x"), *y = NULL;
                assert_ok(op_to_dtype(&y, x, dts[j]));
                assert_int_equal(tensor_dtype(y->data), dts[j]);
                struct oracle_case c = {.op = "to_dtype", .in = {x}, .n_in = 1, .params = {(double)dts[j]},
                                        .n_params = 1};
                char op[48];
                snprintf(op, sizeof op, "to_dtype ->%s", dtype_name(dts[j]));
                label_of(c.label, sizeof c.label, op, dts[i], sh->nd, sh->s);
                check_bitwise_against_torch(&c, y, seed + 1);
                assert_int_equal(tensor_dtype(x->grad), dts[i]);
                var_release(y);
                var_release(x);
            }
}

/* ---- backward memory ------------------------------------------------------------------------ */

/* Linear's backward allocates its three gradients and nothing that outlives
 * an op: dW is computed in W's own layout, not as a transposed product
 * copied into place (which held a second weight-sized buffer at the peak
 * of every reentrant checkpoint's nested backward). */
static void test_linear_backward_peak_is_its_gradients(void **state)
{
    (void)state;
    const int64_t xs[3] = {4, 8, 16}, ws[2] = {24, 16}, bs[1] = {24};
    struct var *x = leaf(randn_t(DT_F32, 3, xs, 1601, 1.0), "x");
    struct var *w = leaf(randn_t(DT_F32, 2, ws, 1602, 0.25), "w");
    struct var *b = leaf(randn_t(DT_F32, 1, bs, 1603, 0.25), "b");
    struct var *y = NULL;
    assert_ok(op_linear(&y, x, w, b));
    tensor *gy = grad_like(y->data, 1604);
    int64_t live0, peak, count;
    ckpt_counting_allocator_stats(&live0, &peak, &count);
    ckpt_counting_allocator_reset_peak();
    assert_ok(tape_backward(&y, &gy, 1));
    int64_t live1;
    ckpt_counting_allocator_stats(&live1, &peak, &count);
    int64_t grads = (int64_t)(tensor_nbytes(x->grad) + tensor_nbytes(w->grad) + tensor_nbytes(b->grad));
    assert_int_equal(grads, (4 * 8 * 16 + 24 * 16 + 24) * 4);
    assert_int_equal(peak - live0, grads);
    assert_int_equal(live1 - live0, grads);
    tensor_free(gy);
    var_release(y);
    var_release(x);
    var_release(w);
    var_release(b);
}

/* Attention frees each intermediate once its consumer ran, as autograd
 * does: forward holds the saved q, k, v and probabilities, the output and at
 * most one [T, T] temporary besides (plus the boolean causal mask), instead
 * of every score tensor it made until it returns. */
static void test_causal_attention_forward_peak_holds_one_score_temporary(void **state)
{
    (void)state;
    const int64_t B = 2, T = 16, C = 8, H = 2;
    const int64_t shape[3] = {B, T, 3 * C};
    struct var *qkv = leaf(randn_t(DT_F32, 3, shape, 1701, 1.0), "qkv");
    const int64_t f32 = 4, head_bytes = B * T * C * f32, scores_bytes = B * H * T * T * f32;
    int64_t live0, peak, count;
    ckpt_counting_allocator_stats(&live0, &peak, &count);
    ckpt_counting_allocator_reset_peak();
    struct var *y = NULL;
    assert_ok(op_causal_attention(&y, qkv, (int)H));
    ckpt_counting_allocator_stats(&count, &peak, &count);
    const int64_t bound = 3 * head_bytes + scores_bytes /* probs, saved */ + head_bytes /* y */ +
                          scores_bytes /* one temporary */ + T * T /* bool mask */;
    print_message("attention forward peak %lld bytes above the start, bound %lld\n", (long long)(peak - live0),
                  (long long)bound);
    assert_true(peak - live0 <= bound);
    var_release(y);
    var_release(qkv);
}

/* ---- main ---------------------------------------------------------------------------------- */

#define T(name) cmocka_unit_test_setup(name, reset_state)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_linear_backward_peak_is_its_gradients),
        T(test_causal_attention_forward_peak_holds_one_score_temporary),
        T(test_bias_gelu_fused_float32_is_within_measured_bounds_of_torch),
        T(test_bias_gelu_fused_bfloat16_is_within_measured_bounds_of_torch_bfloat16),
        T(test_bias_gelu_fused_bfloat16_is_within_one_ulp_of_torch_float32_rounded),
        T(test_bias_gelu_fused_float16_is_within_one_ulp_of_torch_float32_rounded),
        T(test_bias_gelu_fused_atomic_float32_dx_bitwise_dbias_within_summation_bound),
        T(test_bias_gelu_fused_atomic_bfloat16_dx_bitwise_dbias_within_summation_bound),
        T(test_dropout_float32_is_bitwise_torch_from_the_same_generator_state),
        T(test_dropout_bfloat16_is_bitwise_torch_from_the_same_generator_state),
        T(test_dropout_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_dropout_p0_is_the_input_itself_and_draws_nothing),
        T(test_dropout_p1_zeroes_everything_and_draws_nothing_like_torch),
        T(test_bias_dropout_add_float32_is_bitwise_torch_from_the_same_generator_state),
        T(test_bias_dropout_add_bfloat16_is_bitwise_torch_from_the_same_generator_state),
        T(test_bias_dropout_add_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_rrelu_float32_is_bitwise_torch_from_the_same_generator_state),
        T(test_rrelu_bfloat16_is_bitwise_torch_from_the_same_generator_state),
        T(test_rrelu_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_to_dtype_every_float_pair_is_bitwise_torch),
    };
    return cmocka_run_group_tests(tests, setup_group, NULL);
}
