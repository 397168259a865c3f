/* Unit tests for compare: each test pins one behaviour of the per-tensor and
 * per-run comparison, with hand-built tensors whose bits are known exactly. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "compare.h"
#include "error.h"

/* Builds a tensor of `dtype` and `shape` from raw element bits (low bytes of
 * each uint64 used), so NaN payloads and signed zeros are set exactly. */
static void make_bits(struct host_tensor *t, enum dtype dt, int ndim, const int64_t *shape, const uint64_t *bits)
{
    assert_int_equal(host_tensor_alloc(t, dt, ndim, shape), ST_OK);
    size_t size = dtype_size(dt);
    for (size_t i = 0; i < t->numel; i++) {
        unsigned char *p = (unsigned char *)t->data + i * size;
        uint8_t u8 = (uint8_t)bits[i];
        uint16_t u16 = (uint16_t)bits[i];
        uint32_t u32 = (uint32_t)bits[i];
        switch (size) {
        case 1: memcpy(p, &u8, 1); break;
        case 2: memcpy(p, &u16, 2); break;
        case 4: memcpy(p, &u32, 4); break;
        default: memcpy(p, &bits[i], 8); break;
        }
    }
}

static void make_f32(struct host_tensor *t, int ndim, const int64_t *shape, const float *v)
{
    assert_int_equal(host_tensor_alloc(t, DT_F32, ndim, shape), ST_OK);
    memcpy(t->data, v, t->numel * sizeof *v);
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double double_of(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static const int64_t SHAPE_2x3[2] = {2, 3};
static const int64_t SHAPE_3x2[2] = {3, 2};
static const int64_t SHAPE_2[1] = {2};
static const int64_t SHAPE_3[1] = {3};

/* ---- compare_tensors: float32 ---- */

static void test_identical_float32_tensors_are_bitwise_equal(void **state)
{
    (void)state;
    const float v[6] = {1.0f, -2.5f, 0.0f, 3e-40f, 1e30f, -7.0f};
    struct host_tensor a, b;
    make_f32(&a, 2, SHAPE_2x3, v);
    make_f32(&b, 2, SHAPE_2x3, v);
    struct tensor_diff d;
    memset(&d, 0xAB, sizeof d); /* must be fully overwritten */
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_true(d.comparable);
    assert_true(d.bitwise_equal);
    assert_int_equal(d.count, 6);
    assert_int_equal(d.n_differ, 0);
    assert_int_equal(d.max_ulp, 0);
    assert_true(d.max_abs == 0.0);
    assert_true(d.max_rel == 0.0);
    assert_int_equal(d.nan_a + d.nan_b + d.inf_a + d.inf_b, 0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_one_ulp_apart_float32_reports_index_and_ulp_1(void **state)
{
    (void)state;
    const float v[6] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    float w[6];
    memcpy(w, v, sizeof w);
    w[4] = nextafterf(5.0f, INFINITY);
    struct host_tensor a, b;
    make_f32(&a, 2, SHAPE_2x3, v);
    make_f32(&b, 2, SHAPE_2x3, w);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_true(d.comparable);
    assert_false(d.bitwise_equal);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.first_index, 4);
    assert_true(d.first_a == 5.0);
    assert_true(d.first_b == (double)w[4]);
    assert_int_equal(d.max_ulp, 1);
    assert_int_equal(d.max_ulp_index, 4);
    /* One float32 ULP at 5.0 is 2^-21. */
    assert_true(d.max_abs == ldexp(1.0, -21));
    assert_true(d.max_rel == ldexp(1.0, -21) / (double)w[4]);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_max_ulp_index_is_the_first_element_with_the_largest_distance(void **state)
{
    (void)state;
    const float v[3] = {1.0f, 1.0f, 1.0f};
    /* Index 2 ties index 1 at 5 ULP (from below): the first one is reported. */
    const float w[3] = {nextafterf(1.0f, 2.0f), float_of(bits_of(1.0f) + 5), float_of(bits_of(1.0f) - 5)};
    struct host_tensor a, b;
    make_f32(&a, 1, SHAPE_3, v);
    make_f32(&b, 1, SHAPE_3, w);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 3);
    assert_int_equal(d.first_index, 0);
    assert_int_equal(d.max_ulp, 5);
    assert_int_equal(d.max_ulp_index, 1);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_smallest_subnormals_of_opposite_sign_are_2_ulp_apart(void **state)
{
    (void)state;
    float pos = float_of(0x00000001u), neg = float_of(0x80000001u);
    assert_int_equal(ulp_distance_f32(pos, neg), 2);
    assert_int_equal(ulp_distance_f32(neg, pos), 2);
    assert_int_equal(ulp_distance_f32(pos, 0.0f), 1);
    assert_int_equal(ulp_distance_f32(neg, 0.0f), 1);
    /* Across zero with larger magnitudes: -1.0 to 1.0 is twice 0 to 1.0. */
    assert_int_equal(ulp_distance_f32(-1.0f, 1.0f), 2ull * bits_of(1.0f));

    struct host_tensor a, b;
    const uint64_t ba[1] = {0x00000001u}, bb[1] = {0x80000001u};
    make_bits(&a, DT_F32, 1, (const int64_t[]){1}, ba);
    make_bits(&b, DT_F32, 1, (const int64_t[]){1}, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.max_ulp, 2);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_positive_and_negative_zero_differ_in_bits_but_are_0_ulp_apart(void **state)
{
    (void)state;
    assert_int_equal(ulp_distance_f32(0.0f, -0.0f), 0);
    assert_int_equal(ulp_distance_f64(0.0, -0.0), 0);
    assert_int_equal(ulp_distance_bf16(0x0000, 0x8000), 0);
    assert_int_equal(ulp_distance_f16(0x0000, 0x8000), 0);

    const float v[2] = {1.0f, 0.0f}, w[2] = {1.0f, -0.0f};
    struct host_tensor a, b;
    make_f32(&a, 1, SHAPE_2, v);
    make_f32(&b, 1, SHAPE_2, w);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_false(d.bitwise_equal);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.first_index, 1);
    assert_int_equal(d.max_ulp, 0);
    assert_true(d.max_abs == 0.0);
    assert_true(d.max_rel == 0.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_nan_with_identical_bits_is_equal_and_counted(void **state)
{
    (void)state;
    float qnan = float_of(0x7FC00001u);
    assert_int_equal(ulp_distance_f32(qnan, qnan), 0);

    const uint64_t bits[2] = {0x7FC00001u, 0x3F800000u};
    struct host_tensor a, b;
    make_bits(&a, DT_F32, 1, SHAPE_2, bits);
    make_bits(&b, DT_F32, 1, SHAPE_2, bits);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_true(d.bitwise_equal);
    assert_int_equal(d.n_differ, 0);
    assert_int_equal(d.max_ulp, 0);
    assert_int_equal(d.nan_a, 1);
    assert_int_equal(d.nan_b, 1);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_nan_with_different_payload_differs_with_ulp_infinite(void **state)
{
    (void)state;
    assert_int_equal(ulp_distance_f32(float_of(0x7FC00000u), float_of(0x7FC00001u)), ULP_INFINITE);
    assert_int_equal(ulp_distance_f32(float_of(0x7FC00000u), float_of(0xFFC00000u)), ULP_INFINITE);
    assert_int_equal(ulp_distance_f32(float_of(0x7FC00000u), 1.0f), ULP_INFINITE);
    assert_int_equal(ulp_distance_f64(double_of(0x7FF8000000000000ull), double_of(0x7FF8000000000001ull)),
                     ULP_INFINITE);
    assert_int_equal(ulp_distance_bf16(0x7FC0, 0x7FC1), ULP_INFINITE);
    assert_int_equal(ulp_distance_f16(0x7E00, 0x3C00), ULP_INFINITE);

    const uint64_t ba[2] = {0x3F800000u, 0x7FC00000u}, bb[2] = {0x3F800000u, 0x7FC00001u};
    struct host_tensor a, b;
    make_bits(&a, DT_F32, 1, SHAPE_2, ba);
    make_bits(&b, DT_F32, 1, SHAPE_2, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_false(d.bitwise_equal);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.first_index, 1);
    assert_true(isnan(d.first_a) && isnan(d.first_b));
    assert_int_equal(d.max_ulp, ULP_INFINITE);
    assert_int_equal(d.max_ulp_index, 1);
    assert_int_equal(d.nan_a, 1);
    assert_int_equal(d.nan_b, 1);
    /* NaN is not finite: it must not poison max_abs. */
    assert_true(d.max_abs == 0.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_inf_counted_per_side_and_excluded_from_max_abs(void **state)
{
    (void)state;
    const float v[3] = {INFINITY, 1.0f, 2.0f}, w[3] = {INFINITY, -INFINITY, 2.5f};
    struct host_tensor a, b;
    make_f32(&a, 1, SHAPE_3, v);
    make_f32(&b, 1, SHAPE_3, w);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.inf_a, 1);
    assert_int_equal(d.inf_b, 2);
    assert_int_equal(d.nan_a + d.nan_b, 0);
    assert_int_equal(d.n_differ, 2);
    /* Only index 2 is finite on both sides. */
    assert_true(d.max_abs == 0.5);
    assert_true(d.max_rel == 0.5 / 2.5);
    /* Inf vs finite is an ordered (finite) distance, never ULP_INFINITE. */
    assert_int_equal(d.max_ulp, (uint64_t)bits_of(1.0f) + 0x7F800000u);
    assert_int_equal(d.max_ulp_index, 1);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_infinities_have_finite_ordered_ulp_distance(void **state)
{
    (void)state;
    assert_int_equal(ulp_distance_f32(INFINITY, FLT_MAX), 1);
    assert_int_equal(ulp_distance_f32(INFINITY, -INFINITY), 2ull * 0x7F800000u);
    assert_int_equal(ulp_distance_f16(0x7C00, 0x7BFF), 1);
    assert_int_equal(ulp_distance_bf16(0x7F80, 0xFF80), 2ull * 0x7F80);
    /* float64 magnitudes use 63 bits: the sum must not wrap. */
    uint64_t d = ulp_distance_f64(INFINITY, -INFINITY);
    assert_int_equal(d, 0xFFE0000000000000ull);
    assert_true(d != ULP_INFINITE);
    assert_int_equal(ulp_distance_f64(DBL_MAX, -DBL_MAX), 2ull * 0x7FEFFFFFFFFFFFFFull);
    assert_int_equal(ulp_distance_f64(1.0, nextafter(1.0, 2.0)), 1);
}

static void test_max_rel_is_relative_to_the_larger_magnitude(void **state)
{
    (void)state;
    const float v[3] = {2.0f, 0.0f, 10.0f}, w[3] = {1.0f, 0.25f, 10.0f};
    struct host_tensor a, b;
    make_f32(&a, 1, SHAPE_3, v);
    make_f32(&b, 1, SHAPE_3, w);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_true(d.max_abs == 1.0);
    /* |2-1|/2 = 0.5; |0-0.25|/0.25 = 1. */
    assert_true(d.max_rel == 1.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_float64_opposite_extremes_give_finite_max_rel(void **state)
{
    (void)state;
    const uint64_t ba[1] = {0x7FEFFFFFFFFFFFFFull}, bb[1] = {0xFFEFFFFFFFFFFFFFull};
    struct host_tensor a, b;
    make_bits(&a, DT_F64, 1, (const int64_t[]){1}, ba);
    make_bits(&b, DT_F64, 1, (const int64_t[]){1}, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_true(d.first_a == DBL_MAX && d.first_b == -DBL_MAX);
    assert_true(d.max_rel == 2.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

/* ---- narrow floats ---- */

static void test_bf16_adjacent_values_are_1_ulp_apart(void **state)
{
    (void)state;
    assert_int_equal(ulp_distance_bf16(0x3F80, 0x3F81), 1);
    assert_int_equal(ulp_distance_bf16(0x0001, 0x8001), 2);
    assert_int_equal(ulp_distance_bf16(0x3F80, 0xBF80), 2ull * 0x3F80);

    const uint64_t ba[2] = {0x4000, 0x3F80}, bb[2] = {0x4000, 0x3F81};
    struct host_tensor a, b;
    make_bits(&a, DT_BF16, 1, SHAPE_2, ba);
    make_bits(&b, DT_BF16, 1, SHAPE_2, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.first_index, 1);
    assert_true(d.first_a == 1.0);
    assert_true(d.first_b == 1.0 + ldexp(1.0, -7));
    assert_int_equal(d.max_ulp, 1);
    assert_true(d.max_abs == ldexp(1.0, -7));
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_f16_adjacent_values_are_1_ulp_apart(void **state)
{
    (void)state;
    assert_int_equal(ulp_distance_f16(0x3C00, 0x3C01), 1);
    assert_int_equal(ulp_distance_f16(0x0001, 0x8001), 2);
    /* 1.0 in half has bits 0x3C00: its width is 5 exponent bits, not 8. */
    assert_int_equal(ulp_distance_f16(0x3C00, 0x4000), 0x0400);

    const uint64_t ba[2] = {0x3C00, 0x3C00}, bb[2] = {0x3C00, 0x3C01};
    struct host_tensor a, b;
    make_bits(&a, DT_F16, 1, SHAPE_2, ba);
    make_bits(&b, DT_F16, 1, SHAPE_2, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.first_index, 1);
    assert_true(d.first_a == 1.0);
    assert_true(d.first_b == 1.0 + ldexp(1.0, -10));
    assert_int_equal(d.max_ulp, 1);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_f16_nan_and_inf_are_counted_with_half_layout(void **state)
{
    (void)state;
    /* 0x7C00 is inf and 0x7E00 NaN in half; as bf16 bits both would be finite. */
    const uint64_t ba[3] = {0x7C00, 0x7E00, 0x3C00}, bb[3] = {0x7C00, 0x7E00, 0x3C00};
    struct host_tensor a, b;
    make_bits(&a, DT_F16, 1, SHAPE_3, ba);
    make_bits(&b, DT_F16, 1, SHAPE_3, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_true(d.bitwise_equal);
    assert_int_equal(d.inf_a, 1);
    assert_int_equal(d.inf_b, 1);
    assert_int_equal(d.nan_a, 1);
    assert_int_equal(d.nan_b, 1);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_f16_to_double_subnormal_0x0001_is_2_pow_minus_24(void **state)
{
    (void)state;
    assert_true(f16_to_double(0x0001) == ldexp(1.0, -24));
    assert_true(f16_to_double(0x03FF) == 1023.0 * ldexp(1.0, -24));
    assert_true(f16_to_double(0x0400) == ldexp(1.0, -14));
    assert_true(f16_to_double(0x8001) == -ldexp(1.0, -24));
    assert_true(f16_to_double(0x3C00) == 1.0);
    assert_true(f16_to_double(0x3C01) == 1.0 + ldexp(1.0, -10));
    assert_true(f16_to_double(0x7BFF) == 65504.0);
    assert_true(f16_to_double(0xC000) == -2.0);
    assert_true(f16_to_double(0x0000) == 0.0 && !signbit(f16_to_double(0x0000)));
    assert_true(f16_to_double(0x8000) == 0.0 && signbit(f16_to_double(0x8000)));
    assert_true(isinf(f16_to_double(0x7C00)) && f16_to_double(0x7C00) > 0);
    assert_true(isinf(f16_to_double(0xFC00)) && f16_to_double(0xFC00) < 0);
    assert_true(isnan(f16_to_double(0x7E00)));
    assert_true(isnan(f16_to_double(0x7C01)));
}

static void test_bf16_to_double_is_exact_including_subnormals(void **state)
{
    (void)state;
    assert_true(bf16_to_double(0x0001) == ldexp(1.0, -133));
    assert_true(bf16_to_double(0x007F) == 127.0 * ldexp(1.0, -133));
    assert_true(bf16_to_double(0x0080) == ldexp(1.0, -126));
    assert_true(bf16_to_double(0x3F80) == 1.0);
    assert_true(bf16_to_double(0x3F81) == 1.0 + ldexp(1.0, -7));
    assert_true(bf16_to_double(0xC000) == -2.0);
    assert_true(bf16_to_double(0x7F7F) == (double)float_of(0x7F7F0000u));
    assert_true(bf16_to_double(0x8000) == 0.0 && signbit(bf16_to_double(0x8000)));
    assert_true(isinf(bf16_to_double(0x7F80)) && bf16_to_double(0x7F80) > 0);
    assert_true(isinf(bf16_to_double(0xFF80)) && bf16_to_double(0xFF80) < 0);
    assert_true(isnan(bf16_to_double(0x7FC0)));
    assert_true(isnan(bf16_to_double(0x7F81)));
}

/* ---- non-float dtypes ---- */

/* Integers are counts: they differ by values, never by ULPs (max_ulp stays
 * 0, max_value_diff is the largest absolute difference). */
static void test_int64_differences_are_values_not_ulps(void **state)
{
    (void)state;
    const uint64_t ba[3] = {(uint64_t)-5, 4, (uint64_t)INT64_MIN}, bb[3] = {7, 4, (uint64_t)INT64_MAX};
    struct host_tensor a, b;
    make_bits(&a, DT_I64, 1, SHAPE_3, ba);
    make_bits(&b, DT_I64, 1, SHAPE_3, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 2);
    assert_int_equal(d.first_index, 0);
    assert_true(d.first_a == -5.0 && d.first_b == 7.0);
    assert_true(d.integer);
    assert_int_equal(d.max_ulp, 0);
    /* INT64_MIN..INT64_MAX spans 2^64 - 1 without overflowing. */
    assert_int_equal(d.max_value_diff, UINT64_MAX);
    assert_int_equal(d.max_ulp_index, 2);
    assert_int_equal(d.nan_a + d.nan_b + d.inf_a + d.inf_b, 0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_uint8_and_bool_compare_bytes(void **state)
{
    (void)state;
    const uint64_t ba[3] = {200, 1, 0}, bb[3] = {3, 1, 0};
    struct host_tensor a, b;
    make_bits(&a, DT_U8, 1, SHAPE_3, ba);
    make_bits(&b, DT_U8, 1, SHAPE_3, bb);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 1);
    assert_true(d.integer);
    assert_int_equal(d.max_ulp, 0);
    assert_int_equal(d.max_value_diff, 197);
    host_tensor_free(&a);
    host_tensor_free(&b);

    const uint64_t ca[2] = {1, 0}, cb[2] = {1, 1};
    make_bits(&a, DT_BOOL, 1, SHAPE_2, ca);
    make_bits(&b, DT_BOOL, 1, SHAPE_2, cb);
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_int_equal(d.n_differ, 1);
    assert_int_equal(d.first_index, 1);
    assert_int_equal(d.max_value_diff, 1);
    assert_int_equal(d.max_ulp, 0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

/* ---- incomparable and malformed ---- */

static void test_dtype_mismatch_is_incomparable_with_reason(void **state)
{
    (void)state;
    struct host_tensor a, b;
    assert_int_equal(host_tensor_alloc(&a, DT_F32, 2, SHAPE_2x3), ST_OK);
    assert_int_equal(host_tensor_alloc(&b, DT_BF16, 2, SHAPE_2x3), ST_OK);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_false(d.comparable);
    assert_false(d.bitwise_equal);
    assert_string_equal(d.why, "dtype float32 vs bfloat16");
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_shape_mismatch_is_incomparable_with_reason(void **state)
{
    (void)state;
    struct host_tensor a, b;
    assert_int_equal(host_tensor_alloc(&a, DT_F32, 2, SHAPE_2x3), ST_OK);
    assert_int_equal(host_tensor_alloc(&b, DT_F32, 2, SHAPE_3x2), ST_OK);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_false(d.comparable);
    assert_false(d.bitwise_equal);
    assert_string_equal(d.why, "shape [2, 3] vs [3, 2]");
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_rank_mismatch_with_same_numel_is_incomparable(void **state)
{
    (void)state;
    struct host_tensor a, b;
    assert_int_equal(host_tensor_alloc(&a, DT_F32, 1, (const int64_t[]){6}), ST_OK);
    assert_int_equal(host_tensor_alloc(&b, DT_F32, 2, SHAPE_2x3), ST_OK);
    struct tensor_diff d;
    assert_int_equal(compare_tensors(&a, &b, &d), ST_OK);
    assert_false(d.comparable);
    assert_string_equal(d.why, "shape [6] vs [2, 3]");
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_malformed_tensor_is_an_internal_error(void **state)
{
    (void)state;
    struct host_tensor a, b;
    assert_int_equal(host_tensor_alloc(&a, DT_F32, 2, SHAPE_2x3), ST_OK);
    assert_int_equal(host_tensor_alloc(&b, DT_F32, 2, SHAPE_2x3), ST_OK);
    b.numel = 7; /* would read past the buffer */
    struct tensor_diff d;
    error_clear();
    assert_int_equal(compare_tensors(&a, &b, &d), ST_INTERNAL);
    assert_non_null(strstr(error_message(), "numel"));
    b.numel = 6;
    host_tensor_free(&a);
    host_tensor_free(&b);
}

/* ---- compare_runs ---- */

static void add_f32(struct run_record *r, const char *path, int ndim, const int64_t *shape, const float *v)
{
    struct host_tensor t;
    make_f32(&t, ndim, shape, v);
    assert_int_equal(run_record_add(r, path, &t), ST_OK);
}

static void test_compare_runs_finds_first_diverging_path_in_recorded_order(void **state)
{
    (void)state;
    const float loss[1] = {0.5f};
    const float g[6] = {1, 2, 3, 4, 5, 6};
    float g1[6], g2[6];
    memcpy(g1, g, sizeof g1);
    memcpy(g2, g, sizeof g2);
    g1[5] = nextafterf(6.0f, 7.0f);          /* [1, 2], 1 ULP */
    g2[0] = float_of(bits_of(1.0f) + 3);     /* [0, 0], 3 ULP */
    const int64_t one[1] = {1};

    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "reentrant");
    add_f32(&a, "steps/1/loss", 1, one, loss);
    add_f32(&a, "steps/1/grads/l0.weight", 2, SHAPE_2x3, g);
    add_f32(&a, "steps/2/grads/l0.weight", 2, SHAPE_2x3, g);
    /* b records in a different order: a's order must decide "first". */
    add_f32(&b, "steps/2/grads/l0.weight", 2, SHAPE_2x3, g2);
    add_f32(&b, "steps/1/grads/l0.weight", 2, SHAPE_2x3, g1);
    add_f32(&b, "steps/1/loss", 1, one, loss);

    struct run_diff rd;
    assert_int_equal(compare_runs(&a, &b, NULL, &rd), ST_OK);
    assert_int_equal(rd.n_tensors, 3);
    assert_int_equal(rd.n_differ, 2);
    assert_int_equal(rd.n_missing, 0);
    assert_true(rd.has_divergence);
    assert_string_equal(rd.first_path, "steps/1/grads/l0.weight");
    assert_string_equal(rd.first_index_str, "[1, 2]");
    assert_int_equal(rd.first.first_index, 5);
    assert_int_equal(rd.first.max_ulp, 1);
    assert_int_equal(rd.max_ulp, 3);
    assert_string_equal(rd.max_ulp_path, "steps/2/grads/l0.weight");
    /* max_abs is its own maximum: 1 ULP at 6.0 (2^-21) beats 3 ULP at 1.0. */
    assert_true(rd.max_abs == ldexp(1.0, -21));
    assert_false(rd.incomparable);
    run_record_free(&a);
    run_record_free(&b);
}

/* A run whose count differs (an int64 buffer) and whose gradient is 1 ULP
 * off: the ULP figures are the gradient's, the count's difference is
 * counted apart, as values. */
static void test_compare_runs_counts_integer_tensors_apart_from_ulps(void **state)
{
    (void)state;
    const float g[6] = {1, 2, 3, 4, 5, 6};
    float g1[6];
    memcpy(g1, g, sizeof g1);
    g1[2] = nextafterf(3.0f, 4.0f);
    const uint64_t one[1] = {1}, three[1] = {3};
    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "mine");
    struct host_tensor t;
    make_bits(&t, DT_I64, 0, NULL, one);
    assert_int_equal(run_record_add(&a, "steps/1/buffers/n", &t), ST_OK);
    make_bits(&t, DT_I64, 0, NULL, three);
    assert_int_equal(run_record_add(&b, "steps/1/buffers/n", &t), ST_OK);
    add_f32(&a, "steps/1/grads/w", 2, SHAPE_2x3, g);
    add_f32(&b, "steps/1/grads/w", 2, SHAPE_2x3, g1);
    struct run_diff rd;
    assert_int_equal(compare_runs(&a, &b, NULL, &rd), ST_OK);
    assert_int_equal(rd.n_differ, 2);
    assert_string_equal(rd.first_path, "steps/1/buffers/n");
    assert_true(rd.first.integer);
    assert_int_equal(rd.max_ulp, 1);
    assert_string_equal(rd.max_ulp_path, "steps/1/grads/w");
    assert_int_equal(rd.n_integer_differ, 1);
    assert_int_equal(rd.max_value_diff, 2);
    assert_string_equal(rd.max_value_path, "steps/1/buffers/n");
    run_record_free(&a);
    run_record_free(&b);
}

static void test_compare_runs_identical_runs_have_no_divergence(void **state)
{
    (void)state;
    const float g[6] = {1, 2, 3, 4, 5, 6};
    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "baseline_1");
    add_f32(&a, "steps/1/grads/w", 2, SHAPE_2x3, g);
    add_f32(&a, "final_params/w", 2, SHAPE_2x3, g);
    add_f32(&b, "steps/1/grads/w", 2, SHAPE_2x3, g);
    add_f32(&b, "final_params/w", 2, SHAPE_2x3, g);
    struct run_diff rd;
    memset(&rd, 0xAB, sizeof rd);
    assert_int_equal(compare_runs(&a, &b, NULL, &rd), ST_OK);
    assert_int_equal(rd.n_tensors, 2);
    assert_int_equal(rd.n_differ, 0);
    assert_int_equal(rd.n_missing, 0);
    assert_false(rd.has_divergence);
    assert_false(rd.incomparable);
    assert_int_equal(rd.max_ulp, 0);
    assert_string_equal(rd.max_ulp_path, "");
    run_record_free(&a);
    run_record_free(&b);
}

static void test_compare_runs_reports_missing_tensor_on_either_side(void **state)
{
    (void)state;
    const float g[2] = {1, 2};
    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "reentrant");
    add_f32(&a, "steps/1/loss", 1, SHAPE_2, g);
    add_f32(&a, "steps/1/grads/l1.bias", 1, SHAPE_2, g);
    add_f32(&b, "steps/1/loss", 1, SHAPE_2, g);
    add_f32(&b, "final_params/extra", 1, SHAPE_2, g);

    struct run_diff rd;
    assert_int_equal(compare_runs(&a, &b, NULL, &rd), ST_OK);
    assert_int_equal(rd.n_tensors, 1);
    assert_int_equal(rd.n_missing, 2);
    assert_string_equal(rd.first_missing, "steps/1/grads/l1.bias");
    assert_int_equal(rd.n_differ, 0);

    /* Only b's extra one: the walk over b must find it too. */
    struct run_diff rd2;
    assert_int_equal(compare_runs(&a, &b, "final_params/", &rd2), ST_OK);
    assert_int_equal(rd2.n_tensors, 0);
    assert_int_equal(rd2.n_missing, 1);
    assert_string_equal(rd2.first_missing, "final_params/extra");
    run_record_free(&a);
    run_record_free(&b);
}

static void test_compare_runs_prefix_restricts_the_paths_compared(void **state)
{
    (void)state;
    const float g[2] = {1, 2}, h[2] = {1, 3};
    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "reentrant");
    add_f32(&a, "steps/1/grads/w", 1, SHAPE_2, g);
    add_f32(&a, "final_params/w", 1, SHAPE_2, g);
    add_f32(&b, "steps/1/grads/w", 1, SHAPE_2, g);
    add_f32(&b, "final_params/w", 1, SHAPE_2, h);

    struct run_diff rd;
    assert_int_equal(compare_runs(&a, &b, "steps/", &rd), ST_OK);
    assert_int_equal(rd.n_tensors, 1);
    assert_int_equal(rd.n_differ, 0);
    assert_false(rd.has_divergence);

    assert_int_equal(compare_runs(&a, &b, "final_params/", &rd), ST_OK);
    assert_int_equal(rd.n_tensors, 1);
    assert_int_equal(rd.n_differ, 1);
    assert_string_equal(rd.first_path, "final_params/w");
    run_record_free(&a);
    run_record_free(&b);
}

static void test_compare_runs_without_prefix_skips_saved_tensors(void **state)
{
    (void)state;
    const float g[2] = {1, 2};
    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "nonreentrant");
    add_f32(&a, "steps/1/loss", 1, SHAPE_2, g);
    add_f32(&b, "steps/1/loss", 1, SHAPE_2, g);
    /* Only the checkpointed run records saved/: not a missing result. */
    add_f32(&b, "saved/1/fingerprints", 1, SHAPE_2, g);

    struct run_diff rd;
    assert_int_equal(compare_runs(&a, &b, NULL, &rd), ST_OK);
    assert_int_equal(rd.n_tensors, 1);
    assert_int_equal(rd.n_missing, 0);

    assert_int_equal(compare_runs(&a, &b, "saved/", &rd), ST_OK);
    assert_int_equal(rd.n_missing, 1);
    assert_string_equal(rd.first_missing, "saved/1/fingerprints");
    run_record_free(&a);
    run_record_free(&b);
}

static void test_compare_runs_incomparable_pair_counts_as_divergence(void **state)
{
    (void)state;
    const float g[6] = {1, 2, 3, 4, 5, 6};
    struct run_record a, b;
    run_record_init(&a, "baseline_0");
    run_record_init(&b, "reentrant");
    add_f32(&a, "steps/1/grads/w", 2, SHAPE_2x3, g);
    add_f32(&b, "steps/1/grads/w", 2, SHAPE_3x2, g);

    struct run_diff rd;
    assert_int_equal(compare_runs(&a, &b, NULL, &rd), ST_OK);
    assert_true(rd.incomparable);
    assert_string_equal(rd.incomparable_path, "steps/1/grads/w");
    assert_string_equal(rd.incomparable_why, "shape [2, 3] vs [3, 2]");
    assert_int_equal(rd.n_differ, 1);
    assert_true(rd.has_divergence);
    assert_string_equal(rd.first_path, "steps/1/grads/w");
    assert_false(rd.first.comparable);
    assert_string_equal(rd.first_index_str, "");
    run_record_free(&a);
    run_record_free(&b);
}

/* ---- distance at the tensor's scale ---- */

static void test_scaled_distance_is_small_for_values_crossing_zero(void **state)
{
    (void)state;
    int64_t shape[1] = {3};
    struct host_tensor a, b;
    make_f32(&a, 1, shape, (const float[]){1.0f, 1e-9f, -0.5f});
    make_f32(&b, 1, shape, (const float[]){1.0f, -1e-9f, -0.5f});
    double scale;
    /* Element-wise the pair is ~2^31 ULP apart; at max |a| = 1 (ULP 2^-23)
     * 2e-9 is a small fraction of one ULP. */
    assert_true(ulp_distance_f32(1e-9f, -1e-9f) > (1u << 30));
    double d = compare_scaled_distance(&a, &b, &scale);
    assert_true(d > 0 && d < 0.02);
    assert_true(scale == 1.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_scaled_distance_counts_ulps_at_the_largest_magnitude(void **state)
{
    (void)state;
    int64_t shape[1] = {2};
    struct host_tensor a, b;
    make_f32(&a, 1, shape, (const float[]){3.0f, 0.25f}); /* max |a| 3: ULP 2^-22 */
    make_f32(&b, 1, shape, (const float[]){3.0f, 0.25f + 0x1p-20f});
    assert_true(compare_scaled_distance(&a, &b, NULL) == 4.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_scaled_distance_is_zero_when_equal_and_infinite_when_a_nan_differs(void **state)
{
    (void)state;
    int64_t shape[1] = {2};
    struct host_tensor a, b, c;
    make_f32(&a, 1, shape, (const float[]){1.0f, 2.0f});
    make_f32(&b, 1, shape, (const float[]){1.0f, 2.0f});
    make_f32(&c, 1, shape, (const float[]){1.0f, NAN});
    assert_true(compare_scaled_distance(&a, &b, NULL) == 0);
    assert_true(isinf(compare_scaled_distance(&a, &c, NULL)));
    host_tensor_free(&a);
    host_tensor_free(&b);
    host_tensor_free(&c);
}

static void test_scaled_distance_uses_the_dtype_mantissa(void **state)
{
    (void)state;
    int64_t shape[1] = {1};
    struct host_tensor a, b;
    /* bfloat16 1.0 (0x3f80) and its successor (0x3f81): 1 ULP of 2^-7. */
    make_bits(&a, DT_BF16, 1, shape, (const uint64_t[]){0x3f80});
    make_bits(&b, DT_BF16, 1, shape, (const uint64_t[]){0x3f81});
    assert_true(compare_scaled_distance(&a, &b, NULL) == 1.0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical_float32_tensors_are_bitwise_equal),
        cmocka_unit_test(test_one_ulp_apart_float32_reports_index_and_ulp_1),
        cmocka_unit_test(test_max_ulp_index_is_the_first_element_with_the_largest_distance),
        cmocka_unit_test(test_smallest_subnormals_of_opposite_sign_are_2_ulp_apart),
        cmocka_unit_test(test_positive_and_negative_zero_differ_in_bits_but_are_0_ulp_apart),
        cmocka_unit_test(test_nan_with_identical_bits_is_equal_and_counted),
        cmocka_unit_test(test_nan_with_different_payload_differs_with_ulp_infinite),
        cmocka_unit_test(test_inf_counted_per_side_and_excluded_from_max_abs),
        cmocka_unit_test(test_infinities_have_finite_ordered_ulp_distance),
        cmocka_unit_test(test_max_rel_is_relative_to_the_larger_magnitude),
        cmocka_unit_test(test_float64_opposite_extremes_give_finite_max_rel),
        cmocka_unit_test(test_bf16_adjacent_values_are_1_ulp_apart),
        cmocka_unit_test(test_f16_adjacent_values_are_1_ulp_apart),
        cmocka_unit_test(test_f16_nan_and_inf_are_counted_with_half_layout),
        cmocka_unit_test(test_f16_to_double_subnormal_0x0001_is_2_pow_minus_24),
        cmocka_unit_test(test_bf16_to_double_is_exact_including_subnormals),
        cmocka_unit_test(test_int64_differences_are_values_not_ulps),
        cmocka_unit_test(test_uint8_and_bool_compare_bytes),
        cmocka_unit_test(test_dtype_mismatch_is_incomparable_with_reason),
        cmocka_unit_test(test_shape_mismatch_is_incomparable_with_reason),
        cmocka_unit_test(test_rank_mismatch_with_same_numel_is_incomparable),
        cmocka_unit_test(test_malformed_tensor_is_an_internal_error),
        cmocka_unit_test(test_compare_runs_finds_first_diverging_path_in_recorded_order),
        cmocka_unit_test(test_compare_runs_counts_integer_tensors_apart_from_ulps),
        cmocka_unit_test(test_compare_runs_identical_runs_have_no_divergence),
        cmocka_unit_test(test_compare_runs_reports_missing_tensor_on_either_side),
        cmocka_unit_test(test_compare_runs_prefix_restricts_the_paths_compared),
        cmocka_unit_test(test_compare_runs_without_prefix_skips_saved_tensors),
        cmocka_unit_test(test_compare_runs_incomparable_pair_counts_as_divergence),
        cmocka_unit_test(test_scaled_distance_is_small_for_values_crossing_zero),
        cmocka_unit_test(test_scaled_distance_counts_ulps_at_the_largest_magnitude),
        cmocka_unit_test(test_scaled_distance_is_zero_when_equal_and_infinite_when_a_nan_differs),
        cmocka_unit_test(test_scaled_distance_uses_the_dtype_mantissa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
