/* test_cuda_kernels: the CUDA kernels of harness/cuda/ against the CPU kernel
 * (harness/autograd/fused_bias_gelu.c) and against their own documented promises, and
 * the shim's CUDA entry points (stream, Philox reservation, timers).
 *
 * Runs for real only in a CUDA build (CKPT_WITH_CUDA) with a device. Elsewhere
 * the GPU tests are cmocka skip()s, the few that need no GPU still run (the
 * shim's refusals, CPU timers), and the binary exits 77, which CTest reports
 * as skipped (SKIP_RETURN_CODE) with the reason printed. In a CPU build with
 * nvcc, cmake/cuda.cmake also compiles this file with CKPT_WITH_CUDA defined
 * (never linked), so the GPU half cannot rot unnoticed.
 *
 * Bounds against the CPU kernel are derived, not measured (no GPU was at
 * hand when they were written): tanhf is the only operation that differs
 * (CUDA's within 2 ULP, glibc's within 1), so
 *   forward  |y_gpu - y_cpu| <= 8 * max(1, |v|) * 2^-24   (v = x + b)
 *   dx       |dx_gpu - dx_cpu| <= 128 * |dy| * 2^-24
 * in float32, and at most 1 ULP of the dtype in bfloat16 / float16. Each test
 * prints the largest error it saw relative to its bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/aten/aten.h"
#include "../harness/error.h"
#include "fused_bias_gelu.h"
#include "half_convert.h"
#ifdef CKPT_WITH_CUDA
#include "../harness/cuda/bias_dropout_add_cuda.h"
#include "../harness/cuda/fused_bias_gelu_cuda.h"
#endif

/* CTest's SKIP_RETURN_CODE for this test (cmake/cuda.cmake). */
#define EXIT_SKIPPED 77


/* NULL when the GPU tests can run, else why not. */
static const char *gpu_skip_reason(void)
{
#ifndef CKPT_WITH_CUDA
    return "built without CUDA (CPU libtorch, or CKPT_CUDA=OFF): the kernels are only compile-checked; "
           "run this test in a CUDA build on a machine with a GPU";
#else
    return aten_cuda_available() ? NULL : "CUDA build, but no CUDA device is visible";
#endif
}

/* main prints the reason once, before the tests. */
#define REQUIRE_GPU()                                                                      \
    do {                                                                                   \
        if (gpu_skip_reason())                                                             \
            skip();                                                                        \
    } while (0)

/* ---- tests that need no GPU ------------------------------------------------ */

static void test_cuda_entry_points_refuse_cpu_and_cpu_builds(void **state)
{
    (void)state;
    void *stream = (void *)1;
    uint64_t seed = 7, offset = 7;
    assert_int_equal(aten_cuda_stream(DEVICE_CPU, &stream), ST_INTERNAL);
    assert_null(stream);
    assert_int_equal(aten_cuda_philox_reserve(DEVICE_CPU, 4, &seed, &offset), ST_INTERNAL);
    if (aten_built_with_cuda()) {
        if (aten_cuda_available()) /* odd increments would be rounded differently by torch versions */
            assert_int_equal(aten_cuda_philox_reserve(0, 3, &seed, &offset), ST_INTERNAL);
        return;
    }
    assert_int_equal(aten_cuda_stream(0, &stream), ST_INPUT);
    assert_non_null(strstr(error_message(), "has no CUDA"));
    assert_int_equal(aten_cuda_philox_reserve(0, 4, &seed, &offset), ST_INPUT);
    assert_non_null(strstr(error_message(), "has no CUDA"));
    assert_null(strchr(error_message(), '\n'));
}

static void test_cpu_timer_measures_monotonic_intervals(void **state)
{
    (void)state;
    aten_timer *t = NULL;
    double a = -1, b = -1;
    assert_ok(aten_timer_create(&t, DEVICE_CPU));
    assert_ok(aten_timer_mark(t));
    assert_ok(aten_timer_mark(t));
    assert_ok(aten_timer_mark(t));
    assert_ok(aten_timer_ms(t, 0, 1, &a));
    assert_ok(aten_timer_ms(t, 0, 2, &b));
    assert_true(a >= 0 && b >= a);
    assert_int_equal(aten_timer_ms(t, 0, 3, &a), ST_INTERNAL); /* no fourth mark */
    assert_int_equal(aten_timer_ms(t, 2, 1, &a), ST_INTERNAL);
    aten_timer_free(t);
    aten_timer_free(NULL);
}

