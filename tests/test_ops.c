/* test_ops: every op of harness/autograd/ops.h, forward and backward through the
 * tape, against libtorch's own autograd (harness/aten/oracle.h) on seeded
 * random inputs: leaves that require grad, the op, tape_backward with a
 * random upstream gradient, then the output and each leaf's ->grad compared
 * with the oracle's through the compare module.
 *
 * On CPU both sides end in the same ATen kernels, so every op is expected to
 * be bitwise equal to torch, and is asserted so, with one stated
 * exception: the fused bias+GELU, the harness's own C kernel, held to
 * measured bounds. Which CPU kernels exist in float16 (and a few in
 * bfloat16) depends on the libtorch: 1.13 lacks Half addmm, bmm, gelu,
 * softmax/log_softmax, layer norm, bernoulli, rrelu and mse_loss_backward,
 * and BFloat16 mse_loss; 2.x has most of them. Those tests ask this
 * libtorch (the oracle) what it does on the same inputs and hold the
 * harness to it either way: where torch runs the op, ours is bitwise
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

#include "aten/aten.h"
#include "aten/oracle.h"
#include "autocast.h"
#include "compare.h"
#include "error.h"
#include "half_convert.h"
#include "ops.h"
#include "tape.h"

/* ---- helpers ------------------------------------------------------------- */


#define MAX_IN 4
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int g_report;

static void free_tensors(tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        tensor_free(ts[i]);
        ts[i] = NULL;
    }
}

/* Normal(0, std) drawn in float32 from its own seed, then cast to dt (so the
 * same seed gives the same values, rounded, in every dtype). */
static tensor *randn_t(enum dtype dt, int nd, const int64_t *shape, uint64_t seed, double std)
{
    tensor *f = NULL, *t = NULL;
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed));
    assert_ok(tensor_randn(&f, DT_F32, nd, shape, DEVICE_CPU, std));
    if (dt == DT_F32)
        return f;
    assert_ok(tensor_to_dtype(&t, f, dt));
    tensor_free(f);
    return t;
}

/* An upstream gradient of y's shape and dtype, from its own seed. */
static tensor *grad_like(const tensor *y, uint64_t seed)
{
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(y, shape);
    assert_true(nd >= 0);
    return randn_t(tensor_dtype(y), nd, shape, seed, 1.0);
}

static tensor *cast(const tensor *t, enum dtype dt)
{
    tensor *c = NULL;
    assert_ok(tensor_to_dtype(&c, t, dt));
    return c;
}

/* A leaf that requires grad; takes ownership of t. */
static struct var *leaf(tensor *t, const char *name)
{
    struct var *v = NULL;
    assert_ok(var_leaf(&v, t, 1, name));
    return v;
}

static struct var *constant(tensor *t)
{
    struct var *v = NULL;
    assert_ok(var_constant(&v, t));
    return v;
}

