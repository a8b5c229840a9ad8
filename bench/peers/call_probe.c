/*
 * The cost of one blocking call: every rank calls one collective ITERS times, each followed by
 * aclrtSynchronizeStream (as a blocking MPI call would be), and prints its microseconds per call,
 * for 3 rounds. The probe the per-call measurements in bench/results/ use (A/B of two builds: run it
 * alternately with LD_LIBRARY_PATH pointing at each build's libraries). Plain malloc buffers.
 *
 *   hccl-run -n 2 call_probe COLL [ITERS] [BYTES] [colocate|touch|every=K]
 *
 * COLL: ar (AllReduce), ag (AllGather), bc (Broadcast), rd (Reduce), sc (Scatter), aa (AlltoAll),
 * rs (ReduceScatter), av (AlltoAllV, equal blocks), gv (AllGatherV, equal blocks), sr (rank 0 sends, rank 1 receives), sx (a grouped exchange of each pair), bx (the
 * same exchange as one HcclBatchSendRecv), sxq (ranks 0 and 1 exchange while every other rank waits
 * in a receive from rank 0, which it sends after its rounds: a pair talking beside idle ranks),
 * pp (a pipeline: rank r receives from r - 1, then sends to r + 1, each synchronised; rank 0 only
 * sends, the last rank only receives), ba (Barrier), pa (pipelined AllReduce: each call launches the
 * next AllReduce into one of two outputs and records its event, then waits for the previous call's
 * event instead of synchronising the stream: overlap.py's pipelined pattern without the compute).
 * BYTES: fp32 elements times 4 per rank and call (AllGather(V), Scatter, ReduceScatter: the block
 * of one rank; AlltoAll(V): the whole send buffer).
 * `colocate` (unbound ranks: hccl-run --bind-to none): before each of 6 rounds every rank moves to
 * the first CPU of its mask and gets its mask back, so that the ranks start the round on one CPU
 * and the library has to spread them (docs/performance.md, "Ranks that share a CPU"). `touch`:
 * before each call every rank writes every cache line of both its buffers and after it reads them,
 * as a program does with what it sends and receives (the loops are timed too). `every=K`: the stream
 * is synchronised after every K-th call only (and after the last): a program that launches a few
 * collectives per synchronisation, between blocking calls (K = 1) and the perf tools' bursts.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

typedef struct {
    HcclComm comm;
    aclrtStream stream;
    uint32_t rank, size;
    float *a, *b;
    uint64_t n; /* fp32 elements */
    uint64_t *counts, *displs; /* per rank: AlltoAllV's blocks (n / size), AllGatherV's (n) */
    uint64_t *gv_counts, *gv_displs;
    aclrtEvent ev[2]; /* pa: the two AllReduces in flight */
    long call;        /* pa: calls so far in the round */
} probe_t;

/* `touch`: dirty every line of both buffers before a call, read them after. */
static void write_buffers(const probe_t *p)
{
    volatile float *a = p->a, *b = p->b;

    for (uint64_t i = 0; i < p->n * p->size; i += 16) {
        a[i] = a[i];
        b[i] = b[i];
    }
}

static float read_buffers(const probe_t *p)
{
    const volatile float *a = p->a, *b = p->b;
    float sum = 0.0f;

    for (uint64_t i = 0; i < p->n * p->size; i += 16)
        sum += a[i] + b[i];
    return sum;
}

static HcclResult exchange(const probe_t *p)
{
    uint32_t peer = p->rank ^ 1u;
    HcclResult res, end;

    if (peer >= p->size)
        return HCCL_SUCCESS;
    res = HcclGroupStart();
    if (res != HCCL_SUCCESS)
        return res;
    res = HcclSend(p->a, p->n, HCCL_DATA_TYPE_FP32, peer, p->comm, p->stream);
    if (res == HCCL_SUCCESS)
        res = HcclRecv(p->b, p->n, HCCL_DATA_TYPE_FP32, peer, p->comm, p->stream);
    end = HcclGroupEnd();
    return res != HCCL_SUCCESS ? res : end;
}

/* The same exchange as one HcclBatchSendRecv (no group). */
static HcclResult batch_exchange(const probe_t *p)
{
    uint32_t peer = p->rank ^ 1u;
    HcclSendRecvItem items[2] = {
        {.sendRecvType = HCCL_SEND, .buf = p->a, .count = p->n, .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = peer},
        {.sendRecvType = HCCL_RECV, .buf = p->b, .count = p->n, .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = peer},
    };

    if (peer >= p->size)
        return HCCL_SUCCESS;
    return HcclBatchSendRecv(items, 2, p->comm, p->stream);
}

