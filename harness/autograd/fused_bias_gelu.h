/* fused_bias_gelu: the harness's own single-pass bias + GELU (tanh) CPU kernel on raw
 * float32/bf16/f16 buffers, in float32 with ATen's formulas, no libtorch. dbias is reduced
 * in a fixed order (bitwise reproducible) or by racing atomic adds (non-deterministic on purpose). */
#ifndef CKPT_FUSED_BIAS_GELU_H
#define CKPT_FUSED_BIAS_GELU_H

#include <stddef.h>

#include "dtype.h"

/* Shapes: x, y, dy, dx are rows x cols, row-major, contiguous; bias and dbias
 * are cols. All buffers hold `dt` (DT_F32, DT_BF16 or DT_F16) and need no
 * particular alignment. Elements are widened to float32, computed in float32,
 * and rounded once to `dt` (nearest even) on store. y may be x and dx may be dy
 * (exactly in place); other overlaps are not allowed.
 *
 * Numerics are ATen's CPU GeluKernelImpl / GeluBackwardKernelImpl tanh branch,
 * scalar path, operation for operation (kBeta = float(sqrt(2) * 2/sqrt(pi) / 2),
 * kKappa = float(0.044715), tanhf from libm). ATen's vectorised path uses its
 * own tanh, so results match torch closely, not bitwise: against libtorch
 * 1.13 CPU, float32, forward within 3 ULP for x + b >= -0.5 and within
 * 3.5 * max(1, |v|) * 2^-24 absolute everywhere (below -0.5 both sides lose
 * relative accuracy to the formula's cancellation in 1 + tanh); dx within
 * 19 * |dy| * 2^-24 absolute (measured once on 2M random elements, x in
 * +-3 and +-12; the unit tests have no libtorch and do not re-check this).
 * The bias add happens in float32 and is not rounded to `dt` before GELU (an
 * unfused bf16/f16 `gelu(x + b)` rounds the sum first: the fused kernel may
 * differ from it by an ULP of `dt`, as fused kernels do).
 * gelu(-inf) is NaN, as in ATen (-inf * 0). Accuracy: see the measured
 * bounds in tests/test_fused_bias_gelu.c.
 *
 * Status returns (error.h): ST_OK; ST_INPUT for a bad argument (NULL buffer
 * with rows * cols > 0, unsupported dtype or reduction, threads out of range,
 * rows * cols overflow); ST_RUN when memory or a thread could not be had or a
 * worker failed (message says which). On failure outputs are unspecified. */

/* The scalar formulas, float32 in and out, for reuse and tests. */
float fbg_gelu_tanh_f32(float v);
/* dy * d/dv gelu_tanh(v) */
float fbg_gelu_tanh_backward_f32(float dy, float v);

/* y[r][c] = gelu_tanh(x[r][c] + bias[c]) in one pass. Single-threaded. */
int fused_bias_gelu_forward(const void *x, const void *bias, void *y, size_t rows, size_t cols,
                            enum dtype dt);

enum dbias_reduction {
    /* One thread. Each column is summed in float32 in row order 0..rows-1,
     * starting from +0.0f: dbias[c] = (((0 + dx[0][c]) + dx[1][c]) + ...),
     * then rounded once to dt. Bitwise identical run to run and machine to
     * machine (given the same libm tanhf and no FP contraction). */
    DBIAS_DETERMINISTIC = 0,
    /* `threads` workers take rows interleaved (worker t: rows t, t+T, t+2T,
     * ...) and add every element of dx straight into one shared float32
     * accumulator per column with a compare-and-swap loop on its bit
     * pattern; no per-thread partial sums. The order in which rows land in a
     * column is decided by scheduling, so with 2+ threads dbias differs from
     * run to run in its last bits. Rounded once to dt at the end. */
    DBIAS_ATOMIC = 1
};

/* Largest `threads` accepted; more is ST_INPUT. */
#define FBG_MAX_THREADS 256

/* dx = dy * gelu_tanh'(x + bias); dbias[c] = sum over rows of dx[r][c],
 * where the summands are the dx values as stored (already rounded to dt), so
 * dbias is the column sum of the dx tensor the caller gets back. dx is
 * bitwise the same for both reductions and any thread count. rows == 0
 * gives dbias = 0. `threads` (1..FBG_MAX_THREADS) is used by DBIAS_ATOMIC
 * (capped at rows) and ignored by DBIAS_DETERMINISTIC. */
int fused_bias_gelu_backward(const void *dy, const void *x, const void *bias, void *dx,
                             void *dbias, size_t rows, size_t cols, enum dtype dt,
                             enum dbias_reduction red, int threads);

/* The same with options. fail_worker is a test seam: the atomic worker with
 * that index reports ST_RUN ("injected worker failure") instead of working,
 * so tests can prove that an error raised on a helper thread (whose error.h
 * slot is its own) reaches the caller's status and message. -1 = none (an
 * index >= the worker count, or a deterministic reduction, also injects
 * nothing). */
struct fbg_backward_opts {
    enum dbias_reduction red;
    int threads;
    int fail_worker;
};
int fused_bias_gelu_backward_opts(const void *dy, const void *x, const void *bias, void *dx,
                                  void *dbias, size_t rows, size_t cols, enum dtype dt,
                                  const struct fbg_backward_opts *opts);

#endif
