/*
 * One fault-injection case on N ranks (run by run_fault.sh under hccl-run --keep-going). Each rank
 * that must survive prints "SURVIVED <code> after <s> s" (the time the failing op took) and "destroy
 * took <s> s" (HcclCommDestroy); run_fault.sh checks the codes, the log line naming the culprit and
 * both times against the case's bounds. After destroy nothing of the communicator may remain:
 * descriptors, threads, and mappings of shared memory (its segment, the peers' arenas) are counted
 * before and after ("LEAK" otherwise).
 *
 * usage: fault_case CASE SEED   with CASE one of
 *   kill        a random rank (not 0) dies by SIGKILL at a random moment of a random collective
 *               (among them bursts of small Broadcasts and Reduces, whose writers run ahead)
 *   kill-malloc the same on plain malloc buffers: the paths through the slots (AllReduce's
 *               reduce-scatter + all-gather among them) instead of zero copy
 *   stop        rank 1 stops (SIGSTOP) before an AllReduce: the others time out
 *   busy        rank 1 enqueues an AllReduce behind a host function that takes BUSY_S on its stream
 *               (standing in for a long kernel): the others time out, and their diagnosis says
 *               that rank 1 has enqueued the op but its stream has not started it
 *   count|dtype|op|root|coll|skip    rank 1 calls a mismatching AllReduce (or skips one)
 *   ag-count|rs-count  rank 1's AllGather (ReduceScatter) has twice the others' count
 *   a2av-count|a2av-count-large|a2av-count-tiny  rank 1's AlltoAllV sends rank 0 twice the block
 *               rank 0 expects (small: the count exchange's step also carries data; large: read in
 *               place after it; tiny: every rank's counts and data on its hot line)
 *   small-count|small-root|small-reduce|small-size|small-coll   the same on the eager path of
 *               small Broadcast and Reduce, and between it and the stepped path
 *   tiny-ar|tiny-ag|tiny-rs|tiny-a2a   rank 1's AllReduce (AllGather, ReduceScatter, AlltoAll) of
 *               count 16 takes the general path, the others' of count 1 the short path
 * A Barrier follows a mismatching call that succeeded: the writers of the eager path fail there.
 *   direct      (2 ranks) rank 1 sends rank 0 its pid (a Broadcast on a second communicator),
 *               starts a large AllReduce (its launch publishes the first step) and dies by SIGKILL
 *               at once; rank 0 waits for that death, then finds its peer begun but not running the
 *               op, so its AllReduce must not run at launch (it has later steps: hc_shm_ready):
 *               HcclAllReduce returns success with nothing failed yet, and the synchronisation,
 *               which runs it, must report the failure, naming the AllReduce (on a loaded machine
 *               rank 1's worker may run the op before the SIGKILL lands: rank 0's diagnosis then
 *               shows it running the op, and the case is checked as direct-run)
 *   direct-run  (2 ranks) the same, but rank 1 dies inside the op: its synchronisation runs it and,
 *               once it waits there for rank 0, a second thread sends the pid and kills the
 *               process; rank 0 then finds its peer running the op, so its AllReduce runs at launch
 *               and must fail there (the failure seen when HcclAllReduce returns) and at the
 *               synchronisation
 *   p2p-peer    rank 1 sends to rank 3, rank 3 receives from rank 2 (which is in a Barrier): a deadlock
 *               rank 3 sees at once
 *   send-send   ranks 0 and 1 each send to the other: a deadlock both see at once
 *   other-op    rank 0 sends to rank 1, which calls the AllReduce that comes after its receive:
 *               a deadlock seen at once
 *   wrong-peer  rank 0 sends to rank 2 instead of rank 1; rank 2 stops (SIGSTOP) outside any op: no
 *               certain deadlock, so the waiting ranks print still-waiting lines, then time out
 *   p2p-count   rank 0 sends 100 elements to rank 1, rank 1 receives 200
 *   p2p-count-large  the same with 300000 and 200000 elements: the send takes the rendezvous
 *               path (rank 1 would read rank 0's buffer in place), the mismatch must still fail both
 *   p2p-count-exchange  ranks 0 and 1 exchange one element each in a group, but rank 1 receives 2:
 *               rank 1's chunk tells rank 0 of that receive, and rank 0's send must still fail
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#define COUNT_MAX (1u << 20)
#define BUSY_S 5 /* rank 1's stream is busy this long: past HCCL_EXEC_TIMEOUT (3 s) */

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;

    while (d != NULL && readdir(d) != NULL)
        n++;
    if (d != NULL)
        closedir(d);
    return n;
}

