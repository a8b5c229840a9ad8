/* A receiver that is not scheduled for a while is not deadlocked. Rank 1 waits in HcclRecv from rank 0
 * (its pending receive published: it says so on a still-waiting line) and stops itself (SIGSTOP,
 * standing in for a starved process); rank 0 sees it stopped, sends (a small message: complete once it
 * is in the ring), and goes on with its next op, which waits for rank 1: a Barrier ("barrier") or a
 * receive from rank 1 ("recv"). Rank 1 is resumed 300 ms later, reads its message and pairs with that
 * op. Rank 1's receive stays pending while rank 0's op waits for it, but the message it waits for is
 * already in the ring: the shm watchdog must not call that a deadlock (it once did, after 20 ms).
 * "exchange": rank 1 is stopped in a batch that sends rank 0 a small message and receives 4 MiB from
 * it; rank 0 sends the 4 MiB (the ring fills, and holds chunks of rank 0's own current send) and
 * then receives: the pair's send and receive must still count as pairing (leaving out the receive
 * because the ring held chunks once made this a send/send deadlock).
 * Run: hccl-run -n 2 slow_peer barrier|recv|exchange, with HOSTCCL_STILL_WAITING_S=1. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#define COUNT 1024      /* 4 KiB: an eager message */
#define BIG (1u << 20)  /* 4 MiB: more than the ring of a pair holds */
#define STOPPED_MS 300  /* far above the watchdog's confirmation time (20 ms) */
#define WAIT_MS 30000   /* for rank 1's still-waiting line, and for it to be stopped */

static pid_t peer_pid;

static void pause_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static float value(uint32_t from, uint32_t i)
{
    return (float)from * 1000.0f + (float)i * 0.37f + 0.125f;
}

static int check(const float *buf, uint32_t count, uint32_t from, uint32_t me)
{
    for (uint32_t i = 0; i < count; i++)
        if (buf[i] != value(from, i)) {
            fprintf(stderr, "rank %u: element %u from rank %u is %g, not %g\n", me, i, from, buf[i], value(from, i));
            return 1;
        }
    return 0;
}

/* Rank 1: once its receive says it is still waiting, stop the whole process. */
static void *stop_self(void *arg)
{
    (void)arg;
    if (!t_stderr_wait(" still waiting after ", WAIT_MS)) {
        fprintf(stderr, "rank 1: no still-waiting line within %d ms\n", WAIT_MS);
        exit(1);
    }
    kill(getpid(), SIGSTOP);
    return NULL;
}

/* Rank 0: resume rank 1 after STOPPED_MS. */
static void *resume_peer(void *arg)
{
    (void)arg;
    pause_ms(STOPPED_MS);
    kill(peer_pid, SIGCONT);
    return NULL;
}

/* Is process pid stopped (state T in /proc/pid/stat)? */
static int stopped(pid_t pid)
{
    char path[64], line[512], *end;
    FILE *f;
    int yes = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(line, sizeof(line), f) != NULL && (end = strrchr(line, ')')) != NULL)
        yes = end[1] == ' ' && end[2] == 'T';
    fclose(f);
    return yes;
}

static HcclResult finish(HcclResult res, aclrtStream stream)
{
    if (res != HCCL_SUCCESS)
        return res;
    return aclrtSynchronizeStream(stream) == ACL_SUCCESS ? HCCL_SUCCESS : HCCL_E_INTERNAL;
}

/* Rank 1's first op, during which it stops: a receive of rank 0's small message, or (exchange) a
 * batch that sends rank 0 a small message and receives a large one. */
static HcclResult first_op(int exchange, float *out, float *in, float *big, t_world_t *w)
{
    HcclSendRecvItem items[2] = {{HCCL_SEND, out, COUNT, HCCL_DATA_TYPE_FP32, 0},
                                 {HCCL_RECV, big, BIG, HCCL_DATA_TYPE_FP32, 0}};

    if (exchange)
        return finish(HcclBatchSendRecv(items, 2, w->comm, w->stream), w->stream);
    return finish(HcclRecv(in, COUNT, HCCL_DATA_TYPE_FP32, 0, w->comm, w->stream), w->stream);
}