static void test_raw_data_is_null_for_a_non_contiguous_view(void **state)
{
    (void)state;
    const int64_t shape[2] = {3, 5};
    tensor *t = NULL, *v = NULL;
    assert_ok(tensor_zeros(&t, DT_F32, 2, shape, DEVICE_CPU));
    assert_ptr_equal(tensor_raw_data(t), tensor_data(t));
    assert_ok(tensor_transpose(&v, t, 0, 1));
    assert_null(tensor_raw_data_const(v));
    tensor_free(v);
    tensor_free(t);
}

/* ---- GPU helpers ------------------------------------------------------------- */

#ifdef CKPT_WITH_CUDA


/* n elements of dt, uniform in [lo, hi), rounded to dt. */
static void *host_random(enum dtype dt, size_t n, double lo, double hi, uint64_t seed)
{
    void *buf = malloc(n * dtype_size(dt));
    assert_non_null(buf);
    struct rng g = {seed};
    for (size_t i = 0; i < n; i++)
        hc_store_f32(buf, dt, i, (float)rng_uniform(&g, lo, hi));
    return buf;
}

static tensor *upload(const void *host, enum dtype dt, size_t n)
{
    struct host_tensor h = {.dtype = dt, .ndim = 1, .shape = {(int64_t)n}, .numel = n, .data = (void *)host};
    tensor *t = NULL;
    assert_ok(tensor_from_host(&t, &h, 0));
    return t;
}

static tensor *device_empty(enum dtype dt, size_t n)
{
    const int64_t shape[1] = {(int64_t)n};
    tensor *t = NULL;
    assert_ok(tensor_empty(&t, dt, 1, shape, 0));
    return t;
}

/* The bytes of a device tensor in a malloc'd buffer (waits for the device;
 * an error during a kernel surfaces here). */
static void *download(const tensor *t)
{
    struct host_tensor h;
    assert_ok(aten_synchronize(0));
    assert_ok(tensor_to_host(t, &h));
    size_t bytes = host_tensor_bytes(&h);
    void *out = malloc(bytes ? bytes : 1);
    assert_non_null(out);
    memcpy(out, h.data, bytes);
    host_tensor_free(&h);
    return out;
}

static void *stream0(void)
{
    void *s = NULL;
    assert_ok(aten_cuda_stream(0, &s));
    return s;
}

static uint64_t ulp_distance(enum dtype dt, const void *a, const void *b, size_t i)
{
    if (dt == DT_F32) {
        float fa, fb;
        memcpy(&fa, (const char *)a + 4 * i, 4);
        memcpy(&fb, (const char *)b + 4 * i, 4);
        int32_t ia, ib;
        memcpy(&ia, &fa, 4);
        memcpy(&ib, &fb, 4);
        int64_t oa = ia < 0 ? -(int64_t)(ia & 0x7fffffff) : ia, ob = ib < 0 ? -(int64_t)(ib & 0x7fffffff) : ib;
        return (uint64_t)(oa > ob ? oa - ob : ob - oa);
    }
    uint16_t ha, hb;
    memcpy(&ha, (const char *)a + 2 * i, 2);
    memcpy(&hb, (const char *)b + 2 * i, 2);
    int64_t oa = (ha & 0x8000u) ? -(int64_t)(ha & 0x7fffu) : ha, ob = (hb & 0x8000u) ? -(int64_t)(hb & 0x7fffu) : hb;
    return (uint64_t)(oa > ob ? oa - ob : ob - oa);
}

static int same_bytes(const void *a, const void *b, size_t n, enum dtype dt)
{
    return memcmp(a, b, n * dtype_size(dt)) == 0;
}

/* ---- fused bias + GELU ---------------------------------------------------------- */

