#include "half_convert.h"

#include <string.h>

/* Everything here works on bit patterns with integer arithmetic. Going
 * through FP instructions instead would make results depend on the rounding
 * mode and on flush-to-zero, and would quiet signalling NaNs on widening. */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float hc_bf16_to_f32(uint16_t h)
{
    /* bfloat16 is the top half of a float32: same exponent range, so every
     * value (subnormals, inf, NaN payloads) widens by a shift. */
    return f32_from_bits((uint32_t)h << 16);
}

float hc_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;

    if (e == 0x1f) /* inf or NaN: payload moves to the top of the f32 mantissa */
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0) /* normal: rebias 15 -> 127 */
        return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0)
        return f32_from_bits(sign);
    /* Subnormal m * 2^-24 is a normal float32: shift the leading one up to
     * the implicit-bit position, lowering the exponent once per step. */
    uint32_t steps = 0;
    while (!(m & 0x400u)) {
        m <<= 1;
        steps++;
    }
    return f32_from_bits(sign | ((113u - steps) << 23) | ((m & 0x3ffu) << 13));
}

uint16_t hc_f32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Round to nearest even on the low 16 bits. A carry out of the mantissa
     * bumps the exponent, which is exactly right, including the step from
     * the largest finite value to inf and from subnormal to normal. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

uint16_t hc_f32_to_f16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u)
            return sign | 0x7c00u;
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    /* 65520 = halfway between 65504 (largest f16, odd mantissa) and 65536:
     * the tie goes to the even neighbour, which is inf. */
    if (ax >= 0x477ff000u)
        return sign | 0x7c00u;
    if (ax >= 0x38800000u) { /* >= 2^-14: normal in f16 */
        uint32_t r = ax - (112u << 23); /* rebias 127 -> 15 */
        r += 0xfffu + ((r >> 13) & 1u); /* nearest even on the 13 dropped bits */
        return (uint16_t)(sign | (r >> 13));
    }
    /* f16 subnormal range: result = round(|f| / 2^-24). |f| = m * 2^(e-150)
     * so |f| / 2^-24 = m >> (126 - e). Below e = 102 that is < 1/2 (or
     * exactly 1/2 for the tie, which goes to the even 0). */
    const uint32_t e = ax >> 23;
    if (e < 102)
        return sign;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++; /* q may reach 0x400: the smallest normal, encoded correctly */
    return (uint16_t)(sign | q);
}

/* One-step rounding of a double to a small binary format with `ebits`
 * exponent bits and `mbits` stored mantissa bits (IEEE layout, bias
 * 2^(ebits-1) - 1). Shared by bf16 (8, 7) and f16 (5, 10). */
static uint16_t narrow_f64(double d, unsigned ebits, unsigned mbits)
{
    uint64_t x;
    memcpy(&x, &d, sizeof x);
    const uint32_t sign = (uint32_t)(x >> 63) << (ebits + mbits);
    const uint64_t ax = x & 0x7fffffffffffffffu;
    const uint32_t emax = (1u << ebits) - 1u; /* all-ones exponent field */
    const int bias = (1 << (ebits - 1u)) - 1;
    const uint32_t inf = emax << mbits;

    if (ax >= 0x7ff0000000000000u) {
        if (ax == 0x7ff0000000000000u)
            return (uint16_t)(sign | inf);
        const uint32_t payload = (uint32_t)(ax >> (52u - mbits)) & ((1u << mbits) - 1u);
        return (uint16_t)(sign | inf | (1u << (mbits - 1u)) | payload);
    }
    const int e = (int)(ax >> 52);
    if (e == 0) /* double subnormal: < 2^-1022, far below either format's half-quantum */
        return (uint16_t)sign;
    const uint64_t m = (ax & 0xfffffffffffffu) | (1ull << 52);
    const int E = e - 1023; /* |d| = m * 2^(E-52) */
    /* Quantum (value of one ULP) of the target at this magnitude, as a power
     * of two: 2^(E - mbits) for normals, fixed 2^(1-bias-mbits) below. */
    const int normal = E >= 1 - bias;
    const int qexp = (normal ? E : 1 - bias) - (int)mbits;
    const int shift = qexp - (E - 52); /* >= 52 - mbits > 0 */
    if (shift > 60) /* |d| / quantum < 2^-7: rounds to zero */
        return (uint16_t)sign;
    uint64_t q = m >> shift;
    const uint64_t rem = m & ((1ull << shift) - 1u);
    const uint64_t half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    uint32_t r;
    if (normal) {
        const int te = E + bias; /* >= 1 */
        if (te >= (int)emax)
            return (uint16_t)(sign | inf);
        /* q holds the implicit bit (2^mbits); adding it to (te-1) << mbits
         * gives te << mbits, and a rounding carry (q = 2^(mbits+1)) moves
         * to the next binade on its own. */
        r = ((uint32_t)(te - 1) << mbits) + (uint32_t)q;
    } else {
        r = (uint32_t)q; /* subnormal; q = 2^mbits is the smallest normal */
    }
    if (r > inf)
        r = inf;
    return (uint16_t)(sign | r);
}

uint16_t hc_f64_to_bf16(double d) { return narrow_f64(d, 8, 7); }

uint16_t hc_f64_to_f16(double d) { return narrow_f64(d, 5, 10); }
