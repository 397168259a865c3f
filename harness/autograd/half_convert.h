/* half_convert: bit-exact conversions between float32/float64 and the two
 * 16-bit float formats (bfloat16, IEEE binary16 "float16"), rounding to
 * nearest-even with subnormals, overflow to infinity, infinities and NaN
 * handled; plus element load/store on raw float32/bf16/f16 buffers.
 * Pure integer bit manipulation: no libtorch, no global state, and the result
 * does not depend on the FPU rounding mode or flush-to-zero settings. */
#ifndef CKPT_HALF_CONVERT_H
#define CKPT_HALF_CONVERT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

/* Widening is exact. A NaN keeps its sign and payload (a signalling NaN stays
 * signalling: no FP instruction touches it). */
float hc_bf16_to_f32(uint16_t h);
float hc_f16_to_f32(uint16_t h);

/* Narrowing, round to nearest, ties to even. Values beyond the largest finite
 * value (after rounding) become +-inf. NaN stays NaN: sign and the top payload
 * bits are kept and the quiet bit is set, so a payload that would truncate to
 * zero cannot turn into an infinity. */
uint16_t hc_f32_to_bf16(float f);
uint16_t hc_f32_to_f16(float f);

/* Same from double, rounded once, directly: (uint16)(float)d would round
 * twice and can be off by one ULP on values just past a tie, which matters
 * for reference results in tests. */
uint16_t hc_f64_to_bf16(double d);
uint16_t hc_f64_to_f16(double d);

/* Element i of a float32, bfloat16 or float16 buffer, as float, and back
 * (stores round as above). Inline because kernels call them per element; the
 * buffers need no alignment (memcpy). Other dtypes are the caller's bug: the
 * load gives NaN and the store writes nothing. */
static inline float hc_load_f32(const void *buf, enum dtype dt, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf; /* cast: C++-includable */
    switch (dt) {
    case DT_F32: { float v; memcpy(&v, p + 4 * i, sizeof v); return v; }
    case DT_BF16: { uint16_t h; memcpy(&h, p + 2 * i, sizeof h); return hc_bf16_to_f32(h); }
    case DT_F16: { uint16_t h; memcpy(&h, p + 2 * i, sizeof h); return hc_f16_to_f32(h); }
    default: return NAN;
    }
}

static inline void hc_store_f32(void *buf, enum dtype dt, size_t i, float v)
{
    unsigned char *p = (unsigned char *)buf;
    switch (dt) {
    case DT_F32: memcpy(p + 4 * i, &v, sizeof v); break;
    case DT_BF16: { uint16_t h = hc_f32_to_bf16(v); memcpy(p + 2 * i, &h, sizeof h); break; }
    case DT_F16: { uint16_t h = hc_f32_to_f16(v); memcpy(p + 2 * i, &h, sizeof h); break; }
    default: break;
    }
}

#endif
