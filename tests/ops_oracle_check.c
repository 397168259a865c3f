/* ops_oracle_check: the checks the ops suites share (ops_oracle_check.h):
 * seeded inputs, bitwise comparison with libtorch's autograd through the
 * oracle, dtype probes and the element-wise bounded comparison. */
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
#include "compare.h"
#include "error.h"
#include "half_convert.h"
#include "tape.h"

/* TEST_OPS_REPORT: set by setup_group, read through ops_report. */
static int g_report;

int ops_report(void) { return g_report; }

void free_tensors(tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        tensor_free(ts[i]);
        ts[i] = NULL;
    }
}

tensor *randn_t(enum dtype dt, int nd, const int64_t *shape, uint64_t seed, double std)
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

tensor *grad_like(const tensor *y, uint64_t seed)
{
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(y, shape);
    assert_true(nd >= 0);
    return randn_t(tensor_dtype(y), nd, shape, seed, 1.0);
}

tensor *cast(const tensor *t, enum dtype dt)
{
    tensor *c = NULL;
    assert_ok(tensor_to_dtype(&c, t, dt));
    return c;
}

struct var *leaf(tensor *t, const char *name)
{
    struct var *v = NULL;
    assert_ok(var_leaf(&v, t, 1, name));
    return v;
}

struct var *constant(tensor *t)
{
    struct var *v = NULL;
    assert_ok(var_constant(&v, t));
    return v;
}

const char *shape_str(int nd, const int64_t *shape, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < nd && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

void label_of(char *buf, size_t len, const char *op, enum dtype dt, int nd, const int64_t *shape)
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

void expect_bitwise(const char *what, const tensor *ours, const tensor *torch)
{
    struct tensor_diff d = diff_of(what, ours, torch);
    if (!d.bitwise_equal)
        fail_msg("%s: not bitwise torch's: %zu of %zu elements differ, max %llu ULP (flat index %zu); "
                 "first at %zu: ours %.9g, torch %.9g",
                 what, d.n_differ, d.count, (unsigned long long)d.max_ulp, d.max_ulp_index, d.first_index,
                 d.first_a, d.first_b);
}

void check_bitwise_against_torch(const struct oracle_case *c, struct var *y, uint64_t grad_seed)
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

/* ---- dtypes a libtorch may lack ------------------------------------------ */

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

int torch_runs_else_ours_fails_alike(const struct probe *p, apply_fn apply)
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

void probe_release(struct probe *p)
{
    for (int i = 0; i < p->n_v; i++)
        var_release(p->v[i]);
}

int setup_group(void **state)
{
    (void)state;
    g_report = getenv("TEST_OPS_REPORT") != NULL;
    return aten_init() == ST_OK ? 0 : -1;
}

int reset_state(void **state)
{
    (void)state;
    grad_mode_set(1);
    autocast_set((struct autocast_state){0, DT_BF16});
    error_clear();
    return 0;
}

const struct shape k_shapes[4] = {
    {2, {1, 16}},
    {3, {1, 7, 16}},
    {3, {3, 5, 16}},
    {3, {2, 9, 33}},
};

/* ---- element-wise comparison on the host -------------------------------- */

struct floats host_floats(const tensor *t)
{
    tensor *f = cast(t, DT_F32);
    struct host_tensor h = {0};
    assert_ok(tensor_to_host(f, &h));
    tensor_free(f);
    return (struct floats){h.data, h.numel};
}

int mantissa_bits(enum dtype dt) { return dt == DT_F32 ? 23 : dt == DT_BF16 ? 7 : 10; }
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

struct elem_result elem_compare(const struct elem_check *k)
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
