/* sched_yield and the POSIX parts of pthread.h under -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include "fused_bias_gelu.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "half_convert.h"

/* Results must not depend on the compiler fusing a*b+c into an FMA: the
 * deterministic dbias is meant to be reproducible across builds. GCC in ISO
 * mode (-std=c11) already does not contract; under -std=gnu11 on a target
 * with FMA (aarch64, -march=native) the build must add -ffp-contract=off
 * (GCC ignores this pragma and warns about it). Clang honours the pragma. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ATen spells these M_SQRT2 * M_2_SQRTPI * 0.5 and 0.044715, evaluated in
 * double and converted to float (scalar_t = float, or float explicitly on the
 * bf16 path). <math.h> in ISO C has no M_ constants, so the digits are here;
 * (float)(double) keeps ATen's exact float values (a 0.044715f literal is
 * rounded from decimal once and could in principle differ). */
#define FBG_SQRT2 1.41421356237309504880
#define FBG_2_SQRTPI 1.12837916709551257390
static const float kBeta = (float)(FBG_SQRT2 * FBG_2_SQRTPI * 0.5);
static const float kKappa = (float)0.044715;

float fbg_gelu_tanh_f32(float x)
{
    /* GeluKernelImpl, tanh branch, scalar lambda, same operation order. */
    const float x_cube = x * x * x;
    const float inner = kBeta * (x + kKappa * x_cube);
    return 0.5f * x * (1.0f + tanhf(inner));
}

float fbg_gelu_tanh_backward_f32(float dy, float x)
{
    /* GeluBackwardKernelImpl, tanh branch, scalar lambda, same order:
     * d/dx [0.5 x (1 + tanh(u))] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'. */
    const float x_sq = x * x;
    const float x_cube = x_sq * x;
    const float inner = kBeta * (x + kKappa * x_cube);
    const float tanh_inner = tanhf(inner);
    const float left = 0.5f * x;
    const float right = 1.0f + tanh_inner;
    const float left_derivative = 0.5f * right;
    const float tanh_derivative = 1.0f - tanh_inner * tanh_inner;
    const float inner_derivative = kBeta * (1.0f + 3.0f * kKappa * x_sq);
    const float right_derivative = left * tanh_derivative * inner_derivative;
    return dy * (left_derivative + right_derivative);
}

static int dtype_supported(enum dtype dt) { return dt == DT_F32 || dt == DT_BF16 || dt == DT_F16; }

/* Shared argument checks. `what` prefixes messages. */
static int check_shape(const char *what, size_t rows, size_t cols, enum dtype dt)
{
    if (!dtype_supported(dt))
        return error_set(ST_INPUT, "%s: dtype %s not supported (float32, bfloat16, float16)", what,
                         dtype_name(dt));
    /* Element indices are scaled by up to 4 bytes inside the loaders. */
    if (cols != 0 && rows > SIZE_MAX / 4 / cols)
        return error_set(ST_INPUT, "%s: %zu x %zu elements overflow size_t", what, rows, cols);
    return ST_OK;
}

int fused_bias_gelu_forward(const void *x, const void *bias, void *y, size_t rows, size_t cols,
                            enum dtype dt)
{
    int st = check_shape("fused_bias_gelu_forward", rows, cols, dt);
    if (st)
        return st;
    if (rows == 0 || cols == 0)
        return ST_OK;
    if (!x || !bias || !y)
        return error_set(ST_INPUT, "fused_bias_gelu_forward: NULL buffer");
    for (size_t r = 0; r < rows; r++) {
        const size_t base = r * cols;
        for (size_t c = 0; c < cols; c++) {
            /* Read before write: keeps y == x (in place) correct. */
            const float v = hc_load_f32(x, dt, base + c) + hc_load_f32(bias, dt, c);
            hc_store_f32(y, dt, base + c, fbg_gelu_tanh_f32(v));
        }
    }
    return ST_OK;
}

/* Stores v into dx[i] (rounded to dt) and returns the value actually stored,
 * widened back: dbias sums what the caller sees in dx. */
static float store_rounded(void *buf, enum dtype dt, size_t i, float v)
{
    hc_store_f32(buf, dt, i, v);
    return dt == DT_F32 ? v : hc_load_f32(buf, dt, i);
}

