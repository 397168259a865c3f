#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "run_tensors.h"

/* The per-element helpers are inlined into loops that pass constants, so
 * each dtype gets its own specialised loop (see diff_elements). */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Layout of one IEEE-style binary format: every float dtype we compare is
 * sign | exponent | mantissa, so one bit-level routine serves all four and
 * they cannot drift apart. */
struct float_format {
    int mant_bits;
    int exp_bits;
    int bias;
};

static const struct float_format FMT_F64 = {52, 11, 1023};
static const struct float_format FMT_F32 = {23, 8, 127};
static const struct float_format FMT_BF16 = {7, 8, 127};
static const struct float_format FMT_F16 = {10, 5, 15};

static uint64_t fmt_sign_mask(const struct float_format *f)
{
    return (uint64_t)1 << (f->mant_bits + f->exp_bits);
}

static uint64_t fmt_mant_mask(const struct float_format *f) { return ((uint64_t)1 << f->mant_bits) - 1; }

static uint64_t fmt_exp_mask(const struct float_format *f)
{
    return (((uint64_t)1 << f->exp_bits) - 1) << f->mant_bits;
}

static ALWAYS_INLINE int bits_is_nan(const struct float_format *f, uint64_t v)
{
    return (v & fmt_exp_mask(f)) == fmt_exp_mask(f) && (v & fmt_mant_mask(f)) != 0;
}

static ALWAYS_INLINE int bits_is_inf(const struct float_format *f, uint64_t v)
{
    return (v & fmt_exp_mask(f)) == fmt_exp_mask(f) && (v & fmt_mant_mask(f)) == 0;
}

/* Sign-magnitude bits map onto the number line as +mag / -mag, so the
 * distance is |mag_a - mag_b| on the same side and mag_a + mag_b across zero.
 * That makes +0 and -0 coincide (0 apart) and puts the two smallest
 * subnormals 2 apart. Magnitudes are below 2^63 even for float64, so the sum
 * cannot wrap in uint64; ±inf come out finite (and below ULP_INFINITE). */
static ALWAYS_INLINE uint64_t ulp_bits(const struct float_format *f, uint64_t a, uint64_t b)
{
    if (a == b)
        return 0;
    if (bits_is_nan(f, a) || bits_is_nan(f, b))
        return ULP_INFINITE;
    uint64_t sign = fmt_sign_mask(f);
    uint64_t mag_a = a & (sign - 1), mag_b = b & (sign - 1);
    if ((a & sign) == (b & sign))
        return mag_a > mag_b ? mag_a - mag_b : mag_b - mag_a;
    return mag_a + mag_b;
}

/* Exact decode for the narrow formats: every bf16/f16 value (subnormals
 * included) is an integer times a power of two well inside double's range,
 * so ldexp is exact, and it does not depend on the FPU's subnormal mode the
 * way a float reinterpretation would. */
static double bits_to_double(const struct float_format *f, uint64_t v)
{
    int neg = (v & fmt_sign_mask(f)) != 0;
    uint64_t exp = (v & fmt_exp_mask(f)) >> f->mant_bits;
    uint64_t mant = v & fmt_mant_mask(f);
    double r;
    if (bits_is_nan(f, v))
        r = NAN;
    else if (bits_is_inf(f, v))
        r = INFINITY;
    else if (exp == 0)
        r = ldexp((double)mant, 1 - f->bias - f->mant_bits);
    else
        r = ldexp((double)(mant | ((uint64_t)1 << f->mant_bits)), (int)exp - f->bias - f->mant_bits);
    return neg ? -r : r;
}

static uint64_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint64_t f64_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

uint64_t ulp_distance_f32(float a, float b) { return ulp_bits(&FMT_F32, f32_bits(a), f32_bits(b)); }
uint64_t ulp_distance_f64(double a, double b) { return ulp_bits(&FMT_F64, f64_bits(a), f64_bits(b)); }
uint64_t ulp_distance_bf16(uint16_t a, uint16_t b) { return ulp_bits(&FMT_BF16, a, b); }
uint64_t ulp_distance_f16(uint16_t a, uint16_t b) { return ulp_bits(&FMT_F16, a, b); }
double bf16_to_double(uint16_t v) { return bits_to_double(&FMT_BF16, v); }
double f16_to_double(uint16_t v) { return bits_to_double(&FMT_F16, v); }

static const struct float_format *float_format_of(enum dtype d)
{
    switch (d) {
    case DT_F32: return &FMT_F32;
    case DT_F64: return &FMT_F64;
    case DT_BF16: return &FMT_BF16;
    case DT_F16: return &FMT_F16;
    default: return NULL;
    }
}

/* One element's raw bits, zero-extended; memcpy because the buffer carries
 * no alignment promise for its element type. */
