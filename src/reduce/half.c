/* fp16 and bf16 conversions, exact and round-to-nearest-even, without relying on F16C. */
#include <stdint.h>
#include <string.h>

#include "hc_reduce.h"

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float hc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* Inf or NaN: keep the payload, NaN stays NaN */
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0)
        return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0)
        return bits_float(sign);
    /* Subnormal half: exact in float, value = mant * 2^-24. */
    return bits_float(sign) + (sign ? -1.0f : 1.0f) * (float)mant * 5.9604644775390625e-8f;
}

uint16_t hc_float_to_half(float f)
{
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;

    if (abs > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* rounds to >= 65536 - overflow to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (abs >= 0x38800000u) { /* normal half */
        uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
        return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
    }
    if (abs < 0x33000000u) /* below half of the smallest subnormal: zero */
        return (uint16_t)sign;
    {
        /* Subnormal half: shift the full mantissa and round to nearest even. */
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* 14..24 */
        uint32_t half_value = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (half_value & 1u)))
            half_value++;
        return (uint16_t)(sign | half_value);
    }
}

float hc_bf16_to_float(uint16_t b)
{
    return bits_float((uint32_t)b << 16);
}

uint16_t hc_float_to_bf16(float f)
{
    uint32_t u = float_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet it so truncation cannot make Inf */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
