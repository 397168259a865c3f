/* fused_bias_gelu.cu: the CUDA fused bias + GELU (tanh) kernels behind
 * fused_bias_gelu_cuda.h. Plain CUDA (no libtorch headers), so the same file
 * compiles in every build that has nvcc; see that header for the contract
 * and the documented dbias summation order. */
#include "fused_bias_gelu_cuda.h"

#include <stdint.h>

#include <cuda_runtime.h>

#include <type_traits>

extern "C" {
#include "../error.h"
}
#include "device_float.cuh"

using ckpt_cuda::device_guard;
using ckpt_cuda::gelu_tanh;
using ckpt_cuda::gelu_tanh_backward;
using ckpt_cuda::load;
using ckpt_cuda::store;

namespace {

constexpr int kThreads = 256;          /* elementwise kernels */
constexpr int kTileCols = 32;          /* one warp across 32 adjacent columns: coalesced rows */
constexpr int kLanes = 8;              /* row lanes per column in the reduction kernels */
constexpr unsigned kMaxGrid = 65535u;  /* grid.y limit; grid-stride loops cover the rest */
constexpr unsigned kMaxBlocks = 1u << 18;

static_assert(CUDA_FBG_CHUNK_ROWS % kLanes == 0, "a chunk is whole rounds of the lanes");
static_assert(kLanes == 8, "the documented tree in fused_bias_gelu_cuda.h is for eight lanes");

unsigned blocks_for(size_t n, size_t per_block, unsigned cap)
{
    size_t b = (n + per_block - 1) / per_block;
    return (unsigned)(b < cap ? (b ? b : 1) : cap);
}

int dtype_ok(enum dtype dt) { return dt == DT_F32 || dt == DT_BF16 || dt == DT_F16; }

int check_shape(const char *what, size_t rows, size_t cols, enum dtype dt)
{
    if (!dtype_ok(dt))
        return error_set(ST_INPUT, "%s: dtype %s not supported (float32, bfloat16, float16)", what,
                         dtype_name(dt));
    if (cols != 0 && rows > SIZE_MAX / 4 / cols)
        return error_set(ST_INPUT, "%s: %zu x %zu elements overflow size_t", what, rows, cols);
    return ST_OK;
}

int cuda_failed(const char *what, const char *call, cudaError_t e)
{
    return error_set(ST_RUN, "%s: %s: %s (%s)", what, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Status of the launches just queued (not of their execution). */
int launched(const char *what)
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? (int)ST_OK : cuda_failed(what, "kernel launch", e);
}

/* Calls f with the dtype as a compile-time constant. */
template <class F>
void with_dtype(enum dtype dt, F &&f)
{
    switch (dt) {
    case DT_F32: f(std::integral_constant<int, DT_F32>()); break;
    case DT_BF16: f(std::integral_constant<int, DT_BF16>()); break;
    default: f(std::integral_constant<int, DT_F16>()); break;
    }
}

template <int DT>
__global__ void forward_kernel(const void *x, const void *bias, void *y, size_t n, size_t cols)
{
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        /* Both reads before the write: y == x stays correct. */
        const float v = __fadd_rn(load<DT>(x, i), load<DT>(bias, i % cols));
        store<DT>(y, i, gelu_tanh(v));
    }
}

/* dx of one element, stored; returns the stored value widened. */
template <int DT>
__device__ __forceinline__ float dx_element(const void *dy, const void *x, const void *bias, void *dx,
                                            size_t cols, size_t r, size_t c)
{
    const size_t i = r * cols + c;
    const float v = __fadd_rn(load<DT>(x, i), load<DT>(bias, c));
    const float g = load<DT>(dy, i);
    return store<DT>(dx, i, gelu_tanh_backward(g, v));
}

/* Steps 1-3 of the documented order: block (column tile, chunk), thread
 * (column in tile, lane). Writes P_k for its 32 columns into partials. */
template <int DT>
__global__ void __launch_bounds__(kTileCols *kLanes)
    chunk_partials_kernel(const void *dy, const void *x, const void *bias, void *dx, float *partials,
                          size_t rows, size_t cols, size_t chunks)
{
    __shared__ float lane_sum[kLanes][kTileCols];
    const size_t c = (size_t)blockIdx.x * kTileCols + threadIdx.x;
    const int lane = (int)threadIdx.y;
    for (size_t k = blockIdx.y; k < chunks; k += gridDim.y) {
        float acc = 0.0f;
        if (c < cols) {
            const size_t first = k * CUDA_FBG_CHUNK_ROWS;
            const size_t end = first + CUDA_FBG_CHUNK_ROWS < rows ? first + CUDA_FBG_CHUNK_ROWS : rows;
            for (size_t r = first + lane; r < end; r += kLanes)
                acc = __fadd_rn(acc, dx_element<DT>(dy, x, bias, dx, cols, r, c));
        }
        lane_sum[lane][threadIdx.x] = acc;
        __syncthreads();
        /* Stride 4, 2, 1: ((p0+p4) + (p2+p6)) + ((p1+p5) + (p3+p7)). */
        for (int stride = kLanes / 2; stride > 0; stride /= 2) {
            if (lane < stride)
                lane_sum[lane][threadIdx.x] =
                    __fadd_rn(lane_sum[lane][threadIdx.x], lane_sum[lane + stride][threadIdx.x]);
            __syncthreads();
        }
        if (lane == 0 && c < cols)
            partials[k * cols + c] = lane_sum[0][threadIdx.x];
        __syncthreads(); /* lane_sum is reused by the next chunk */
    }
}

/* The atomic variant: each warp takes one row, blocks of kLanes rows race
 * on the same per-column accumulators. */
template <int DT>
__global__ void __launch_bounds__(kTileCols *kLanes)
    atomic_kernel(const void *dy, const void *x, const void *bias, void *dx, float *acc, size_t rows,
                  size_t cols)
{
    const size_t c = (size_t)blockIdx.x * kTileCols + threadIdx.x;
    if (c >= cols)
        return;
    const size_t step = (size_t)gridDim.y * kLanes;
    for (size_t r = (size_t)blockIdx.y * kLanes + threadIdx.y; r < rows; r += step)
        atomicAdd(&acc[c], dx_element<DT>(dy, x, bias, dx, cols, r, c));
}

/* Step 4: dbias[c] = (+0 + P_0) + P_1 + ... in chunk order, rounded once.
 * The atomic variant passes its accumulators as one chunk. */
template <int DT>
__global__ void finish_kernel(const float *partials, size_t chunks, void *dbias, size_t cols)
{
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += step) {
        float s = 0.0f;
        for (size_t k = 0; k < chunks; k++)
            s = __fadd_rn(s, partials[k * cols + c]);
        store<DT>(dbias, c, s);
    }
}