static ALWAYS_INLINE uint64_t load_bits(const unsigned char *p, size_t size)
{
    switch (size) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, sizeof v); return v; }
    case 4: { uint32_t v; memcpy(&v, p, sizeof v); return v; }
    default: { uint64_t v; memcpy(&v, p, sizeof v); return v; }
    }
}

static ALWAYS_INLINE double value_of(enum dtype d, uint64_t bits)
{
    switch (d) {
    case DT_F32: { uint32_t u = (uint32_t)bits; float f; memcpy(&f, &u, sizeof f); return f; }
    case DT_F64: { double x; memcpy(&x, &bits, sizeof x); return x; }
    case DT_BF16: return bf16_to_double((uint16_t)bits);
    case DT_F16: return f16_to_double((uint16_t)bits);
    case DT_I64: { int64_t i; memcpy(&i, &bits, sizeof i); return (double)i; }
    default: return (double)bits; /* uint8, bool */
    }
}

/* Integer "ULP": the absolute difference, computed in uint64 so int64
 * extremes (INT64_MIN vs INT64_MAX) do not overflow. */
static uint64_t int_distance(enum dtype d, uint64_t a, uint64_t b)
{
    if (d == DT_I64) {
        int64_t ia, ib;
        memcpy(&ia, &a, sizeof ia);
        memcpy(&ib, &b, sizeof ib);
        return ia >= ib ? a - b : b - a; /* two's complement: exact in uint64 */
    }
    return a > b ? a - b : b - a;
}

static int shape_equal(const struct host_tensor *a, const struct host_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

/* A tensor whose numel disagrees with its shape, or that has elements but no
 * buffer, would make us read out of bounds: that is a bug upstream, not a
 * difference between runs. */
static int check_tensor(const struct host_tensor *t, const char *side)
{
    if ((unsigned)t->dtype >= DT_COUNT || dtype_size(t->dtype) == 0)
        return error_set(ST_INTERNAL, "compare: tensor %s has unknown dtype %d", side, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > HOST_TENSOR_MAX_DIMS)
        return error_set(ST_INTERNAL, "compare: tensor %s has rank %d", side, t->ndim);
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return error_set(ST_INTERNAL, "compare: tensor %s has negative dimension", side);
        n *= (size_t)t->shape[i];
    }
    if (n != t->numel)
        return error_set(ST_INTERNAL, "compare: tensor %s has numel %zu but shape holds %zu", side, t->numel, n);
    if (t->numel && !t->data)
        return error_set(ST_INTERNAL, "compare: tensor %s has no data", side);
    return ST_OK;
}

/* The element loop of compare_tensors. Always inlined, and called with
 * the dtype, format and size as constants (compare_tensors' switch), so
 * the compiler drops the per-element dtype switches: one routine, several
 * specialised copies, the same results. */
static ALWAYS_INLINE void diff_elements(const struct host_tensor *a, const struct host_tensor *b,
                                        struct tensor_diff *d, enum dtype dtype,
                                        const struct float_format *fmt, size_t size)
{
    const unsigned char *pa = a->data, *pb = b->data;
    int have_max = 0;
    for (size_t i = 0; i < a->numel; i++) {
        uint64_t ba = load_bits(pa + i * size, size), bb = load_bits(pb + i * size, size);
        int finite = 1;
        if (fmt) {
            /* Counted on every element, equal or not: a NaN in both runs is
             * still worth reporting. */
            if (bits_is_nan(fmt, ba)) { d->nan_a++; finite = 0; }
            if (bits_is_nan(fmt, bb)) { d->nan_b++; finite = 0; }
            if (bits_is_inf(fmt, ba)) { d->inf_a++; finite = 0; }
            if (bits_is_inf(fmt, bb)) { d->inf_b++; finite = 0; }
        }
        if (ba == bb)
            continue;
        double va = value_of(dtype, ba), vb = value_of(dtype, bb);
        if (d->n_differ++ == 0) {
            d->first_index = i;
            d->first_a = va;
            d->first_b = vb;
        }
        /* Integers differ by values (counts), floats by ULPs. Strictly
         * greater, so the index is the first element reaching the max; a
         * pair differing only as +0/-0 still seeds it. */
        uint64_t dist = fmt ? ulp_bits(fmt, ba, bb) : int_distance(dtype, ba, bb);
        uint64_t *max = fmt ? &d->max_ulp : &d->max_value_diff;
        if (!have_max || dist > *max) {
            have_max = 1;
            *max = dist;
            d->max_ulp_index = i;
        }
        if (finite) {
            double diff = fabs(va - vb), m = fmax(fabs(va), fabs(vb));
            double rel = m > 0 ? diff / m : 0;
            /* float64 of opposite signs can overflow the subtraction; the
             * relative difference is then |a|/m + |b|/m, which cannot. */
            if (isinf(diff))
                rel = fabs(va) / m + fabs(vb) / m;
            if (diff > d->max_abs)
                d->max_abs = diff;
            if (rel > d->max_rel)
                d->max_rel = rel;
        }
    }
}

