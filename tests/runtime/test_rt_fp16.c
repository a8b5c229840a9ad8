/*
 * aclFloat16ToFloat / aclFloatToFloat16: every half converts exactly to float and back; floats
 * round to nearest even, checked on the boundary cases by value and on a dense sample of all
 * floats against the compiler's own _Float16 conversion where it has one.
 */
#include <math.h>
#include <string.h>

#include "rt_test.h"

static float float_of(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

static int half_is_nan(uint16_t h)
{
    return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

static void test_every_half_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        float f = aclFloat16ToFloat((aclFloat16)h);

        if (half_is_nan((uint16_t)h)) {
            assert_true(isnan(f));
            assert_true(half_is_nan(aclFloatToFloat16(f)));
            /* The sign and the payload's top bits survive; the NaN comes back quiet. */
            assert_int_equal(aclFloatToFloat16(f) & 0x81ffu, h & 0x81ffu);
            assert_int_equal(aclFloatToFloat16(f) & 0x200u, 0x200u);
            continue;
        }
        assert_int_equal(aclFloatToFloat16(f), h);
    }
}

static void test_known_values(void **state)
{
    static const struct {
        float value;
        uint16_t half;
    } cases[] = {
        {0.0f, 0x0000},      {-0.0f, 0x8000},       {1.0f, 0x3c00},         {-2.0f, 0xc000},
        {0.5f, 0x3800},      {65504.0f, 0x7bff},    {65519.0f, 0x7bff},     {65520.0f, 0x7c00},
        {1e10f, 0x7c00},     {-1e10f, 0xfc00},      {0.1f, 0x2e66},         {0x1p-14f, 0x0400},
        {0x1p-24f, 0x0001},  {0x1p-25f, 0x0000},    {0x1.8p-25f, 0x0001},   {0x1.8p-24f, 0x0002},
        {0x1.ffcp-15f, 0x0400}, {0x1p-26f, 0x0000}, {-0x1p-24f, 0x8001},
        /* Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10. */
        {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02}, {2049.0f, 0x6800}, {2051.0f, 0x6802},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(aclFloatToFloat16(cases[i].value), cases[i].half);
    assert_int_equal(aclFloatToFloat16(INFINITY), 0x7c00);
    assert_int_equal(aclFloatToFloat16(-INFINITY), 0xfc00);
    assert_true(half_is_nan(aclFloatToFloat16(NAN)));
    /* A NaN whose payload lives only in the low bits must not become infinity. */
    assert_true(half_is_nan(aclFloatToFloat16(float_of(0x7f800001u))));
    assert_true(isinf(aclFloat16ToFloat(0x7c00)));
    assert_true(aclFloat16ToFloat(0x0001) == 0x1p-24f);
    assert_true(aclFloat16ToFloat(0x03ff) == 0x1.ff8p-15f);
    assert_true(aclFloat16ToFloat(0xfbff) == -65504.0f);
    assert_int_equal(bits_of(aclFloat16ToFloat(0x8000)), 0x80000000u);
}

static void test_dense_sample_against_compiler(void **state)
{
    (void)state;
#ifdef __FLT16_MAX__
    /* A stride coprime with every mantissa pattern length visits all exponents and many roundings. */
    for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 251) {
        float f = float_of((uint32_t)bits);
        _Float16 reference = (_Float16)f;
        uint16_t expected;

        memcpy(&expected, &reference, sizeof(expected));
        if (isnan(f))
            assert_true(half_is_nan(aclFloatToFloat16(f)));
        else if (aclFloatToFloat16(f) != expected)
            fail_msg("float 0x%08x: got half 0x%04x, expected 0x%04x", (unsigned)bits,
                     (unsigned)aclFloatToFloat16(f), (unsigned)expected);
    }
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_half_round_trips),
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_dense_sample_against_compiler),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
