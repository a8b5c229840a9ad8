/*
 * The values the perf tools put in their inputs, and the results they expect.
 *
 * With -c 1 every element of every result is compared exactly, for every type and reduction, so
 * the inputs are chosen to keep every result, and every partial result in whatever order the
 * library combines them, exactly representable:
 *   - data movement: integers in [-125, 125] (unsigned [0, 250]) that depend on the source rank and
 *     the index, so a block that lands in the wrong place or comes from the wrong rank is seen;
 *     bf16, the narrowest type, holds every integer up to 256 exactly;
 *   - sum: integers in [-2, 2] (unsigned [0, 4]); integer types wrap exactly as the library does, and
 *     floating types stay exact while 2 * ranks is within the type's exact integers (bf16: 128 ranks);
 *   - prod: 1 almost everywhere; per index one rank holds a value from {2, 0.5, -2, 3, ...} and, every
 *     other round of indices, another holds -1, so products never leave [-3, 3];
 *   - max and min: integers in [-50, 50] (unsigned [0, 100]).
 * Every value also depends on a per-size salt, so output left over from the previous size fails.
 */
#include "perf.h"

static const double prod_float_specials[] = {2.0, 0.5, -2.0, 3.0, -0.5, 1.0};
static const double prod_signed_specials[] = {2.0, -2.0, 3.0, -1.0, 5.0, 1.0};
static const double prod_unsigned_specials[] = {2.0, 3.0, 5.0, 1.0};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

double hc_perf_value_move(const hc_perf_run_t *run, uint32_t src, uint64_t index)
{
    uint64_t h = ((uint64_t)src * 37u + (index + run->salt) * 11u + 1u) % 251u;

    return run->opts->dtype->is_signed ? (double)h - 125.0 : (double)h;
}

static double prod_value(const hc_perf_dtype_t *dtype, uint32_t nranks, uint32_t src, uint64_t index)
{
    uint64_t round = index / nranks;

    if (src == index % nranks) {
        if (dtype->is_float)
            return prod_float_specials[round % COUNT_OF(prod_float_specials)];
        if (dtype->is_signed)
            return prod_signed_specials[round % COUNT_OF(prod_signed_specials)];
        return prod_unsigned_specials[round % COUNT_OF(prod_unsigned_specials)];
    }
    if (nranks > 1 && dtype->is_signed && src == (index + 1) % nranks && round % 2 == 0)
        return -1.0;
    return 1.0;
}

double hc_perf_value_reduce(const hc_perf_run_t *run, uint32_t src, uint64_t index)
{
    const hc_perf_dtype_t *dtype = run->opts->dtype;
    uint64_t salted = index + run->salt;
    uint64_t h;

    switch (run->opts->op) {
    case HCCL_REDUCE_PROD:
        return prod_value(dtype, run->nranks, src, salted);
    case HCCL_REDUCE_MAX:
    case HCCL_REDUCE_MIN:
        h = ((uint64_t)src * 29u + salted * 13u) % 101u;
        return dtype->is_signed ? (double)h - 50.0 : (double)h;
    default:
        h = ((uint64_t)src * 3u + salted * 7u) % 5u;
        return dtype->is_signed ? (double)h - 2.0 : (double)h;
    }
}

static double combine(HcclReduceOp op, double a, double b)
{
    switch (op) {
    case HCCL_REDUCE_PROD:
        return a * b;
    case HCCL_REDUCE_MAX:
        return a > b ? a : b;
    case HCCL_REDUCE_MIN:
        return a < b ? a : b;
    default:
        return a + b;
    }
}

/* Computed in double, where every value here is exact; the dtype's store then wraps integers. */
double hc_perf_value_reduced(const hc_perf_run_t *run, uint64_t index)
{
    double acc = hc_perf_value_reduce(run, 0, index);

    for (uint32_t src = 1; src < run->nranks; src++)
        acc = combine(run->opts->op, acc, hc_perf_value_reduce(run, src, index));
    return acc;
}

int hc_perf_value_exact(const hc_perf_opts_t *opts, const hc_perf_coll_ops_t *coll, uint32_t nranks)
{
    if (!coll->reduces || !opts->dtype->is_float || opts->op != HCCL_REDUCE_SUM)
        return 1;
    return 2.0 * (double)nranks <= opts->dtype->exact_limit;
}