int compare_tensors(const struct host_tensor *a, const struct host_tensor *b, struct tensor_diff *d)
{
    if (!a || !b || !d)
        return error_set(ST_INTERNAL, "compare_tensors: NULL argument");
    memset(d, 0, sizeof *d);
    int st = check_tensor(a, "a");
    if (st == ST_OK)
        st = check_tensor(b, "b");
    if (st != ST_OK)
        return st;

    int dtype_differs = a->dtype != b->dtype, shape_differs = !shape_equal(a, b);
    if (dtype_differs || shape_differs) {
        char sa[80], sb[80];
        size_t off = 0;
        if (dtype_differs)
            off = (size_t)snprintf(d->why, sizeof d->why, "dtype %s vs %s", dtype_name(a->dtype),
                                   dtype_name(b->dtype));
        if (shape_differs && off < sizeof d->why)
            snprintf(d->why + off, sizeof d->why - off, "%sshape %s vs %s", off ? "; " : "",
                     host_tensor_shape_str(a, sa, sizeof sa), host_tensor_shape_str(b, sb, sizeof sb));
        return ST_OK;
    }

    d->comparable = 1;
    d->integer = compare_is_integer(a->dtype);
    d->count = a->numel;
    switch (a->dtype) {
    case DT_F32: diff_elements(a, b, d, DT_F32, &FMT_F32, 4); break;
    case DT_F64: diff_elements(a, b, d, DT_F64, &FMT_F64, 8); break;
    case DT_BF16: diff_elements(a, b, d, DT_BF16, &FMT_BF16, 2); break;
    case DT_F16: diff_elements(a, b, d, DT_F16, &FMT_F16, 2); break;
    default: diff_elements(a, b, d, a->dtype, NULL, dtype_size(a->dtype)); break;
    }
    d->bitwise_equal = d->n_differ == 0;
    return ST_OK;
}

int compare_is_integer(enum dtype d) { return float_format_of(d) == NULL; }

/* compare_scaled_distance's element loop, specialised as diff_elements is. */
static ALWAYS_INLINE void scaled_elements(const struct host_tensor *ref, const struct host_tensor *other,
                                          enum dtype dtype, size_t size, double *max_ref, double *max_diff,
                                          int *nonfinite_differs)
{
    const unsigned char *pa = ref->data, *pb = other->data;
    for (size_t i = 0; i < ref->numel; i++) {
        uint64_t ba = load_bits(pa + i * size, size), bb = load_bits(pb + i * size, size);
        double va = value_of(dtype, ba), vb = value_of(dtype, bb);
        if (isfinite(va) && fabs(va) > *max_ref)
            *max_ref = fabs(va);
        if (ba == bb)
            continue;
        if (!isfinite(va) || !isfinite(vb))
            *nonfinite_differs = 1;
        else if (fabs(va - vb) > *max_diff)
            *max_diff = fabs(va - vb);
    }
}

double compare_scaled_distance(const struct host_tensor *ref, const struct host_tensor *other, double *scale)
{
    if (scale)
        *scale = 0;
    if (!ref || !other || check_tensor(ref, "a") || check_tensor(other, "b") || ref->dtype != other->dtype ||
        !shape_equal(ref, other))
        return INFINITY;
    const struct float_format *fmt = float_format_of(ref->dtype);
    double max_ref = 0, max_diff = 0;
    int nonfinite_differs = 0;
    switch (ref->dtype) {
    case DT_F32: scaled_elements(ref, other, DT_F32, 4, &max_ref, &max_diff, &nonfinite_differs); break;
    case DT_F64: scaled_elements(ref, other, DT_F64, 8, &max_ref, &max_diff, &nonfinite_differs); break;
    default:
        scaled_elements(ref, other, ref->dtype, dtype_size(ref->dtype), &max_ref, &max_diff, &nonfinite_differs);
        break;
    }
    if (scale)
        *scale = max_ref;
    if (nonfinite_differs)
        return INFINITY;
    if (!fmt || max_diff == 0)
        return max_diff;
    /* One ULP at max |ref|: 2^(exponent of max |ref| - mantissa bits). */
    double magnitude = fmax(max_ref, 1.17549435082228750797e-38), ulp = ldexp(1.0, ilogb(magnitude) - fmt->mant_bits);
    return max_diff / ulp;
}

/* With no prefix the run's results are compared: the per-step tensors and
 * the final parameters. "saved/" is left out because only checkpointed runs
 * record it, so it would show up as missing against every baseline. */
