/*
 * The measurements, one pair of ranks at a time so that no two pairs compete for CPUs or memory
 * bandwidth: for pair (a, b), in the order (0,1), (0,2), ..., (1,2), ...
 *
 *   1. both members: a bounded probe, one 8-byte ping-pong on their two-rank sub-communicator;
 *   2. every rank: an AllReduce(MAX) on the world communicator of "the probe failed" (this is how
 *      both members, and everyone else, learn whether the pair is DOWN);
 *   3. both members, unless DOWN: latency (median of lat_iters ping-pongs, halved), then bandwidth
 *      a -> b and b -> a (bw_iters messages of bw_bytes, best of three trials);
 *   4. every rank: a barrier on the world communicator, so that the next pair starts only now.
 *
 * A probe that gets no answer within the timeout leaves its operation queued on the pair's stream:
 * that stream and communicator are abandoned (never synchronised or destroyed again) and the
 * doctor skips its teardown at exit. The world communicator's steps are bounded by the same timeout
 * times ten; a rank that misses one ends the run with what was measured so far.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor.h"

#define BW_TRIALS 3
#define WARMUP 8

typedef struct {
    HcclComm *comm;       /* [size]: this rank's communicator with each peer, made on first use */
    aclrtStream stream;   /* for the pair communicators; replaced when one is abandoned */
    uint8_t *small, *big;
} pair_ctx_t;

static pair_ctx_t ctx;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A world-communicator step, bounded: 0 on success. */
static int world_sync(doctor_t *doc, const char *what)
{
    aclError err = aclrtSynchronizeStreamWithTimeout(doc->stream, (int32_t)(doc->timeout_s * 10000));

    if (err == ACL_SUCCESS)
        return 0;
    fprintf(stderr, "hccl-doctor: rank %u: %s on the world communicator %s: some rank is not responding\n",
            doc->rank, what, err == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ? "timed out" : "failed");
    doc->abandoned = 1;
    return -1;
}

int doc_gather(doctor_t *doc, void *mine, void *all, uint64_t bytes)
{
    uint8_t *send = NULL, *recv = NULL;
    HcclResult res;
    int rc;

    if (aclrtMalloc((void **)&send, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv, bytes * doc->size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        fprintf(stderr, "hccl-doctor: out of memory\n");
        return -1;
    }
    memcpy(send, mine, bytes);
    res = HcclAllGather(send, recv, bytes, HCCL_DATA_TYPE_UINT8, doc->world, doc->stream);
    rc = res == HCCL_SUCCESS ? world_sync(doc, "an exchange between all ranks") : -1;
    if (res != HCCL_SUCCESS)
        fprintf(stderr, "hccl-doctor: rank %u: an AllGather over all ranks failed: %s%s\n", doc->rank,
                HcclGetErrorString(res), res == HCCL_E_NOT_SUPPORT ? " (ranks on several hosts need the "
                                                                   "inter-host engine, which hostccl does not have yet)"
                                                                 : "");
    if (rc == 0)
        memcpy(all, recv, bytes * doc->size);
    (void)aclrtFree(send);
    (void)aclrtFree(recv);
    return rc;
}

static int pair_comm(doctor_t *doc, uint32_t a, uint32_t b, HcclComm *comm_p)
{
    uint32_t ids[2] = {a, b}, peer = doc->rank == a ? b : a;
    HcclCommConfig cfg;
    HcclResult res;

    if (ctx.comm[peer] != NULL) {
        *comm_p = ctx.comm[peer];
        return 0;
    }
    HcclCommConfigInit(&cfg);
    cfg.hcclBufferSize = 16; /* MB: plenty for two ranks' messages, and (n-1) of them per rank */
    res = HcclCreateSubCommConfig(&doc->world, 2, ids, 1 + (uint64_t)a * doc->size + b, doc->rank == a ? 0 : 1,
                                  &cfg, &ctx.comm[peer]);
    if (res != HCCL_SUCCESS) {
        ctx.comm[peer] = NULL;
        return -1;
    }
    *comm_p = ctx.comm[peer];
    return 0;
}

/* Send then receive (first) or receive then send, 8 bytes each way. */
static HcclResult ping(HcclComm comm, int first)
{
    HcclResult res;

    if (first) {
        res = HcclSend(ctx.small, 1, HCCL_DATA_TYPE_UINT64, 1, comm, ctx.stream);
        return res != HCCL_SUCCESS ? res : HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_UINT64, 1, comm, ctx.stream);
    }
    res = HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_UINT64, 0, comm, ctx.stream);
    return res != HCCL_SUCCESS ? res : HcclSend(ctx.small, 1, HCCL_DATA_TYPE_UINT64, 0, comm, ctx.stream);
}

