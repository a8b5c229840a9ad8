/*
 * The twelve HCCL element types as the perf tools write and read them on the host.
 *
 * The tools fill inputs and compute expectations as doubles and convert at the buffer: one store
 * and one load per type. fp16 and bf16 have their own converters here because the tools use only
 * the public API, and the library's are internal.
 */
#include <math.h>
#include <string.h>

#include "perf.h"

/* Integers are written modulo 2^bits, so an expected sum or product that wrapped in the library
 * (two's complement, DESIGN.md section 6) wraps the same way here. The double always holds an
 * integer well inside int64's range: the tools' values are small. */
#define INT_CODEC(name, type, utype)                                                           \
    static void store_##name(void *elem, double value)                                         \
    {                                                                                          \
        utype bits = (utype)(uint64_t)(int64_t)value;                                          \
        memcpy(elem, &bits, sizeof(bits));                                                     \
    }                                                                                          \
    static double load_##name(const void *elem)                                                \
    {                                                                                          \
        type v;                                                                                \
        memcpy(&v, elem, sizeof(v));                                                           \
        return (double)v;                                                                      \
    }

INT_CODEC(i8, int8_t, uint8_t)
INT_CODEC(i16, int16_t, uint16_t)
INT_CODEC(i32, int32_t, uint32_t)
INT_CODEC(i64, int64_t, uint64_t)
INT_CODEC(u8, uint8_t, uint8_t)
INT_CODEC(u16, uint16_t, uint16_t)
INT_CODEC(u32, uint32_t, uint32_t)
INT_CODEC(u64, uint64_t, uint64_t)

static void store_fp32(void *elem, double value)
{
    float v = (float)value;
    memcpy(elem, &v, sizeof(v));
}

static double load_fp32(const void *elem)
{
    float v;
    memcpy(&v, elem, sizeof(v));
    return v;
}

static void store_fp64(void *elem, double value)
{
    memcpy(elem, &value, sizeof(value));
}

static double load_fp64(const void *elem)
{
    double v;
    memcpy(&v, elem, sizeof(v));
    return v;
}

/* Round the low `shift` bits of value away, to nearest, ties to even. */
static uint32_t round_shift(uint32_t value, uint32_t shift)
{
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);

    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return kept;
}

uint16_t hc_perf_fp16_from_float(float value)
{
    uint32_t bits, mant, sign;
    int32_t exp;

    memcpy(&bits, &value, sizeof(bits));
    sign = (bits >> 16) & 0x8000u;
    mant = bits & 0x7fffffu;
    if (((bits >> 23) & 0xffu) == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
    exp = (int32_t)((bits >> 23) & 0xffu) - 127 + 15;
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        /* A subnormal half: the 24-bit significand scaled to units of 2^-24. Anything below half
         * of the smallest subnormal rounds to zero. */
        if (exp < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign | round_shift(mant | 0x800000u, (uint32_t)(14 - exp)));
    }
    /* A carry out of the significand bumps the exponent, up to infinity: exactly right. */
    return (uint16_t)(sign | round_shift(((uint32_t)exp << 23) | mant, 13));
}

float hc_perf_fp16_to_float(uint16_t bits)
{
    uint32_t sign = ((uint32_t)bits & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)bits >> 10) & 0x1fu;
    uint32_t mant = (uint32_t)bits & 0x3ffu;
    uint32_t out;
    float value;

    if (exp == 0) {
        value = ldexpf((float)mant, -24);
        return sign != 0 ? -value : value;
    }
    if (exp == 31)
        out = sign | 0x7f800000u | (mant << 13);
    else
        out = sign | ((exp - 15u + 127u) << 23) | (mant << 13);
    memcpy(&value, &out, sizeof(value));
    return value;
}

uint16_t hc_perf_bf16_from_float(float value)
{
    uint32_t bits;

    memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float hc_perf_bf16_to_float(uint16_t bits)
{
    uint32_t out = (uint32_t)bits << 16;
    float value;

    memcpy(&value, &out, sizeof(value));
    return value;
}

static void store_fp16(void *elem, double value)
{
    uint16_t bits = hc_perf_fp16_from_float((float)value);
    memcpy(elem, &bits, sizeof(bits));
}

static double load_fp16(const void *elem)
{
    uint16_t bits;
    memcpy(&bits, elem, sizeof(bits));
    return hc_perf_fp16_to_float(bits);
}

static void store_bf16(void *elem, double value)
{
    uint16_t bits = hc_perf_bf16_from_float((float)value);
    memcpy(elem, &bits, sizeof(bits));
}

static double load_bf16(const void *elem)
{
    uint16_t bits;
    memcpy(&bits, elem, sizeof(bits));
    return hc_perf_bf16_to_float(bits);
}

#define INT_TYPE(label, hccl, ctype, sign, codec)                                              \
    {.name = label, .type = hccl, .size = sizeof(ctype), .is_float = 0, .is_signed = sign,     \
     .exact_limit = 0, .store = store_##codec, .load = load_##codec}

/* hccl_test's order, which its usage text and -d follow. */
static const hc_perf_dtype_t dtypes[] = {
    INT_TYPE("int8", HCCL_DATA_TYPE_INT8, int8_t, 1, i8),
    INT_TYPE("int16", HCCL_DATA_TYPE_INT16, int16_t, 1, i16),
    INT_TYPE("int32", HCCL_DATA_TYPE_INT32, int32_t, 1, i32),
    {.name = "fp16", .type = HCCL_DATA_TYPE_FP16, .size = 2, .is_float = 1, .is_signed = 1,
     .exact_limit = 2048.0, .store = store_fp16, .load = load_fp16},
    {.name = "fp32", .type = HCCL_DATA_TYPE_FP32, .size = 4, .is_float = 1, .is_signed = 1,
     .exact_limit = 16777216.0, .store = store_fp32, .load = load_fp32},
    INT_TYPE("int64", HCCL_DATA_TYPE_INT64, int64_t, 1, i64),
    INT_TYPE("uint64", HCCL_DATA_TYPE_UINT64, uint64_t, 0, u64),
    INT_TYPE("uint8", HCCL_DATA_TYPE_UINT8, uint8_t, 0, u8),
    INT_TYPE("uint16", HCCL_DATA_TYPE_UINT16, uint16_t, 0, u16),
    INT_TYPE("uint32", HCCL_DATA_TYPE_UINT32, uint32_t, 0, u32),
    {.name = "fp64", .type = HCCL_DATA_TYPE_FP64, .size = 8, .is_float = 1, .is_signed = 1,
     .exact_limit = 9007199254740992.0, .store = store_fp64, .load = load_fp64},
    {.name = "bfp16", .type = HCCL_DATA_TYPE_BFP16, .size = 2, .is_float = 1, .is_signed = 1,
     .exact_limit = 256.0, .store = store_bf16, .load = load_bf16},
};

const hc_perf_dtype_t *hc_perf_dtype_find(const char *name)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (strcmp(dtypes[i].name, name) == 0)
            return &dtypes[i];
    }
    return NULL;
}

const char *hc_perf_dtype_names(void)
{
    return "int8/int16/int32/fp16/fp32/int64/uint64/uint8/uint16/uint32/fp64/bfp16";
}
