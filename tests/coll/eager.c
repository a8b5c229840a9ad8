/*
 * The eager path of small Broadcast and Reduce (at most 240 bytes, docs/collectives.md), where the
 * writing ranks run up to 256 collectives ahead of the readers: a burst of OPS calls enqueued
 * without a synchronisation (deeper than the ring of announcements waiting to be made), mixing
 * roots, sizes, dtypes and stepped collectives (AllReduce, a Broadcast too large to be eager) in
 * between, every value checked; then the same calls synchronised one by one. Every op has its own
 * buffers, so a root that overwrote its slot before a reader copied it shows as a wrong value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define OPS 2600
#define SLOT 1024 /* floats per op and buffer */

enum { BCAST_F32, BCAST_I8, REDUCE_F32, ALLREDUCE, BCAST_LARGE, KINDS };

static int kind_of(int i)
{
    return i % 11 == 10 ? (i / 11 % 2 ? ALLREDUCE : BCAST_LARGE) : i % 3;
}

static uint64_t count_of(int i)
{
    switch (kind_of(i)) {
    case BCAST_I8:
        return 1 + (uint64_t)(i % 240);
    case ALLREDUCE:
        return 5;
    case BCAST_LARGE:
        return SLOT;
    default:
        return 1 + (uint64_t)(i % 60);
    }
}

static float value(int i, uint64_t j, uint32_t rank)
{
    return (float)((i * 7 + (int)j) % 1000 + (int)rank * 1000);
}

static void fill(int i, float *in, float *out, uint32_t me, uint32_t n)
{
    uint32_t root = (uint32_t)(i / 3) % n;
    uint64_t count = count_of(i);

    for (uint64_t j = 0; j < SLOT; j++)
        out[j] = -1.0f;
    if (kind_of(i) == BCAST_I8) {
        int8_t *b = (int8_t *)out;
        for (uint64_t j = 0; j < count; j++)
            b[j] = me == root ? (int8_t)((i + (int)j) % 127) : (int8_t)-1;
        return;
    }
    for (uint64_t j = 0; j < count; j++) {
        in[j] = value(i, j, me);
        if (me == root && (kind_of(i) == BCAST_F32 || kind_of(i) == BCAST_LARGE))
            out[j] = value(i, j, root);
    }
}

static HcclResult issue(int i, float *in, float *out, uint32_t n, t_world_t *w)
{
    uint32_t root = (uint32_t)(i / 3) % n;
    uint64_t count = count_of(i);

    switch (kind_of(i)) {
    case BCAST_I8:
        return HcclBroadcast(out, count, HCCL_DATA_TYPE_INT8, root, w->comm, w->stream);
    case REDUCE_F32:
        return HcclReduce(in, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, root, w->comm, w->stream);
    case ALLREDUCE:
        return HcclAllReduce(in, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream);
    default:
        return HcclBroadcast(out, count, HCCL_DATA_TYPE_FP32, root, w->comm, w->stream);
    }
}

/* Number of wrong elements of op i's output on this rank. */
static int check(int i, const float *out, uint32_t me, uint32_t n)
{
    uint32_t root = (uint32_t)(i / 3) % n;
    uint64_t count = count_of(i);
    int wrong = 0;

    for (uint64_t j = 0; j < count; j++) {
        float want = value(i, j, root);
        if (kind_of(i) == BCAST_I8) {
            wrong += ((const int8_t *)out)[j] != (int8_t)((i + (int)j) % 127);
            continue;
        }
        if (kind_of(i) == REDUCE_F32 || kind_of(i) == ALLREDUCE) {
            want = 0.0f;
            for (uint32_t r = 0; r < n; r++)
                want += value(i, j, r);
            if (kind_of(i) == REDUCE_F32 && me != root)
                want = -1.0f; /* not the root: the output is untouched */
        }
        wrong += out[j] != want;
    }
    return wrong;
}

static int run(t_world_t *w, float *in, float *out, int sync_each)
{
    uint32_t me = w->launch.rank, n = w->launch.size;
    int wrong = 0;

    for (int i = 0; i < OPS; i++)
        fill(i, in + (size_t)i * SLOT, out + (size_t)i * SLOT, me, n);
    for (int i = 0; i < OPS; i++) {
        T_CHECK_HCCL(issue(i, in + (size_t)i * SLOT, out + (size_t)i * SLOT, n, w));
        if (sync_each)
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
    }
    T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
    for (int i = 0; i < OPS; i++) {
        int bad = check(i, out + (size_t)i * SLOT, me, n);
        if (bad != 0 && wrong == 0)
            printf("rank %u: op %d (kind %d, count %llu) has %d wrong values\n", me, i, kind_of(i),
                   (unsigned long long)count_of(i), bad);
        wrong += bad;
    }
    return wrong;
}

int main(void)
{
    t_world_t world;
    float *in = malloc((size_t)OPS * SLOT * sizeof(float));
    float *out = malloc((size_t)OPS * SLOT * sizeof(float));
    int burst, one_by_one;

    if (in == NULL || out == NULL)
        return 2;
    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    burst = run(&world, in, out, 0);
    one_by_one = run(&world, in, out, 1);
    printf("rank %u: %d small rooted ops in a burst: %d wrong; one by one: %d wrong\n", world.launch.rank, OPS, burst,
           one_by_one);
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    free(in);
    free(out);
    return burst != 0 || one_by_one != 0;
}
