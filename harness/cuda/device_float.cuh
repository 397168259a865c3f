/* device_float: what the CUDA kernels share: float32 <-> bfloat16 / float16
 * element load and store with the very rounding rules of half_convert.h
 * (nearest even, subnormals kept, overflow to inf, NaN sign and payload kept
 * with the quiet bit set), and the GELU (tanh) formulas of the CPU kernel.
 *
 * Why not cuda_bf16.h's __float2bfloat16_rn: it returns one canonical NaN,
 * while the CPU kernel keeps the payload; a NaN gradient must have the same
 * bits on both devices for the compare module to call them equal.
 *
 * Why __fmul_rn / __fadd_rn everywhere: nvcc contracts a * b + c into an FMA
 * by default, which rounds once instead of twice. The CPU kernel is built
 * without contraction; spelling every product and sum with the _rn
 * intrinsics keeps the device formula operation for operation the CPU one,
 * whatever --fmad says. What may still differ is tanhf itself (CUDA's is
 * within 2 ULP, glibc's is another implementation). */
#ifndef CKPT_CUDA_DEVICE_FLOAT_CUH
#define CKPT_CUDA_DEVICE_FLOAT_CUH

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

extern "C" {
#include "dtype.h"
}

namespace ckpt_cuda {

__host__ __device__ __forceinline__ uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

__host__ __device__ __forceinline__ float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

__host__ __device__ __forceinline__ float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

__host__ __device__ __forceinline__ float f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f)
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0)
        return f32_from_bits(sign);
    uint32_t steps = 0;
    while (!(m & 0x400u)) {
        m <<= 1;
        steps++;
    }
    return f32_from_bits(sign | ((113u - steps) << 23) | ((m & 0x3ffu) << 13));
}

__host__ __device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__host__ __device__ __forceinline__ uint16_t f32_to_f16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u)
            return sign | 0x7c00u;
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) /* rounds to >= 65520: inf (the tie goes to even) */
        return sign | 0x7c00u;
    if (ax >= 0x38800000u) { /* normal in f16 */
        uint32_t r = ax - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    const uint32_t e = ax >> 23; /* f16 subnormal: round(|f| / 2^-24) */
    if (e < 102)
        return sign;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

/* Element i of a float32 / bfloat16 / float16 buffer, widened exactly. The
 * dtype is a kernel template parameter, so the switch folds away. */
template <int DT>
__device__ __forceinline__ float load(const void *buf, size_t i)
{
    if (DT == DT_F32)
        return static_cast<const float *>(buf)[i];
    if (DT == DT_BF16)
        return bf16_to_f32(static_cast<const uint16_t *>(buf)[i]);
    return f16_to_f32(static_cast<const uint16_t *>(buf)[i]);
}

/* Rounds v once to DT, stores it, and returns the stored value widened back
 * (reductions sum what the caller will see, as the CPU kernel does). */
template <int DT>
__device__ __forceinline__ float store(void *buf, size_t i, float v)
{
    if (DT == DT_F32) {
        static_cast<float *>(buf)[i] = v;
        return v;
    }
    if (DT == DT_BF16) {
        const uint16_t h = f32_to_bf16(v);
        static_cast<uint16_t *>(buf)[i] = h;
        return bf16_to_f32(h);
    }
    const uint16_t h = f32_to_f16(v);
    static_cast<uint16_t *>(buf)[i] = h;
    return f16_to_f32(h);
}

/* v rounded to DT and widened back, on the host or the device. */
__host__ __device__ __forceinline__ float round_to(enum dtype dt, float v)
{
    if (dt == DT_BF16)
        return bf16_to_f32(f32_to_bf16(v));
    if (dt == DT_F16)
        return f16_to_f32(f32_to_f16(v));
    return v;
}

/* The CPU kernel's constants: the same double expressions converted to float. */
#define CKPT_CUDA_BETA ((float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5))
#define CKPT_CUDA_KAPPA ((float)0.044715)

/* fbg_gelu_tanh_f32 of fused_bias_gelu.c, operation for operation. */
__device__ __forceinline__ float gelu_tanh(float x)
{
    const float x_cube = __fmul_rn(__fmul_rn(x, x), x);
    const float inner = __fmul_rn(CKPT_CUDA_BETA, __fadd_rn(x, __fmul_rn(CKPT_CUDA_KAPPA, x_cube)));
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
}

/* fbg_gelu_tanh_backward_f32 of fused_bias_gelu.c, operation for operation. */
__device__ __forceinline__ float gelu_tanh_backward(float dy, float x)
{
    const float x_sq = __fmul_rn(x, x);
    const float x_cube = __fmul_rn(x_sq, x);
    const float inner = __fmul_rn(CKPT_CUDA_BETA, __fadd_rn(x, __fmul_rn(CKPT_CUDA_KAPPA, x_cube)));
    const float tanh_inner = tanhf(inner);
    const float left = __fmul_rn(0.5f, x);
    const float right = __fadd_rn(1.0f, tanh_inner);
    const float left_derivative = __fmul_rn(0.5f, right);
    const float tanh_derivative = __fsub_rn(1.0f, __fmul_rn(tanh_inner, tanh_inner));
    const float inner_derivative =
        __fmul_rn(CKPT_CUDA_BETA, __fadd_rn(1.0f, __fmul_rn(__fmul_rn(3.0f, CKPT_CUDA_KAPPA), x_sq)));
    const float right_derivative = __fmul_rn(__fmul_rn(left, tanh_derivative), inner_derivative);
    return __fmul_rn(dy, __fadd_rn(left_derivative, right_derivative));
}

/* Saves the caller's current device and makes `device` current; restores
 * on scope exit. CUDA's current device is per host thread: the shim's
 * callers (ATen) expect it back as it was. */
class device_guard {
  public:
    explicit device_guard(int device) : prev_(-1)
    {
        if (cudaGetDevice(&prev_) != cudaSuccess)
            prev_ = -1;
        status_ = prev_ == device ? cudaSuccess : cudaSetDevice(device);
    }
    ~device_guard()
    {
        if (prev_ >= 0 && status_ == cudaSuccess)
            (void)cudaSetDevice(prev_);
    }
    cudaError_t status() const { return status_; }
    device_guard(const device_guard &) = delete;
    device_guard &operator=(const device_guard &) = delete;

  private:
    int prev_;
    cudaError_t status_;
};

} // namespace ckpt_cuda

#endif