/* Lines of /proc/self/maps that name `what` (hostccl's shared memory: "memfd:hostccl-shm" is a
 * segment, "memfd:hostccl-arena" this process's arena or a peer's mapped for zero copy). */
static int count_maps(const char *what)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, what) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

static double seconds(const struct timespec *from, const struct timespec *to)
{
    return (double)(to->tv_sec - from->tv_sec) + (double)(to->tv_nsec - from->tv_nsec) / 1e9;
}

static uint64_t rng = 1;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The victim's own choices come from a separate generator, so that every rank draws the same
 * sequence of collectives. */
static uint64_t victim_random(uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

static void *killer(void *arg)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = (long)(uintptr_t)arg};

    nanosleep(&pause, NULL);
    raise(SIGKILL);
    return NULL;
}

/* Random collectives until one fails; returns its result (from the synchronisation). */
static HcclResult random_ops(HcclComm comm, aclrtStream stream, float *a, float *b, uint32_t n)
{
    for (int i = 0; i < 100000; i++) {
        uint64_t r = next_random();
        uint64_t count = 1 + r % (COUNT_MAX / n);
        HcclResult res;
        switch ((r >> 32) % 6) {
        case 4: /* a burst of small Broadcasts (the eager ring: the root runs ahead) */
        case 5: /* the same with Reduces (the others run ahead of the root) */
            res = HCCL_SUCCESS;
            for (uint64_t k = 0; k < 1 + r % 64 && res == HCCL_SUCCESS; k++)
                res = (r >> 32) % 6 == 4
                          ? HcclBroadcast(a, 1 + (r + k) % 4096, HCCL_DATA_TYPE_FP32, (uint32_t)(r % n), comm, stream)
                          : HcclReduce(a, b, 1 + (r + k) % 4096, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                                       (uint32_t)(r % n), comm, stream);
            break;
        case 0:
            res = HcclAllReduce(a, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
            break;
        case 1:
            res = HcclAllGather(a, b, count, HCCL_DATA_TYPE_FP32, comm, stream);
            break;
        case 2:
            res = HcclBroadcast(a, count, HCCL_DATA_TYPE_FP32, (uint32_t)(r % n), comm, stream);
            break;
        default:
            res = HcclAlltoAll(a, count, HCCL_DATA_TYPE_FP32, b, count, HCCL_DATA_TYPE_FP32, comm, stream);
            break;
        }
        if (res != HCCL_SUCCESS)
            return res;
        if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) {
            HcclGetCommAsyncError(comm, &res);
            return res;
        }
    }
    return HCCL_SUCCESS;
}

/* The small-* cases: calls of the eager path (at most 240 bytes, docs/collectives.md) that differ,
 * or that differ in which path they take, after a few matching ones enqueued in the same burst. */
