/*
 * Progress of operations the caller does not synchronise at once, and run-at-enqueue's safety
 * (docs/runtime.md, "Who runs the tasks"). Every value is checked.
 *
 *   progress inline     (1 rank) an AllReduce launched on an idle stream runs at enqueue: its
 *                       result is there when HcclAllReduce returns, before any synchronisation;
 *   progress cross      (2 ranks) rank 0: AllReduce on stream A, then Send to rank 1 on stream B
 *                       (another communicator); rank 1: Recv from rank 0, then the AllReduce,
 *                       both on stream A. Legal on an NPU (the streams run independently); an
 *                       AllReduce run at enqueue on rank 0 before its peer has begun it would
 *                       keep rank 0 from ever sending, and both would wait until the timeout;
 *   progress crossreduce the same with a small Reduce rooted at rank 0 (the eager ring, whose root
 *                       runs at enqueue only once every rank's data is there);
 *   progress crossv     the same pattern with an AllGatherV and an AlltoAllV, whose count arrays
 *                       rank 0 overwrites and frees as soon as each call returns: its AllGatherV
 *                       waits in the queue for rank 1 (the blocking path's op, which pointed at the
 *                       caller's arrays, queued as a copy), its AlltoAllV queues behind it; both
 *                       must run on copies of the arrays as they were at the call;
 *   progress unsynced   (2 ranks) rank 0 enqueues an AllReduce and, without synchronising it,
 *                       waits for rank 1 to say (a Send on another communicator and stream) that
 *                       its AllReduce is complete: rank 0's must have progressed by itself;
 *   progress MODE COUNT the same with COUNT fp32 elements of plain malloc memory (e.g. where
 *                       AllReduce writes into the peers' outputs with CMA, which also starts at
 *                       launch and must not wait there);
 *   progress kick COUNT (HOSTCCL_PROGRESS=caller, HOSTCCL_BACKSTOP_MS=60000) the runner kick
 *                       (docs/runtime.md): after blocking AllReduces, rank 0 launches one more of COUNT
 *                       fp32 (several steps), tells the others so (Sends on another communicator and
 *                       stream) and then computes (sleeps) KICK_SLEEP_S without synchronising; the
 *                       others launch their AllReduce and synchronise, and must be done within
 *                       KICK_BOUND_S: only rank 0's kick listener, woken by a peer's wait, can have had
 *                       rank 0's part run (nobody synchronises it, and the backstop poll waits a
 *                       minute). 2 ranks: the waiters spin first; 4 ranks on 2 CPUs: they sleep;
 *   progress kicksend COUNT  (2 ranks) the same with a Send of COUNT fp32 from rank 0 and its Recv
 *                       on rank 1 (the Send puts its first chunk in the ring at launch, the rest is
 *                       parked);
 *   progress errmsg     (2 ranks, HOSTCCL_PROGRESS=worker) the ranks launch AllReduces of different
 *                       counts; the op fails on the stream's worker thread. After the failed
 *                       aclrtSynchronizeStream, the synchronising thread's HcclHostGetRecentErrMsg
 *                       and aclGetRecentErrMsg name the failed AllReduce (they were per-thread, and
 *                       this thread had logged nothing).
 * Run with a short HCCL_EXEC_TIMEOUT: a hang becomes a failure long before CTest's timeout.
 */
#include <string.h>
#include <time.h>

#include "test_util.h"

#define COUNT 1027
#define ROUNDS 20

static uint32_t count = COUNT; /* elements per op (the command line's second argument) */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static HcclComm second_comm(const t_world_t *world)
{
    HcclRootInfo info;
    HcclComm comm;

    memset(&info, 0, sizeof(info));
    if (world->launch.rank == 0)
        T_CHECK_HCCL(HcclGetRootInfo(&info));
    T_CHECK_HCCL(HcclHostBroadcastRootInfo(&info));
    T_CHECK_HCCL(HcclCommInitRootInfo(world->launch.size, &info, world->launch.rank, &comm));
    return comm;
}

static void fill(float *buf, uint32_t rank, int round)
{
    for (uint32_t i = 0; i < count; i++)
        buf[i] = (float)(rank + 1) * (float)((i + (uint32_t)round) % 13);
}

/* Elements of an AllReduce(sum) of fill() over n ranks that are wrong. */
static int wrong_sum(const float *buf, uint32_t n, int round)
{
    int wrong = 0;

    for (uint32_t i = 0; i < count; i++)
        wrong += buf[i] != (float)(n * (n + 1) / 2) * (float)((i + (uint32_t)round) % 13);
    return wrong;
}

