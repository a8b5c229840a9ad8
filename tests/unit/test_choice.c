/*
 * What the shm engine's measured choices rest on (src/shm/shm_internal.h, shm_cma.c): the verdict
 * on process_vm_readv's speed from the calibration's two times, the samples' ring and the margin a
 * choice switches at. The calibration times are those of the guests the thresholds were set on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shm_internal.h"

#define KIB 1024u
#define CAL_BYTES (256u * KIB) /* 64 pages, as calibrate reads */

static void cma_speed_of_the_measured_guests(void **state)
{
    (void)state;
    /* KVM guest: the read 1.8x the copy. */
    assert_int_equal(hc_shm_cma_speed(90000, 50000, CAL_BYTES), HC_CMA_FAST);
    /* Faster than the copy, and exactly 2.5x: fast. */
    assert_int_equal(hc_shm_cma_speed(20000, 50000, CAL_BYTES), HC_CMA_FAST);
    assert_int_equal(hc_shm_cma_speed(25000, 10000, CAL_BYTES), HC_CMA_FAST);
    /* EPYC Milan guest: 30.8 against 9.0 us, 0.34 us a page beyond the copy; 48.1 against 12.0 (3 ranks
     * on 2 CPUs), 0.56. */
    assert_int_equal(hc_shm_cma_speed(30800, 9000, CAL_BYTES), HC_CMA_FAIR);
    assert_int_equal(hc_shm_cma_speed(48100, 12000, CAL_BYTES), HC_CMA_FAIR);
    /* 0.75 us a page beyond the copy is still fair, just above it slow. */
    assert_int_equal(hc_shm_cma_speed(10000 + 64 * 750, 10000, CAL_BYTES), HC_CMA_FAIR);
    assert_int_equal(hc_shm_cma_speed(10000 + 64 * 751, 10000, CAL_BYTES), HC_CMA_SLOW);
    /* PVM guest: 1-2 us a page for the pins alone. */
    assert_int_equal(hc_shm_cma_speed(8000 + 64 * 1500, 8000, CAL_BYTES), HC_CMA_SLOW);
    /* A read of less than a page is judged per page of it, never divided by 0. */
    assert_int_equal(hc_shm_cma_speed(5000, 1000, 100), HC_CMA_SLOW);
}

static void samples_fill_a_ring_per_64_kib(void **state)
{
    uint32_t ns[3] = {0, 0, 0};
    uint8_t next = 0;

    (void)state;
    assert_int_equal(hc_shm_least_sample(ns, 3), UINT32_MAX); /* none yet */
    hc_shm_add_sample(ns, &next, 3, 100000, 128 * KIB);      /* 100 us for 128 KiB: 50 us per 64 KiB */
    assert_int_equal(ns[0], 50000);
    assert_int_equal(next, 1);
    hc_shm_add_sample(ns, &next, 3, 1, 1u << 30);            /* rounds to 0: kept as 1, a sample */
    assert_int_equal(ns[1], 1);
    hc_shm_add_sample(ns, &next, 3, UINT64_MAX / 2, 64 * KIB); /* no overflow: the most a sample holds */
    assert_int_equal(ns[2], UINT32_MAX);
    assert_int_equal(next, 0);                                /* wrapped */
    assert_int_equal(hc_shm_least_sample(ns, 3), 1);
    hc_shm_add_sample(ns, &next, 3, 640000, 640 * KIB);       /* overwrites the oldest */
    assert_int_equal(ns[0], 64000);
    assert_int_equal(next, 1);
}

static void a_choice_switches_only_an_eighth_below(void **state)
{
    (void)state;
    assert_true(hc_shm_estimate_below(699, 800));
    assert_false(hc_shm_estimate_below(700, 800)); /* exactly 7/8: not below */
    assert_false(hc_shm_estimate_below(800, 700));
    assert_true(hc_shm_estimate_below(1000, UINT32_MAX)); /* the other has no samples */
    assert_false(hc_shm_estimate_below(UINT32_MAX, 1000)); /* this one has none */
    assert_false(hc_shm_estimate_below(UINT32_MAX, UINT32_MAX));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cma_speed_of_the_measured_guests),
        cmocka_unit_test(samples_fill_a_ring_per_64_kib),
        cmocka_unit_test(a_choice_switches_only_an_eighth_below),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