static void check_forward(enum dtype dt)
{
    const size_t rows = 37, cols = 129, n = rows * cols; /* partial warps and tiles */
    void *x = host_random(dt, n, -6, 6, 1), *b = host_random(dt, cols, -1, 1, 2);
    void *y_cpu = malloc(n * dtype_size(dt));
    assert_ok(fused_bias_gelu_forward(x, b, y_cpu, rows, cols, dt));
    tensor *dx = upload(x, dt, n), *db = upload(b, dt, cols), *dy = device_empty(dt, n);
    assert_ok(cuda_fused_bias_gelu_forward(tensor_raw_data_const(dx), tensor_raw_data_const(db), tensor_raw_data(dy),
                                           rows, cols, dt, 0, stream0()));
    void *y_gpu = download(dy);
    double worst = 0;
    size_t bitwise = 0;
    for (size_t i = 0; i < n; i++) {
        const float v = hc_load_f32(x, dt, i) + hc_load_f32(b, dt, i % cols);
        bitwise += ulp_distance(dt, y_cpu, y_gpu, i) == 0;
        if (dt == DT_F32) {
            const double bound = 8.0 * fmax(1.0, fabs(v)) * 0x1p-24;
            const double err = fabs((double)hc_load_f32(y_gpu, dt, i) - hc_load_f32(y_cpu, dt, i));
            if (err / bound > worst)
                worst = err / bound;
            if (!(err <= bound))
                fail_msg("%s y[%zu] (v = %.9g): gpu %.9g cpu %.9g beyond %.3g", dtype_name(dt), i, v,
                         hc_load_f32(y_gpu, dt, i), hc_load_f32(y_cpu, dt, i), bound);
        } else if (ulp_distance(dt, y_cpu, y_gpu, i) > 1) {
            fail_msg("%s y[%zu] (v = %.9g): %llu ULP apart", dtype_name(dt), i, v,
                     (unsigned long long)ulp_distance(dt, y_cpu, y_gpu, i));
        }
    }
    print_message("forward %s: %zu of %zu bitwise equal to the CPU kernel; worst error %.3f of the bound\n",
                  dtype_name(dt), bitwise, n, worst);
    /* In place (y == x) gives the same bits. */
    assert_ok(cuda_fused_bias_gelu_forward(tensor_raw_data_const(dx), tensor_raw_data_const(db), tensor_raw_data(dx),
                                           rows, cols, dt, 0, stream0()));
    void *y_inplace = download(dx);
    assert_true(same_bytes(y_gpu, y_inplace, n, dt));
    free(x), free(b), free(y_cpu), free(y_gpu), free(y_inplace);
    tensor_free(dx), tensor_free(db), tensor_free(dy);
}

static void check_backward_dx(enum dtype dt)
{
    const size_t rows = 300, cols = 65, n = rows * cols;
    void *x = host_random(dt, n, -6, 6, 3), *b = host_random(dt, cols, -1, 1, 4), *g = host_random(dt, n, -2, 2, 5);
    void *dx_cpu = malloc(n * dtype_size(dt)), *db_cpu = malloc(cols * dtype_size(dt));
    assert_ok(fused_bias_gelu_backward(g, x, b, dx_cpu, db_cpu, rows, cols, dt, DBIAS_DETERMINISTIC, 1));
    tensor *tx = upload(x, dt, n), *tb = upload(b, dt, cols), *tg = upload(g, dt, n);
    tensor *tdx = device_empty(dt, n), *tdb = device_empty(dt, cols);
    size_t wsb = cuda_fbg_workspace_bytes(rows, cols, DBIAS_DETERMINISTIC);
    tensor *ws = device_empty(DT_F32, wsb / 4);
    assert_ok(cuda_fused_bias_gelu_backward(tensor_raw_data_const(tg), tensor_raw_data_const(tx),
                                            tensor_raw_data_const(tb), tensor_raw_data(tdx), tensor_raw_data(tdb),
                                            tensor_raw_data(ws), wsb, rows, cols, dt, DBIAS_DETERMINISTIC, 0,
                                            stream0()));
    void *dx_gpu = download(tdx);
    double worst = 0;
    size_t bitwise = 0;
    for (size_t i = 0; i < n; i++) {
        bitwise += ulp_distance(dt, dx_cpu, dx_gpu, i) == 0;
        if (dt == DT_F32) {
            const double bound = 128.0 * fabs(hc_load_f32(g, dt, i)) * 0x1p-24;
            const double err = fabs((double)hc_load_f32(dx_gpu, dt, i) - hc_load_f32(dx_cpu, dt, i));
            if (bound > 0 && err / bound > worst)
                worst = err / bound;
            if (!(err <= bound))
                fail_msg("dx[%zu]: gpu %.9g cpu %.9g beyond %.3g", i, hc_load_f32(dx_gpu, dt, i),
                         hc_load_f32(dx_cpu, dt, i), bound);
        } else if (ulp_distance(dt, dx_cpu, dx_gpu, i) > 1) {
            fail_msg("%s dx[%zu]: %llu ULP apart", dtype_name(dt), i,
                     (unsigned long long)ulp_distance(dt, dx_cpu, dx_gpu, i));
        }
    }
    print_message("backward dx %s: %zu of %zu bitwise equal to the CPU kernel; worst error %.3f of the bound\n",
                  dtype_name(dt), bitwise, n, worst);
    free(x), free(b), free(g), free(dx_cpu), free(db_cpu), free(dx_gpu);
    tensor_free(tx), tensor_free(tb), tensor_free(tg), tensor_free(tdx), tensor_free(tdb), tensor_free(ws);
}

