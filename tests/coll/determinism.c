/*
 * Reductions in rank order (docs/reductions.md): on inputs whose sums are not exact (fp32/fp16/bf16
 * values of mixed magnitudes, where the order of additions changes the rounding), AllReduce,
 * ReduceScatter and Reduce give the bits of a reference that combines the ranks' inputs in rank
 * order, with fp16/bf16 accumulated in fp32 and rounded once: run after run, on aclrtMalloc and on
 * malloc buffers (the zero-copy and the copy-through paths), at a size above the zero-copy threshold
 * and a small one. hostccl always reduces in rank order, with or without HCCL_DETERMINISTIC
 * (ctest runs this both ways); a path that combined in another order fails here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define RUNS 2

static float input_value(uint32_t rank, uint64_t i)
{
    uint64_t x = (rank + 1) * 0x9e3779b97f4a7c15ull ^ (i + 7) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    /* Mixed magnitudes so that the order of additions changes the rounding. */
    return (float)((double)(x % 2000003) / 7.0 * ((x >> 40) % 3 == 0 ? 1e-3 : 1.0) - 100000.0 / 7.0);
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static void fill(HcclDataType t, void *buf, uint32_t rank, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = input_value(rank, i);
        if (t == HCCL_DATA_TYPE_FP32)
            ((float *)buf)[i] = v;
        else if (t == HCCL_DATA_TYPE_FP16)
            ((uint16_t *)buf)[i] = aclFloatToFloat16(v / 64.0f);
        else
            ((uint16_t *)buf)[i] = to_bf16(v);
    }
}

static float widen(HcclDataType t, const void *buf, uint64_t i)
{
    if (t == HCCL_DATA_TYPE_FP32)
        return ((const float *)buf)[i];
    if (t == HCCL_DATA_TYPE_FP16)
        return aclFloat16ToFloat(((const uint16_t *)buf)[i]);
    return from_bf16(((const uint16_t *)buf)[i]);
}

/* Rank-order reference of the sum of elements 0..n-1. */
static void reference(HcclDataType t, uint32_t nranks, uint64_t n, void *expected, void *scratch)
{
    float *acc = calloc(n, sizeof(float));
    for (uint32_t r = 0; r < nranks; r++) {
        fill(t, scratch, r, n);
        for (uint64_t i = 0; i < n; i++)
            acc[i] = r == 0 ? widen(t, scratch, i) : acc[i] + widen(t, scratch, i);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (t == HCCL_DATA_TYPE_FP32)
            ((float *)expected)[i] = acc[i];
        else if (t == HCCL_DATA_TYPE_FP16)
            ((uint16_t *)expected)[i] = aclFloatToFloat16(acc[i]);
        else
            ((uint16_t *)expected)[i] = to_bf16(acc[i]);
    }
    free(acc);
}

typedef enum { ALLREDUCE, REDUCE_SCATTER, REDUCE } coll_t;
static const char *const coll_names[] = {"allreduce", "reducescatter", "reduce"};

typedef struct {
    t_world_t *world;
    HcclDataType t;
    size_t esize;
    uint64_t count; /* the call's count: per block for ReduceScatter */
    int use_malloc;
} case_t;

static void *alloc_buf(int use_malloc, size_t bytes)
{
    void *p = NULL;

    if (use_malloc)
        return malloc(bytes);
    T_CHECK_ACL(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    return p;
}

static void free_buf(int use_malloc, void *p)
{
    if (use_malloc)
        free(p);
    else
        T_CHECK_ACL(aclrtFree(p));
}

/* One collective, RUNS times; the number of runs whose bits differ from the reference. */
static int run_coll(const case_t *c, coll_t coll, const uint8_t *expected)
{
    uint32_t me = c->world->launch.rank, n = c->world->launch.size, root = n - 1;
    uint64_t in = coll == REDUCE_SCATTER ? c->count * n : c->count;
    uint8_t *send = alloc_buf(c->use_malloc, in * c->esize), *recv = alloc_buf(c->use_malloc, c->count * c->esize);
    const uint8_t *want = coll == REDUCE_SCATTER ? expected + (size_t)me * c->count * c->esize : expected;
    int wrong = 0;

    for (int run = 0; run < RUNS; run++) {
        HcclResult res;
        fill(c->t, send, me, in);
        memset(recv, 0xee, c->count * c->esize);
        if (coll == ALLREDUCE)
            res = HcclAllReduce(send, recv, c->count, c->t, HCCL_REDUCE_SUM, c->world->comm, c->world->stream);
        else if (coll == REDUCE_SCATTER)
            res = HcclReduceScatter(send, recv, c->count, c->t, HCCL_REDUCE_SUM, c->world->comm, c->world->stream);
        else
            res = HcclReduce(send, recv, c->count, c->t, HCCL_REDUCE_SUM, root, c->world->comm, c->world->stream);
        T_CHECK_HCCL(res);
        T_CHECK_ACL(aclrtSynchronizeStream(c->world->stream));
        if ((coll != REDUCE || me == root) && memcmp(recv, want, c->count * c->esize) != 0) {
            fprintf(stderr, "rank %u: %s dtype %d count %llu %s run %d differs from the rank-order reference\n", me,
                    coll_names[coll], (int)c->t, (unsigned long long)c->count, c->use_malloc ? "malloc" : "arena",
                    run);
            wrong++;
        }
    }
    free_buf(c->use_malloc, send);
    free_buf(c->use_malloc, recv);
    return wrong;
}

int main(void)
{
    static const HcclDataType types[] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16};
    static const uint64_t counts[] = {1001, 300007}; /* one-shot / copy-through, and above 1 MiB */
    t_world_t world;
    int wrong = 0, cases = 0;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        for (size_t m = 0; m < sizeof(counts) / sizeof(counts[0]); m++) {
            case_t c = {.world = &world, .t = types[k], .esize = types[k] == HCCL_DATA_TYPE_FP32 ? 4 : 2,
                        .count = counts[m]};
            uint64_t total = c.count * world.launch.size;
            uint8_t *expected = malloc(total * c.esize), *scratch = malloc(total * c.esize);
            /* The reference of the ReduceScatter's whole input; its first `count` elements serve
             * AllReduce and Reduce, whose inputs are those same elements. */
            reference(c.t, world.launch.size, total, expected, scratch);
            for (c.use_malloc = 0; c.use_malloc < 2; c.use_malloc++)
                for (int coll = ALLREDUCE; coll <= REDUCE; coll++, cases++)
                    wrong += run_coll(&c, (coll_t)coll, expected);
            free(expected);
            free(scratch);
        }
    }
    printf("rank %u: %d cases of rank-order reductions %s\n", world.launch.rank, cases,
           wrong ? "FAILED" : "verified");
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
