/* bias_dropout_add_cuda: fused out = residual + dropout(x + bias) on a CUDA
 * device, drawing the mask with Philox4_32_10 from a (seed, offset) pair
 * that the caller takes from the device's default generator
 * (aten_cuda_philox_reserve), so restoring a stashed generator state
 * replays the same mask. Plain C API over device buffers.
 *
 * Buffers: x, residual, out, noise are rows x cols, row-major, contiguous;
 * bias is cols; all hold `dt` (DT_F32, DT_BF16 or DT_F16) on `device`; out
 * may be residual (in place). `stream`: a cudaStream_t of that device (NULL:
 * the legacy default stream). Calls only queue work (errors during
 * execution show at the next synchronising call); the caller's current
 * device is restored.
 *
 * The draw. Element i (row-major linear index) belongs to group g = i / 4;
 * group g runs curand_init(seed, g, offset) -- subsequence g, `offset`
 * 32-bit values into it -- and draws one curand_uniform4, u[0..3] in (0, 1];
 * element i is kept when u[i % 4] < (float)(1 - p). The mask is thus a
 * function of (seed, offset, i) alone: not of the launch shape, the device
 * or rows/cols separately.
 *
 * Offset accounting. Every group draws exactly 4 values starting at
 * `offset`, so one call uses the counter range [offset, offset + 4) of every
 * subsequence. The caller must advance the generator's offset by
 * CUDA_BDA_PHILOX_INCREMENT (4) per call -- aten_cuda_philox_reserve does so
 * under the generator's mutex -- which is ATen's own convention (its
 * offsets count 32-bit values per subsequence and stay multiples of 4), so
 * ATen's kernels and this one never reuse each other's numbers, and a
 * stashed get_state()/set_state() pair (seed + offset) replays the mask.
 *
 * The values. s = 1.0f / (float)(1 - p) rounded to dt (the CPU path's mask
 * / (1 - p) in dt); noise[i] = kept ? s : 0, stored in dt, which is what the
 * op saves for backward (dx = dy * noise). In float32:
 *     out[i] = residual[i] + (x[i] + bias[c]) * noise[i],
 * with x + bias not rounded to dt first and no FMA, rounded once to dt (a
 * fused op rounds once; the unfused one rounds after each op). A dropped
 * inf/NaN input gives NaN, as x * 0 does in ATen's dropout.
 *
 * Status returns (error.h): ST_OK; ST_INPUT for a bad argument (p outside
 * (0, 1): p = 0 draws nothing and p = 1 drops everything, both handled by
 * the caller without this kernel; NULL buffer; unsupported dtype); ST_RUN
 * when CUDA refuses the launch or the device. */
#ifndef CKPT_CUDA_BIAS_DROPOUT_ADD_CUDA_H
#define CKPT_CUDA_BIAS_DROPOUT_ADD_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "dtype.h"

/* Philox offset (32-bit values per subsequence) one call consumes. */
#define CUDA_BDA_PHILOX_INCREMENT 4

int cuda_bias_dropout_add(const void *x, const void *bias, const void *residual, void *out, void *noise,
                          size_t rows, size_t cols, enum dtype dt, double p, uint64_t seed, uint64_t offset,
                          int device, void *stream);

/* The kept-element scale as stored in noise: round_dt(1.0f / (float)(1 - p)),
 * widened to float (tests and the host side use it). */
float cuda_bda_scale(double p, enum dtype dt);

#ifdef __cplusplus
}
#endif
#endif
