/* test_aten: the C API over ATen (harness/aten/aten.h, oracle.h), from C.
 * Covers what the rest of the harness relies on: exact CPU memory counts,
 * RNG state replay, bitwise host round trips, errors that stay one line and
 * never escape as C++ exceptions, device parsing, bf16, and that the shim's
 * ops use the same kernels as torch's autograd (bitwise on CPU). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "test_support.h"

#include "../harness/aten/aten.h"
#include "../harness/aten/oracle.h"
#include "../harness/error.h"

/* ---- helpers ------------------------------------------------------------ */


static tensor *randn(enum dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    tensor *t = NULL;
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, seed));
    assert_ok(tensor_randn(&t, dt, ndim, shape, DEVICE_CPU, 1.0));
    return t;
}

static void assert_bitwise(const tensor *a, const tensor *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(tensor_bitwise_equal(a, b), 1);
}

static void assert_one_line_error(const char *must_contain)
{
    const char *msg = error_message();
    assert_non_null(msg);
    assert_true(strlen(msg) > 0);
    assert_null(strchr(msg, '\n'));
    if (must_contain && !strstr(msg, must_contain))
        fail_msg("error message '%s' lacks '%s'", msg, must_contain);
}

static struct mem_stats cpu_stats(void)
{
    struct mem_stats s;
    assert_ok(aten_mem_stats(DEVICE_CPU, &s));
    return s;
}

static int setup_group(void **state)
{
    (void)state;
    /* Before the first tensor, so every CPU byte is counted. */
    return aten_init() == ST_OK && ckpt_counting_allocator_installed() ? 0 : -1;
}

/* ---- counting allocator ------------------------------------------------- */

static void test_alloc_known_tensor_counted_exactly_in_live_and_peak(void **state)
{
    (void)state;
    assert_ok(aten_mem_reset_peak(DEVICE_CPU));
    struct mem_stats before = cpu_stats();
    assert_int_equal(before.peak_bytes, before.live_bytes);

    const int64_t shape[2] = {1000, 1000};
    tensor *t = NULL;
    assert_ok(tensor_empty(&t, DT_F32, 2, shape, DEVICE_CPU));
    struct mem_stats during = cpu_stats();
    /* The bytes the storage asked for, exactly (alloc_cpu asks
     * posix_memalign for nbytes; its padding is not ours to count). */
    assert_int_equal(during.live_bytes - before.live_bytes, 4000000);
    assert_int_equal(during.peak_bytes - before.peak_bytes, 4000000);
    assert_int_equal(during.alloc_count - before.alloc_count, 1);
    tensor_free(t);
}

static void test_alloc_released_on_tensor_free(void **state)
{
    (void)state;
    struct mem_stats before = cpu_stats();
    const int64_t shape[2] = {1000, 1000};
    tensor *t = NULL, *alias = NULL;
    assert_ok(tensor_empty(&t, DT_F32, 2, shape, DEVICE_CPU));
    assert_ok(tensor_share(&alias, t));
    tensor_free(t);
    /* A second handle keeps the storage alive... */
    assert_int_equal(cpu_stats().live_bytes - before.live_bytes, 4000000);
    tensor_free(alias);
    /* ...and the last one releases it. */
    assert_int_equal(cpu_stats().live_bytes, before.live_bytes);
}

static void test_alloc_peak_reset_drops_to_live(void **state)
{
    (void)state;
    const int64_t shape[1] = {250000};
    tensor *t = NULL;
    assert_ok(tensor_zeros(&t, DT_F64, 1, shape, DEVICE_CPU));
    tensor_free(t);
    struct mem_stats high = cpu_stats();
    assert_true(high.peak_bytes >= high.live_bytes + 2000000);
    assert_ok(aten_mem_reset_peak(DEVICE_CPU));
    struct mem_stats reset = cpu_stats();
    assert_int_equal(reset.peak_bytes, reset.live_bytes);
}

static long minor_faults(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt;
}

/* A training step frees its activations in backward and asks for the same
 * sizes in the next forward: those buffers must come back from the heap,
 * not as fresh pages the kernel faults in again (glibc's default trimming
 * made that thousands of page faults per step). */