/* dbias[c] in the order fused_bias_gelu_cuda.h documents, from the dx the
 * GPU stored, rounded to dt. */
static float documented_dbias(const void *dx, enum dtype dt, size_t rows, size_t cols, size_t c)
{
    float total = 0.0f;
    for (size_t first = 0; first < rows; first += CUDA_FBG_CHUNK_ROWS) {
        const size_t end = first + CUDA_FBG_CHUNK_ROWS < rows ? first + CUDA_FBG_CHUNK_ROWS : rows;
        float p[8];
        for (size_t j = 0; j < 8; j++) {
            p[j] = 0.0f;
            for (size_t r = first + j; r < end; r += 8)
                p[j] += hc_load_f32(dx, dt, r * cols + c);
        }
        total += ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
    }
    float out;
    unsigned char buf[4];
    hc_store_f32(buf, dt, 0, total);
    out = hc_load_f32(buf, dt, 0);
    return out;
}

/* One backward on the device; dx and dbias downloaded into fresh buffers. */
static void run_backward(enum dtype dt, enum dbias_reduction red, const tensor *tg, const tensor *tx,
                         const tensor *tb, size_t rows, size_t cols, void **dx_out, void **db_out)
{
    tensor *tdx = device_empty(dt, rows * cols), *tdb = device_empty(dt, cols), *ws = NULL;
    size_t wsb = cuda_fbg_workspace_bytes(rows, cols, red);
    if (wsb)
        ws = device_empty(DT_F32, wsb / 4);
    assert_ok(cuda_fused_bias_gelu_backward(tensor_raw_data_const(tg), tensor_raw_data_const(tx),
                                            tensor_raw_data_const(tb), tensor_raw_data(tdx), tensor_raw_data(tdb),
                                            ws ? tensor_raw_data(ws) : NULL, wsb, rows, cols, dt, red, 0, stream0()));
    *dx_out = download(tdx);
    *db_out = download(tdb);
    tensor_free(tdx), tensor_free(tdb), tensor_free(ws);
}

static void check_dbias_deterministic(enum dtype dt)
{
    const size_t rows = 1000, cols = 70, n = rows * cols; /* 4 chunks, the last partial */
    void *x = host_random(dt, n, -4, 4, 6), *b = host_random(dt, cols, -1, 1, 7), *g = host_random(dt, n, -3, 3, 8);
    tensor *tx = upload(x, dt, n), *tb = upload(b, dt, cols), *tg = upload(g, dt, n);
    void *dx1, *db1, *dx2, *db2;
    run_backward(dt, DBIAS_DETERMINISTIC, tg, tx, tb, rows, cols, &dx1, &db1);
    run_backward(dt, DBIAS_DETERMINISTIC, tg, tx, tb, rows, cols, &dx2, &db2);
    assert_true(same_bytes(dx1, dx2, n, dt));
    assert_true(same_bytes(db1, db2, cols, dt));
    for (size_t c = 0; c < cols; c++) {
        const float want = documented_dbias(dx1, dt, rows, cols, c), got = hc_load_f32(db1, dt, c);
        if (memcmp(&want, &got, sizeof want) != 0)
            fail_msg("%s dbias[%zu] = %.9g, the documented order gives %.9g", dtype_name(dt), c, got, want);
    }
    free(x), free(b), free(g), free(dx1), free(db1), free(dx2), free(db2);
    tensor_free(tx), tensor_free(tb), tensor_free(tg);
}

