/*
 * A job for the inter-host fault tests (engine.sh): every rank runs AllReduces of COUNT floats in a
 * loop, checking every result, until one fails or SECONDS pass. It prints "running" once it has
 * done 20 (the test then breaks something), and at the end "SURVIVED <code> at <unix time>" with
 * the wall-clock time of the failure, so that the test can measure how long detection took.
 *
 * usage: net_fault [SECONDS [COUNT]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "test_util.h"

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    uint64_t count = argc > 2 ? strtoull(argv[2], NULL, 0) : 16384;
    struct timespec start, now;
    HcclResult res = HCCL_SUCCESS;
    t_world_t world;
    float *buf;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    T_CHECK_ACL(aclrtMalloc((void **)&buf, count * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint64_t iter = 0;; iter++) {
        for (uint64_t i = 0; i < count; i++)
            buf[i] = (float)(world.launch.rank + 1) * 0.5f + (float)(i % 7);
        res = HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, world.comm, world.stream);
        if (res == HCCL_SUCCESS && aclrtSynchronizeStream(world.stream) != ACL_SUCCESS)
            HcclGetCommAsyncError(world.comm, &res);
        if (res != HCCL_SUCCESS)
            break;
        for (uint64_t i = 0; i < count; i++) {
            float n = (float)world.launch.size;
            float want = 0.5f * n * (n + 1) / 2 + n * (float)(i % 7);
            if (buf[i] != want) {
                printf("rank %u: WRONG element %llu: %g, want %g\n", world.launch.rank, (unsigned long long)i,
                       (double)buf[i], (double)want);
                return 1;
            }
        }
        if (iter == 20) {
            printf("rank %u: running\n", world.launch.rank);
            fflush(stdout);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= seconds)
            break;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    printf("rank %u: SURVIVED %s at %lld.%03ld\n", world.launch.rank, t_result_name(res), (long long)now.tv_sec,
           now.tv_nsec / 1000000);
    fflush(stdout);
    HcclCommDestroy(world.comm);
    aclrtFree(buf);
    aclFinalize();
    return 0;
}