static void test_alloc_freed_buffers_are_reused_without_page_faults(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's allocator replaces glibc's (no mallopt) and quarantines freed
     * memory on purpose: page reuse is glibc's behaviour, tested without it. */
    skip();
#endif
    enum { N = 24 };
    const int64_t shape[2] = {512, 512}; /* 1 MiB each, 24 MiB in all: a step's activations */
    long faults = 0;
    for (int round = 0; round < 3; round++) {
        tensor *t[N] = {0};
        long before = minor_faults();
        for (int i = 0; i < N; i++) {
            assert_ok(tensor_empty(&t[i], DT_F32, 2, shape, DEVICE_CPU));
            assert_ok(tensor_fill_(t[i], 1.0));
        }
        faults = minor_faults() - before;
        for (int i = 0; i < N; i++)
            tensor_free(t[i]);
    }
    /* The first round faults its 6144 pages in; the third finds them mapped. */
    print_message("  page faults in the third round: %ld (of %d pages touched)\n", faults, N * 256);
    assert_true(faults < N * 256 / 10);
}

static void test_alloc_failure_is_run_error_naming_bytes(void **state)
{
    (void)state;
    /* 2^46 floats = 2^48 bytes: more than any address space hands out. */
    const int64_t shape[1] = {(int64_t)1 << 46};
    tensor *t = (tensor *)0x1;
    int st = tensor_empty(&t, DT_F32, 1, shape, DEVICE_CPU);
    assert_int_equal(st, ST_RUN);
    assert_null(t);
    assert_one_line_error("281474976710656");
    assert_one_line_error("tensor_empty");
}

/* ---- default generator ---------------------------------------------------- */

static tensor *mask_like(const tensor *like, double p_keep)
{
    tensor *m = NULL;
    assert_ok(tensor_bernoulli(&m, like, p_keep));
    return m;
}

static void test_rng_state_replay_draws_identical_mask(void **state)
{
    (void)state;
    const int64_t shape[2] = {37, 53};
    tensor *x = randn(DT_F32, 2, shape, 1);
    uint8_t *saved = NULL;
    size_t len = 0;
    assert_ok(aten_rng_get_state(DEVICE_CPU, &saved, &len));
    assert_true(len > 0);
    tensor *first = mask_like(x, 0.5);
    assert_ok(aten_rng_set_state(DEVICE_CPU, saved, len));
    tensor *again = mask_like(x, 0.5);
    assert_bitwise(first, again);
    /* Without the replay the stream moves on. */
    tensor *next = mask_like(x, 0.5);
    assert_int_equal(tensor_bitwise_equal(first, next), 0);
    free(saved);
    tensor_free(x);
    tensor_free(first);
    tensor_free(again);
    tensor_free(next);
}

static void test_rng_different_seeds_draw_different_masks(void **state)
{
    (void)state;
    const int64_t shape[2] = {37, 53};
    tensor *x = randn(DT_F32, 2, shape, 1);
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, 1234));
    tensor *a = mask_like(x, 0.5);
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, 4321));
    tensor *b = mask_like(x, 0.5);
    assert_ok(aten_rng_manual_seed(DEVICE_CPU, 1234));
    tensor *a2 = mask_like(x, 0.5);
    assert_int_equal(tensor_bitwise_equal(a, b), 0);
    assert_bitwise(a, a2);
    tensor_free(x);
    tensor_free(a);
    tensor_free(b);
    tensor_free(a2);
}

static void test_rng_set_state_rejects_wrong_size(void **state)
{
    (void)state;
    uint8_t junk[7] = {0};
    assert_int_not_equal(aten_rng_set_state(DEVICE_CPU, junk, sizeof junk), ST_OK);
    assert_one_line_error("aten_rng_set_state");
}

/* ---- host round trips ----------------------------------------------------- */

/* Fills with bytes that exercise every bit (NaN payloads, -0, subnormals)
 * where the dtype allows any pattern; bool only holds 0/1. */
static void roundtrip(enum dtype dt)
{
    const int64_t shape[3] = {3, 5, 7};
    struct host_tensor src, back;
    assert_ok(host_tensor_alloc(&src, dt, 3, shape));
    uint8_t *p = src.data;
    size_t n = host_tensor_bytes(&src);
    for (size_t i = 0; i < n; i++)
        p[i] = dt == DT_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 151u + 7u);
    if (dt == DT_F32) {
        uint32_t nan_payload = 0x7fa12345u, neg_zero = 0x80000000u;
        memcpy(p, &nan_payload, 4);
        memcpy(p + 4, &neg_zero, 4);
    }

    tensor *t = NULL;
    assert_ok(tensor_from_host(&t, &src, DEVICE_CPU));
    assert_int_equal(tensor_dtype(t), dt);
    assert_int_equal(tensor_ndim(t), 3);
    assert_int_equal(tensor_size(t, -1), 7);
    assert_int_equal(tensor_numel(t), 105);
    assert_ok(tensor_to_host(t, &back));
    assert_int_equal(back.dtype, dt);
    assert_int_equal(back.ndim, 3);
    assert_memory_equal(back.shape, shape, sizeof shape);
    assert_int_equal(host_tensor_bytes(&back), n);
    assert_memory_equal(back.data, src.data, n);
    host_tensor_free(&src);
    host_tensor_free(&back);
    tensor_free(t);
}