int main(int argc, char **argv)
{
    static float out[COUNT], in[COUNT];
    float *big = calloc(BIG, sizeof(float));
    t_world_t w;
    int32_t mine = (int32_t)getpid(), pids[2];
    int barrier, exchange, bad = 0;
    HcclResult sent = HCCL_SUCCESS, next = HCCL_SUCCESS, received = HCCL_SUCCESS;
    pthread_t helper;
    uint32_t rank;

    if (argc != 2 || big == NULL ||
        (strcmp(argv[1], "barrier") != 0 && strcmp(argv[1], "recv") != 0 && strcmp(argv[1], "exchange") != 0)) {
        fprintf(stderr, "usage: %s barrier|recv|exchange (under hccl-run -n 2)\n", argv[0]);
        return 2;
    }
    barrier = strcmp(argv[1], "barrier") == 0;
    exchange = strcmp(argv[1], "exchange") == 0;
    t_world_init(&w);
    T_CHECK_HCCL(HcclGetRankId(w.comm, &rank));
    T_CHECK_HCCL(HcclAllGather(&mine, pids, 1, HCCL_DATA_TYPE_INT32, w.comm, w.stream));
    T_CHECK_ACL(aclrtSynchronizeStream(w.stream));
    for (uint32_t i = 0; i < COUNT; i++)
        out[i] = value(rank, i);
    if (rank == 1) {
        t_stderr_capture();
        pthread_create(&helper, NULL, stop_self, NULL);
        received = first_op(exchange, out, in, big, &w);
        pthread_join(helper, NULL);
        if (!exchange)
            next = finish(barrier ? HcclBarrier(w.comm, w.stream)
                                  : HcclSend(out, COUNT, HCCL_DATA_TYPE_FP32, 0, w.comm, w.stream),
                          w.stream);
        free(t_stderr_release());
        bad |= received == HCCL_SUCCESS && (exchange ? check(big, BIG, 0, rank) : check(in, COUNT, 0, rank));
    } else if (rank == 0) {
        int waited = 0;
        peer_pid = pids[1];
        for (uint32_t i = 0; i < BIG; i++)
            big[i] = value(rank, i);
        while (!stopped(peer_pid) && waited++ < WAIT_MS)
            pause_ms(1);
        if (!stopped(peer_pid)) {
            fprintf(stderr, "rank 0: rank 1 (pid %d) did not stop within %d ms\n", (int)peer_pid, WAIT_MS);
            kill(peer_pid, SIGCONT);
            return 1;
        }
        pthread_create(&helper, NULL, resume_peer, NULL);
        sent = finish(exchange ? HcclSend(big, BIG, HCCL_DATA_TYPE_FP32, 1, w.comm, w.stream)
                               : HcclSend(out, COUNT, HCCL_DATA_TYPE_FP32, 1, w.comm, w.stream),
                      w.stream);
        next = finish(barrier ? HcclBarrier(w.comm, w.stream)
                              : HcclRecv(in, COUNT, HCCL_DATA_TYPE_FP32, 1, w.comm, w.stream),
                      w.stream);
        pthread_join(helper, NULL);
        bad |= !barrier && next == HCCL_SUCCESS && check(in, COUNT, 1, rank);
    }
    bad |= sent != HCCL_SUCCESS || received != HCCL_SUCCESS || next != HCCL_SUCCESS;
    printf("rank %u: %s %s (send %s, receive %s, next %s)\n", rank, argv[1], bad ? "FAILED" : "ok",
           t_result_name(sent), t_result_name(received), t_result_name(next));
    t_world_fini(&w);
    free(big);
    return bad;
}
