/*
 * Reduction kernels: conversions against known values, every dtype x op against a per-element
 * reference on random data with NaN, +-Inf and denormals, tails of every length 0..64, aliasing of
 * the output with an input, and fp16/bf16 rounded once.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hc_dtype.h"
#include "hc_reduce.h"

static uint64_t rng_state = 0x1234567887654321ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_half_known_values(void **state)
{
    (void)state;
    assert_int_equal(hc_float_to_half(1.0f), 0x3c00);
    assert_int_equal(hc_float_to_half(-2.0f), 0xc000);
    assert_int_equal(hc_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(hc_float_to_half(65520.0f), 0x7c00);       /* rounds up to +Inf */
    assert_int_equal(hc_float_to_half(5.9604644775390625e-8f), 0x0001); /* smallest subnormal */
    assert_int_equal(hc_float_to_half(2.98023223876953125e-8f), 0x0000); /* half of it: ties to even */
    assert_int_equal(hc_float_to_half(1.0009765625f), 0x3c01);
    assert_int_equal(hc_float_to_half(1.00048828125f), 0x3c00); /* tie between 0x3c00 and 0x3c01: even */
    assert_int_equal(hc_float_to_half(1.00146484375f), 0x3c02); /* tie between 0x3c01 and 0x3c02: even */
    assert_true(isnan(hc_half_to_float(hc_float_to_half(NAN))));
    assert_true(isinf(hc_half_to_float(0x7c00)));
    assert_true(hc_half_to_float(0x0001) == 5.9604644775390625e-8f);
    assert_true(hc_half_to_float(0x3555) == 0.333251953125f);
    /* Every half survives a round trip through float. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* NaN payloads are quieted */
        assert_int_equal(hc_float_to_half(hc_half_to_float((uint16_t)h)), h);
    }
}

static void test_bf16_known_values(void **state)
{
    (void)state;
    assert_int_equal(hc_float_to_bf16(1.0f), 0x3f80);
    assert_int_equal(hc_float_to_bf16(1.00390625f), 0x3f80); /* tie: even */
    assert_int_equal(hc_float_to_bf16(1.01171875f), 0x3f82);  /* tie: up to even */
    assert_true(isnan(hc_bf16_to_float(hc_float_to_bf16(NAN))));
    for (uint32_t b = 0; b < 0x10000; b++) {
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f))
            continue;
        assert_int_equal(hc_float_to_bf16(hc_bf16_to_float((uint16_t)b)), b);
    }
}

/* Random element values with the special cases mixed in (floats: NaN, +-Inf, denormals, zeros). */
static void fill_random(HcclDataType t, void *buf, size_t count)
{
    size_t size = hc_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
        uint64_t r = next_random();
        double special[] = {NAN, INFINITY, -INFINITY, 1e-310, -0.0, 0.0, 1e-40, 6e-8};
        double v = (double)(int64_t)(r % 2001) / 8.0 - 125.0;
        if (r % 17 == 0)
            v = special[(r >> 8) % 8];
        switch (t) {
        case HCCL_DATA_TYPE_FP32:
            ((float *)buf)[i] = (float)v;
            break;
        case HCCL_DATA_TYPE_FP64:
            ((double *)buf)[i] = v;
            break;
        case HCCL_DATA_TYPE_FP16:
            ((uint16_t *)buf)[i] = hc_float_to_half((float)v);
            break;
        case HCCL_DATA_TYPE_BFP16:
            ((uint16_t *)buf)[i] = hc_float_to_bf16((float)v);
            break;
        default:
            memcpy((uint8_t *)buf + i * size, &r, size);
            break;
        }
    }
}

/* Reference: element by element, in input order, in the widest type; floats through double for
 * fp32/fp64 accumulations done in the type itself, fp16/bf16 accumulated in float. */
static double load_float(HcclDataType t, const void *buf, size_t i)
{
    switch (t) {
    case HCCL_DATA_TYPE_FP32:
        return ((const float *)buf)[i];
    case HCCL_DATA_TYPE_FP64:
        return ((const double *)buf)[i];
    case HCCL_DATA_TYPE_FP16:
        return hc_half_to_float(((const uint16_t *)buf)[i]);
    default:
        return hc_bf16_to_float(((const uint16_t *)buf)[i]);
    }
}

static double combine(HcclReduceOp op, double a, double b)
{
    switch (op) {
    case HCCL_REDUCE_SUM:
        return a + b;
    case HCCL_REDUCE_PROD:
        return a * b;
    case HCCL_REDUCE_MAX:
        return isnan(a) ? a : isnan(b) ? b : b > a ? b : a;
    default:
        return isnan(a) ? a : isnan(b) ? b : b < a ? b : a;
    }
}

static int is_float_type(HcclDataType t)
{
    return t == HCCL_DATA_TYPE_FP16 || t == HCCL_DATA_TYPE_BFP16 || t == HCCL_DATA_TYPE_FP32 ||
           t == HCCL_DATA_TYPE_FP64;
}

static void reference_float(HcclDataType t, HcclReduceOp op, void *out, const void *const *in, size_t n,
                            size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (t == HCCL_DATA_TYPE_FP64) {
            double acc = load_float(t, in[0], i);
            for (size_t k = 1; k < n; k++)
                acc = combine(op, acc, load_float(t, in[k], i));
            ((double *)out)[i] = acc;
        } else {
            float acc = (float)load_float(t, in[0], i);
            for (size_t k = 1; k < n; k++)
                acc = (float)combine(op, acc, load_float(t, in[k], i)); /* float result of float inputs */
            if (t == HCCL_DATA_TYPE_FP32)
                ((float *)out)[i] = acc;
            else if (t == HCCL_DATA_TYPE_FP16)
                ((uint16_t *)out)[i] = hc_float_to_half(acc);
            else
                ((uint16_t *)out)[i] = hc_float_to_bf16(acc);
        }
    }
}