#define ROUNDTRIP_TEST(name, dt)                                                          \
    static void test_host_roundtrip_is_bitwise_##name(void **state)                        \
    {                                                                                      \
        (void)state;                                                                       \
        roundtrip(dt);                                                                     \
    }
ROUNDTRIP_TEST(float32, DT_F32)
ROUNDTRIP_TEST(bfloat16, DT_BF16)
ROUNDTRIP_TEST(float16, DT_F16)
ROUNDTRIP_TEST(float64, DT_F64)
ROUNDTRIP_TEST(int64, DT_I64)
ROUNDTRIP_TEST(uint8, DT_U8)
ROUNDTRIP_TEST(bool, DT_BOOL)

static void test_to_host_of_transposed_view_is_contiguous_copy(void **state)
{
    (void)state;
    const int64_t shape[2] = {2, 3};
    struct host_tensor src, back;
    assert_ok(host_tensor_alloc(&src, DT_F32, 2, shape));
    for (int i = 0; i < 6; i++)
        ((float *)src.data)[i] = (float)i;
    tensor *t = NULL, *tt = NULL;
    assert_ok(tensor_from_host(&t, &src, DEVICE_CPU));
    assert_ok(tensor_transpose(&tt, t, 0, 1));
    assert_false(tensor_is_contiguous(tt));
    assert_null(tensor_data(tt));
    assert_ptr_equal(tensor_storage_id(tt), tensor_storage_id(t));
    assert_ok(tensor_to_host(tt, &back));
    const float want[6] = {0, 3, 1, 4, 2, 5};
    assert_memory_equal(back.data, want, sizeof want);
    host_tensor_free(&src);
    host_tensor_free(&back);
    tensor_free(t);
    tensor_free(tt);
}

/* ---- one-ULP flip (the planted bug first_call_kernel's mutation) ---------- */

/* A host tensor of `n` raw bit patterns of dtype dt, on the CPU. */
static tensor *from_bits(enum dtype dt, const void *bits, int64_t n)
{
    struct host_tensor h;
    assert_ok(host_tensor_alloc(&h, dt, 1, &n));
    memcpy(h.data, bits, (size_t)n * dtype_size(dt));
    tensor *t = NULL;
    assert_ok(tensor_from_host(&t, &h, DEVICE_CPU));
    host_tensor_free(&h);
    return t;
}

static void assert_bits(const tensor *t, const void *want, size_t bytes)
{
    struct host_tensor h;
    assert_ok(tensor_to_host(t, &h));
    assert_memory_equal(h.data, want, bytes);
    host_tensor_free(&h);
}

static void test_flip_last_bit_flips_finite_nonzero_float32_only(void **state)
{
    (void)state;
    /* 1.0, -2.5, +0, -0, +inf, NaN, a subnormal, 1.0 + 1 ULP */
    const uint32_t in[8] = {0x3f800000u, 0xc0200000u, 0x00000000u, 0x80000000u,
                            0x7f800000u, 0x7fc00001u, 0x00000003u, 0x3f800001u};
    const uint32_t want[8] = {0x3f800001u, 0xc0200001u, 0x00000000u, 0x80000000u,
                              0x7f800000u, 0x7fc00001u, 0x00000002u, 0x3f800000u};
    tensor *t = from_bits(DT_F32, in, 8);
    assert_ok(tensor_flip_last_bit_(t));
    assert_bits(t, want, sizeof want);
    tensor_free(t);
}