/* Step 1: 0 if the peer answered within the timeout; otherwise why into `why`. */
static int probe(doctor_t *doc, uint32_t a, uint32_t b, HcclComm *comm_p, char *why, size_t len)
{
    aclError err;
    HcclResult async = HCCL_SUCCESS;

    if (pair_comm(doc, a, b, comm_p) != 0) {
        snprintf(why, len, "could not create the pair's communicator");
        return -1;
    }
    if (ping(*comm_p, doc->rank == a) != HCCL_SUCCESS) {
        snprintf(why, len, "the probe could not be issued");
        return -1;
    }
    err = aclrtSynchronizeStreamWithTimeout(ctx.stream, (int32_t)(doc->timeout_s * 1000));
    if (err == ACL_SUCCESS)
        return 0;
    if (err == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        snprintf(why, len, "no answer within %.1f s", doc->timeout_s);
        /* The probe is still queued: leave that stream and communicator alone from now on. */
        ctx.comm[doc->rank == a ? b : a] = NULL;
        doc->abandoned = 1;
        if (aclrtCreateStream(&ctx.stream) != ACL_SUCCESS)
            ctx.stream = NULL;
        return -1;
    }
    (void)HcclGetCommAsyncError(*comm_p, &async);
    snprintf(why, len, "the probe failed: %s", HcclGetErrorString(async != HCCL_SUCCESS ? async : HCCL_E_INTERNAL));
    ctx.comm[doc->rank == a ? b : a] = NULL;
    return -1;
}

static double latency_us(const doctor_t *doc, HcclComm comm, int first)
{
    double *rtt = calloc(doc->lat_iters, sizeof(double)), med;

    for (uint32_t i = 0; i < WARMUP + doc->lat_iters; i++) {
        double t0 = now_s();
        (void)ping(comm, first);
        (void)aclrtSynchronizeStream(ctx.stream);
        if (i >= WARMUP && rtt != NULL)
            rtt[i - WARMUP] = now_s() - t0;
    }
    med = rtt != NULL ? doc_median(rtt, doc->lat_iters) : 0.0;
    free(rtt);
    return med * 0.5e6;
}

/* bw_iters messages one way, then an 8-byte acknowledgement; GB/s as the sender saw it. peer is
 * the other rank's index in the pair communicator. */
static double bandwidth(const doctor_t *doc, HcclComm comm, int sender, uint32_t peer)
{
    double best = 0.0;

    for (int t = 0; t < BW_TRIALS; t++) {
        double t0 = now_s(), gbps;
        for (uint32_t i = 0; i < doc->bw_iters; i++) {
            if (sender)
                (void)HcclSend(ctx.big, doc->bw_bytes, HCCL_DATA_TYPE_UINT8, peer, comm, ctx.stream);
            else
                (void)HcclRecv(ctx.big, doc->bw_bytes, HCCL_DATA_TYPE_UINT8, peer, comm, ctx.stream);
        }
        if (sender)
            (void)HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_UINT64, peer, comm, ctx.stream);
        else
            (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_UINT64, peer, comm, ctx.stream);
        (void)aclrtSynchronizeStream(ctx.stream);
        gbps = (double)doc->bw_bytes * doc->bw_iters / (now_s() - t0) / 1e9;
        best = gbps > best ? gbps : best;
    }
    return best;
}