static const char *shape_str(int nd, const int64_t *shape, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < nd && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* "<op> <dtype> [shape]" */
static void label_of(char *buf, size_t len, const char *op, enum dtype dt, int nd, const int64_t *shape)
{
    char s[64];
    snprintf(buf, len, "%s %s %s", op, dtype_name(dt), shape_str(nd, shape, s, sizeof s));
}

/* ours vs torch through compare_tensors; incomparable (dtype or shape) fails. */
static struct tensor_diff diff_of(const char *what, const tensor *ours, const tensor *torch)
{
    struct host_tensor a = {0}, b = {0};
    struct tensor_diff d;
    if (!ours || !torch)
        fail_msg("%s: missing tensor (ours %p, torch %p)", what, (const void *)ours, (const void *)torch);
    assert_ok(tensor_to_host(ours, &a));
    assert_ok(tensor_to_host(torch, &b));
    assert_ok(compare_tensors(&a, &b, &d));
    host_tensor_free(&a);
    host_tensor_free(&b);
    if (!d.comparable)
        fail_msg("%s: not comparable with torch: %s", what, d.why);
    if (g_report) {
        if (d.bitwise_equal)
            print_message("  %-64s bitwise (%zu)\n", what, d.count);
        else
            print_message("  %-64s %zu/%zu differ, max %llu ULP, max abs %.3g\n", what, d.n_differ, d.count,
                          (unsigned long long)d.max_ulp, d.max_abs);
    }
    return d;
}

static void expect_bitwise(const char *what, const tensor *ours, const tensor *torch)
{
    struct tensor_diff d = diff_of(what, ours, torch);
    if (!d.bitwise_equal)
        fail_msg("%s: not bitwise torch's: %zu of %zu elements differ, max %llu ULP (flat index %zu); "
                 "first at %zu: ours %.9g, torch %.9g",
                 what, d.n_differ, d.count, (unsigned long long)d.max_ulp, d.max_ulp_index, d.first_index,
                 d.first_a, d.first_b);
}

/* The oracle's view of one op application: which op, on which vars (in the
 * oracle's input order), with which params. */
struct oracle_case {
    char label[128];
    const char *op;
    struct var *in[MAX_IN];
    int n_in;
    double params[2];
    int n_params;
    /* Random ops: the CPU default generator is seeded with this before the
     * oracle runs; the caller seeds it identically right before our op. */
    int reseed;
    uint64_t seed;
};

/* Backward through the tape from y with a random upstream gradient, then
 * torch on the same inputs and upstream gradient; y and the gradient of
 * every input that requires grad must be bitwise torch's. */
static void check_bitwise_against_torch(const struct oracle_case *c, struct var *y, uint64_t grad_seed)
{
    char what[192];
    assert_non_null(y);
    assert_non_null(y->grad_fn);
    tensor *gy = grad_like(y->data, grad_seed);
    assert_ok(tape_backward(&y, &gy, 1));

    const tensor *in[MAX_IN] = {0};
    for (int i = 0; i < c->n_in; i++)
        in[i] = c->in[i]->data;
    if (c->reseed)
        assert_ok(aten_rng_manual_seed(DEVICE_CPU, c->seed));
    tensor *y_torch = NULL, *g_torch[MAX_IN] = {0};
    assert_ok(oracle_run(c->op, in, c->n_in, c->params, c->n_params, gy, &y_torch, g_torch));

    snprintf(what, sizeof what, "%s: output", c->label);
    expect_bitwise(what, y->data, y_torch);
    for (int i = 0; i < c->n_in; i++) {
        if (!c->in[i]->requires_grad)
            continue;
        snprintf(what, sizeof what, "%s: d%s", c->label, c->in[i]->name);
        if (!c->in[i]->grad)
            fail_msg("%s: no gradient reached the leaf", what);
        expect_bitwise(what, c->in[i]->grad, g_torch[i]);
    }
    tensor_free(gy);
    tensor_free(y_torch);
    free_tensors(g_torch, MAX_IN);
}

/* ---- dtypes a libtorch may lack ---------------------------------------------
 * An op tried on small probe inputs in a dtype whose CPU kernels depend on
 * the libtorch version: ours (apply) and torch's (the oracle) on the same
 * values. */
struct probe {
    const char *what;
    const char *oracle_op;
    struct var *v[MAX_IN]; /* ours */
    int n_v;
    const tensor *in[MAX_IN]; /* the oracle's inputs (the same values) */
    int n_in;
    double params[2]; /* the op's params, as the oracle takes them */
    int n_params;
    int arg; /* what only ours takes: gelu's tanh flag, attention's heads */
};

typedef int (*apply_fn)(struct var **y, const struct probe *p);

/* What this libtorch does with the probe. */
enum torch_support { TORCH_LACKS_FORWARD, TORCH_LACKS_BACKWARD, TORCH_RUNS };

static enum torch_support torch_support_of(const struct probe *p)
{
    static const char *const names[] = {"lacks the forward kernel", "lacks the backward kernel", "runs it"};
    tensor *y = NULL, *g[MAX_IN] = {0};
    enum torch_support s = TORCH_RUNS;
    if (oracle_run(p->oracle_op, p->in, p->n_in, p->params, p->n_params, NULL, &y, NULL) != ST_OK)
        s = TORCH_LACKS_FORWARD;
    tensor_free(y);
    y = NULL;
    if (s == TORCH_RUNS && oracle_run(p->oracle_op, p->in, p->n_in, p->params, p->n_params, NULL, &y, g) != ST_OK)
        s = TORCH_LACKS_BACKWARD;
    tensor_free(y);
    free_tensors(g, MAX_IN);
    error_clear();
    print_message("  %s: libtorch %s %s\n", p->what, aten_libtorch_version(), names[s]);
    return s;
}

/* Our failure is clean: a non-OK status, a one-line message naming the
 * dtype ATen lacks. */
static void expect_dtype_error(int st, const char *what)
{
    if (st == ST_OK)
        fail_msg("%s: ours succeeded where this libtorch errors", what);
    const char *msg = error_message();
    assert_non_null(msg);
    assert_null(strchr(msg, '\n'));
    if (!strstr(msg, "Half") && !strstr(msg, "BFloat16"))
        fail_msg("%s: error message '%s' names no dtype", what, msg);
    error_clear();
}

/* Returns 1 when this libtorch runs the probe forward and backward: the
 * caller then holds ours to torch's results over every shape. Otherwise
 * checks that ours fails where torch does: in the op itself (no output), or
 * in backward after a forward bitwise torch's (both draw from the same
 * generator state). */
static int torch_runs_else_ours_fails_alike(const struct probe *p, apply_fn apply)
{
    enum torch_support s = torch_support_of(p);
    if (s == TORCH_RUNS)
        return 1;
    struct var *y = NULL;
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, 1));
    int st = apply(&y, p);
    if (s == TORCH_LACKS_FORWARD) {
        expect_dtype_error(st, p->what);
        assert_null(y);
        return 0;
    }
    if (st != ST_OK)
        fail_msg("%s: ours failed in forward where torch runs it: %s", p->what, error_message());
    tensor *y_torch = NULL;
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, 1));
    assert_ok(oracle_run(p->oracle_op, p->in, p->n_in, p->params, p->n_params, NULL, &y_torch, NULL));
    char what[192];
    snprintf(what, sizeof what, "%s: output", p->what);
    expect_bitwise(what, y->data, y_torch);
    tensor *gy = grad_like(y->data, 2);
    snprintf(what, sizeof what, "%s: backward", p->what);
    expect_dtype_error(tape_backward(&y, &gy, 1), what);
    for (int i = 0; i < p->n_v; i++)
        assert_null(p->v[i]->grad);
    tensor_free(gy);
    tensor_free(y_torch);
    var_release(y);
    return 0;
}

