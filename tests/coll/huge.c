/*
 * Counts beyond 32 bits: an in-place uint8 AllReduce of 4.5 GiB elements (more than 2^32) on
 * aclrtMalloc memory, and a Broadcast of the same buffer. Needs about 5 GiB per rank, so it only
 * runs with HOSTCCL_TEST_FULL=1 (exit 77, skipped, otherwise).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

int main(void)
{
    const uint64_t count = 4608ull << 20; /* 4.5 GiB of uint8 */
    const char *full = getenv("HOSTCCL_TEST_FULL");
    t_world_t world;
    uint8_t *buf;
    uint64_t wrong = 0;

    if (full == NULL || strcmp(full, "1") != 0) {
        printf("huge: skipped (set HOSTCCL_TEST_FULL=1)\n");
        return 77;
    }
    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    T_CHECK_ACL(aclrtMalloc((void **)&buf, count, ACL_MEM_MALLOC_HUGE_FIRST));
    for (uint64_t i = 0; i < count; i++)
        buf[i] = (uint8_t)((i >> 32) + i + world.launch.rank);
    T_CHECK_HCCL(HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_SUM, world.comm, world.stream));
    T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
    for (uint64_t i = 0; i < count; i++) {
        uint32_t n = world.launch.size;
        uint8_t expected = (uint8_t)(n * ((uint8_t)(i >> 32) + (uint8_t)i) + n * (n - 1) / 2);
        wrong += buf[i] != expected;
    }
    if (world.launch.rank == 0)
        memset(buf, 0x3c, count);
    T_CHECK_HCCL(HcclBroadcast(buf, count, HCCL_DATA_TYPE_UINT8, 0, world.comm, world.stream));
    T_CHECK_ACL(aclrtSynchronizeStream(world.stream));
    for (uint64_t i = 0; i < count; i += 4093)
        wrong += buf[i] != 0x3c;
    wrong += buf[count - 1] != 0x3c;
    printf("rank %u: %llu-element allreduce and broadcast: %llu wrong\n", world.launch.rank,
           (unsigned long long)count, (unsigned long long)wrong);
    T_CHECK_ACL(aclrtFree(buf));
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