static void test_flip_last_bit_flips_finite_nonzero_half_types_only(void **state)
{
    (void)state;
    /* bf16: 1.0, -0, +inf, NaN, 2.0;  f16: 1.0, -0, +inf, NaN, 2.0 */
    const uint16_t bf_in[5] = {0x3f80u, 0x8000u, 0x7f80u, 0x7fc0u, 0x4000u};
    const uint16_t bf_want[5] = {0x3f81u, 0x8000u, 0x7f80u, 0x7fc0u, 0x4001u};
    const uint16_t h_in[5] = {0x3c00u, 0x8000u, 0x7c00u, 0x7e00u, 0x4000u};
    const uint16_t h_want[5] = {0x3c01u, 0x8000u, 0x7c00u, 0x7e00u, 0x4001u};
    tensor *bf = from_bits(DT_BF16, bf_in, 5), *h = from_bits(DT_F16, h_in, 5);
    assert_ok(tensor_flip_last_bit_(bf));
    assert_ok(tensor_flip_last_bit_(h));
    assert_bits(bf, bf_want, sizeof bf_want);
    assert_bits(h, h_want, sizeof h_want);
    tensor_free(bf);
    tensor_free(h);
}

/* The flip is an ATen op on the tensor itself, not a write through a host
 * pointer: it lands on a view that has no host-addressable data (what a
 * CUDA tensor is to the host), which tensor_data() cannot reach. */
static void test_flip_last_bit_reaches_a_tensor_without_host_data(void **state)
{
    (void)state;
    const uint32_t in[6] = {0x3f800000u, 0x40000000u, 0x40400000u, 0x40800000u, 0x40a00000u, 0x40c00000u};
    tensor *flat = from_bits(DT_F32, in, 6), *m = NULL, *view = NULL;
    const int64_t shape[2] = {2, 3};
    assert_ok(tensor_reshape(&m, flat, 2, shape));
    assert_ok(tensor_transpose(&view, m, 0, 1));
    assert_null(tensor_data(view));
    assert_ok(tensor_flip_last_bit_(view));
    uint32_t want[6];
    for (int i = 0; i < 6; i++)
        want[i] = in[i] ^ 1u;
    assert_bits(flat, want, sizeof want);
    tensor_free(view);
    tensor_free(m);
    tensor_free(flat);
}

static void test_flip_last_bit_refuses_non_float_dtypes(void **state)
{
    (void)state;
    const int64_t shape[1] = {4};
    tensor *t = NULL;
    assert_ok(tensor_randint(&t, 5, 1, shape, DEVICE_CPU));
    assert_int_equal(tensor_flip_last_bit_(t), ST_INTERNAL);
    assert_one_line_error("tensor_flip_last_bit_");
    tensor_free(t);
}

/* ---- errors ------------------------------------------------------------- */

static void test_linear_shape_mismatch_is_one_line_error(void **state)
{
    (void)state;
    const int64_t xs[2] = {4, 3}, ws[2] = {5, 7};
    tensor *x = randn(DT_F32, 2, xs, 1), *w = randn(DT_F32, 2, ws, 2);
    tensor *y = (tensor *)0x1;
    error_clear();
    int st = tensor_linear(&y, x, w, NULL);
    /* Reaching this line at all means no exception escaped. */
    assert_int_equal(st, ST_INTERNAL);
    assert_null(y);
    assert_one_line_error("tensor_linear: ");
    tensor_free(x);
    tensor_free(w);
}

static void test_null_handle_is_error_not_crash(void **state)
{
    (void)state;
    tensor *y = NULL;
    assert_int_equal(tensor_gelu(&y, NULL, 1), ST_INTERNAL);
    assert_one_line_error("NULL tensor handle");
    assert_true(isnan(tensor_item(NULL)));
    assert_int_equal(tensor_ndim(NULL), -1);
    tensor_free(NULL);
}

/* ---- devices ------------------------------------------------------------ */

static void test_parse_device_cpu(void **state)
{
    (void)state;
    int d = 99;
    assert_ok(aten_parse_device("cpu", &d));
    assert_int_equal(d, DEVICE_CPU);
    char buf[32];
    assert_string_equal(aten_device_str(DEVICE_CPU, buf, sizeof buf), "cpu");
    assert_string_equal(aten_device_str(2, buf, sizeof buf), "cuda:2");
}

static void test_parse_device_cuda_without_cuda_build_is_input_error(void **state)
{
    (void)state;
    if (aten_built_with_cuda())
        skip();
    int d = 42;
    assert_int_equal(aten_parse_device("cuda", &d), ST_INPUT);
    assert_string_equal(error_message(), "device cuda:0 requested but this libtorch has no CUDA");
    assert_int_equal(aten_parse_device("cuda:3", &d), ST_INPUT);
    assert_string_equal(error_message(), "device cuda:3 requested but this libtorch has no CUDA");
    assert_int_equal(d, 42);
}

