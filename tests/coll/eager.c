/*
 * The eager path of small Broadcast and Reduce (at most 32 KiB, docs/collectives.md), where the
 * writing ranks run up to 256 collectives ahead of the readers (16 of those above 240 bytes): a
 * burst of OPS calls enqueued without a synchronisation (deeper than the ring of announcements
 * waiting to be made), mixing roots, sizes (in the slot, in a medium slot), dtypes and stepped
 * collectives (AllReduce, a Broadcast too large to be eager) in between, every value checked;
 * then the same calls synchronised one by one. Every op has its own
 * buffers, so a root that overwrote its slot before a reader copied it shows as a wrong value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

#define OPS 2600
#define SLOT 1024 /* floats per op and buffer (4 KiB: up to the medium slots) */
#define BIG 9000  /* floats of the large Broadcasts (above the eager limit of 32 KiB) */
#define BIG_EVERY 13

enum { BCAST_F32, BCAST_I8, REDUCE_F32, BCAST_MEDIUM, REDUCE_MEDIUM, ALLREDUCE, BCAST_LARGE };

/* Ops [0, PHASE): Broadcasts from rank 0, [PHASE, 2 PHASE): Reduces to rank 1, nothing else in
 * between, so that the writers run as far ahead as the rings let them (and wrap them); then a mix
 * with rotating roots and stepped collectives. */
#define PHASE 600

static int kind_of(int i)
{
    if (i < PHASE)
        return i % 3 == 0 ? BCAST_MEDIUM : i % 3 == 1 ? BCAST_F32 : BCAST_I8;
    if (i < 2 * PHASE)
        return i % 2 ? REDUCE_MEDIUM : REDUCE_F32;
    if (i % BIG_EVERY == BIG_EVERY - 1)
        return BCAST_LARGE;
    if (i % BIG_EVERY == BIG_EVERY - 2)
        return ALLREDUCE;
    return i % 5;
}

static uint64_t count_of(int i)
{
    switch (kind_of(i)) {
    case BCAST_I8:
        return 1 + (uint64_t)(i % 240);
    case BCAST_MEDIUM:
    case REDUCE_MEDIUM:
        return 61 + (uint64_t)(i * 37 % (SLOT - 60)); /* 244 B - 4 KiB: the medium slots */
    case ALLREDUCE:
        return 5;
    case BCAST_LARGE:
        return BIG;
    default:
        return 1 + (uint64_t)(i % 60);
    }
}

static int is_reduce(int kind)
{
    return kind == REDUCE_F32 || kind == REDUCE_MEDIUM || kind == ALLREDUCE;
}

static uint32_t root_of(int i, uint32_t n)
{
    return i < PHASE ? 0 : i < 2 * PHASE ? 1 % n : (uint32_t)(i / 3) % n;
}

static float value(int i, uint64_t j, uint32_t rank)
{
    return (float)((i * 7 + (int)j) % 1000 + (int)rank * 1000);
}

/* Op i's buffers: its own SLOT floats of in/out, or for the large ones a BIG region of big. */
static float *in_of(int i, float *in)
{
    return in + (size_t)i * SLOT;
}

static float *out_of(int i, float *out, float *big)
{
    return kind_of(i) == BCAST_LARGE ? big + (size_t)(i / BIG_EVERY) * BIG : out + (size_t)i * SLOT;
}

static void fill(int i, float *in, float *out, uint32_t me, uint32_t n)
{
    uint32_t root = root_of(i, n);
    uint64_t count = count_of(i);

    for (uint64_t j = 0; j < count || j < SLOT; j++)
        out[j] = -1.0f;
    if (kind_of(i) == BCAST_I8) {
        int8_t *b = (int8_t *)out;
        for (uint64_t j = 0; j < count; j++)
            b[j] = (int8_t)(me == root ? (i + (int)j) % 127 : -1);
        return;
    }
    for (uint64_t j = 0; j < count; j++) {
        if (count <= SLOT)
            in[j] = value(i, j, me);
        if (me == root && !is_reduce(kind_of(i)))
            out[j] = value(i, j, root);
    }
}

static HcclResult issue(int i, float *in, float *out, uint32_t n, t_world_t *w)
{
    uint32_t root = root_of(i, n);
    uint64_t count = count_of(i);

    switch (kind_of(i)) {
    case BCAST_I8:
        return HcclBroadcast(out, count, HCCL_DATA_TYPE_INT8, root, w->comm, w->stream);
    case REDUCE_F32:
    case REDUCE_MEDIUM:
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
    uint32_t root = root_of(i, n);
    uint64_t count = count_of(i);
    int wrong = 0;

    for (uint64_t j = 0; j < count; j++) {
        float want = value(i, j, root);
        if (kind_of(i) == BCAST_I8) {
            wrong += ((const int8_t *)out)[j] != (int8_t)((i + (int)j) % 127);
            continue;
        }
        if (is_reduce(kind_of(i))) {
            want = 0.0f;
            for (uint32_t r = 0; r < n; r++)
                want += value(i, j, r);
            if (kind_of(i) != ALLREDUCE && me != root)
                want = -1.0f; /* not the root: the output is untouched */
        }
        wrong += out[j] != want;
    }
    return wrong;
}

static int run(t_world_t *w, float *in, float *out, float *big, int sync_each)
{
    uint32_t me = w->launch.rank, n = w->launch.size;
    int wrong = 0;

    for (int i = 0; i < OPS; i++)
        fill(i, in_of(i, in), out_of(i, out, big), me, n);
    for (int i = 0; i < OPS; i++) {
        T_CHECK_HCCL(issue(i, in_of(i, in), out_of(i, out, big), n, w));
        if (sync_each)
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
    }
    /* Not a wait for anything: the readers of the first phase start late (their streams run the
     * queue only after a grace period of a millisecond or two when nobody synchronises), so that
     * rank 0 runs the whole depth of the ring ahead and wraps it. The values checked below do not
     * depend on it. */
    if (!sync_each && me != 0)
        usleep(20000);
    T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
    for (int i = 0; i < OPS; i++) {
        int bad = check(i, out_of(i, out, big), me, n);
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
    float *big = malloc((size_t)(OPS / BIG_EVERY + 1) * BIG * sizeof(float));
    int burst, one_by_one;

    if (in == NULL || out == NULL || big == NULL)
        return 2;
    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    burst = run(&world, in, out, big, 0);
    one_by_one = run(&world, in, out, big, 1);
    printf("rank %u: %d small rooted ops in a burst: %d wrong; one by one: %d wrong\n", world.launch.rank, OPS, burst,
           one_by_one);
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    free(in);
    free(out);
    free(big);
    return burst != 0 || one_by_one != 0;
}
