/*
 * Skipping in-place attempts that keep falling back (hc_shm_zc_try / hc_shm_zc_outcome,
 * src/shm/shm_zcopy.c): after a fallback the next 1, 2, 4 ... 64 attempts of that collective and
 * size class are skipped, a success ends the skipping, and another size class (which may be read in
 * place where this one is not: aclrtMalloc memory from HOSTCCL_ZERO_COPY_MIN) or another collective
 * is never skipped because of it. Without the size classes, 512 KiB AlltoAlls that fell back made
 * the 1 MiB ones after them skip the in-place path they take (2 ranks: 22-26 -> 64-77 us).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "shm_internal.h"

#define KIB 1024u

/* Attempts of `bytes` until one is not skipped; returns how many were skipped. */
static unsigned skipped_before_try(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t bytes)
{
    unsigned n = 0;

    while (!hc_shm_zc_try(eng, coll, bytes))
        n++;
    return n;
}

static void test_backs_off_and_resets(void **state)
{
    hc_shm_engine_t eng = {0};
    unsigned expect[] = {1, 2, 4, 8, 16, 32, 64, 64, 64};

    (void)state;
    assert_true(hc_shm_zc_try(&eng, HC_COLL_ALLTOALLV, 1024 * KIB)); /* nothing skipped at first */
    for (unsigned k = 0; k < sizeof(expect) / sizeof(expect[0]); k++) {
        hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALLV, 1024 * KIB, 1);
        assert_int_equal(skipped_before_try(&eng, HC_COLL_ALLTOALLV, 1024 * KIB), expect[k]);
    }
    hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALLV, 1024 * KIB, 0); /* read in place: start over */
    assert_true(hc_shm_zc_try(&eng, HC_COLL_ALLTOALLV, 1024 * KIB));
    hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALLV, 1024 * KIB, 1);
    assert_int_equal(skipped_before_try(&eng, HC_COLL_ALLTOALLV, 1024 * KIB), 1);
}

static void test_skips_by_size_class_and_collective(void **state)
{
    hc_shm_engine_t eng = {0};

    (void)state;
    hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALL, 512 * KIB, 1);
    hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALL, 700 * KIB, 1); /* the same class: backs off to 2 */
    assert_true(hc_shm_zc_skipping(&eng, HC_COLL_ALLTOALL, 600 * KIB));
    /* The next size class up, another collective: tried. Asking changes nothing. */
    assert_false(hc_shm_zc_skipping(&eng, HC_COLL_ALLTOALL, 1024 * KIB));
    assert_false(hc_shm_zc_skipping(&eng, HC_COLL_ALLTOALLV, 512 * KIB));
    assert_true(hc_shm_zc_try(&eng, HC_COLL_ALLTOALL, 1024 * KIB));
    assert_true(hc_shm_zc_skipping(&eng, HC_COLL_ALLTOALL, 512 * KIB));
    /* A 1 MiB attempt that reads in place takes the collective over to its class. */
    hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALL, 1024 * KIB, 0);
    assert_false(hc_shm_zc_skipping(&eng, HC_COLL_ALLTOALL, 512 * KIB));
    assert_false(hc_shm_zc_skipping(&eng, HC_COLL_ALLTOALL, 1024 * KIB));
    /* A fallback in a new class starts its back-off at 1, not where the old class's was. */
    hc_shm_zc_outcome(&eng, HC_COLL_ALLTOALL, 4096 * KIB, 1);
    assert_int_equal(skipped_before_try(&eng, HC_COLL_ALLTOALL, 4096 * KIB), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backs_off_and_resets),
        cmocka_unit_test(test_skips_by_size_class_and_collective),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