/* One pipeline step of this rank: receive from the previous stage, then send to the next. */
static HcclResult pipeline_stage(const probe_t *p)
{
    HcclResult res = HCCL_SUCCESS;

    if (p->rank > 0) {
        res = HcclRecv(p->b, p->n, HCCL_DATA_TYPE_FP32, p->rank - 1, p->comm, p->stream);
        if (res == HCCL_SUCCESS && aclrtSynchronizeStream(p->stream) != ACL_SUCCESS)
            res = HCCL_E_INTERNAL;
    }
    if (res == HCCL_SUCCESS && p->rank + 1 < p->size)
        res = HcclSend(p->a, p->n, HCCL_DATA_TYPE_FP32, p->rank + 1, p->comm, p->stream);
    return res;
}

/* pa: launch call i's AllReduce into output i % 2, record its event, wait for call i - 1's. */
static HcclResult pipelined_ar(probe_t *p)
{
    int slot = (int)(p->call % 2);

    if (HcclAllReduce(p->a, slot ? p->b + p->n : p->b, p->n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, p->comm,
                      p->stream) != HCCL_SUCCESS ||
        aclrtRecordEvent(p->ev[slot], p->stream) != ACL_SUCCESS)
        return HCCL_E_INTERNAL;
    if (p->call++ > 0 && aclrtSynchronizeEvent(p->ev[!slot]) != ACL_SUCCESS)
        return HCCL_E_INTERNAL;
    return HCCL_SUCCESS;
}

static HcclResult call_ar(const probe_t *p)
{
    return HcclAllReduce(p->a, p->b, p->n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, p->comm, p->stream);
}

static HcclResult call_ag(const probe_t *p)
{
    return HcclAllGather(p->a, p->b, p->n, HCCL_DATA_TYPE_FP32, p->comm, p->stream);
}

static HcclResult call_bc(const probe_t *p)
{
    return HcclBroadcast(p->a, p->n, HCCL_DATA_TYPE_FP32, 0, p->comm, p->stream);
}

static HcclResult call_rd(const probe_t *p)
{
    return HcclReduce(p->a, p->b, p->n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, p->comm, p->stream);
}

static HcclResult call_sc(const probe_t *p)
{
    return HcclScatter(p->a, p->b, p->n, HCCL_DATA_TYPE_FP32, 0, p->comm, p->stream);
}

static HcclResult call_rs(const probe_t *p)
{
    return HcclReduceScatter(p->a, p->b, p->n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, p->comm, p->stream);
}

static HcclResult call_aa(const probe_t *p)
{
    const HcclDataType f32 = HCCL_DATA_TYPE_FP32;

    return HcclAlltoAll(p->a, p->n / p->size, f32, p->b, p->n / p->size, f32, p->comm, p->stream);
}

static HcclResult call_av(const probe_t *p)
{
    return HcclAlltoAllV(p->a, p->counts, p->displs, HCCL_DATA_TYPE_FP32, p->b, p->counts, p->displs,
                         HCCL_DATA_TYPE_FP32, p->comm, p->stream);
}

static HcclResult call_gv(const probe_t *p)
{
    return HcclAllGatherV(p->a, p->n, p->b, p->gv_counts, p->gv_displs, HCCL_DATA_TYPE_FP32, p->comm, p->stream);
}

static HcclResult call_sr(const probe_t *p)
{
    if (p->rank == 0)
        return HcclSend(p->a, p->n, HCCL_DATA_TYPE_FP32, 1, p->comm, p->stream);
    return p->rank == 1 ? HcclRecv(p->a, p->n, HCCL_DATA_TYPE_FP32, 0, p->comm, p->stream) : HCCL_SUCCESS;
}

static HcclResult call_ba(const probe_t *p)
{
    return HcclBarrier(p->comm, p->stream);
}

typedef HcclResult (*call_fn_t)(const probe_t *p);

/* COLL resolved once, before the timed loop, so that the probe times the library only. */
static const struct {
    const char *name;
    call_fn_t fn;
} calls[] = {
    {"ar", call_ar},     {"ag", call_ag},       {"bc", call_bc},        {"rd", call_rd},
    {"sc", call_sc},     {"rs", call_rs},       {"aa", call_aa},        {"av", call_av},
    {"gv", call_gv},     {"sr", call_sr},
    {"sx", exchange},    {"sxq", exchange},     {"bx", batch_exchange}, {"pp", pipeline_stage},
    {"ba", call_ba},
};