static void probe_release(struct probe *p)
{
    for (int i = 0; i < p->n_v; i++)
        var_release(p->v[i]);
}

static int setup_group(void **state)
{
    (void)state;
    g_report = getenv("TEST_OPS_REPORT") != NULL;
    return aten_init() == ST_OK ? 0 : -1;
}

/* Every test starts with grad mode on and autocast off, whatever the
 * previous one left after a failure. */
static int reset_state(void **state)
{
    (void)state;
    grad_mode_set(1);
    autocast_set((struct autocast_state){0, DT_BF16});
    error_clear();
    return 0;
}

/* Shapes: a 2-D batch of one row, 3-D with batch 1, 3-D with batch > 1 and
 * an odd last dim (vector tails). */
struct shape {
    int nd;
    int64_t s[3];
};

static const struct shape k_shapes[] = {
    {2, {1, 16}},
    {3, {1, 7, 16}},
    {3, {3, 5, 16}},
    {3, {2, 9, 33}},
};

/* ---- element-wise comparison on the host -------------------------------- */

#define TWO_M24 0x1p-24

struct floats {
    float *v;
    size_t n;
};

/* t's values as float32 on the host (widening is exact). */
static struct floats host_floats(const tensor *t)
{
    tensor *f = cast(t, DT_F32);
    struct host_tensor h = {0};
    assert_ok(tensor_to_host(f, &h));
    tensor_free(f);
    return (struct floats){h.data, h.numel};
}

static int mantissa_bits(enum dtype dt) { return dt == DT_F32 ? 23 : dt == DT_BF16 ? 7 : 10; }
static int min_exponent(enum dtype dt) { return dt == DT_F16 ? -14 : -126; }

/* Spacing of dt's representable values at |r| (the ULP of r in dt). */
static double ulp_dt(double r, enum dtype dt)
{
    int e = min_exponent(dt);
    if (r != 0.0 && isfinite(r)) {
        int fe;
        frexp(fabs(r), &fe); /* |r| = m 2^fe, m in [0.5, 1) */
        if (fe - 1 > e)
            e = fe - 1;
    }
    return ldexp(1.0, e - mantissa_bits(dt));
}