static int run_inline(t_world_t *w, float *send, float *recv)
{
    int wrong = 0;

    for (int round = 0; round < ROUNDS; round++) {
        fill(send, 0, round);
        memset(recv, 0, count * sizeof(float));
        T_CHECK_HCCL(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream));
        wrong += wrong_sum(recv, 1, round); /* before synchronising: it ran at enqueue */
        T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
    }
    return wrong;
}

/* The collective of `progress cross`: an AllReduce, or a Reduce rooted at rank 0. */
static void cross_coll(t_world_t *w, int reduce, float *send, float *recv)
{
    if (reduce)
        T_CHECK_HCCL(HcclReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, w->comm, w->stream));
    else
        T_CHECK_HCCL(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream));
}

static int run_cross(t_world_t *w, HcclComm pp, int reduce, float *send, float *recv, float *act)
{
    aclrtStream b;
    uint32_t me = w->launch.rank;
    int wrong = 0;

    T_CHECK_ACL(aclrtCreateStream(&b));
    for (int round = 0; round < ROUNDS; round++) {
        double t0 = now_s();
        fill(send, me, round);
        if (me == 0) {
            fill(act, 7, round);
            cross_coll(w, reduce, send, recv);
            T_CHECK_HCCL(HcclSend(act, count, HCCL_DATA_TYPE_FP32, 1, pp, b));
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
            T_CHECK_ACL(aclrtSynchronizeStream(b));
        } else if (me == 1) {
            T_CHECK_HCCL(HcclRecv(act, count, HCCL_DATA_TYPE_FP32, 0, pp, w->stream));
            cross_coll(w, reduce, send, recv);
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
            for (uint32_t i = 0; i < count; i++)
                wrong += act[i] != (float)8 * (float)((i + (uint32_t)round) % 13);
        }
        if (!reduce || me == 0) /* a Reduce's result is the root's */
            wrong += wrong_sum(recv, 2, round);
        if (now_s() - t0 > 5.0) {
            fprintf(stderr, "rank %u: round %d took %.1f s\n", me, round, now_s() - t0);
            wrong++;
        }
    }
    T_CHECK_ACL(aclrtDestroyStream(b));
    return wrong;
}

static int run_unsynced(t_world_t *w, HcclComm pp, float *send, float *recv)
{
    aclrtStream b;
    uint32_t me = w->launch.rank;
    float note = 0;
    int wrong = 0;

    T_CHECK_ACL(aclrtCreateStream(&b));
    for (int round = 0; round < ROUNDS; round++) {
        fill(send, me, round);
        T_CHECK_HCCL(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream));
        if (me == 0) {
            T_CHECK_HCCL(HcclRecv(&note, 1, HCCL_DATA_TYPE_FP32, 1, pp, b));
            T_CHECK_ACL(aclrtSynchronizeStream(b)); /* rank 1's AllReduce is complete */
            wrong += note != (float)round;
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
        } else {
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
            note = (float)round;
            if (me == 1) {
                T_CHECK_HCCL(HcclSend(&note, 1, HCCL_DATA_TYPE_FP32, 0, pp, b));
                T_CHECK_ACL(aclrtSynchronizeStream(b));
            }
        }
        wrong += wrong_sum(recv, w->launch.size, round);
    }
    T_CHECK_ACL(aclrtDestroyStream(b));
    return wrong;
}

#define KICK_SLEEP_S 1.5
#define KICK_BOUND_S 0.75

/* The op of `progress kick`: an AllReduce, or (p2p) rank 0's Send of send to rank 1's recv. */
static void kick_op(t_world_t *w, int p2p, float *send, float *recv)
{
    if (!p2p)
        T_CHECK_HCCL(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream));
    else if (w->launch.rank == 0)
        T_CHECK_HCCL(HcclSend(send, count, HCCL_DATA_TYPE_FP32, 1, w->comm, w->stream));
    else
        T_CHECK_HCCL(HcclRecv(recv, count, HCCL_DATA_TYPE_FP32, 0, w->comm, w->stream));
}

static int kick_wrong(const t_world_t *w, int p2p, const float *recv, int round)
{
    int wrong = 0;

    if (!p2p)
        return wrong_sum(recv, w->launch.size, round);
    for (uint32_t i = 0; w->launch.rank == 1 && i < count; i++) /* fill(send, 0, round) on rank 0 */
        wrong += recv[i] != (float)((i + (uint32_t)round) % 13);
    return wrong;
}