static HcclResult small_mismatch(const char *what, int culprit, HcclComm comm, aclrtStream stream, float *a)
{
    HcclResult res = HCCL_SUCCESS;

    for (int i = 0; i < 3 && res == HCCL_SUCCESS; i++)
        res = HcclBroadcast(a, 8, HCCL_DATA_TYPE_FP32, 0, comm, stream);
    if (res != HCCL_SUCCESS)
        return res;
    if (strcmp(what, "count") == 0) /* both eager */
        return HcclBroadcast(a, culprit ? 12 : 8, HCCL_DATA_TYPE_FP32, 0, comm, stream);
    if (strcmp(what, "root") == 0)
        return HcclBroadcast(a, 8, HCCL_DATA_TYPE_FP32, culprit ? 1 : 0, comm, stream);
    if (strcmp(what, "reduce") == 0)
        return HcclReduce(a, a + 64, culprit ? 16 : 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, comm, stream);
    if (strcmp(what, "size") == 0) /* the culprit's call is too large for the eager path */
        return HcclBroadcast(a, culprit ? 1024 : 8, HCCL_DATA_TYPE_FP32, 0, comm, stream);
    /* "coll": the culprit broadcasts (eager) while the others all-reduce (steps) */
    return culprit ? HcclBroadcast(a, 8, HCCL_DATA_TYPE_FP32, 0, comm, stream)
                   : HcclAllReduce(a, a, 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
}

/* AlltoAllV with blocks of c elements, but rank 1 (the culprit) sends rank 0 a block of 2c. */
static HcclResult alltoallv_mismatch(int culprit, uint64_t c, HcclComm comm, aclrtStream stream, float *a)
{
    uint64_t sc[8], sd[8], rc[8], rd[8], off = 0;
    uint32_t n;
    HcclResult res = HcclGetRankSize(comm, &n);

    if (res != HCCL_SUCCESS || n > 8)
        return res != HCCL_SUCCESS ? res : HCCL_E_PARA;
    for (uint32_t j = 0; j < n; j++) {
        sc[j] = culprit && j == 0 ? 2 * c : c;
        sd[j] = off;
        off += sc[j];
        rc[j] = c;
        rd[j] = (uint64_t)j * c;
    }
    return HcclAlltoAllV(a, sc, sd, HCCL_DATA_TYPE_FP32, a + COUNT_MAX / 2, rc, rd, HCCL_DATA_TYPE_FP32, comm,
                         stream);
}

/* The short paths of 48 bytes or less (one step on the hot lines): rank 1's count of 16 takes the
 * general path while the others' count of 1 takes the short one. */
static HcclResult tiny_mismatch(const char *what, int culprit, HcclComm comm, aclrtStream stream, float *a)
{
    uint64_t count = culprit ? 16 : 1;
    float *out = a + COUNT_MAX / 2;

    if (strcmp(what, "ag") == 0)
        return HcclAllGather(a, out, count, HCCL_DATA_TYPE_FP32, comm, stream);
    if (strcmp(what, "rs") == 0)
        return HcclReduceScatter(a, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
    if (strcmp(what, "a2a") == 0)
        return HcclAlltoAll(a, count, HCCL_DATA_TYPE_FP32, out, count, HCCL_DATA_TYPE_FP32, comm, stream);
    return HcclAllReduce(a, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
}

/* The mismatching call of rank 1 for the mismatch cases. */
static HcclResult mismatch(const char *what, int culprit, HcclComm comm, aclrtStream stream, float *a)
{
    uint64_t count = culprit && strcmp(what, "count") == 0 ? 2048 : 1024;
    HcclDataType t = culprit && strcmp(what, "dtype") == 0 ? HCCL_DATA_TYPE_FP16 : HCCL_DATA_TYPE_FP32;
    HcclReduceOp op = culprit && strcmp(what, "op") == 0 ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM;
    HcclResult res;

    if (strncmp(what, "small-", 6) == 0)
        res = small_mismatch(what + 6, culprit, comm, stream, a);
    else if (strncmp(what, "tiny-", 5) == 0)
        res = tiny_mismatch(what + 5, culprit, comm, stream, a);
    else if (strncmp(what, "a2av-count", 10) == 0)
        res = alltoallv_mismatch(culprit, strcmp(what, "a2av-count-large") == 0   ? 65536
                                          : strcmp(what, "a2av-count-tiny") == 0 ? 1
                                                                                 : 256,
                                 comm, stream, a);
    else if (strcmp(what, "root") == 0)
        res = HcclBroadcast(a, 1024, HCCL_DATA_TYPE_FP32, culprit ? 1 : 0, comm, stream);
    else if (culprit && strcmp(what, "coll") == 0)
        res = HcclReduce(a, a, 1024, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, comm, stream);
    else if (culprit && strcmp(what, "skip") == 0)
        res = HcclBarrier(comm, stream); /* the AllReduce before it was skipped */
    else if (strcmp(what, "ag-count") == 0)
        res = HcclAllGather(a, a + 65536, culprit ? 2048 : 1024, HCCL_DATA_TYPE_FP32, comm, stream);
    else if (strcmp(what, "rs-count") == 0)
        res = HcclReduceScatter(a, a + 65536, culprit ? 2048 : 1024, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm,
                                stream);
    else
        res = HcclAllReduce(a, a, count, t, op, comm, stream);
    if (res == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS)
        HcclGetCommAsyncError(comm, &res);
    /* A rank that only writes in a rooted collective of the eager path (its root, or the others of
     * a Reduce; up to 32 KiB) and a reader whose root matched complete it and learn of the mismatch
     * at their next op. */
    if (res == HCCL_SUCCESS) {
        res = HcclBarrier(comm, stream);
        if (res == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS)
            HcclGetCommAsyncError(comm, &res);
    }
    return res;
}

/* The deadlock and wrong-peer cases: the first op of each rank (the others' Barrier follows). */
static HcclResult blocked_p2p(const char *what, uint32_t me, HcclComm comm, aclrtStream stream, float *a)
{
    if (strcmp(what, "p2p-peer") == 0 && me == 1)
        return HcclSend(a, 1024, HCCL_DATA_TYPE_FP32, 3, comm, stream);
    if (strcmp(what, "p2p-peer") == 0 && me == 3)
        return HcclRecv(a, 1024, HCCL_DATA_TYPE_FP32, 2, comm, stream);
    if (strcmp(what, "send-send") == 0 && me < 2)
        return HcclSend(a, 1024, HCCL_DATA_TYPE_FP32, 1 - me, comm, stream);
    if (strcmp(what, "wrong-peer") == 0 && me == 0)
        return HcclSend(a, 1024, HCCL_DATA_TYPE_FP32, 2, comm, stream);
    if (strcmp(what, "wrong-peer") == 0 && me == 1)
        return HcclRecv(a, 1024, HCCL_DATA_TYPE_FP32, 0, comm, stream);
    if (strcmp(what, "wrong-peer") == 0 && me == 2)
        raise(SIGSTOP); /* busy elsewhere: run_fault.sh lets it go on once the others have reported */
    return HCCL_SUCCESS;
}

/* other-op: rank 0 sends to rank 1 and then all-reduces; rank 1 all-reduces first. */
static HcclResult other_op(uint32_t me, HcclComm comm, aclrtStream stream, float *a)
{
    HcclResult res = HCCL_SUCCESS;

    if (me == 0)
        res = HcclSend(a, 1024, HCCL_DATA_TYPE_FP32, 1, comm, stream);
    if (res == HCCL_SUCCESS)
        res = HcclAllReduce(a, a, 1024, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
    if (res == HCCL_SUCCESS && me == 1)
        res = HcclRecv(a, 1024, HCCL_DATA_TYPE_FP32, 0, comm, stream);
    if (res == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS)
        HcclGetCommAsyncError(comm, &res);
    return res;
}

static HcclResult p2p(const char *what, uint32_t me, HcclComm comm, aclrtStream stream, float *a)
{
    HcclResult res = HCCL_SUCCESS;

    if (strcmp(what, "other-op") == 0)
        return other_op(me, comm, stream, a);
    if (strcmp(what, "p2p-count-exchange") == 0) {
        if (me < 2 && (res = HcclGroupStart()) == HCCL_SUCCESS) {
            HcclResult end;
            res = HcclSend(a, 1, HCCL_DATA_TYPE_FP32, 1 - me, comm, stream);
            if (res == HCCL_SUCCESS)
                res = HcclRecv(a + 1024, me == 1 ? 2 : 1, HCCL_DATA_TYPE_FP32, 1 - me, comm, stream);
            end = HcclGroupEnd();
            res = res != HCCL_SUCCESS ? res : end;
        }
    } else if (strcmp(what, "p2p-count") != 0 && strcmp(what, "p2p-count-large") != 0) {
        res = blocked_p2p(what, me, comm, stream, a);
    } else {
        int large = strcmp(what, "p2p-count-large") == 0;
        if (me == 0)
            res = HcclSend(a, large ? 300000 : 100, HCCL_DATA_TYPE_FP32, 1, comm, stream);
        else if (me == 1)
            res = HcclRecv(a, large ? 200000 : 200, HCCL_DATA_TYPE_FP32, 0, comm, stream);
    }
    /* Everyone then meets in a barrier: the ranks not involved learn of the failure there. */
    if (res == HCCL_SUCCESS)
        res = HcclBarrier(comm, stream);
    if (res == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS)
        HcclGetCommAsyncError(comm, &res);
    return res;
}

/* The busy case's host function: the long work ahead of the AllReduce on rank 1's stream. */
static void busy_work(void *arg)
{
    struct timespec t = {.tv_sec = BUSY_S, .tv_nsec = 0};

    (void)arg;
    nanosleep(&t, NULL); /* the fault itself: a stream busy past the others' timeout */
}

/* What rank 1's second thread needs in the direct-run case. */
typedef struct {
    HcclComm side;
    aclrtStream side_stream;
    atomic_int launched; /* the main thread launched the AllReduce it then synchronises */
} dier_t;

/* The state letter of /proc/self/task/TID/stat ('R', 'S', ...), '?' if unreadable. */
static char thread_state(pid_t tid)
{
    char path[64], line[512], state = '?';
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    if ((f = fopen(path, "r")) != NULL) {
        const char *end = fgets(line, sizeof(line), f) != NULL ? strrchr(line, ')') : NULL;
        if (end != NULL && end[1] == ' ')
            state = end[2];
        fclose(f);
    }
    return state;
}

/* Poll every millisecond, for at most 10 s, until ready(arg); 0 if it never was. */
static int poll_until(int (*ready)(void *), void *arg)
{
    const struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};

    for (int i = 0; i < 10000; i++) {
        if (ready(arg))
            return 1;
        nanosleep(&ms, NULL);
    }
    return 0;
}

static int main_asleep(void *arg)
{
    dier_t *d = arg;

    /* After its launch the main thread sleeps only in the op's wait for rank 0 (HOSTCCL_PROGRESS=
     * caller: the synchronisation runs the op itself), where its engine shows it running the op. */
    return atomic_load(&d->launched) && thread_state(getpid()) == 'S';
}

/* Rank 1's second thread: once the main thread waits inside the AllReduce, tell rank 0 this
 * process's pid and die there. */
static void *die_in_op(void *arg)
{
    dier_t *d = arg;
    int32_t pid = (int32_t)getpid();

    if (!poll_until(main_asleep, d))
        printf("rank 1: the main thread never waited inside the AllReduce\n");
    else if (HcclBroadcast(&pid, 1, HCCL_DATA_TYPE_INT32, 1, d->side, d->side_stream) == HCCL_SUCCESS &&
             aclrtSynchronizeStream(d->side_stream) == ACL_SUCCESS)
        raise(SIGKILL);
    printf("rank 1: could not tell rank 0 it dies\n");
    _exit(1);
}

static int process_gone(void *arg)
{
    char path[64], line[512];
    FILE *f;
    const char *end = NULL;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)(intptr_t)arg);
    if ((f = fopen(path, "r")) == NULL)
        return 1; /* reaped */
    if (fgets(line, sizeof(line), f) != NULL)
        end = strrchr(line, ')');
    fclose(f);
    return end != NULL && (end[2] == 'Z' || end[2] == 'X'); /* dead, not reaped yet */
}

/* The direct cases (see the top); `running`: direct-run. The error rank 0 reports, HCCL_E_INTERNAL
 * with a line when its AllReduce ran at launch other than exactly when its peer was running the op,
 * or its synchronisation did not report the failure. */
static HcclResult direct(uint32_t me, HcclComm comm, aclrtStream stream, int running)
{
    const uint64_t count = 196608; /* 768 KiB: steps after the first one, staged (CMA off) */
    float *a = calloc(count, sizeof(float)), *b = calloc(count, sizeof(float));
    HcclRootInfo info;
    dier_t d = {.launched = 0};
    int32_t pid = (int32_t)getpid();
    HcclResult res = HCCL_SUCCESS, at_return;

    if (a == NULL || b == NULL)
        return HCCL_E_MEMORY;
    memset(&info, 0, sizeof(info));
    if (me == 0)
        T_CHECK_HCCL(HcclGetRootInfo(&info));
    T_CHECK_HCCL(HcclHostBroadcastRootInfo(&info));
    T_CHECK_HCCL(HcclCommInitRootInfo(2, &info, me, &d.side));
    T_CHECK_ACL(aclrtCreateStream(&d.side_stream));
    for (int i = 0; i < 3; i++) { /* blocking calls: the stream is this thread's, in the synchronous pattern */
        T_CHECK_HCCL(HcclAllReduce(a, b, 2, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
        T_CHECK_ACL(aclrtSynchronizeStream(stream));
    }
    if (me == 1 && running) {
        pthread_t t;
        T_CHECK(pthread_create(&t, NULL, die_in_op, &d) == 0);
        T_CHECK_HCCL(HcclAllReduce(a, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
        atomic_store(&d.launched, 1);
        (void)aclrtSynchronizeStream(stream); /* killed in it */
        printf("rank 1: survived the AllReduce it was to die in\n");
        _exit(1);
    }
    if (me == 1) {
        T_CHECK_HCCL(HcclBroadcast(&pid, 1, HCCL_DATA_TYPE_INT32, 1, d.side, d.side_stream));
        T_CHECK_ACL(aclrtSynchronizeStream(d.side_stream));
        T_CHECK_HCCL(HcclAllReduce(a, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
        raise(SIGKILL); /* before a worker could run the op (a backstop poll, a millisecond away) */
    }
    T_CHECK_HCCL(HcclBroadcast(&pid, 1, HCCL_DATA_TYPE_INT32, 1, d.side, d.side_stream));
    T_CHECK_ACL(aclrtSynchronizeStream(d.side_stream));
    if (!poll_until(process_gone, (void *)(intptr_t)pid)) {
        printf("rank 0: rank 1 (pid %d) did not die\n", (int)pid);
        return HCCL_E_INTERNAL;
    }
    T_CHECK_HCCL(HcclAllReduce(a, b, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    T_CHECK_HCCL(HcclGetCommAsyncError(comm, &at_return));
    if (!running && at_return != HCCL_SUCCESS) {
        /* Rank 1's worker ran its op before the SIGKILL (a backstop poll while the launching thread
         * was preempted for a millisecond or more: a loaded machine): rank 0 rightly found its peer
         * running the op and ran at launch, as in direct-run. Its diagnosis says so; anything else
         * is the failure this case is for. */
        char running_line[64];
        snprintf(running_line, sizeof(running_line), "rank 1 (pid %d): in allreduce", (int)pid);
        if (strstr(HcclHostGetRecentErrMsg(), running_line) != NULL) {
            printf("rank 0: rank 1's worker had begun the AllReduce before it died: checked as direct-run\n");
            running = 1;
        }
    }
    if (aclrtSynchronizeStream(stream) == ACL_SUCCESS) { /* the op's buffers are free to go after it */
        printf("rank 0: the AllReduce whose peer died succeeded\n");
        res = HCCL_E_INTERNAL;
    } else if ((at_return != HCCL_SUCCESS) != running) {
        printf("rank 0: the AllReduce %s at launch, its peer having %s it\n",
               running ? "did not run" : "ran (and failed)", running ? "died running" : "only started");
        res = HCCL_E_INTERNAL;
    } else if (strstr(HcclHostGetRecentErrMsg(), "allreduce") == NULL) {
        printf("rank 0: the synchronising thread's last error does not name the AllReduce: %s\n",
               HcclHostGetRecentErrMsg());
        res = HCCL_E_INTERNAL;
    } else {
        T_CHECK_HCCL(HcclGetCommAsyncError(comm, &res));
    }
    (void)HcclCommDestroy(d.side); /* its peer is gone: whatever it says */
    T_CHECK_ACL(aclrtDestroyStream(d.side_stream));
    free(a);
    free(b);
    return res;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    t_world_t world;
    float *a, *b;
    HcclResult res = HCCL_SUCCESS;
    uint32_t me, n, victim;
    int plain = strcmp(what, "kill-malloc") == 0; /* the buffers are malloc's, not aclrtMalloc's */
    int fds, tasks, maps;
    struct timespec t0, t1, t2;

    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
    rng = seed * 2654435761u + 1;
    T_CHECK_ACL(aclInit(NULL));
    T_CHECK_HCCL(HcclHostGetLaunchInfo(&world.launch));
    T_CHECK_ACL(aclrtSetDevice((int32_t)world.launch.localRank));
    if (plain) {
        a = malloc(COUNT_MAX * sizeof(float));
        b = malloc(COUNT_MAX * sizeof(float));
        T_CHECK(a != NULL && b != NULL);
    } else {
        T_CHECK_ACL(aclrtMalloc((void **)&a, COUNT_MAX * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
        T_CHECK_ACL(aclrtMalloc((void **)&b, COUNT_MAX * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    }
    memset(a, 0, COUNT_MAX * sizeof(float));
    {
        /* Start whatever threads the runtimes start lazily (a sanitizer's background thread) before
         * taking the baseline: only what the communicator leaves behind should count. */
        aclrtStream warm;
        T_CHECK_ACL(aclrtCreateStream(&warm));
        T_CHECK_ACL(aclrtDestroyStream(warm));
    }
    fds = count_entries("/proc/self/fd");
    tasks = count_entries("/proc/self/task");
    maps = count_maps("memfd:hostccl");
    if (strncmp(what, "direct", 6) == 0) {
        setenv("HOSTCCL_CMA", "0", 1);           /* the large AllReduce goes in staged steps */
        setenv("HOSTCCL_PROGRESS", "caller", 1); /* the worker runs nothing unless nobody does */
    }
    t_world_init(&world);
    me = world.launch.rank;
    n = world.launch.size;
    victim = 1 + (uint32_t)(victim_random(seed) % (n - 1));

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (strcmp(what, "kill") == 0 || plain) {
        if (me == victim) {
            pthread_t t;
            pthread_create(&t, NULL, killer, (void *)(uintptr_t)(victim_random(seed + 1) % 300000000u));
        }
        res = random_ops(world.comm, world.stream, a, b, n);
    } else if (strcmp(what, "direct") == 0 || strcmp(what, "direct-run") == 0) {
        res = direct(me, world.comm, world.stream, strcmp(what, "direct-run") == 0);
    } else if (strcmp(what, "stop") == 0) {
        if (me == 1)
            raise(SIGSTOP);
        res = mismatch("none", 0, world.comm, world.stream, a);
    } else if (strcmp(what, "busy") == 0) {
        if (me == 1)
            T_CHECK_ACL(aclrtLaunchHostFunc(world.stream, busy_work, NULL));
        res = mismatch("none", 0, world.comm, world.stream, a);
    } else if (strncmp(what, "p2p", 3) == 0 || strcmp(what, "send-send") == 0 || strcmp(what, "other-op") == 0 ||
               strcmp(what, "wrong-peer") == 0) {
        res = p2p(what, me, world.comm, world.stream, a);
    } else {
        res = mismatch(what, me == 1, world.comm, world.stream, a);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    T_CHECK_HCCL(HcclCommDestroy(world.comm));
    clock_gettime(CLOCK_MONOTONIC, &t2);
    T_CHECK_ACL(aclrtDestroyStream(world.stream));
    if (plain) {
        free(a);
        free(b);
    } else {
        T_CHECK_ACL(aclrtFree(a));
        T_CHECK_ACL(aclrtFree(b));
    }
    /* The stream's worker thread and descriptors are gone with it; nothing of the comm remains. */
    if (count_entries("/proc/self/fd") > fds || count_entries("/proc/self/task") > tasks)
        printf("rank %u: LEAK fds %d -> %d, threads %d -> %d\n", me, fds, count_entries("/proc/self/fd"), tasks,
               count_entries("/proc/self/task"));
    if (count_maps("memfd:hostccl") != maps)
        printf("rank %u: LEAK shared-memory mappings %d -> %d (the segment or a peer's arena is still mapped)\n", me,
               maps, count_maps("memfd:hostccl"));
    printf("rank %u: SURVIVED %s after %.2f s\n", me, t_result_name(res), seconds(&t0, &t1));
    printf("rank %u: destroy took %.3f s\n", me, seconds(&t1, &t2));
    T_CHECK_ACL(aclFinalize());
    return 0;
}