#endif /* CKPT_WITH_CUDA */

static void test_forward_matches_cpu_kernel_f32(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_forward(DT_F32);
#endif
}

static void test_forward_matches_cpu_kernel_bf16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_forward(DT_BF16);
#endif
}

static void test_forward_matches_cpu_kernel_f16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_forward(DT_F16);
#endif
}

static void test_forward_special_values_classify_like_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    const float vals[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e30f, -1e30f, 1e-30f, -1e-30f, 9.0f, -9.0f, 20.0f};
    const size_t n = sizeof vals / sizeof vals[0];
    const float zero = 0.0f;
    float y_cpu[sizeof vals / sizeof vals[0]];
    assert_ok(fused_bias_gelu_forward(vals, &zero, y_cpu, n, 1, DT_F32));
    tensor *tx = upload(vals, DT_F32, n), *tb = upload(&zero, DT_F32, 1), *ty = device_empty(DT_F32, n);
    assert_ok(cuda_fused_bias_gelu_forward(tensor_raw_data_const(tx), tensor_raw_data_const(tb), tensor_raw_data(ty), n,
                                           1, DT_F32, 0, stream0()));
    float *y_gpu = download(ty);
    for (size_t i = 0; i < n; i++) {
        if (isnan(y_cpu[i]) != isnan(y_gpu[i]) || isinf(y_cpu[i]) != isinf(y_gpu[i]) ||
            (!isnan(y_cpu[i]) && signbit(y_cpu[i]) != signbit(y_gpu[i]) && y_cpu[i] != 0))
            fail_msg("gelu(%g): gpu %g cpu %g", vals[i], y_gpu[i], y_cpu[i]);
    }
    free(y_gpu);
    tensor_free(tx), tensor_free(tb), tensor_free(ty);
#endif
}

static void test_backward_dx_matches_cpu_kernel_f32(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_backward_dx(DT_F32);
#endif
}

static void test_backward_dx_matches_cpu_kernel_bf16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_backward_dx(DT_BF16);
#endif
}

static void test_backward_dx_matches_cpu_kernel_f16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_backward_dx(DT_F16);
#endif
}

static void test_deterministic_dbias_is_reproducible_in_documented_order_f32(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_dbias_deterministic(DT_F32);
#endif
}

static void test_deterministic_dbias_is_reproducible_in_documented_order_bf16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_dbias_deterministic(DT_BF16);
#endif
}

static void test_deterministic_dbias_is_reproducible_in_documented_order_f16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_dbias_deterministic(DT_F16);
#endif
}

static void test_atomic_dbias_is_right_and_differs_between_runs(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    const enum dtype dt = DT_F32;
    const size_t rows = 65536, cols = 64, n = rows * cols, runs = 20;
    void *x = host_random(dt, n, -3, 3, 9), *b = host_random(dt, cols, -1, 1, 10), *g = host_random(dt, n, -1, 1, 11);
    tensor *tx = upload(x, dt, n), *tb = upload(b, dt, cols), *tg = upload(g, dt, n);
    void *dx_det, *db_det;
    run_backward(dt, DBIAS_DETERMINISTIC, tg, tx, tb, rows, cols, &dx_det, &db_det);
    size_t distinct = 1;
    void *first_db = NULL;
    for (size_t k = 0; k < runs; k++) {
        void *dx, *db;
        run_backward(dt, DBIAS_ATOMIC, tg, tx, tb, rows, cols, &dx, &db);
        assert_true(same_bytes(dx, dx_det, n, dt)); /* dx does not depend on the reduction */
        for (size_t c = 0; c < cols; c++) {
            double sum = 0, mag = 0;
            for (size_t r = 0; r < rows; r++) {
                sum += hc_load_f32(dx, dt, r * cols + c);
                mag += fabs(hc_load_f32(dx, dt, r * cols + c));
            }
            /* The classic bound for any summation order. */
            if (!(fabs(hc_load_f32(db, dt, c) - sum) <= (double)rows * 0x1p-24 * mag))
                fail_msg("atomic dbias[%zu] = %.9g, exact sum %.9g", c, hc_load_f32(db, dt, c), sum);
        }
        if (!first_db)
            first_db = db;
        else {
            if (!same_bytes(db, first_db, cols, dt))
                distinct++;
            free(db);
        }
        free(dx);
    }
    print_message("atomic dbias: %zu of %zu runs differ from the first\n", distinct - 1, runs - 1);
    if (distinct == 1)
        fail_msg("the atomic dbias gave the same bits in %zu runs: not observably non-deterministic", runs);
    free(first_db), free(x), free(b), free(g), free(dx_det), free(db_det);
    tensor_free(tx), tensor_free(tb), tensor_free(tg);
#endif
}

