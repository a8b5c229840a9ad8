/* hccl-run --bind-to share: how the CPUs hccl-run may use are split among the ranks (bind.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hccl_run.h"

static cpu_set_t cpus_of(const int *list, int n)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    for (int i = 0; i < n; i++)
        CPU_SET(list[i], &set);
    return set;
}

/* rank's share as a bit mask of the first 64 CPUs. */
static uint64_t share_bits(const cpu_set_t *allowed, uint32_t rank, uint32_t nranks)
{
    cpu_set_t share;
    uint64_t bits = 0;

    assert_int_equal(hc_run_share_cpus(allowed, rank, nranks, &share), 0);
    for (int cpu = 0; cpu < 64; cpu++)
        if (CPU_ISSET(cpu, &share))
            bits |= 1ull << cpu;
    assert_int_equal(CPU_COUNT(&share), __builtin_popcountll(bits));
    return bits;
}

static void one_cpu_each_when_they_match(void **state)
{
    cpu_set_t two = cpus_of((const int[]){0, 1}, 2);

    (void)state;
    assert_int_equal(share_bits(&two, 0, 2), 0x1);
    assert_int_equal(share_bits(&two, 1, 2), 0x2);
}

static void round_robin_when_ranks_outnumber_cpus(void **state)
{
    cpu_set_t two = cpus_of((const int[]){0, 1}, 2);

    (void)state;
    assert_int_equal(share_bits(&two, 0, 4), 0x1);
    assert_int_equal(share_bits(&two, 1, 4), 0x2);
    assert_int_equal(share_bits(&two, 2, 4), 0x1);
    assert_int_equal(share_bits(&two, 3, 4), 0x2);
}

/* Contiguous shares; the first k % n ranks get one more; every CPU is used exactly once. */
static void contiguous_shares_cover_every_cpu(void **state)
{
    cpu_set_t five = cpus_of((const int[]){0, 1, 2, 3, 4}, 5);
    uint64_t all = 0;

    (void)state;
    assert_int_equal(share_bits(&five, 0, 2), 0x07);
    assert_int_equal(share_bits(&five, 1, 2), 0x18);
    for (uint32_t r = 0; r < 3; r++) {
        uint64_t bits = share_bits(&five, r, 3);
        assert_int_equal(all & bits, 0);
        all |= bits;
    }
    assert_int_equal(all, 0x1f);
    assert_int_equal(share_bits(&five, 0, 3), 0x03);
    assert_int_equal(share_bits(&five, 2, 3), 0x10);
}

/* Only the CPUs hccl-run may use (taskset, cgroups), in their order. */
static void only_allowed_cpus(void **state)
{
    cpu_set_t odd = cpus_of((const int[]){1, 3, 5, 7}, 4);

    (void)state;
    assert_int_equal(share_bits(&odd, 0, 2), 0x0a);
    assert_int_equal(share_bits(&odd, 1, 2), 0xa0);
    assert_int_equal(share_bits(&odd, 5, 8), 0x08);
}

static void nothing_to_split(void **state)
{
    cpu_set_t none, share, one = cpus_of((const int[]){3}, 1);

    (void)state;
    CPU_ZERO(&none);
    assert_int_equal(hc_run_share_cpus(&none, 0, 2, &share), -1);
    assert_int_equal(CPU_COUNT(&share), 0);
    assert_int_equal(hc_run_share_cpus(&one, 2, 2, &share), -1); /* no such rank */
    assert_int_equal(share_bits(&one, 1, 2), 0x08);               /* pinned: both ranks on it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_cpu_each_when_they_match),
        cmocka_unit_test(round_robin_when_ranks_outnumber_cpus),
        cmocka_unit_test(contiguous_shares_cover_every_cpu),
        cmocka_unit_test(only_allowed_cpus),
        cmocka_unit_test(nothing_to_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