static int run_kick(t_world_t *w, HcclComm pp, int p2p, float *send, float *recv)
{
    const int blocking = 4;
    uint32_t me = w->launch.rank;
    float note = 0;
    aclrtStream b;
    int wrong = 0;

    if (p2p && w->launch.size != 2) {
        fprintf(stderr, "progress kicksend runs on 2 ranks\n");
        return 1;
    }
    T_CHECK_ACL(aclrtCreateStream(&b));
    for (int round = 0; round <= blocking; round++) {
        fill(send, me, round);
        memset(recv, 0, count * sizeof(float));
        if (round < blocking) { /* the synchronous pattern */
            kick_op(w, p2p, send, recv);
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
        } else if (me == 0) {
            struct timespec nap = {.tv_sec = (time_t)KICK_SLEEP_S,
                                   .tv_nsec = (long)((KICK_SLEEP_S - (int)KICK_SLEEP_S) * 1e9)};
            kick_op(w, p2p, send, recv);
            for (uint32_t r = 1; r < w->launch.size; r++) { /* launched: come */
                T_CHECK_HCCL(HcclSend(&note, 1, HCCL_DATA_TYPE_FP32, r, pp, b));
                T_CHECK_ACL(aclrtSynchronizeStream(b));
            }
            nanosleep(&nap, NULL); /* the program's compute, not a wait for anything */
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
        } else {
            double t0, waited;
            T_CHECK_HCCL(HcclRecv(&note, 1, HCCL_DATA_TYPE_FP32, 0, pp, b));
            T_CHECK_ACL(aclrtSynchronizeStream(b));
            t0 = now_s();
            kick_op(w, p2p, send, recv);
            T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
            waited = now_s() - t0;
            printf("rank %u: the op with rank 0 computing took %.1f us\n", me, waited * 1e6);
            if (waited > KICK_BOUND_S) {
                fprintf(stderr, "rank %u: waited %.3f s (bound %.2f): rank 0's part ran only when it synchronised\n",
                        me, waited, KICK_BOUND_S);
                wrong++;
            }
        }
        wrong += kick_wrong(w, p2p, recv, round);
    }
    T_CHECK_ACL(aclrtDestroyStream(b));
    return wrong;
}

/* The error line of an op that failed on the worker reaches the thread that synchronises. */
static int run_errmsg(t_world_t *w, float *send, float *recv)
{
    uint64_t mismatched = count + w->launch.rank; /* every rank fails */
    const char *hccl_msg, *acl_msg;
    aclrtEvent done;
    int wrong = 0;

    T_CHECK_ACL(aclrtCreateEvent(&done));
    fill(send, w->launch.rank, 0);
    T_CHECK_HCCL(HcclAllReduce(send, recv, mismatched, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w->comm, w->stream));
    T_CHECK_ACL(aclrtRecordEvent(done, w->stream));
    T_CHECK_ACL(aclrtSynchronizeEvent(done)); /* waits (runs nothing): the worker runs the op */
    if (HcclHostGetRecentErrMsg()[0] != '\0') {
        fprintf(stderr, "rank %u: this thread logged an error itself: %s\n", w->launch.rank,
                HcclHostGetRecentErrMsg());
        wrong++;
    }
    if (aclrtSynchronizeStream(w->stream) == ACL_SUCCESS) {
        fprintf(stderr, "rank %u: the mismatched AllReduce did not fail\n", w->launch.rank);
        return wrong + 1;
    }
    hccl_msg = HcclHostGetRecentErrMsg();
    acl_msg = aclGetRecentErrMsg();
    printf("rank %u: after the failed synchronisation: '%s'\n", w->launch.rank, hccl_msg);
    wrong += strstr(hccl_msg, "allreduce") == NULL || strstr(hccl_msg, "error") == NULL;
    wrong += strstr(acl_msg, "allreduce") == NULL;
    /* A second synchronisation has nothing to report and leaves the line alone. */
    T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
    wrong += strstr(HcclHostGetRecentErrMsg(), "allreduce") == NULL;
    T_CHECK_ACL(aclrtDestroyEvent(done));
    return wrong;
}