/* dx for one element, stored; returns the stored value. */
static float dx_element(const void *dy, const void *x, const void *bias, void *dx, enum dtype dt,
                        size_t cols, size_t r, size_t c)
{
    const size_t i = r * cols + c;
    const float v = hc_load_f32(x, dt, i) + hc_load_f32(bias, dt, c);
    const float g = hc_load_f32(dy, dt, i);
    /* All reads of element i happen above, so dx == dy (in place) is fine. */
    return store_rounded(dx, dt, i, fbg_gelu_tanh_backward_f32(g, v));
}

static int backward_deterministic(const void *dy, const void *x, const void *bias, void *dx,
                                  void *dbias, size_t rows, size_t cols, enum dtype dt)
{
    /* calloc: all-zero bits = +0.0f, the documented starting value. */
    float *acc = calloc(cols, sizeof *acc);
    if (!acc)
        return error_set(ST_RUN, "fused_bias_gelu_backward: out of memory for %zu dbias accumulators",
                         cols);
    /* Row-major walk: for each column the additions happen in row order,
     * which is the documented, fixed summation order. */
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            acc[c] += dx_element(dy, x, bias, dx, dt, cols, r, c);
    for (size_t c = 0; c < cols; c++)
        hc_store_f32(dbias, dt, c, acc[c]);
    free(acc);
    return ST_OK;
}

/* ---- atomic reduction ---------------------------------------------------- */

static uint32_t f32_to_u32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u32_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* *slot += v for a float kept as its bit pattern: C11 has no atomic float
 * add, and CAS on the bits is what GPU atomicAdd emulation does too. Relaxed
 * order suffices: the only reader is the creating thread after
 * pthread_join, which already orders everything. */
