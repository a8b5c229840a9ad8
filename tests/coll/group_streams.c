/*
 * A group whose calls use several streams (issue 12, bug 1): each op completes in its own stream's
 * order. Every rank sends to the next rank on stream A and receives from the previous one on
 * stream B, in one group, with work on both streams before and after the group:
 *
 *   B: memset(recv, 0xff)            -- before the group: the receive must land after it
 *   A: memcpy(send <- fresh values)  -- before the group: the send must carry the fresh values
 *   group { Send(send, A); Recv(recv, B); AllReduce(x, C) }
 *   B: memcpy(out <- recv)           -- after the group: must see the received data
 *
 * then synchronises stream B alone and checks `out` against the previous rank's fresh values; then
 * C, then A. Values are inexact floats (no small integers), so a stale or partial copy shows.
 *
 * usage: group_streams [ROUNDS]   (under hccl-run, 2 or more ranks)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define COUNT 4099 /* odd: not a multiple of any chunk */

static float value(uint32_t rank, int round, size_t i)
{
    return (float)(sin((double)(rank * 7919u + (uint32_t)round * 104729u + i)) * 1234.567 + 0.1);
}

static int check(const float *got, uint32_t from, int round, const char *what, uint32_t me)
{
    for (size_t i = 0; i < COUNT; i++) {
        float want = value(from, round, i);
        if (got[i] != want) { /* a copy: bit-exact */
            fprintf(stderr, "rank %u round %d: %s[%zu] = %g, expected %g (rank %u's value)\n", me, round, what, i,
                    (double)got[i], (double)want, from);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20, failed = 0;
    t_world_t world;
    aclrtStream a, b, c;
    float *send, *recv, *out, *fresh, *x;
    uint32_t me, n, next, prev;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    me = world.launch.rank;
    n = world.launch.size;
    next = (me + 1) % n;
    prev = (me + n - 1) % n;
    T_CHECK_ACL(aclrtCreateStream(&a));
    T_CHECK_ACL(aclrtCreateStream(&b));
    T_CHECK_ACL(aclrtCreateStream(&c));
    T_CHECK_ACL(aclrtMalloc((void **)&send, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    T_CHECK_ACL(aclrtMalloc((void **)&recv, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    T_CHECK_ACL(aclrtMalloc((void **)&x, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    out = malloc(COUNT * sizeof(float));
    fresh = malloc(COUNT * sizeof(float));
    if (out == NULL || fresh == NULL)
        return 1;
    for (int round = 0; round < rounds && !failed; round++) {
        for (size_t i = 0; i < COUNT; i++) {
            fresh[i] = value(me, round, i);
            x[i] = (float)(me + 1) * 0.5f;
        }
        memset(send, 0, COUNT * sizeof(float)); /* stale: the copy on A must come first */
        T_CHECK_ACL(aclrtMemsetAsync(recv, COUNT * sizeof(float), 0xff, COUNT * sizeof(float), b));
        T_CHECK_ACL(aclrtMemcpyAsync(send, COUNT * sizeof(float), fresh, COUNT * sizeof(float),
                                     ACL_MEMCPY_HOST_TO_DEVICE, a));
        T_CHECK_HCCL(HcclGroupStart());
        T_CHECK_HCCL(HcclSend(send, COUNT, HCCL_DATA_TYPE_FP32, next, world.comm, a));
        T_CHECK_HCCL(HcclRecv(recv, COUNT, HCCL_DATA_TYPE_FP32, prev, world.comm, b));
        T_CHECK_HCCL(HcclAllReduce(x, x, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, world.comm, c));
        T_CHECK_HCCL(HcclGroupEnd());
        T_CHECK_ACL(aclrtMemcpyAsync(out, COUNT * sizeof(float), recv, COUNT * sizeof(float),
                                     ACL_MEMCPY_DEVICE_TO_HOST, b));
        /* Only B: the receive and the copy after it must be done. */
        T_CHECK_ACL(aclrtSynchronizeStream(b));
        failed |= check(out, prev, round, "out", me);
        T_CHECK_ACL(aclrtSynchronizeStream(c));
        for (size_t i = 0; i < COUNT && !failed; i++) {
            float want = (float)n * (float)(n + 1) * 0.25f; /* sum of (r+1)/2 */
            if (fabsf(x[i] - want) > 1e-5f * want) {
                fprintf(stderr, "rank %u round %d: allreduce x[%zu] = %g, expected %g\n", me, round, i,
                        (double)x[i], (double)want);
                failed = 1;
            }
        }
        T_CHECK_ACL(aclrtSynchronizeStream(a));
    }
    T_CHECK_ACL(aclrtFree(send));
    T_CHECK_ACL(aclrtFree(recv));
    T_CHECK_ACL(aclrtFree(x));
    free(out);
    free(fresh);
    T_CHECK_ACL(aclrtDestroyStream(a));
    T_CHECK_ACL(aclrtDestroyStream(b));
    T_CHECK_ACL(aclrtDestroyStream(c));
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    if (!failed)
        printf("rank %u: %d rounds of a send/receive group on two streams correct\n", me, rounds);
    return failed;
}