static void test_parse_device_cuda_index_checked_against_devices(void **state)
{
    (void)state;
    if (!aten_built_with_cuda())
        skip();
    int n = aten_device_count(), d = 42;
    char text[32];
    if (n > 0) {
        assert_ok(aten_parse_device("cuda", &d));
        assert_int_equal(d, 0);
        snprintf(text, sizeof text, "cuda:%d", n - 1);
        assert_ok(aten_parse_device(text, &d));
        assert_int_equal(d, n - 1);
    }
    snprintf(text, sizeof text, "cuda:%d", n);
    assert_int_equal(aten_parse_device(text, &d), ST_INPUT);
    assert_one_line_error("CUDA device(s) present");
}

static void test_parse_device_rejects_malformed(void **state)
{
    (void)state;
    const char *bad[] = {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:0x", "", " cpu",
                         "cuda:99999", "cpu\nmore"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int d = 42;
        assert_int_equal(aten_parse_device(bad[i], &d), ST_INPUT);
        assert_int_equal(d, 42);
        assert_one_line_error("unknown device");
    }
}

static void test_cuda_tensor_without_cuda_is_input_error(void **state)
{
    (void)state;
    if (aten_built_with_cuda())
        skip();
    const int64_t shape[1] = {4};
    tensor *t = NULL;
    assert_int_equal(tensor_zeros(&t, DT_F32, 1, shape, 0), ST_INPUT);
    assert_null(t);
    assert_one_line_error("no CUDA");
}

/* ---- ops ---------------------------------------------------------------- */