static void atomic_add_f32(_Atomic uint32_t *slot, float v)
{
    uint32_t old = atomic_load_explicit(slot, memory_order_relaxed);
    for (;;) {
        const uint32_t sum = f32_to_u32(u32_to_f32(old) + v);
        if (atomic_compare_exchange_weak_explicit(slot, &old, sum, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
        /* old now holds the value another worker just wrote: add onto that. */
    }
}

/* Read-only for workers except acc (atomic) and their own struct worker. */
struct atomic_job {
    const void *dy, *x, *bias;
    void *dx;
    size_t rows, cols;
    enum dtype dt;
    size_t nworkers;
    _Atomic uint32_t *acc; /* cols float32 bit patterns */
    atomic_int go;         /* 0 wait, 1 run, -1 abandon (a sibling failed to start) */
};

struct worker {
    struct atomic_job *job;
    size_t index;
    int inject_failure;
    int status;     /* written by the worker, read after join */
    char msg[512];  /* the worker's error message: its error.h slot is thread-local */
    pthread_t tid;
};

static void *atomic_worker(void *arg)
{
    struct worker *w = arg;
    struct atomic_job *j = w->job;

    /* Start line: all workers begin together once every thread exists, so
     * they really overlap and race on the same columns instead of the first
     * one finishing before the last one is created. */
    int go;
    while ((go = atomic_load_explicit(&j->go, memory_order_acquire)) == 0)
        sched_yield();
    if (go < 0) {
        w->status = ST_OK; /* not this worker's failure: the creator reports it */
        return NULL;
    }
    if (w->inject_failure) {
        w->status = error_set(ST_RUN, "injected worker failure");
        snprintf(w->msg, sizeof w->msg, "%s", error_message());
        return NULL;
    }
    /* Interleaved rows: consecutive rows belong to different workers, so
     * every column receives a stream of rows from all workers at once.
     * Each worker also starts at a row picked by the clock when it starts:
     * on a GPU thousands of blocks race and the order changes every launch,
     * while two CPU threads on a small tensor tend to settle into one
     * interleaving for many calls in a row, which would hide the noise from
     * a handful of baseline runs. The order is still decided at run time
     * only, never by anything a run can replay. */
    size_t mine = j->rows > w->index ? (j->rows - w->index + j->nworkers - 1) / j->nworkers : 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    size_t first = mine ? (size_t)(now.tv_nsec / 64) % mine : 0;
    for (size_t k = 0; k < mine; k++) {
        size_t r = w->index + ((first + k) % mine) * j->nworkers;
        for (size_t c = 0; c < j->cols; c++)
            atomic_add_f32(&j->acc[c], dx_element(j->dy, j->x, j->bias, j->dx, j->dt, j->cols, r, c));
    }
    w->status = ST_OK;
    return NULL;
}

static int backward_atomic(const void *dy, const void *x, const void *bias, void *dx, void *dbias,
                           size_t rows, size_t cols, enum dtype dt, int threads, int fail_worker)
{
    const char *what = "fused_bias_gelu_backward (atomic)";
    /* More workers than rows would only idle; rows == 0 still needs dbias = 0. */
    size_t n = (size_t)threads;
    if (n > rows)
        n = rows;

    struct atomic_job job = {
        .dy = dy, .x = x, .bias = bias, .dx = dx, .rows = rows, .cols = cols, .dt = dt,
        .nworkers = n,
    };
    job.acc = malloc(cols * sizeof *job.acc);
    struct worker *w = calloc(n ? n : 1, sizeof *w);
    if (!job.acc || !w) {
        free(job.acc);
        free(w);
        return error_set(ST_RUN, "%s: out of memory for %zu columns / %zu workers", what, cols, n);
    }
    for (size_t c = 0; c < cols; c++)
        atomic_init(&job.acc[c], f32_to_u32(0.0f));
    atomic_init(&job.go, 0);

    int st = ST_OK;
    size_t started = 0;
    for (; started < n; started++) {
        w[started].job = &job;
        w[started].index = started;
        w[started].inject_failure = fail_worker >= 0 && (size_t)fail_worker == started;
        const int rc = pthread_create(&w[started].tid, NULL, atomic_worker, &w[started]);
        if (rc != 0) {
            st = error_set(ST_RUN, "%s: pthread_create failed for worker %zu of %zu: %s", what,
                           started, n, strerror(rc));
            break;
        }
    }
    /* Release the start line, or tell the started ones to leave. */
    atomic_store_explicit(&job.go, st == ST_OK ? 1 : -1, memory_order_release);
    for (size_t k = 0; k < started; k++) {
        const int rc = pthread_join(w[k].tid, NULL);
        if (rc != 0 && st == ST_OK)
            st = error_set(ST_RUN, "%s: pthread_join failed for worker %zu: %s", what, k, strerror(rc));
        else if (rc == 0 && w[k].status != ST_OK && st == ST_OK)
            st = error_set(w[k].status, "%s: worker %zu of %zu: %s", what, k, n, w[k].msg);
    }
    if (st == ST_OK)
        for (size_t c = 0; c < cols; c++)
            hc_store_f32(dbias, dt, c,
                         u32_to_f32(atomic_load_explicit(&job.acc[c], memory_order_relaxed)));
    free(job.acc);
    free(w);
    return st;
}

int fused_bias_gelu_backward_opts(const void *dy, const void *x, const void *bias, void *dx,
                                  void *dbias, size_t rows, size_t cols, enum dtype dt,
                                  const struct fbg_backward_opts *opts)
{
    const char *what = "fused_bias_gelu_backward";
    if (!opts)
        return error_set(ST_INPUT, "%s: NULL options", what);
    int st = check_shape(what, rows, cols, dt);
    if (st)
        return st;
    if (opts->red != DBIAS_DETERMINISTIC && opts->red != DBIAS_ATOMIC)
        return error_set(ST_INPUT, "%s: unknown dbias reduction %d", what, (int)opts->red);
    if (opts->red == DBIAS_ATOMIC && (opts->threads < 1 || opts->threads > FBG_MAX_THREADS))
        return error_set(ST_INPUT, "%s: threads %d out of range 1..%d", what, opts->threads,
                         FBG_MAX_THREADS);
    if (cols == 0)
        return ST_OK;
    if (!dbias || (rows > 0 && (!dy || !x || !bias || !dx)))
        return error_set(ST_INPUT, "%s: NULL buffer", what);
    if (opts->red == DBIAS_DETERMINISTIC)
        return backward_deterministic(dy, x, bias, dx, dbias, rows, cols, dt);
    return backward_atomic(dy, x, bias, dx, dbias, rows, cols, dt, opts->threads, opts->fail_worker);
}

int fused_bias_gelu_backward(const void *dy, const void *x, const void *bias, void *dx,
                             void *dbias, size_t rows, size_t cols, enum dtype dt,
                             enum dbias_reduction red, int threads)
{
    const struct fbg_backward_opts opts = {.red = red, .threads = threads, .fail_worker = -1};
    return fused_bias_gelu_backward_opts(dy, x, bias, dx, dbias, rows, cols, dt, &opts);
}
