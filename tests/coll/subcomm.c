/*
 * Sub-communicators as the seed advises (one communicator per parallel dimension): a world of
 * tp*pp ranks is cut into TP groups (consecutive ranks) and PP groups (stride tp) with
 * HcclCreateSubCommConfig, and both are used at once on two streams: an AllReduce in every TP group
 * and a pipeline Send/Recv along every PP group, for several rounds, each result checked.
 *
 * usage: subcomm TP   (world size must be a multiple of TP)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define ROUNDS 20
#define COUNT 10007

int main(int argc, char **argv)
{
    uint32_t tp = argc > 1 ? (uint32_t)atoi(argv[1]) : 2, pp, me, tp_rank, pp_rank, ids[64];
    t_world_t world;
    HcclComm tp_comm, pp_comm;
    HcclCommConfig config;
    aclrtStream pp_stream;
    float *act, *stage_in, *stage_out;
    int wrong = 0;
    char name[COMM_NAME_MAX_LENGTH];

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    me = world.launch.rank;
    pp = world.launch.size / tp;
    tp_rank = me % tp;
    pp_rank = me / tp;
    T_CHECK_ACL(aclrtCreateStream(&pp_stream));

    for (uint32_t i = 0; i < tp; i++)
        ids[i] = pp_rank * tp + i;
    HcclCommConfigInit(&config);
    T_CHECK_HCCL(HcclCreateSubCommConfig(&world.comm, tp, ids, 1, tp_rank, &config, &tp_comm));
    for (uint32_t i = 0; i < pp; i++)
        ids[i] = i * tp + tp_rank;
    T_CHECK_HCCL(HcclCreateSubCommConfig(&world.comm, pp, ids, 2, pp_rank, NULL, &pp_comm));
    T_CHECK_HCCL(HcclGetCommName(tp_comm, name));

    T_CHECK_ACL(aclrtMalloc((void **)&act, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    stage_in = malloc(COUNT * sizeof(float));
    stage_out = malloc(COUNT * sizeof(float));
    for (int round = 0; round < ROUNDS; round++) {
        for (uint32_t i = 0; i < COUNT; i++) {
            act[i] = (float)(tp_rank + 1 + round);
            stage_out[i] = (float)(pp_rank * 1000 + round + (int)(i % 13));
        }
        /* TP: AllReduce of the partial activations; PP: pass the stage output down the pipeline. */
        T_CHECK_HCCL(HcclAllReduce(act, act, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, tp_comm, world.stream));
        T_CHECK_HCCL(HcclGroupStart());
        if (pp_rank + 1 < pp)
            T_CHECK_HCCL(HcclSend(stage_out, COUNT, HCCL_DATA_TYPE_FP32, pp_rank + 1, pp_comm, pp_stream));
        if (pp_rank > 0)
            T_CHECK_HCCL(HcclRecv(stage_in, COUNT, HCCL_DATA_TYPE_FP32, pp_rank - 1, pp_comm, pp_stream));
        T_CHECK_HCCL(HcclGroupEnd());
        T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
        T_CHECK_ACL(aclrtSynchronizeStream(pp_stream));
        for (uint32_t i = 0; i < COUNT; i++) {
            float tp_expected = (float)(tp * (tp + 1) / 2 + tp * (uint32_t)round);
            if (act[i] != tp_expected)
                wrong++;
            if (pp_rank > 0 && stage_in[i] != (float)((pp_rank - 1) * 1000 + round + (int)(i % 13)))
                wrong++;
        }
    }
    printf("rank %u (tp %u/%u, pp %u/%u, %s): %d wrong\n", me, tp_rank, tp, pp_rank, pp, name, wrong);
    T_CHECK_HCCL(HcclCommDestroy(tp_comm));
    T_CHECK_HCCL(HcclCommDestroy(pp_comm));
    T_CHECK_ACL(aclrtFree(act));
    free(stage_in);
    free(stage_out);
    T_CHECK_ACL(aclrtDestroyStream(pp_stream));
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
