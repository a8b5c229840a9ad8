/*
 * The seed's pipeline-parallel pattern: stage r receives its input from stage r-1 and sends its
 * output to stage r+1, so ranks take part in different numbers of point-to-point calls; then a
 * collective over all stages (a loss AllReduce, say). Ten rounds, every value checked. Regression
 * test: point-to-point calls must not shift the collective numbering that ranks compare.
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

#define COUNT 4099
#define ROUNDS 10

int main(void)
{
    t_world_t world;
    float *act, loss;
    uint32_t me, n;
    int wrong = 0;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    me = world.launch.rank;
    n = world.launch.size;
    T_CHECK_ACL(aclrtMalloc((void **)&act, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int round = 0; round < ROUNDS; round++) {
        if (me == 0)
            for (uint32_t i = 0; i < COUNT; i++)
                act[i] = (float)(round + (int)(i % 17));
        else
            T_CHECK_HCCL(HcclRecv(act, COUNT, HCCL_DATA_TYPE_FP32, me - 1, world.comm, world.stream));
        T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
        for (uint32_t i = 0; i < COUNT; i++) /* this stage's "layer" */
            act[i] += 1.0f;
        if (me + 1 < n)
            T_CHECK_HCCL(HcclSend(act, COUNT, HCCL_DATA_TYPE_FP32, me + 1, world.comm, world.stream));
        loss = me + 1 == n ? act[0] : 0.0f;
        T_CHECK_HCCL(HcclAllReduce(&loss, &loss, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, world.comm, world.stream));
        T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
        for (uint32_t i = 0; i < COUNT; i++)
            wrong += act[i] != (float)(round + (int)(i % 17) + (int)me + 1);
        wrong += loss != (float)(round + (int)n);
    }
    printf("rank %u: pipeline of %u stages, %d wrong\n", me, n, wrong);
    T_CHECK_ACL(aclrtFree(act));
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