/* ULP distance in dt of two floats that are values of dt. */
static uint64_t ulp_in(float a, float b, enum dtype dt)
{
    if (dt == DT_BF16)
        return ulp_distance_bf16(hc_f32_to_bf16(a), hc_f32_to_bf16(b));
    if (dt == DT_F16)
        return ulp_distance_f16(hc_f32_to_f16(a), hc_f32_to_f16(b));
    return ulp_distance_f32(a, b);
}

/* One element-wise comparison: |ours - ref| <= ulps * ulp_dt + c * scale_i
 * (+ extra_i when extra is not NULL). Fails when the worst ratio |Δ| /
 * bound exceeds 1; returns it with the c the data needed and the max ULP
 * over all elements and over those where upper[i] (all when NULL). */
struct elem_check {
    const char *what;
    enum dtype dt;
    double ulps, c;
    const float *ours, *ref, *scale, *extra;
    const unsigned char *upper;
    size_t n;
};

struct elem_result {
    double worst;          /* max |Δ| / bound */
    size_t worst_i;
    double raw;            /* max (|Δ| - ulps ulp_dt - extra) / scale: the c this data needs */
    uint64_t ulp_upper;    /* max ULP over the upper region */
    uint64_t ulp_all;
};

static struct elem_result elem_compare(const struct elem_check *k)
{
    struct elem_result r = {0};
    for (size_t i = 0; i < k->n; i++) {
        double o = k->ours[i], t = k->ref[i], d = fabs(o - t);
        if (!isfinite(o) || !isfinite(t))
            fail_msg("%s: non-finite value at %zu: ours %g, torch %g", k->what, i, o, t);
        double ulp_part = k->ulps * ulp_dt(fmax(fabs(o), fabs(t)), k->dt);
        double extra = k->extra ? k->extra[i] : 0.0;
        double bound = ulp_part + k->c * k->scale[i] + extra;
        double ratio = d == 0.0 ? 0.0 : bound > 0.0 ? d / bound : INFINITY;
        if (ratio > r.worst) {
            r.worst = ratio;
            r.worst_i = i;
        }
        if (k->scale[i] > 0.0 && (d - ulp_part - extra) / k->scale[i] > r.raw)
            r.raw = (d - ulp_part - extra) / k->scale[i];
        uint64_t u = ulp_in(k->ours[i], k->ref[i], k->dt);
        if (u > r.ulp_all)
            r.ulp_all = u;
        if ((!k->upper || k->upper[i]) && u > r.ulp_upper)
            r.ulp_upper = u;
    }
    if (g_report && k->upper)
        print_message("  %-64s max ULP %llu (in region: %llu), needs c %.2f, |Δ|/bound %.3f\n", k->what,
                      (unsigned long long)r.ulp_all, (unsigned long long)r.ulp_upper, r.raw, r.worst);
    else if (g_report)
        print_message("  %-64s max ULP %llu, needs c %.2f, |Δ|/bound %.3f\n", k->what,
                      (unsigned long long)r.ulp_all, r.raw, r.worst);
    if (r.worst > 1.0)
        fail_msg("%s: element %zu: ours %.9g, torch %.9g, %.3g times the bound", k->what, r.worst_i,
                 (double)k->ours[r.worst_i], (double)k->ref[r.worst_i], r.worst);
    return r;
}

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
    if (g_report)
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
        T(test_linear_with_bias_float32_is_bitwise_torch),
        T(test_linear_without_bias_float32_is_bitwise_torch),
        T(test_linear_with_bias_bfloat16_is_bitwise_torch),
        T(test_linear_without_bias_bfloat16_is_bitwise_torch),
        T(test_linear_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_linear_backward_peak_is_its_gradients),
        T(test_causal_attention_forward_peak_holds_one_score_temporary),
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
        T(test_rrelu_float32_is_bitwise_torch_from_the_same_generator_state),
        T(test_rrelu_bfloat16_is_bitwise_torch_from_the_same_generator_state),
        T(test_rrelu_float16_is_bitwise_torch_or_an_error_as_in_torch),
        T(test_to_dtype_every_float_pair_is_bitwise_torch),
        T(test_autocast_linear_runs_in_bfloat16_and_returns_float32_gradients),
        T(test_autocast_layer_norm_runs_in_float32),
        T(test_autocast_mse_loss_runs_in_float32),
        T(test_autocast_cross_entropy_runs_in_float32),
        T(test_autocast_attention_gives_bfloat16_output_and_float32_gradient),
    };
    return cmocka_run_group_tests(tests, setup_group, NULL);
}