/* `count` floats: from aclrtMalloc, or plain malloc (`plain`). */
/* Count arrays of 2 ranks, in one heap block that the caller may scribble over and free. */
static uint64_t *two_rank_vectors(uint64_t block)
{
    uint64_t *v = malloc(4 * sizeof(*v));

    if (v == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    v[0] = v[1] = block; /* counts */
    v[2] = 0;            /* displacements */
    v[3] = block;
    return v;
}

static void scribble_and_free(uint64_t *v)
{
    memset(v, 0xA5, 4 * sizeof(*v));
    free(v);
}

static float moved_value(uint32_t src, uint32_t dst, uint64_t i, int round)
{
    return (float)(src * 10 + dst + 1) * (float)((i + (uint64_t)round) % 11);
}

static int run_crossv(t_world_t *w, HcclComm pp, float *send, float *recv, float *act)
{
    const HcclDataType f32 = HCCL_DATA_TYPE_FP32;
    uint64_t half = count / 2, quarter = count / 4;
    uint32_t me = w->launch.rank;
    aclrtStream b;
    int wrong = 0;

    T_CHECK_ACL(aclrtCreateStream(&b));
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t *gv = two_rank_vectors(half), *av = two_rank_vectors(quarter);
        float *gathered = recv, *exchanged = act + 2 * quarter; /* act: the AlltoAllV's input, then output */
        for (uint64_t i = 0; i < half; i++)
            send[i] = moved_value(me, 0, i, round);
        for (uint32_t dst = 0; dst < 2; dst++)
            for (uint64_t i = 0; i < quarter; i++)
                act[dst * quarter + i] = moved_value(me, dst, i, round);
        memset(recv, 0, count * sizeof(float));
        memset(exchanged, 0, 2 * quarter * sizeof(float));
        if (me == 1)
            T_CHECK_HCCL(HcclRecv(send + half, 1, f32, 0, pp, w->stream));
        T_CHECK_HCCL(HcclAllGatherV(send, half, gathered, gv, gv + 2, f32, w->comm, w->stream));
        scribble_and_free(gv);
        T_CHECK_HCCL(HcclAlltoAllV(act, av, av + 2, f32, exchanged, av, av + 2, f32, w->comm, w->stream));
        scribble_and_free(av);
        if (me == 0)
            T_CHECK_HCCL(HcclSend(send + half, 1, f32, 1, pp, b));
        T_CHECK_ACL(aclrtSynchronizeStream(w->stream));
        T_CHECK_ACL(aclrtSynchronizeStream(b));
        for (uint32_t src = 0; src < 2; src++) {
            for (uint64_t i = 0; i < half; i++)
                wrong += gathered[src * half + i] != moved_value(src, 0, i, round);
            for (uint64_t i = 0; i < quarter; i++)
                wrong += exchanged[src * quarter + i] != moved_value(src, me, i, round);
        }
    }
    T_CHECK_ACL(aclrtDestroyStream(b));
    return wrong;
}

static float *alloc_floats(int plain)
{
    float *p = NULL;

    if (plain) {
        if ((p = malloc(count * sizeof(float))) == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        return p;
    }
    T_CHECK_ACL(aclrtMalloc((void **)&p, count * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    return p;
}

static void free_floats(float *p, int plain)
{
    if (plain)
        free(p);
    else
        T_CHECK_ACL(aclrtFree(p));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : COUNT;
    t_world_t world;
    HcclComm pp = NULL;
    float *send, *recv, *act;
    int wrong;

    if (n <= 0 || n > (1L << 24)) {
        fprintf(stderr, "progress: COUNT must be 1..%ld\n", 1L << 24);
        return 2;
    }
    count = (uint32_t)n;
    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    send = alloc_floats(argc > 2);
    recv = alloc_floats(argc > 2);
    act = alloc_floats(argc > 2);
    if (strcmp(mode, "inline") == 0) {
        wrong = run_inline(&world, send, recv);
    } else if (strcmp(mode, "crossv") == 0) {
        pp = second_comm(&world);
        wrong = run_crossv(&world, pp, send, recv, act);
    } else if (strcmp(mode, "cross") == 0 || strcmp(mode, "crossreduce") == 0 || strcmp(mode, "unsynced") == 0) {
        pp = second_comm(&world);
        wrong = mode[0] == 'c' ? run_cross(&world, pp, strcmp(mode, "crossreduce") == 0, send, recv, act)
                               : run_unsynced(&world, pp, send, recv);
    } else if (strcmp(mode, "kick") == 0 || strcmp(mode, "kicksend") == 0) {
        pp = second_comm(&world);
        wrong = run_kick(&world, pp, strcmp(mode, "kicksend") == 0, send, recv);
    } else if (strcmp(mode, "errmsg") == 0) {
        wrong = run_errmsg(&world, send, recv);
    } else {
        fprintf(stderr, "usage: progress inline|cross|crossreduce|crossv|unsynced|kick|kicksend|errmsg [COUNT]\n");
        return 2;
    }
    printf("rank %u: progress %s, %d wrong\n", world.launch.rank, mode, wrong);
    if (pp != NULL)
        T_CHECK_HCCL(HcclCommDestroy(pp));
    free_floats(send, argc > 2);
    free_floats(recv, argc > 2);
    free_floats(act, argc > 2);
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    return wrong != 0;
}