static int is_signed_type(HcclDataType t)
{
    return t == HCCL_DATA_TYPE_INT8 || t == HCCL_DATA_TYPE_INT16 || t == HCCL_DATA_TYPE_INT32 ||
           t == HCCL_DATA_TYPE_INT64;
}

static void reference_int(HcclDataType t, HcclReduceOp op, void *out, const void *const *in, size_t n, size_t count)
{
    size_t size = hc_dtype_size(t);
    unsigned shift = (unsigned)(64 - 8 * size);
    for (size_t i = 0; i < count; i++) {
        uint64_t acc = 0, v;
        memcpy(&acc, (const uint8_t *)in[0] + i * size, size);
        for (size_t k = 1; k < n; k++) {
            v = 0;
            memcpy(&v, (const uint8_t *)in[k] + i * size, size);
            if (op == HCCL_REDUCE_SUM) {
                acc += v;
            } else if (op == HCCL_REDUCE_PROD) {
                acc *= v;
            } else {
                int greater = is_signed_type(t) ? (int64_t)(v << shift) > (int64_t)(acc << shift)
                                                : (v << shift) > (acc << shift);
                int smaller = is_signed_type(t) ? (int64_t)(v << shift) < (int64_t)(acc << shift)
                                                : (v << shift) < (acc << shift);
                if (op == HCCL_REDUCE_MAX ? greater : smaller)
                    acc = v;
            }
        }
        memcpy((uint8_t *)out + i * size, &acc, size);
    }
}

/* Compare floats by value with NaN == NaN (payloads may differ). */
static void assert_same(HcclDataType t, const void *got, const void *want, size_t count, const char *what)
{
    size_t size = hc_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
        if (is_float_type(t)) {
            double g = load_float(t, got, i), w = load_float(t, want, i);
            if ((isnan(g) && isnan(w)) || memcmp((const uint8_t *)got + i * size, (const uint8_t *)want + i * size, size) == 0)
                continue;
            fail_msg("%s %s element %zu: got %.17g want %.17g", hc_dtype_name(t), what, i, g, w);
        } else if (memcmp((const uint8_t *)got + i * size, (const uint8_t *)want + i * size, size) != 0) {
            fail_msg("%s %s element %zu differs", hc_dtype_name(t), what, i);
        }
    }
}

static const HcclDataType all_types[] = {
    HCCL_DATA_TYPE_INT8,   HCCL_DATA_TYPE_UINT8,  HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_UINT16,
    HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,   HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,  HCCL_DATA_TYPE_FP64,
};

static void check_case(HcclDataType t, HcclReduceOp op, size_t nsrc, size_t count)
{
    size_t bytes = count * hc_dtype_size(t) + 8;
    void *in[8], *out = malloc(bytes), *want = malloc(bytes);
    const void *cin[8];
    char what[64];

    for (size_t k = 0; k < nsrc; k++) {
        in[k] = malloc(bytes);
        fill_random(t, in[k], count);
        cin[k] = in[k];
    }
    if (is_float_type(t))
        reference_float(t, op, want, cin, nsrc, count);
    else
        reference_int(t, op, want, cin, nsrc, count);
    hc_reduce_multi(t, op, out, cin, nsrc, count);
    snprintf(what, sizeof(what), "%s n=%zu count=%zu", hc_redop_name(op), nsrc, count);
    assert_same(t, out, want, count, what);
    /* In place: the output is the first input. */
    hc_reduce_multi(t, op, in[0], cin, nsrc, count);
    assert_same(t, in[0], want, count, what);
    for (size_t k = 0; k < nsrc; k++)
        free(in[k]);
    free(out);
    free(want);
}

static void test_all_types_ops_tails(void **state)
{
    (void)state;
    for (size_t ti = 0; ti < sizeof(all_types) / sizeof(all_types[0]); ti++)
        for (int op = 0; op < 4; op++)
            for (size_t count = 0; count <= 64; count++)
                check_case(all_types[ti], (HcclReduceOp)op, 1 + count % 5, count);
}

static void test_large_counts(void **state)
{
    (void)state;
    for (size_t ti = 0; ti < sizeof(all_types) / sizeof(all_types[0]); ti++)
        for (int op = 0; op < 4; op++)
            check_case(all_types[ti], (HcclReduceOp)op, 8, 1000 + ti * 37);
}

/* fp16: 3 * 0.1 accumulated in float and rounded once differs from rounding after each step. */
static void test_half_rounded_once(void **state)
{
    uint16_t a = hc_float_to_half(0.1f), out;
    const void *in[3] = {&a, &a, &a};
    float once = hc_half_to_float(a) * 3.0f;

    (void)state;
    hc_reduce_multi(HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, &out, in, 3, 1);
    assert_int_equal(out, hc_float_to_half(hc_half_to_float(a) + hc_half_to_float(a) + hc_half_to_float(a)));
    assert_true(fabsf(hc_half_to_float(out) - once) < 1e-3f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_known_values),   cmocka_unit_test(test_bf16_known_values),
        cmocka_unit_test(test_all_types_ops_tails), cmocka_unit_test(test_large_counts),
        cmocka_unit_test(test_half_rounded_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