static void test_backward_with_no_rows_gives_zero_dbias(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    const size_t cols = 40;
    float ones[40];
    for (size_t c = 0; c < cols; c++)
        ones[c] = 1.0f;
    tensor *tb = upload(ones, DT_F32, cols);
    for (int red = DBIAS_DETERMINISTIC; red <= DBIAS_ATOMIC; red++) {
        tensor *tdb = upload(ones, DT_F32, cols), *ws = NULL;
        size_t wsb = cuda_fbg_workspace_bytes(0, cols, (enum dbias_reduction)red);
        if (wsb)
            ws = device_empty(DT_F32, wsb / 4);
        assert_ok(cuda_fused_bias_gelu_backward(NULL, NULL, tensor_raw_data_const(tb), NULL, tensor_raw_data(tdb),
                                                ws ? tensor_raw_data(ws) : NULL, wsb, 0, cols, DT_F32,
                                                (enum dbias_reduction)red, 0, stream0()));
        float *db = download(tdb);
        for (size_t c = 0; c < cols; c++)
            assert_true(db[c] == 0.0f && !signbit(db[c]));
        free(db);
        tensor_free(tdb), tensor_free(ws);
    }
    tensor_free(tb);
#endif
}

static void test_bad_arguments_are_input_errors(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    float dummy = 0;
    assert_int_equal(cuda_fused_bias_gelu_forward(&dummy, &dummy, &dummy, 1, 1, DT_F64, 0, NULL), ST_INPUT);
    assert_int_equal(cuda_fused_bias_gelu_forward(NULL, &dummy, &dummy, 1, 1, DT_F32, 0, NULL), ST_INPUT);
    assert_int_equal(cuda_fused_bias_gelu_backward(&dummy, &dummy, &dummy, &dummy, &dummy, NULL, 0, 300, 1, DT_F32,
                                                   DBIAS_DETERMINISTIC, 0, NULL),
                     ST_INPUT); /* no workspace for 2 chunks */
    assert_non_null(strstr(error_message(), "workspace"));
    assert_int_equal(cuda_bias_dropout_add(&dummy, &dummy, &dummy, &dummy, &dummy, 1, 1, DT_F32, 0.0, 1, 0, 0, NULL),
                     ST_INPUT);
    assert_int_equal(cuda_bias_dropout_add(&dummy, &dummy, &dummy, &dummy, &dummy, 1, 1, DT_F32, 1.0, 1, 0, 0, NULL),
                     ST_INPUT);
#endif
}

/* ---- bias + dropout + add ----------------------------------------------------------- */

#ifdef CKPT_WITH_CUDA
struct bda_run {
    void *out, *noise; /* host copies */
    uint64_t seed, offset;
};

static struct bda_run run_bda(enum dtype dt, const tensor *tx, const tensor *tb, const tensor *tr, size_t rows,
                              size_t cols, double p)
{
    struct bda_run r;
    tensor *out = device_empty(dt, rows * cols), *noise = device_empty(dt, rows * cols);
    assert_ok(aten_cuda_philox_reserve(0, CUDA_BDA_PHILOX_INCREMENT, &r.seed, &r.offset));
    assert_ok(cuda_bias_dropout_add(tensor_raw_data_const(tx), tensor_raw_data_const(tb), tensor_raw_data_const(tr),
                                    tensor_raw_data(out), tensor_raw_data(noise), rows, cols, dt, p, r.seed, r.offset,
                                    0, stream0()));
    r.out = download(out);
    r.noise = download(noise);
    tensor_free(out), tensor_free(noise);
    return r;
}

