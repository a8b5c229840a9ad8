/*
 * Deterministic reductions (DESIGN.md 6, HCCL_DETERMINISTIC): on inputs whose sums are not exact
 * (random fp32/fp16/bf16 values of mixed magnitudes), AllReduce and ReduceScatter give the same
 * bits run after run, equal to a reference that combines the ranks' inputs in rank order with
 * fp16/bf16 accumulated in fp32 and rounded once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define COUNT 300007
#define RUNS 3

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

static void fill(HcclDataType t, void *buf, uint32_t rank)
{
    for (uint64_t i = 0; i < COUNT; i++) {
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

/* Rank-order reference of the sum of element i. */
static void reference(HcclDataType t, uint32_t nranks, void *expected, void *scratch)
{
    float *acc = calloc(COUNT, sizeof(float));
    for (uint32_t r = 0; r < nranks; r++) {
        fill(t, scratch, r);
        for (uint64_t i = 0; i < COUNT; i++)
            acc[i] = r == 0 ? widen(t, scratch, i) : acc[i] + widen(t, scratch, i);
    }
    for (uint64_t i = 0; i < COUNT; i++) {
        if (t == HCCL_DATA_TYPE_FP32)
            ((float *)expected)[i] = acc[i];
        else if (t == HCCL_DATA_TYPE_FP16)
            ((uint16_t *)expected)[i] = aclFloatToFloat16(acc[i]);
        else
            ((uint16_t *)expected)[i] = to_bf16(acc[i]);
    }
    free(acc);
}

int main(void)
{
    static const HcclDataType types[] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16};
    t_world_t world;
    int wrong = 0;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        HcclDataType t = types[k];
        size_t bytes = COUNT * (t == HCCL_DATA_TYPE_FP32 ? 4 : 2);
        uint8_t *buf, *expected = malloc(bytes), *scratch = malloc(bytes);
        T_CHECK_ACL(aclrtMalloc((void **)&buf, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        reference(t, world.launch.size, expected, scratch);
        for (int run = 0; run < RUNS; run++) {
            fill(t, buf, world.launch.rank);
            T_CHECK_HCCL(HcclAllReduce(buf, buf, COUNT, t, HCCL_REDUCE_SUM, world.comm, world.stream));
            T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
            if (memcmp(buf, expected, bytes) != 0) {
                fprintf(stderr, "rank %u: dtype %d run %d differs from the rank-order reference\n",
                        world.launch.rank, (int)t, run);
                wrong++;
            }
        }
        T_CHECK_ACL(aclrtFree(buf));
        free(expected);
        free(scratch);
    }
    printf("rank %u: determinism %s\n", world.launch.rank, wrong ? "FAILED" : "verified");
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
