/* fused_bias_gelu_cuda: the CUDA twin of fused_bias_gelu.h, a plain C API over
 * device buffers. Same shapes, dtypes, formulas and dbias semantics as the
 * CPU kernel; the differences are listed here.
 *
 * Buffers are device addresses on `device`: x, y, dy, dx are rows x cols,
 * row-major, contiguous; bias, dbias are cols; all hold `dt` (DT_F32, DT_BF16
 * or DT_F16) and are aligned as the caching allocator aligns (to their
 * element size at least). y may be x and dx may be dy (exactly in place).
 * `stream` is a cudaStream_t of that device (NULL: the legacy default
 * stream, which is ATen's default current stream). Calls only queue work:
 * they return once it is launched, and an error during execution shows at
 * the next synchronising call. The caller's current device is restored.
 *
 * Numerics: elements are widened to float32, the bias is added in float32,
 * the CPU kernel's formulas are evaluated operation for operation with no
 * FMA contraction (see device_float.cuh), and the result is rounded once to
 * dt with half_convert.h's rules (NaN payloads included). Only tanhf differs
 * from the CPU kernel's (CUDA's libdevice tanhf vs the host libm's), so y and
 * dx agree with the CPU kernel to a few float32 ULP, not bitwise.
 *
 * dbias sums the dx values as stored (rounded to dt), in float32, rounded
 * once to dt at the end; rows == 0 gives +0.
 *
 * Status returns (error.h): ST_OK; ST_INPUT for a bad argument (NULL buffer
 * with rows * cols > 0, unsupported dtype or reduction, a workspace smaller
 * than cuda_fbg_workspace_bytes says); ST_RUN when CUDA refuses the launch
 * or the device (message names the call and CUDA's error string).
 *
 * Built only where nvcc is (see CMakeLists.txt, CKPT_CUDA); linked and
 * callable only in a CUDA build (CKPT_WITH_CUDA). */
#ifndef CKPT_CUDA_FUSED_BIAS_GELU_CUDA_H
#define CKPT_CUDA_FUSED_BIAS_GELU_CUDA_H

#include <stddef.h>

/* The project's C headers carry no extern "C" of their own. */
#ifdef __cplusplus
extern "C" {
#endif

#include "dtype.h"
#include "fused_bias_gelu.h" /* enum dbias_reduction */

/* y[r][c] = gelu_tanh(x[r][c] + bias[c]), one thread per element. */
int cuda_fused_bias_gelu_forward(const void *x, const void *bias, void *y, size_t rows, size_t cols,
                                 enum dtype dt, int device, void *stream);

/* Rows per chunk of the deterministic reduction (below). */
#define CUDA_FBG_CHUNK_ROWS 256

/* dx = dy * gelu_tanh'(x + bias); dbias[c] = sum over rows of dx[r][c].
 *
 * DBIAS_DETERMINISTIC, the summation order (fixed by rows and cols alone: the
 * same bits on every run, launch and device of the same code):
 *   1. rows are cut into chunks of CUDA_FBG_CHUNK_ROWS: chunk k holds rows
 *      [256k, 256k + 256);
 *   2. in chunk k, column c, eight lanes j = 0..7 each sum the rows
 *      256k + j, 256k + j + 8, 256k + j + 16, ... in increasing order,
 *      starting from +0.0f (lane j's partial p_j);
 *   3. the eight lanes are combined by a fixed tree:
 *      P_k = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7));
 *   4. dbias[c] = (((+0.0f + P_0) + P_1) + ...) + P_{K-1}, rounded once to dt.
 *   The chunk partials P_k live in the workspace (K * cols floats).
 *
 * DBIAS_ATOMIC: every dx element is added straight into one float32
 * accumulator per column (workspace, cols floats, zeroed on the stream
 * first) with atomicAdd from blocks of 8 rows that run concurrently, so the
 * order of additions is whatever the scheduler makes it: dbias differs from
 * run to run in its last bits. dx is bitwise the same for both reductions.
 *
 * workspace: device memory of at least cuda_fbg_workspace_bytes(rows, cols,
 * red) bytes, 4-byte aligned (NULL when that is 0); the caller allocates it
 * (through the caching allocator, so memory statistics see it). */
size_t cuda_fbg_workspace_bytes(size_t rows, size_t cols, enum dbias_reduction red);
int cuda_fused_bias_gelu_backward(const void *dy, const void *x, const void *bias, void *dx, void *dbias,
                                  void *workspace, size_t workspace_bytes, size_t rows, size_t cols,
                                  enum dtype dt, enum dbias_reduction red, int device, void *stream);

#ifdef __cplusplus
}
#endif
#endif