static void check_dropout(enum dtype dt)
{
    const size_t rows = 1024, cols = 1023, n = rows * cols; /* n % 4 != 0: a partial last group */
    const double p = 0.1;
    void *x = host_random(dt, n, -2, 2, 12), *b = host_random(dt, cols, -1, 1, 13), *res = host_random(dt, n, -1, 1, 14);
    tensor *tx = upload(x, dt, n), *tb = upload(b, dt, cols), *tr = upload(res, dt, n);
    uint8_t *saved = NULL;
    size_t saved_len = 0;
    assert_ok(aten_rng_manual_seed(0, 1234));
    assert_ok(aten_rng_get_state(0, &saved, &saved_len));

    struct bda_run first = run_bda(dt, tx, tb, tr, rows, cols, p);
    struct bda_run second = run_bda(dt, tx, tb, tr, rows, cols, p);
    assert_true(second.seed == first.seed);
    assert_true(second.offset == first.offset + CUDA_BDA_PHILOX_INCREMENT);
    assert_false(same_bytes(first.noise, second.noise, n, dt)); /* fresh numbers */

    /* Restoring the stashed state replays the mask and the output bitwise. */
    assert_ok(aten_rng_set_state(0, saved, saved_len));
    struct bda_run replay = run_bda(dt, tx, tb, tr, rows, cols, p);
    assert_true(replay.seed == first.seed && replay.offset == first.offset);
    assert_true(same_bytes(first.noise, replay.noise, n, dt));
    assert_true(same_bytes(first.out, replay.out, n, dt));

    /* Values: noise is 0 or the scale; out is residual + (x + b) * noise in
     * float32, rounded once; about 1 - p of the elements kept. */
    const float scale = cuda_bda_scale(p, dt);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const float nz = hc_load_f32(first.noise, dt, i);
        if (nz != 0.0f && nz != scale)
            fail_msg("%s noise[%zu] = %.9g, neither 0 nor %.9g", dtype_name(dt), i, nz, scale);
        kept += nz != 0.0f;
        const float v = hc_load_f32(x, dt, i) + hc_load_f32(b, dt, i % cols);
        const float want = hc_load_f32(res, dt, i) + v * nz;
        unsigned char wbuf[4];
        hc_store_f32(wbuf, dt, 0, want);
        if (memcmp(wbuf, (const char *)first.out + i * dtype_size(dt), dtype_size(dt)) != 0)
            fail_msg("%s out[%zu] = %.9g, want %.9g", dtype_name(dt), i, hc_load_f32(first.out, dt, i),
                     hc_load_f32(wbuf, dt, 0));
    }
    const double frac = (double)kept / (double)n;
    print_message("dropout %s: kept %.5f (expected %.2f)\n", dtype_name(dt), frac, 1 - p);
    assert_true(fabs(frac - (1 - p)) < 0.005);

    free(saved), free(x), free(b), free(res);
    free(first.out), free(first.noise), free(second.out), free(second.noise), free(replay.out), free(replay.noise);
    tensor_free(tx), tensor_free(tb), tensor_free(tr);
}
#endif

static void test_dropout_replays_from_restored_generator_f32(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_dropout(DT_F32);
#endif
}

static void test_dropout_replays_from_restored_generator_bf16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_dropout(DT_BF16);
#endif
}

static void test_dropout_replays_from_restored_generator_f16(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    check_dropout(DT_F16);
#endif
}

static void test_dropout_mask_depends_on_linear_index_only(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    /* The same 3072 elements as 64 x 48 and as 3072 x 1, same (seed, offset):
     * the same mask. */
    const size_t n = 3072;
    void *x = host_random(DT_F32, n, -1, 1, 15), *res = host_random(DT_F32, n, -1, 1, 16);
    void *b48 = host_random(DT_F32, 48, -1, 1, 17), *b1 = host_random(DT_F32, 1, -1, 1, 18);
    tensor *tx = upload(x, DT_F32, n), *tr = upload(res, DT_F32, n), *tb48 = upload(b48, DT_F32, 48),
           *tb1 = upload(b1, DT_F32, 1);
    tensor *out = device_empty(DT_F32, n), *noise_a = device_empty(DT_F32, n), *noise_b = device_empty(DT_F32, n);
    assert_ok(cuda_bias_dropout_add(tensor_raw_data_const(tx), tensor_raw_data_const(tb48), tensor_raw_data_const(tr),
                                    tensor_raw_data(out), tensor_raw_data(noise_a), 64, 48, DT_F32, 0.5, 99, 8, 0,
                                    stream0()));
    assert_ok(cuda_bias_dropout_add(tensor_raw_data_const(tx), tensor_raw_data_const(tb1), tensor_raw_data_const(tr),
                                    tensor_raw_data(out), tensor_raw_data(noise_b), n, 1, DT_F32, 0.5, 99, 8, 0,
                                    stream0()));
    void *a = download(noise_a), *bb = download(noise_b);
    assert_true(same_bytes(a, bb, n, DT_F32));
    free(a), free(bb), free(x), free(res), free(b48), free(b1);
    tensor_free(tx), tensor_free(tr), tensor_free(tb48), tensor_free(tb1), tensor_free(out), tensor_free(noise_a),
        tensor_free(noise_b);
#endif
}