static int in_scope(const char *path, const char *only_prefix)
{
    if (only_prefix)
        return strncmp(path, only_prefix, strlen(only_prefix)) == 0;
    return strncmp(path, "steps/", 6) == 0 || strncmp(path, "final_params/", 13) == 0;
}

/* "steps/<k>/input_grads/<leaf>" (docs/schema.md). */
static int is_input_grad(const char *path)
{
    if (strncmp(path, "steps/", 6) != 0)
        return 0;
    const char *rest = path + 6 + strcspn(path + 6, "/");
    return strncmp(rest, "/input_grads/", 13) == 0;
}

static void note_missing(struct run_diff *out, const char *path)
{
    if (out->n_missing++ == 0)
        snprintf(out->first_missing, sizeof out->first_missing, "%s", path);
}

int compare_runs(const struct run_record *a, const struct run_record *b, const char *only_prefix,
                 struct run_diff *out)
{
    if (!a || !b || !out)
        return error_set(ST_INTERNAL, "compare_runs: NULL argument");
    memset(out, 0, sizeof *out);
    for (int i = 0; i < a->n; i++) {
        const struct run_tensor *ta = &a->items[i];
        if (!in_scope(ta->path, only_prefix))
            continue;
        const struct run_tensor *tb = run_record_find(b, ta->path);
        if (!tb) {
            note_missing(out, ta->path);
            continue;
        }
        out->n_tensors++;
        /* One HDF5 object (a tensor linked to baseline_0's) is equal unread;
         * otherwise bytes first, element-wise work only where they differ. */
        if (run_tensors_same_object(a, ta, b, tb))
            continue;
        struct tensor_hold ha, hb;
        int st = run_tensor_acquire(a, ta, &ha);
        if (st == ST_OK && (st = run_tensor_acquire(b, tb, &hb)) != ST_OK)
            run_tensor_release(&ha);
        if (st != ST_OK)
            return st;
        struct tensor_diff d;
        if (host_tensors_bitwise_equal(&ha.t, &hb.t)) {
            run_tensor_release(&ha);
            run_tensor_release(&hb);
            continue;
        }
        st = compare_tensors(&ha.t, &hb.t, &d);
        run_tensor_release(&ha);
        run_tensor_release(&hb);
        if (st != ST_OK)
            return error_wrap(st, "%s", ta->path);
        if (!d.comparable && !out->incomparable) {
            out->incomparable = 1;
            snprintf(out->incomparable_path, sizeof out->incomparable_path, "%s", ta->path);
            snprintf(out->incomparable_why, sizeof out->incomparable_why, "%s", d.why);
        }
        if (d.bitwise_equal)
            continue;
        /* An incomparable pair is not bitwise equal either: it counts as a
         * divergence, so a shape or dtype change can never read as a pass. */
        out->n_differ++;
        if (!out->has_divergence) {
            out->has_divergence = 1;
            snprintf(out->first_path, sizeof out->first_path, "%s", ta->path);
            out->first = d;
            if (d.comparable)
                host_tensor_index_str(&ta->t, d.first_index, out->first_index_str,
                                      sizeof out->first_index_str);
        }
        if (d.comparable && d.integer) {
            if (out->n_integer_differ++ == 0 || d.max_value_diff > out->max_value_diff) {
                out->max_value_diff = d.max_value_diff;
                snprintf(out->max_value_path, sizeof out->max_value_path, "%s", ta->path);
            }
        } else if (d.comparable) {
            if (d.max_ulp > out->max_ulp) {
                out->max_ulp = d.max_ulp;
                snprintf(out->max_ulp_path, sizeof out->max_ulp_path, "%s", ta->path);
            }
            if (d.max_abs > out->max_abs)
                out->max_abs = d.max_abs;
        }
    }
    for (int i = 0; i < b->n; i++) {
        const char *p = b->items[i].path;
        if (!in_scope(p, only_prefix) || run_record_find(a, p))
            continue;
        if (!only_prefix && is_input_grad(p)) {
            if (out->n_input_grads_b_only++ == 0)
                snprintf(out->first_input_grad_b_only, sizeof out->first_input_grad_b_only, "%s", p);
        } else {
            note_missing(out, p);
        }
    }
    return ST_OK;
}

const char *ulp_format(uint64_t ulp, char *buf, size_t len)
{
    if (ulp == ULP_INFINITE)
        snprintf(buf, len, "inf");
    else
        snprintf(buf, len, "%llu", (unsigned long long)ulp);
    return buf;
}

const char *scaled_ulp_format(double v, char *buf, size_t len)
{
    if (isinf(v) || isnan(v))
        snprintf(buf, len, "inf");
    else
        snprintf(buf, len, "%.3g", v);
    return buf;
}