size_t chunk_count(size_t rows) { return (rows + CUDA_FBG_CHUNK_ROWS - 1) / CUDA_FBG_CHUNK_ROWS; }

} // namespace

extern "C" int cuda_fused_bias_gelu_forward(const void *x, const void *bias, void *y, size_t rows,
                                            size_t cols, enum dtype dt, int device, void *stream)
{
    const char *what = "cuda_fused_bias_gelu_forward";
    int st = check_shape(what, rows, cols, dt);
    if (st)
        return st;
    if (rows == 0 || cols == 0)
        return ST_OK;
    if (!x || !bias || !y)
        return error_set(ST_INPUT, "%s: NULL buffer", what);
    device_guard guard(device);
    if (guard.status() != cudaSuccess)
        return cuda_failed(what, "cudaSetDevice", guard.status());
    const size_t n = rows * cols;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    with_dtype(dt, [&](auto tag) {
        forward_kernel<decltype(tag)::value>
            <<<blocks_for(n, kThreads, kMaxBlocks), kThreads, 0, s>>>(x, bias, y, n, cols);
    });
    return launched(what);
}

extern "C" size_t cuda_fbg_workspace_bytes(size_t rows, size_t cols, enum dbias_reduction red)
{
    const size_t floats_per_col = red == DBIAS_ATOMIC ? 1 : chunk_count(rows);
    if (cols != 0 && floats_per_col > SIZE_MAX / sizeof(float) / cols)
        return SIZE_MAX; /* no allocation can satisfy it; the call then says so */
    return floats_per_col * cols * sizeof(float);
}

extern "C" int cuda_fused_bias_gelu_backward(const void *dy, const void *x, const void *bias, void *dx,
                                             void *dbias, void *workspace, size_t workspace_bytes,
                                             size_t rows, size_t cols, enum dtype dt,
                                             enum dbias_reduction red, int device, void *stream)
{
    const char *what = "cuda_fused_bias_gelu_backward";
    int st = check_shape(what, rows, cols, dt);
    if (st)
        return st;
    if (red != DBIAS_DETERMINISTIC && red != DBIAS_ATOMIC)
        return error_set(ST_INPUT, "%s: unknown dbias reduction %d", what, (int)red);
    if (cols == 0)
        return ST_OK;
    if (!dbias || (rows > 0 && (!dy || !x || !bias || !dx)))
        return error_set(ST_INPUT, "%s: NULL buffer", what);
    const size_t need = cuda_fbg_workspace_bytes(rows, cols, red);
    if (workspace_bytes < need || (need > 0 && !workspace))
        return error_set(ST_INPUT, "%s: workspace of %zu bytes, %zu needed", what, workspace_bytes, need);
    device_guard guard(device);
    if (guard.status() != cudaSuccess)
        return cuda_failed(what, "cudaSetDevice", guard.status());
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    float *ws = static_cast<float *>(workspace);
    const unsigned col_tiles = blocks_for(cols, kTileCols, 0x7fffffffu);
    const dim3 block(kTileCols, kLanes);
    size_t chunks;
    if (red == DBIAS_DETERMINISTIC) {
        chunks = chunk_count(rows);
        if (chunks > 0)
            with_dtype(dt, [&](auto tag) {
                chunk_partials_kernel<decltype(tag)::value>
                    <<<dim3(col_tiles, blocks_for(chunks, 1, kMaxGrid)), block, 0, s>>>(dy, x, bias, dx, ws,
                                                                                      rows, cols, chunks);
            });
    } else {
        chunks = 1;
        /* All-zero bytes are +0.0f, the documented starting value. */
        const cudaError_t e = cudaMemsetAsync(ws, 0, cols * sizeof(float), s);
        if (e != cudaSuccess)
            return cuda_failed(what, "cudaMemsetAsync", e);
        if (rows > 0)
            with_dtype(dt, [&](auto tag) {
                atomic_kernel<decltype(tag)::value>
                    <<<dim3(col_tiles, blocks_for(rows, kLanes, kMaxGrid)), block, 0, s>>>(dy, x, bias, dx, ws,
                                                                                         rows, cols);
            });
    }
    if ((st = launched(what)))
        return st;
    with_dtype(dt, [&](auto tag) {
        finish_kernel<decltype(tag)::value>
            <<<blocks_for(cols, kThreads, kMaxBlocks), kThreads, 0, s>>>(ws, chunks, dbias, cols);
    });
    return launched(what);
}