static void test_bf16_ops_keep_dtype_and_track_float32(void **state)
{
    (void)state;
    const int64_t xs[2] = {8, 16}, ws[2] = {12, 16}, bs[1] = {12};
    tensor *x32 = randn(DT_F32, 2, xs, 3), *w32 = randn(DT_F32, 2, ws, 4),
           *b32 = randn(DT_F32, 1, bs, 5);
    tensor *x, *w, *b;
    assert_ok(tensor_to_dtype(&x, x32, DT_BF16));
    assert_ok(tensor_to_dtype(&w, w32, DT_BF16));
    assert_ok(tensor_to_dtype(&b, b32, DT_BF16));

    const int64_t ts[1] = {8};
    tensor *target = NULL;
    assert_ok(tensor_randint(&target, 12, 1, ts, DEVICE_CPU));

    /* linear -> gelu -> layer norm -> softmax, and a cross-entropy loss with
     * its backward. (Not mse: libtorch 1.13 has no bf16 CPU mse kernel.) */
    tensor *y, *g, *ln, *mean, *rstd, *sm, *loss, *logp, *one, *dlogits;
    assert_ok(tensor_linear(&y, x, w, b));
    assert_ok(tensor_gelu(&g, y, 1));
    assert_ok(tensor_layer_norm(&ln, &mean, &rstd, g, NULL, NULL, 1e-5));
    assert_ok(tensor_softmax(&sm, ln, -1));
    assert_ok(tensor_cross_entropy(&loss, &logp, ln, target));
    assert_ok(tensor_full(&one, DT_BF16, 0, NULL, DEVICE_CPU, 1.0));
    assert_ok(tensor_cross_entropy_backward(&dlogits, one, logp, target));
    const tensor *outs[] = {y, g, ln, sm, loss, logp, dlogits};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        assert_int_equal(tensor_dtype(outs[i]), DT_BF16);
    assert_int_equal(tensor_size(y, 1), 12);
    assert_int_equal(tensor_size(dlogits, 1), 12);
    assert_true(isfinite(tensor_item(loss)));

    /* The same chain in float32 lands close: bf16 keeps ~3 significant digits. */
    tensor *y32, *g32, *ln32, *m32, *r32, *loss32, *logp32;
    assert_ok(tensor_linear(&y32, x32, w32, b32));
    assert_ok(tensor_gelu(&g32, y32, 1));
    assert_ok(tensor_layer_norm(&ln32, &m32, &r32, g32, NULL, NULL, 1e-5));
    assert_ok(tensor_cross_entropy(&loss32, &logp32, ln32, target));
    double l16 = tensor_item(loss), l32 = tensor_item(loss32);
    assert_true(fabs(l16 - l32) <= 0.05 * fabs(l32) + 1e-2);

    tensor *all[] = {x32, w32, b32, x, w, b, target, y, g, ln, mean, rstd, sm, loss, logp, one,
                     dlogits, y32, g32, ln32, m32, r32, loss32, logp32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_causal_fill_masks_above_diagonal_only(void **state)
{
    (void)state;
    const int64_t shape[3] = {2, 3, 3};
    tensor *z = NULL, *f = NULL;
    assert_ok(tensor_zeros(&z, DT_F32, 3, shape, DEVICE_CPU));
    assert_ok(tensor_causal_fill(&f, z, -INFINITY));
    const float *v = tensor_data_const(f);
    assert_non_null(v);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                float e = v[b * 9 + i * 3 + j];
                if (j > i)
                    assert_true(isinf(e) && e < 0);
                else
                    assert_true(e == 0.0f);
            }
    tensor_free(z);
    tensor_free(f);
}

/* ---- the shim against torch's own autograd (oracle) --------------------- */

/* One upstream gradient of y's shape, from its own seed. */
static tensor *grad_like(const tensor *y, uint64_t seed)
{
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(y, shape);
    assert_true(nd >= 0);
    return randn(tensor_dtype(y), nd, shape, seed);
}

static void test_oracle_gelu_tanh_equals_tensor_gelu_bitwise(void **state)
{
    (void)state;
    const int64_t shape[2] = {16, 33};
    tensor *x = randn(DT_F32, 2, shape, 7);
    tensor *gy = grad_like(x, 8);
    tensor *y_or = NULL, *dx_or = NULL, *y = NULL, *dx = NULL;
    const tensor *in[1] = {x};
    assert_ok(oracle_run("gelu_tanh", in, 1, NULL, 0, gy, &y_or, &dx_or));
    assert_ok(tensor_gelu(&y, x, 1));
    assert_ok(tensor_gelu_backward(&dx, gy, x, 1));
    assert_bitwise(y_or, y);
    assert_bitwise(dx_or, dx);
    tensor *all[] = {x, gy, y_or, dx_or, y, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

/* x * (bernoulli(p_keep) / p_keep), the division a Scalar one: torch's CPU
 * F.dropout, which the harness's dropout must equal bitwise. */
static void dropout_matches_torch(enum dtype dt)
{
    const int64_t shape[3] = {4, 9, 31};
    const double p = 0.3;
    tensor *x32 = randn(DT_F32, 3, shape, 11), *x = NULL;
    assert_ok(tensor_to_dtype(&x, x32, dt));
    uint8_t *rng = NULL;
    size_t len = 0;
    assert_ok(aten_rng_get_state(DEVICE_CPU, &rng, &len));

    tensor *y_torch = NULL, *dx_torch = NULL;
    const tensor *in[1] = {x};
    assert_ok(oracle_run("dropout", in, 1, &p, 1, NULL, &y_torch, &dx_torch));

    assert_ok(aten_rng_set_state(DEVICE_CPU, rng, len));
    tensor *mask = NULL, *noise = NULL, *y = NULL;
    assert_ok(tensor_bernoulli(&mask, x, 1.0 - p));
    assert_ok(tensor_div_scalar(&noise, mask, 1.0 - p));
    assert_ok(tensor_mul(&y, x, noise));
    assert_bitwise(y_torch, y);
    assert_bitwise(dx_torch, noise); /* d/dx (x * noise) with upstream ones */
    free(rng);
    tensor *all[] = {x32, x, y_torch, dx_torch, mask, noise, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_bernoulli_dropout_equals_torch_dropout_float32(void **state)
{
    (void)state;
    dropout_matches_torch(DT_F32);
}

static void test_bernoulli_dropout_equals_torch_dropout_bfloat16(void **state)
{
    (void)state;
    dropout_matches_torch(DT_BF16);
}

static void test_oracle_layer_norm_equals_shim_kernels_bitwise(void **state)
{
    (void)state;
    const int64_t xs[3] = {3, 5, 24}, ps[1] = {24};
    tensor *x = randn(DT_F32, 3, xs, 21), *w = randn(DT_F32, 1, ps, 22),
           *b = randn(DT_F32, 1, ps, 23);
    tensor *gy = grad_like(x, 24);
    const double eps = 1e-5;
    const tensor *in[3] = {x, w, b};
    tensor *y_or = NULL, *g_or[3] = {NULL, NULL, NULL};
    assert_ok(oracle_run("layer_norm", in, 3, &eps, 1, gy, &y_or, g_or));
    tensor *y, *mean, *rstd, *dx, *dw, *db;
    assert_ok(tensor_layer_norm(&y, &mean, &rstd, x, w, b, eps));
    assert_ok(tensor_layer_norm_backward(&dx, &dw, &db, gy, x, mean, rstd, w, b));
    assert_bitwise(y_or, y);
    assert_bitwise(g_or[0], dx);
    assert_bitwise(g_or[1], dw);
    assert_bitwise(g_or[2], db);
    tensor *all[] = {x, w, b, gy, y_or, g_or[0], g_or[1], g_or[2], y, mean, rstd, dx, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_oracle_softmax_equals_shim_kernels_bitwise(void **state)
{
    (void)state;
    const int64_t xs[3] = {2, 7, 19};
    tensor *x = randn(DT_F32, 3, xs, 31), *gy = grad_like(x, 32);
    const double dim = -1;
    const tensor *in[1] = {x};
    tensor *y_or = NULL, *dx_or = NULL, *y = NULL, *dx = NULL;
    assert_ok(oracle_run("softmax", in, 1, &dim, 1, gy, &y_or, &dx_or));
    assert_ok(tensor_softmax(&y, x, -1));
    assert_ok(tensor_softmax_backward(&dx, gy, y, -1, DT_F32));
    assert_bitwise(y_or, y);
    assert_bitwise(dx_or, dx);
    tensor *all[] = {x, gy, y_or, dx_or, y, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_oracle_cross_entropy_equals_shim_kernels_bitwise(void **state)
{
    (void)state;
    const int64_t ls[3] = {3, 4, 10}, ts[2] = {3, 4};
    tensor *logits = randn(DT_F32, 3, ls, 41), *target = NULL;
    assert_ok(tensor_randint(&target, 10, 2, ts, DEVICE_CPU));
    const tensor *in[2] = {logits, target};
    tensor *l_or = NULL, *g_or[2] = {NULL, (tensor *)0x1};
    assert_ok(oracle_run("cross_entropy", in, 2, NULL, 0, NULL, &l_or, g_or));
    assert_null(g_or[1]); /* int64 targets get no gradient */

    tensor *loss, *logp, *one, *dx;
    assert_ok(tensor_cross_entropy(&loss, &logp, logits, target));
    assert_ok(tensor_full(&one, DT_F32, 0, NULL, DEVICE_CPU, 1.0));
    assert_ok(tensor_cross_entropy_backward(&dx, one, logp, target));
    assert_bitwise(l_or, loss);
    assert_bitwise(g_or[0], dx);
    assert_int_equal(tensor_ndim(dx), 3);
    tensor *all[] = {logits, target, l_or, g_or[0], loss, logp, one, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_oracle_mse_equals_shim_kernels_bitwise(void **state)
{
    (void)state;
    const int64_t xs[2] = {6, 11};
    tensor *x = randn(DT_F32, 2, xs, 51), *t = randn(DT_F32, 2, xs, 52);
    const tensor *in[2] = {x, t};
    tensor *l_or = NULL, *g_or[2] = {NULL, NULL};
    assert_ok(oracle_run("mse_loss", in, 2, NULL, 0, NULL, &l_or, g_or));
    tensor *loss, *one, *dx;
    assert_ok(tensor_mse_loss(&loss, x, t));
    assert_ok(tensor_full(&one, DT_F32, 0, NULL, DEVICE_CPU, 1.0));
    assert_ok(tensor_mse_loss_backward(&dx, one, x, t));
    assert_bitwise(l_or, loss);
    assert_bitwise(g_or[0], dx);
    tensor *all[] = {x, t, l_or, g_or[0], g_or[1], loss, one, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_oracle_rrelu_replayed_equals_shim_kernels_bitwise(void **state)
{
    (void)state;
    const int64_t xs[2] = {9, 17};
    tensor *x = randn(DT_F32, 2, xs, 61), *gy = grad_like(x, 62);
    const double bounds[2] = {0.1, 0.3};
    uint8_t *rng = NULL;
    size_t len = 0;
    assert_ok(aten_rng_get_state(DEVICE_CPU, &rng, &len));
    const tensor *in[1] = {x};
    tensor *y_or = NULL, *dx_or = NULL;
    assert_ok(oracle_run("rrelu", in, 1, bounds, 2, gy, &y_or, &dx_or));
    assert_ok(aten_rng_set_state(DEVICE_CPU, rng, len));
    tensor *y, *noise, *dx;
    assert_ok(tensor_rrelu(&y, &noise, x, bounds[0], bounds[1]));
    assert_ok(tensor_rrelu_backward(&dx, gy, x, noise, bounds[0], bounds[1]));
    assert_bitwise(y_or, y);
    assert_bitwise(dx_or, dx);
    free(rng);
    tensor *all[] = {x, gy, y_or, dx_or, y, noise, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_oracle_linear_equals_shim_forward_bitwise(void **state)
{
    (void)state;
    const int64_t xs[3] = {2, 5, 8}, ws[2] = {6, 8}, bs[1] = {6};
    tensor *x = randn(DT_F32, 3, xs, 71), *w = randn(DT_F32, 2, ws, 72),
           *b = randn(DT_F32, 1, bs, 73);
    const tensor *in[3] = {x, w, b};
    tensor *y_or = NULL, *g_or[3] = {NULL, NULL, NULL}, *y = NULL;
    assert_ok(oracle_run("linear", in, 3, NULL, 0, NULL, &y_or, g_or));
    assert_ok(tensor_linear(&y, x, w, b));
    assert_bitwise(y_or, y);
    /* db with upstream ones is the count of rows summed: 2 * 5 = 10 each. */
    assert_int_equal(tensor_size(g_or[2], 0), 6);
    tensor *db_sum = NULL;
    assert_ok(tensor_sum_all(&db_sum, g_or[2]));
    assert_true(tensor_item(db_sum) == 60.0);
    tensor *all[] = {x, w, b, y_or, g_or[0], g_or[1], g_or[2], y, db_sum};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void test_oracle_unknown_op_is_input_error(void **state)
{
    (void)state;
    tensor *y = (tensor *)0x1;
    assert_int_equal(oracle_run("no_such_op", NULL, 0, NULL, 0, NULL, &y, NULL), ST_INPUT);
    assert_null(y);
    assert_one_line_error("no_such_op");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_known_tensor_counted_exactly_in_live_and_peak),
        cmocka_unit_test(test_alloc_released_on_tensor_free),
        cmocka_unit_test(test_alloc_peak_reset_drops_to_live),
        cmocka_unit_test(test_alloc_freed_buffers_are_reused_without_page_faults),
        cmocka_unit_test(test_alloc_failure_is_run_error_naming_bytes),
        cmocka_unit_test(test_rng_state_replay_draws_identical_mask),
        cmocka_unit_test(test_rng_different_seeds_draw_different_masks),
        cmocka_unit_test(test_rng_set_state_rejects_wrong_size),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_float32),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_bfloat16),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_float16),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_float64),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_int64),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_uint8),
        cmocka_unit_test(test_host_roundtrip_is_bitwise_bool),
        cmocka_unit_test(test_to_host_of_transposed_view_is_contiguous_copy),
        cmocka_unit_test(test_flip_last_bit_flips_finite_nonzero_float32_only),
        cmocka_unit_test(test_flip_last_bit_flips_finite_nonzero_half_types_only),
        cmocka_unit_test(test_flip_last_bit_reaches_a_tensor_without_host_data),
        cmocka_unit_test(test_flip_last_bit_refuses_non_float_dtypes),
        cmocka_unit_test(test_linear_shape_mismatch_is_one_line_error),
        cmocka_unit_test(test_null_handle_is_error_not_crash),
        cmocka_unit_test(test_parse_device_cpu),
        cmocka_unit_test(test_parse_device_cuda_without_cuda_build_is_input_error),
        cmocka_unit_test(test_parse_device_cuda_index_checked_against_devices),
        cmocka_unit_test(test_parse_device_rejects_malformed),
        cmocka_unit_test(test_cuda_tensor_without_cuda_is_input_error),
        cmocka_unit_test(test_bf16_ops_keep_dtype_and_track_float32),
        cmocka_unit_test(test_causal_fill_masks_above_diagonal_only),
        cmocka_unit_test(test_oracle_gelu_tanh_equals_tensor_gelu_bitwise),
        cmocka_unit_test(test_bernoulli_dropout_equals_torch_dropout_float32),
        cmocka_unit_test(test_bernoulli_dropout_equals_torch_dropout_bfloat16),
        cmocka_unit_test(test_oracle_layer_norm_equals_shim_kernels_bitwise),
        cmocka_unit_test(test_oracle_softmax_equals_shim_kernels_bitwise),
        cmocka_unit_test(test_oracle_cross_entropy_equals_shim_kernels_bitwise),
        cmocka_unit_test(test_oracle_mse_equals_shim_kernels_bitwise),
        cmocka_unit_test(test_oracle_rrelu_replayed_equals_shim_kernels_bitwise),
        cmocka_unit_test(test_oracle_linear_equals_shim_forward_bitwise),
        cmocka_unit_test(test_oracle_unknown_op_is_input_error),
    };
    return cmocka_run_group_tests(tests, setup_group, NULL);
}