static call_fn_t find_call(const char *coll)
{
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        if (strcmp(coll, calls[i].name) == 0)
            return calls[i].fn;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *coll = argc > 1 ? argv[1] : "ar";
    long iters = argc > 2 ? atol(argv[2]) : 100000;
    uint64_t bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 8;
    int colocate = argc > 4 && strcmp(argv[4], "colocate") == 0, rounds = colocate ? 6 : 3;
    int touch = argc > 4 && strcmp(argv[4], "touch") == 0;
    long every = argc > 4 && strncmp(argv[4], "every=", 6) == 0 ? atol(argv[4] + 6) : 1;
    volatile float sink = 0.0f;
    HcclHostLaunchInfo launch;
    HcclRootInfo root;
    cpu_set_t mask, first;
    call_fn_t one_call = find_call(coll);
    int pipelined = strcmp(coll, "pa") == 0;
    probe_t p = {0};

    if (iters <= 0 || every <= 0 || (one_call == NULL && !pipelined) || aclInit(NULL) != ACL_SUCCESS ||
        HcclHostGetLaunchInfo(&launch) != HCCL_SUCCESS || aclrtSetDevice((int32_t)launch.localRank) != ACL_SUCCESS ||
        aclrtCreateStream(&p.stream) != ACL_SUCCESS || aclrtCreateEvent(&p.ev[0]) != ACL_SUCCESS ||
        aclrtCreateEvent(&p.ev[1]) != ACL_SUCCESS) {
        fprintf(stderr, "usage: hccl-run -n N call_probe ar|ag|bc|rd|sc|rs|aa|av|gv|sr|sx|sxq|bx|pp|ba|pa "
                        "[ITERS] [BYTES] [colocate|touch|every=K]\n");
        return 2;
    }
    if ((launch.rank == 0 && HcclGetRootInfo(&root) != HCCL_SUCCESS) || HcclHostBroadcastRootInfo(&root) != HCCL_SUCCESS ||
        HcclCommInitRootInfo(launch.size, &root, launch.rank, &p.comm) != HCCL_SUCCESS) {
        fprintf(stderr, "call_probe: rank %u: communicator init failed\n", launch.rank);
        return 1;
    }
    p.rank = launch.rank;
    p.size = launch.size;
    p.n = bytes / 4 ? bytes / 4 : 1;
    p.a = malloc((p.n * p.size + 16) * sizeof(float));
    p.b = malloc((p.n * p.size + 16) * sizeof(float));
    p.counts = calloc(4 * (size_t)p.size, sizeof(uint64_t));
    if (p.a == NULL || p.b == NULL || p.counts == NULL)
        return 1;
    p.displs = p.counts + p.size;
    p.gv_counts = p.displs + p.size;
    p.gv_displs = p.gv_counts + p.size;
    for (uint32_t r = 0; r < p.size; r++) {
        p.counts[r] = p.n / p.size;
        p.displs[r] = r * (p.n / p.size);
        p.gv_counts[r] = p.n;
        p.gv_displs[r] = r * p.n;
    }
    /* Written once, as a program's buffers are: calloc's untouched pages all read the one zero page,
     * which made a large untouched send buffer cost nothing to read. */
    for (uint64_t i = 0; i < p.n * p.size + 16; i++)
        p.a[i] = p.b[i] = (float)(i % 251) * 0.25f;
    CPU_ZERO(&first);
    if (colocate && sched_getaffinity(0, sizeof(mask), &mask) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &mask)) {
                CPU_SET(cpu, &first);
                break;
            }
    } else {
        colocate = 0;
    }
    if (strcmp(coll, "sxq") == 0 && p.rank >= 2) {
        /* Idle until rank 0 is done: one receive, asleep in the progress loop. */
        if (HcclRecv(p.b, 1, HCCL_DATA_TYPE_FP32, 0, p.comm, p.stream) != HCCL_SUCCESS ||
            aclrtSynchronizeStream(p.stream) != ACL_SUCCESS)
            return 1;
        rounds = 0;
    }
    for (int round = 0; round < rounds; round++) {
        double t0;
        if (colocate) {
            if (HcclBarrier(p.comm, p.stream) != HCCL_SUCCESS || aclrtSynchronizeStream(p.stream) != ACL_SUCCESS)
                return 1;
            (void)sched_setaffinity(0, sizeof(first), &first); /* every rank on one CPU, */
            (void)sched_setaffinity(0, sizeof(mask), &mask);   /* free to move again */
        }
        t0 = now_us();
        for (long i = 0; i < iters; i++) {
            if (touch)
                write_buffers(&p);
            int sync = (i + 1) % every == 0 || i + 1 == iters;
            if (pipelined ? pipelined_ar(&p) != HCCL_SUCCESS
                          : one_call(&p) != HCCL_SUCCESS || (sync && aclrtSynchronizeStream(p.stream) != ACL_SUCCESS)) {
                fprintf(stderr, "call_probe: rank %u: %s failed at call %ld of round %d\n", p.rank, coll, i, round);
                return 1;
            }
            if (touch)
                sink += read_buffers(&p);
        }
        if (pipelined && aclrtSynchronizeStream(p.stream) != ACL_SUCCESS)
            return 1;
        p.call = 0;
        printf("r%u %s %lluB: %.3f us/call\n", p.rank, coll, (unsigned long long)bytes, (now_us() - t0) / (double)iters);
    }
    for (uint32_t r = 2; strcmp(coll, "sxq") == 0 && p.rank == 0 && r < p.size; r++)
        if (HcclSend(p.a, 1, HCCL_DATA_TYPE_FP32, r, p.comm, p.stream) != HCCL_SUCCESS ||
            aclrtSynchronizeStream(p.stream) != ACL_SUCCESS)
            return 1;
    (void)sink;
    (void)HcclCommDestroy(p.comm);
    free(p.a);
    free(p.b);
    return 0;
}