/* Step 3 for the pair's two ranks. In the pair communicator a is rank 0 and b rank 1. */
static void measure(doctor_t *doc, uint32_t a, uint32_t b, HcclComm comm)
{
    doc_pair_t *p = doc_pair(doc, a, b);
    int is_a = doc->rank == a;
    double theirs;

    p->lat_us = latency_us(doc, comm, is_a);
    /* a -> b: with the pair communicator, "rank 1" is b. Then the roles swap. */
    if (is_a) {
        p->bw_ab = bandwidth(doc, comm, 1, 1);
        (void)bandwidth(doc, comm, 0, 1);
        (void)HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_FP64, 1, comm, ctx.stream);
        (void)aclrtSynchronizeStream(ctx.stream);
        memcpy(&theirs, ctx.small, sizeof(theirs));
        p->bw_ba = theirs;
    } else {
        (void)bandwidth(doc, comm, 0, 0);
        theirs = bandwidth(doc, comm, 1, 0);
        memcpy(ctx.small, &theirs, sizeof(theirs));
        (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_FP64, 0, comm, ctx.stream);
        (void)aclrtSynchronizeStream(ctx.stream);
    }
}

static int ctx_init(doctor_t *doc)
{
    if (ctx.comm != NULL)
        return 0;
    ctx.comm = calloc(doc->size, sizeof(HcclComm));
    if (ctx.comm == NULL || aclrtCreateStream(&ctx.stream) != ACL_SUCCESS ||
        aclrtMalloc((void **)&ctx.small, 64, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
        return -1;
    if (doc->plain)
        ctx.big = malloc(doc->bw_bytes);
    else if (aclrtMalloc((void **)&ctx.big, doc->bw_bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
        ctx.big = NULL;
    if (ctx.big == NULL)
        return -1;
    memset(ctx.big, 0x5a, doc->bw_bytes);
    return 0;
}

/* One pair, steps 1-4; every rank calls it for every pair in the same order. */
static int one_pair(doctor_t *doc, uint32_t a, uint32_t b, int *down_buf)
{
    doc_pair_t *p = doc_pair(doc, a, b);
    int member = doc->rank == a || doc->rank == b, failed = 0;
    HcclComm comm = NULL;
    char why[96] = "";

    if (member && ctx.stream != NULL)
        failed = probe(doc, a, b, &comm, why, sizeof(why)) != 0;
    else if (member)
        failed = 1;
    *down_buf = failed;
    if (HcclAllReduce(down_buf, down_buf, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, doc->world, doc->stream) !=
            HCCL_SUCCESS ||
        world_sync(doc, "the probe verdict") != 0)
        return -1;
    p->measured = 1;
    p->down = *down_buf != 0;
    if (doc->rank == a && p->down)
        snprintf(p->why, sizeof(p->why), "%s", why[0] != '\0' ? why : "rank b got no answer from a");
    if (member && !p->down)
        measure(doc, a, b, comm);
    if (HcclBarrier(doc->world, doc->stream) != HCCL_SUCCESS || world_sync(doc, "the barrier after a pair") != 0)
        return -1;
    return 0;
}

/* Steps 1-4 for every pair (a < b) with which[a * size + b] set; retest marks them as measured twice. */
int doc_measure_pairs(doctor_t *doc, const uint8_t *which, int retest)
{
    int *down_buf = NULL;
    int rc = 0;

    if (ctx_init(doc) != 0 || aclrtMalloc((void **)&down_buf, 64, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        fprintf(stderr, "hccl-doctor: rank %u: cannot set up the measurement (out of memory)\n", doc->rank);
        return -1;
    }
    for (uint32_t a = 0; a < doc->size && rc == 0; a++)
        for (uint32_t b = a + 1; b < doc->size && rc == 0; b++) {
            doc_pair_t keep = *doc_pair(doc, a, b);
            if (!which[(uint64_t)a * doc->size + b])
                continue;
            rc = one_pair(doc, a, b, down_buf);
            if (retest && doc->rank == a) {
                /* A second look: the better of the two counts (noise only ever slows a link down). */
                doc_pair_t *p = doc_pair(doc, a, b);
                p->retested = 1;
                if (!p->down && !keep.down) {
                    p->lat_us = p->lat_us < keep.lat_us ? p->lat_us : keep.lat_us;
                    p->bw_ab = p->bw_ab > keep.bw_ab ? p->bw_ab : keep.bw_ab;
                    p->bw_ba = p->bw_ba > keep.bw_ba ? p->bw_ba : keep.bw_ba;
                }
            }
        }
    (void)aclrtFree(down_buf);
    return rc;
}

static double realtime_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One timestamp exchange between rank 0 and k; rank 0 gets k's clock reading and the round trip. */
static void clock_exchange(doctor_t *doc, HcclComm comm, double *offset_p, double *rtt_p)
{
    double t0 = realtime_s(), theirs, t1;

    if (doc->rank != 0) {
        (void)HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_FP64, 0, comm, ctx.stream);
        (void)aclrtSynchronizeStream(ctx.stream);
        theirs = realtime_s();
        memcpy(ctx.small, &theirs, sizeof(theirs));
        (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_FP64, 0, comm, ctx.stream);
        (void)aclrtSynchronizeStream(ctx.stream);
        return;
    }
    (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_FP64, 1, comm, ctx.stream);
    (void)HcclRecv(ctx.small + 8, 1, HCCL_DATA_TYPE_FP64, 1, comm, ctx.stream);
    (void)aclrtSynchronizeStream(ctx.stream);
    t1 = realtime_s();
    memcpy(&theirs, ctx.small + 8, sizeof(theirs));
    *offset_p = theirs - 0.5 * (t0 + t1);
    *rtt_p = t1 - t0;
}

/* Is k the lowest rank of a host other than rank 0's? */
static int first_of_other_host(const doctor_t *doc, uint32_t k)
{
    if (strcmp(doc->infos[k].host_id, doc->infos[0].host_id) == 0)
        return 0;
    for (uint32_t j = 1; j < k; j++)
        if (strcmp(doc->infos[j].host_id, doc->infos[k].host_id) == 0)
            return 0;
    return 1;
}

/*
 * Clock offsets: for each rank k that needs one (the first rank of every other host, or every rank
 * with --clock-all), rank 0 and k exchange timestamps 16 times over their pair communicator; the
 * exchange with the shortest round trip gives offset = t_k - (t_send + t_recv) / 2, good to half
 * that round trip (NTP's estimate). Pairs found DOWN are skipped.
 */
int doc_measure_clocks(doctor_t *doc)
{
    for (uint32_t k = 1; k < doc->size; k++) {
        doc_pair_t *p = doc_pair(doc, 0, k);
        int wanted = doc->clock_all || first_of_other_host(doc, k);
        double best_rtt = 1e9, offset = 0.0;
        HcclComm comm = ctx.comm != NULL ? ctx.comm[doc->rank == 0 ? k : 0] : NULL;

        if (!wanted || p->down || !(doc->rank == 0 || doc->rank == k) || comm == NULL)
            continue;
        for (int i = 0; i < 16; i++) {
            double off = 0.0, rtt = 1e9;
            clock_exchange(doc, comm, &off, &rtt);
            if (rtt < best_rtt) {
                best_rtt = rtt;
                offset = off;
            }
        }
        if (doc->rank == 0) {
            p->clock_offset_us = offset * 1e6;
            p->clock_measured = 1;
        }
    }
    return 0;
}

/* The pair communicators and buffers; nothing is touched once something was abandoned. */
void doc_measure_fini(doctor_t *doc)
{
    if (doc->abandoned || ctx.comm == NULL)
        return;
    for (uint32_t i = 0; i < doc->size; i++)
        if (ctx.comm[i] != NULL)
            (void)HcclCommDestroy(ctx.comm[i]);
    (void)aclrtDestroyStream(ctx.stream);
    (void)aclrtFree(ctx.small);
    if (doc->plain)
        free(ctx.big);
    else
        (void)aclrtFree(ctx.big);
    free(ctx.comm);
    memset(&ctx, 0, sizeof(ctx));
}
