/*
 * IEEE 754 binary16 conversions, bit-exact: round to nearest even, NaN stays NaN (quietened, with
 * the payload's top bits kept), infinities and subnormals both ways. Written on the bit patterns
 * rather than with _Float16 so that the result does not depend on the compiler or the CPU's F16C.
 */
#include <string.h>

#include "hc_rt.h"

#define F32_INF 0x7f800000u
/* Floats at or above this magnitude round to infinity: halfway between 65504 (the largest half)
 * and 65536, and 65504's last mantissa bit is odd, so the tie goes up. */
#define F32_HALF_OVERFLOW 0x477ff000u
/* Below 2^-14 a half is subnormal; at or below 2^-25 (half the smallest subnormal) it is zero. */
#define F32_HALF_MIN_NORMAL 0x38800000u
#define F32_HALF_ZERO_MAX 0x33000000u

/* Shift mantissa right by `shift` bits, rounding to nearest even. */
static uint32_t shift_round_even(uint32_t mantissa, unsigned shift)
{
    uint32_t kept = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);

    if (rest > half || (rest == half && (kept & 1)))
        kept++;
    return kept;
}

HC_RT_EXPORT aclFloat16 aclFloatToFloat16(float value)
{
    uint32_t bits, magnitude, sign;

    memcpy(&bits, &value, sizeof(bits));
    sign = (bits >> 16) & 0x8000u;
    magnitude = bits & 0x7fffffffu;
    if (magnitude > F32_INF) /* NaN: keep it NaN even if the payload's top bits are zero */
        return (aclFloat16)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude >= F32_HALF_OVERFLOW)
        return (aclFloat16)(sign | 0x7c00u);
    if (magnitude >= F32_HALF_MIN_NORMAL) {
        /* Rebias the exponent (127 -> 15) and round 23 mantissa bits to 10; a carry out of the
         * mantissa correctly bumps the exponent. */
        return (aclFloat16)(sign | shift_round_even(magnitude - 0x38000000u, 13));
    }
    if (magnitude <= F32_HALF_ZERO_MAX)
        return (aclFloat16)sign;
    /* Subnormal: the value in units of 2^-24 is the full mantissa shifted by 126 - exponent
     * (14 to 24 places); rounding up to 0x400 gives the smallest normal, correctly encoded. */
    return (aclFloat16)(sign | shift_round_even((magnitude & 0x7fffffu) | 0x800000u,
                                                126u - (magnitude >> 23)));
}

HC_RT_EXPORT float aclFloat16ToFloat(aclFloat16 value)
{
    uint32_t sign = (uint32_t)(value & 0x8000u) << 16;
    uint32_t exponent = (value >> 10) & 0x1fu;
    uint32_t mantissa = value & 0x3ffu;
    uint32_t bits;
    float result;

    if (exponent == 0x1f) {
        bits = sign | F32_INF | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        /* Subnormal half: normalise; each shift lowers the float exponent by one from 2^-14. */
        exponent = 113;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
    memcpy(&result, &bits, sizeof(result));
    return result;
}
