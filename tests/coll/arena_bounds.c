/*
 * A peer's published arena offset is bounds-checked before this rank touches the peer's memory
 * (issue 12, item 7). Two ranks; rank 1 forges, in its channel to rank 0, the rendezvous chunk of
 * a Send whose buffer lies across the end of its arena (offset arena_bytes - 16, 1 MiB long). Rank
 * 0's matching HcclRecv must fail with a log line saying the range is out of the arena, not read
 * past the mapping (which crashed the rank before the check). Links the internal library: the
 * forgery needs the engine's channel layout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#include "capture.h"
#include "hc_comm.h"
#include "hc_store.h"
#include "hc_time.h"
#include "shm_internal.h"
#include "test_util.h"

#define COUNT (256u * 1024u) /* 1 MiB of fp32: the rendezvous path */


/* Rank 1: a chunk that says "copy 1 MiB from offset arena_bytes - 16 of my arena". */
static void forge_send(hc_shm_engine_t *eng, const void *arena_buf)
{
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    hc_p2p_channel_t *ch = hc_shm_channel(eng, eng->me, 0);
    uint64_t head = atomic_load(&ch->head);
    hc_p2p_chunk_t *chunk = hc_shm_chunk(eng, ch, head);

    T_CHECK(hc_shm_arena_offset(eng, arena_buf, 64) >= 0); /* publishes this rank's arena */
    chunk->msg_seq = 1;
    chunk->count = COUNT;
    chunk->dtype = (uint32_t)HCCL_DATA_TYPE_FP32;
    chunk->kind = HC_P2P_RNDV;
    chunk->h.part.offset = 0;
    chunk->h.part.bytes = COUNT * sizeof(float);
    chunk->u.rndv.src_addr = 0;
    chunk->u.rndv.src_off = (int64_t)mine->arena_bytes - 16;
    atomic_store(&chunk->ready, head + 1); /* what the receiver polls */
    atomic_store(&ch->head, head + 1);
    hc_shm_ring(eng, 0); /* the receiver, local rank 0 */
}

int main(void)
{
    HcclHostLaunchInfo launch;
    HcclRootInfo info;
    HcclComm comm;
    aclrtStream stream;
    float *buf;
    char value[4];
    size_t len;

    memset(&info, 0, sizeof(info));
    T_CHECK(aclInit(NULL) == ACL_SUCCESS);
    T_CHECK(HcclHostGetLaunchInfo(&launch) == HCCL_SUCCESS && launch.size == 2);
    T_CHECK(aclrtSetDevice((int32_t)launch.localRank) == ACL_SUCCESS);
    T_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    T_CHECK(aclrtMalloc((void **)&buf, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    if (launch.rank == 0)
        T_CHECK(HcclGetRootInfo(&info) == HCCL_SUCCESS);
    T_CHECK(HcclHostBroadcastRootInfo(&info) == HCCL_SUCCESS);
    T_CHECK(HcclCommInitRootInfo(2, &info, launch.rank, &comm) == HCCL_SUCCESS);
    if (launch.rank == 1) {
        hc_comm_t *c;

        T_CHECK(hc_comm_acquire(comm, "arena_bounds", &c) == HCCL_SUCCESS); /* handles are not addresses */
        forge_send((hc_shm_engine_t *)(void *)c->engine, buf);
        hc_comm_release(c);
        /* Stay alive until rank 0 has judged the chunk: a dead sender is another error. */
        T_CHECK(hc_store_get("judged", value, sizeof(value), &len, hc_now_ns() + 60 * HC_NS_PER_S) == HCCL_SUCCESS);
    } else {
        capture_t cap;
        HcclResult res;
        char *log;

        capture_begin(&cap);
        res = HcclRecv(buf, COUNT, HCCL_DATA_TYPE_FP32, 1, comm, stream);
        if (res == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS)
            HcclGetCommAsyncError(comm, &res);
        log = capture_end(&cap);
        T_CHECK(res != HCCL_SUCCESS);
        T_CHECK(strstr(log, "out of range") != NULL);
        free(log);
        T_CHECK(hc_store_set("judged", "1", 1) == HCCL_SUCCESS);
        printf("rank 0: the forged offset was refused (%s)\n", HcclGetErrorString(res));
    }
    HcclCommDestroy(comm);
    aclrtDestroyStream(stream);
    aclrtFree(buf);
    aclFinalize();
    return 0;
}
