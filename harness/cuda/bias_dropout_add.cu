/* bias_dropout_add.cu: the CUDA fused bias + dropout + residual add behind
 * bias_dropout_add_cuda.h (the draw and the offset accounting are
 * documented there). Plain CUDA, no libtorch headers. */
#include "bias_dropout_add_cuda.h"

#include <cuda_runtime.h>
#include <curand_kernel.h>

extern "C" {
#include "../error.h"
}
#include "device_float.cuh"

using ckpt_cuda::device_guard;
using ckpt_cuda::load;
using ckpt_cuda::store;

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1u << 16;

template <int DT>
__global__ void bias_dropout_add_kernel(const void *x, const void *bias, const void *residual, void *out,
                                        void *noise, size_t n, size_t cols, float p_keep, float scale,
                                        unsigned long long seed, unsigned long long offset)
{
    const size_t groups = (n + 3) / 4;
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += step) {
        /* One state per group, not per thread: the mask must not depend on
         * the grid (Philox's curand_init is O(1), so this costs nothing). */
        curandStatePhilox4_32_10_t state;
        curand_init(seed, (unsigned long long)g, offset, &state);
        const float4 u4 = curand_uniform4(&state);
        const float u[4] = {u4.x, u4.y, u4.z, u4.w};
        for (int k = 0; k < 4; k++) {
            const size_t i = 4 * g + (size_t)k;
            if (i >= n)
                break;
            const float keep = u[k] < p_keep ? scale : 0.0f;
            const float v = __fadd_rn(load<DT>(x, i), load<DT>(bias, i % cols));
            const float r = load<DT>(residual, i); /* read before out (may be residual) is written */
            store<DT>(noise, i, keep);
            store<DT>(out, i, __fadd_rn(r, __fmul_rn(v, keep)));
        }
    }
}

unsigned blocks_for(size_t n)
{
    const size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? (b ? b : 1) : kMaxBlocks);
}

} // namespace

extern "C" float cuda_bda_scale(double p, enum dtype dt)
{
    return ckpt_cuda::round_to(dt, 1.0f / (float)(1.0 - p));
}

extern "C" int cuda_bias_dropout_add(const void *x, const void *bias, const void *residual, void *out,
                                     void *noise, size_t rows, size_t cols, enum dtype dt, double p,
                                     uint64_t seed, uint64_t offset, int device, void *stream)
{
    const char *what = "cuda_bias_dropout_add";
    if (dt != DT_F32 && dt != DT_BF16 && dt != DT_F16)
        return error_set(ST_INPUT, "%s: dtype %s not supported (float32, bfloat16, float16)", what,
                         dtype_name(dt));
    if (!(p > 0.0 && p < 1.0))
        return error_set(ST_INPUT, "%s: p = %g outside (0, 1)", what, p);
    if (cols != 0 && rows > SIZE_MAX / 4 / cols)
        return error_set(ST_INPUT, "%s: %zu x %zu elements overflow size_t", what, rows, cols);
    if (rows == 0 || cols == 0)
        return ST_OK;
    if (!x || !bias || !residual || !out || !noise)
        return error_set(ST_INPUT, "%s: NULL buffer", what);
    device_guard guard(device);
    if (guard.status() != cudaSuccess)
        return error_set(ST_RUN, "%s: cudaSetDevice(%d): %s", what, device, cudaGetErrorString(guard.status()));
    const size_t n = rows * cols;
    const float p_keep = (float)(1.0 - p);
    const float scale = cuda_bda_scale(p, dt);
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const unsigned grid = blocks_for((n + 3) / 4);
    switch (dt) {
    case DT_F32:
        bias_dropout_add_kernel<DT_F32><<<grid, kThreads, 0, s>>>(x, bias, residual, out, noise, n, cols, p_keep,
                                                                  scale, seed, offset);
        break;
    case DT_BF16:
        bias_dropout_add_kernel<DT_BF16><<<grid, kThreads, 0, s>>>(x, bias, residual, out, noise, n, cols,
                                                                   p_keep, scale, seed, offset);
        break;
    default:
        bias_dropout_add_kernel<DT_F16><<<grid, kThreads, 0, s>>>(x, bias, residual, out, noise, n, cols, p_keep,
                                                                  scale, seed, offset);
        break;
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return error_set(ST_RUN, "%s: kernel launch: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return ST_OK;
}
