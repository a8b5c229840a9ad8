/*
 * hc_copy: every byte of the destination written, nothing around it, at the distances (destination
 * ahead of source, modulo 4 KiB) copied backwards and those that are not, and at the sizes around
 * the backward copy's step and the forward copy's pieces; hc_copy_stream alike (its non-temporal
 * loop starts at the destination's next line and leaves the tail to memcpy: every alignment of
 * both ends); hc_move as memmove.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hc_copy.h"

#define GUARD 4096u /* a whole page: the distances stay those listed */
#define GUARD_BYTE 0xA5u

static const size_t distances[] = {0, 1, 15, 16, 31, 32, 63, 64, 65, 2048, 4080, 4095, 4096};
static const size_t sizes[] = {0,
                               1,
                               127,
                               128,
                               129,
                               3 * 64 + 5,
                               HC_COPY_NEAR_MIN - 1,
                               HC_COPY_NEAR_MIN,
                               HC_COPY_NEAR_MIN + 1,
                               HC_COPY_NEAR_MIN + 37 * HC_COPY_NEAR + 7,
                               HC_COPY_PIECE - 1,
                               HC_COPY_PIECE,
                               HC_COPY_PIECE + 1,
                               2 * HC_COPY_PIECE + 4093};

static void test_near_by_distance(void **state)
{
    uint8_t *base = aligned_alloc(4096, 3 * 4096);

    (void)state;
    assert_non_null(base);
    for (size_t d = 0; d < 2 * 4096; d++)
        assert_int_equal(hc_copy_near(base + 16 + d, base + 16), d % 4096 != 0 && d % 4096 < HC_COPY_NEAR);
    /* a destination before its source: ahead by 4 KiB less the distance behind */
    assert_false(hc_copy_near(base + 4096 - 16, base + 4096));
    assert_true(hc_copy_near(base + 4096 - 4080, base + 4096));
    free(base);
}

static void check_copies(void (*copy)(void *, const void *, size_t))
{
    size_t largest = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    uint8_t *src = aligned_alloc(4096, largest + 8192);
    uint8_t *dst = aligned_alloc(4096, largest + 8192 + 2 * GUARD);

    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < largest + 8192; i++)
        src[i] = (uint8_t)(i * 131u + 7u + (i >> 12)); /* no period of 4 KiB or of a piece */
    for (size_t k = 0; k < sizeof(distances) / sizeof(distances[0]); k++) {
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            const uint8_t *from = src + 48; /* malloc's large blocks start 16 bytes into a page; any start */
            uint8_t *to = dst + GUARD + (48 + distances[k]) % 4096;
            size_t n = sizes[z];

            memset(dst, GUARD_BYTE, largest + 8192 + 2 * GUARD);
            copy(to, from, n);
            assert_memory_equal(to, from, n);
            for (uint8_t *p = dst; p < to; p++)
                assert_int_equal(*p, GUARD_BYTE);
            for (size_t g = 0; g < GUARD; g++)
                assert_int_equal(to[n + g], GUARD_BYTE);
        }
    }
    free(src);
    free(dst);
}

static void test_copies_exactly(void **state)
{
    (void)state;
    check_copies(hc_copy);
}

static void test_stream_copies_exactly(void **state)
{
    (void)state;
    check_copies(hc_copy_stream);
}

/* hc_move on overlapping ranges, either way round, as memmove; apart (near modulo 4 KiB or not), as
 * hc_copy. */
static void test_move_overlapping(void **state)
{
    const size_t n = HC_COPY_NEAR_MIN + 3 * HC_COPY_NEAR + 5, from = 4096 + 32, span = from + 4112 + n + 64;
    uint8_t *buf = malloc(span), *want = malloc(span);
    static const long shifts[] = {-4096, -4080, -2048, -100, -16, -1, 0, 1, 16, 100, 2048, 4112};

    (void)state;
    assert_non_null(buf);
    assert_non_null(want);
    for (size_t k = 0; k < sizeof(shifts) / sizeof(shifts[0]); k++) {
        size_t to = (size_t)((long)from + shifts[k]);

        for (size_t i = 0; i < span; i++)
            buf[i] = want[i] = (uint8_t)(i * 37u + 11u);
        memmove(want + to, want + from, n);
        hc_move(buf + to, buf + from, n);
        assert_memory_equal(buf, want, span);
    }
    free(buf);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_near_by_distance),
        cmocka_unit_test(test_copies_exactly),
        cmocka_unit_test(test_stream_copies_exactly),
        cmocka_unit_test(test_move_overlapping),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
