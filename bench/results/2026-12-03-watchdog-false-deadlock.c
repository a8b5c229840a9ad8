/* Reproducer kept from the 2026-12-03 review (a helper session): the shm watchdog calls a live
 * program deadlocked (HCCL_E_PARA, "barrier #N deadlocks with rank 1 ... receive of ... from rank 0
 * waits for this rank") when a receiver is not scheduled for 20 ms while this rank's eager message
 * to it is already complete in the ring: shm_watch.c drop_consumed_sends handles only the peer's
 * sends to this rank, not this rank's finished sends to the peer. Same verdict on 01e67b1 and
 * 2acd25a (so not from that session's changes). Not fixed yet; build against tests/common
 * (test_util) like tests/fault/ and run under hccl-run -n 2. */
/* Watchdog false positive: rank 1 waits in HcclRecv (its pending receive published), rank 0 stops
 * rank 1 (SIGSTOP, standing in for a starved process), sends (eager: complete once the receive is
 * posted and the chunk is in the ring), then enters a Barrier. Rank 1 is resumed after 500 ms.
 * Nothing is deadlocked: rank 1's message is in the ring. Run: hccl-run -n 2 ./wd_false */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "test_util.h"

static pid_t peer_pid;
static void *resume(void *a) { (void)a; usleep(500000); kill(peer_pid, SIGCONT); return NULL; }

int main(void)
{
    t_world_t w;
    static float buf[1024];
    static int32_t pids[2];
    int32_t mine;
    HcclResult r;
    uint32_t rank;
    t_world_init(&w);
    HcclGetRankId(w.comm, &rank);
    mine = (int32_t)getpid();
    T_CHECK_HCCL(HcclAllGather(&mine, pids, 1, HCCL_DATA_TYPE_INT32, w.comm, w.stream));
    T_CHECK_ACL(aclrtSynchronizeStream(w.stream));
    if (rank == 1) {
        T_CHECK_HCCL(HcclRecv(buf, 1024, HCCL_DATA_TYPE_FP32, 0, w.comm, w.stream));
        T_CHECK_ACL(aclrtSynchronizeStream(w.stream));
    } else {
        pthread_t t; (void)t;
        usleep(300000);                 /* rank 1 is waiting in its receive by now */
        peer_pid = pids[1];
        kill(peer_pid, SIGSTOP);
        pthread_create(&t, NULL, resume, NULL);
        T_CHECK_HCCL(HcclSend(buf, 1024, HCCL_DATA_TYPE_FP32, 1, w.comm, w.stream));
        T_CHECK_ACL(aclrtSynchronizeStream(w.stream));
    }
    if (rank == 0) fprintf(stderr, "rank 0: stopped pid %d, entering barrier\n", (int)pids[1]);
    T_CHECK_HCCL(HcclBarrier(w.comm, w.stream));
    r = aclrtSynchronizeStream(w.stream) == ACL_SUCCESS ? HCCL_SUCCESS : HCCL_E_INTERNAL;
    if (rank == 0) usleep(2600000); /* the resume thread is done by now */
    printf("rank %u: barrier %s\n", rank, r == HCCL_SUCCESS ? "ok" : "FAILED");
    t_world_fini(&w);
    return r == HCCL_SUCCESS ? 0 : 1;
}
