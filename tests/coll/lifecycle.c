/*
 * Communicator lifecycle on several ranks:
 *  1. HcclCommDestroy while ops are still queued on the stream waits for them: their results are
 *     right and the stream synchronises cleanly afterwards.
 *  2. Two communicators made one after the other (two HcclHostBroadcastRootInfo exchanges), both
 *     alive and used at once on two streams.
 *  3. Recovery: after an op fails (a deliberate count mismatch), HcclCommDestroy returns at once and
 *     a new communicator in the same process works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define COUNT 65536
#define QUEUED 16

static HcclComm make_comm(const HcclHostLaunchInfo *launch)
{
    HcclRootInfo info;
    HcclComm comm;

    memset(&info, 0, sizeof(info));
    if (launch->rank == 0)
        T_CHECK_HCCL(HcclGetRootInfo(&info));
    T_CHECK_HCCL(HcclHostBroadcastRootInfo(&info));
    T_CHECK_HCCL(HcclCommInitRootInfo(launch->size, &info, launch->rank, &comm));
    return comm;
}

static int check(const float *buf, float expected, const char *what, uint32_t rank)
{
    for (uint32_t i = 0; i < COUNT; i++) {
        if (buf[i] != expected) {
            fprintf(stderr, "rank %u: %s: element %u is %g, expected %g\n", rank, what, i, buf[i], expected);
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    t_world_t world;
    HcclComm second, third;
    aclrtStream other;
    float *bufs[QUEUED], *a;
    uint32_t me, n;
    int wrong = 0;
    HcclResult res;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    me = world.launch.rank;
    n = world.launch.size;
    T_CHECK_ACL(aclrtCreateStream(&other));

    /* 1. Destroy with queued ops. */
    second = make_comm(&world.launch);
    for (int k = 0; k < QUEUED; k++) {
        T_CHECK_ACL(aclrtMalloc((void **)&bufs[k], COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
        for (uint32_t i = 0; i < COUNT; i++)
            bufs[k][i] = (float)(k + 1);
        T_CHECK_HCCL(HcclAllReduce(bufs[k], bufs[k], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, second, other));
    }
    T_CHECK_HCCL(HcclCommDestroy(second)); /* no synchronisation before it */
    T_CHECK_ACL(aclrtSynchronizeStream(other));
    for (int k = 0; k < QUEUED; k++) {
        wrong += check(bufs[k], (float)((k + 1) * (int)n), "queued allreduce", me);
        T_CHECK_ACL(aclrtFree(bufs[k]));
    }

    /* 2. Two communicators at once. */
    second = make_comm(&world.launch);
    T_CHECK_ACL(aclrtMalloc((void **)&a, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (uint32_t i = 0; i < COUNT; i++)
        a[i] = 1.0f;
    T_CHECK_HCCL(HcclAllReduce(a, a, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, world.comm, world.stream));
    T_CHECK_HCCL(HcclBarrier(second, other));
    T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
    T_CHECK_ACL(aclrtSynchronizeStream(other));
    T_CHECK_HCCL(HcclAllReduce(a, a, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, second, other));
    T_CHECK_ACL(aclrtSynchronizeStream(other));
    wrong += check(a, (float)(n * n), "two communicators", me);

    /* 3. Recovery after a failure: rank 0 passes another count; everyone fails, destroys, goes on. */
    res = HcclAllReduce(a, a, me == 0 ? COUNT / 2 : COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, second, other);
    if (res == HCCL_SUCCESS && aclrtSynchronizeStream(other) == ACL_SUCCESS) {
        fprintf(stderr, "rank %u: the mismatched allreduce succeeded\n", me);
        wrong++;
    }
    T_CHECK_HCCL(HcclGetCommAsyncError(second, &res));
    wrong += res != HCCL_E_PARA;
    T_CHECK_HCCL(HcclCommDestroy(second));
    third = make_comm(&world.launch);
    for (uint32_t i = 0; i < COUNT; i++)
        a[i] = 2.0f;
    T_CHECK_HCCL(HcclAllReduce(a, a, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, third, other));
    T_CHECK_ACL(aclrtSynchronizeStream(other));
    wrong += check(a, (float)(2 * n), "new communicator after a failure", me);
    T_CHECK_HCCL(HcclCommDestroy(third));

    printf("rank %u: lifecycle %s\n", me, wrong ? "FAILED" : "verified");
    T_CHECK_ACL(aclrtFree(a));
    T_CHECK_ACL(aclrtDestroyStream(other));
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