static void test_cuda_timer_measures_device_work(void **state)
{
    (void)state;
    REQUIRE_GPU();
#ifdef CKPT_WITH_CUDA
    const size_t n = (size_t)1 << 24;
    tensor *t = device_empty(DT_F32, n), *bias = device_empty(DT_F32, 1);
    aten_timer *timer = NULL;
    double ms = -1;
    assert_ok(tensor_fill_(t, 0.5));
    assert_ok(tensor_fill_(bias, 0.0));
    assert_ok(aten_timer_create(&timer, 0));
    assert_ok(aten_timer_mark(timer));
    for (int k = 0; k < 4; k++)
        assert_ok(cuda_fused_bias_gelu_forward(tensor_raw_data_const(t), tensor_raw_data_const(bias),
                                               tensor_raw_data(t), n, 1, DT_F32, 0, stream0()));
    assert_ok(aten_timer_mark(timer));
    assert_ok(aten_timer_ms(timer, 0, 1, &ms));
    print_message("4 forward passes over %zu floats: %.3f ms of device time\n", n, ms);
    assert_true(ms > 0 && ms < 10000);
    aten_timer_free(timer);
    tensor_free(t), tensor_free(bias);
#endif
}

static int setup_group(void **state)
{
    (void)state;
    return aten_init() == ST_OK ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_entry_points_refuse_cpu_and_cpu_builds),
        cmocka_unit_test(test_cpu_timer_measures_monotonic_intervals),
        cmocka_unit_test(test_raw_data_is_null_for_a_non_contiguous_view),
        cmocka_unit_test(test_forward_matches_cpu_kernel_f32),
        cmocka_unit_test(test_forward_matches_cpu_kernel_bf16),
        cmocka_unit_test(test_forward_matches_cpu_kernel_f16),
        cmocka_unit_test(test_forward_special_values_classify_like_cpu),
        cmocka_unit_test(test_backward_dx_matches_cpu_kernel_f32),
        cmocka_unit_test(test_backward_dx_matches_cpu_kernel_bf16),
        cmocka_unit_test(test_backward_dx_matches_cpu_kernel_f16),
        cmocka_unit_test(test_deterministic_dbias_is_reproducible_in_documented_order_f32),
        cmocka_unit_test(test_deterministic_dbias_is_reproducible_in_documented_order_bf16),
        cmocka_unit_test(test_deterministic_dbias_is_reproducible_in_documented_order_f16),
        cmocka_unit_test(test_atomic_dbias_is_right_and_differs_between_runs),
        cmocka_unit_test(test_backward_with_no_rows_gives_zero_dbias),
        cmocka_unit_test(test_bad_arguments_are_input_errors),
        cmocka_unit_test(test_dropout_replays_from_restored_generator_f32),
        cmocka_unit_test(test_dropout_replays_from_restored_generator_bf16),
        cmocka_unit_test(test_dropout_replays_from_restored_generator_f16),
        cmocka_unit_test(test_dropout_mask_depends_on_linear_index_only),
        cmocka_unit_test(test_cuda_timer_measures_device_work),
    };
    const char *why = gpu_skip_reason();
    if (why)
        printf("test_cuda_kernels: the GPU tests will be skipped: %s\n", why);
    const int failed = cmocka_run_group_tests(tests, setup_group, NULL);
    if (failed == 0 && why) {
        printf("test_cuda_kernels: SKIPPED (exit %d): %s\n", EXIT_SKIPPED, why);
        return EXIT_SKIPPED;
    }
    return failed;
}
