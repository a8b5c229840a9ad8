/*
 * The measurements, one pair of ranks at a time so that no two pairs compete for CPUs, memory
 * bandwidth or a network link: for pair (a, b), in the order (0,1), (0,2), ..., (1,2), ...
 *
 *   1. both members: create their two-rank sub-communicator (bounded by create_s, through
 *      HCCL_CONNECT_TIMEOUT), then a bounded probe, one 8-byte ping-pong (timeout_s);
 *   2. every rank: an AllReduce(MAX) on the world communicator of "the probe failed" (this is how
 *      both members, and everyone else, learn whether the pair is DOWN);
 *   3. both members, unless DOWN: latency (median of up to lat_iters ping-pongs, halved), then
 *      bandwidth a -> b and b -> a (best of up to three trials of up to bw_iters messages);
 *   4. every rank: a barrier on the world communicator, so that the next pair starts only now.
 *
 * Measurements are bounded in time as well as in count, so that a slow link costs about a second
 * and not minutes: the latency loop stops after LAT_BUDGET_S worth of round trips (at least
 * LAT_MIN), and each bandwidth direction starts with one message and runs more trials only while
 * they fit BW_BUDGET_S. Every step of a pair is bounded by op_s (the pair communicators'
 * HCCL_EXEC_TIMEOUT): a pair that stops answering in the middle is DOWN too.
 *
 * A probe or step that gets no answer in time leaves its operation queued on the pair's stream:
 * that stream and communicator are abandoned (never synchronised or destroyed again) and the
 * doctor skips its teardown at exit. The world communicator's steps are bounded by world_s; a rank
 * that misses one ends the run with what was measured so far, and says so.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor.h"

#define BW_TRIALS 3
#define WARMUP 8
#define LAT_MIN 10
#define LAT_BUDGET_S 0.25
#define BW_BUDGET_S 0.25

typedef struct {
    HcclComm *comm;       /* [size]: this rank's communicator with each peer, made on first use */
    aclrtStream stream;   /* for the pair communicators; replaced when one is abandoned */
    uint8_t *small, *big;
    uint32_t peer;        /* the current pair: the other member's world rank */
    uint32_t other;       /* ... and its rank in the pair communicator */
    int broken;           /* a step of the current pair did not finish within op_s */
    const char *step;     /* what the current pair was doing, for the DOWN reason */
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
    aclError err = aclrtSynchronizeStreamWithTimeout(doc->stream, (int32_t)(doc->world_s * 1000));

    if (err == ACL_SUCCESS)
        return 0;
    fprintf(stderr, "hccl-doctor: rank %u: %s on the world communicator %s: some rank is not responding\n",
            doc->rank, what, err == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ? "timed out" : "failed");
    if (doc->stopped[0] == '\0')
        snprintf(doc->stopped, sizeof(doc->stopped), "%s on the world communicator %s (rank %u): %s", what,
                 err == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ? "timed out" : "failed", doc->rank,
                 HcclHostGetRecentErrMsg()[0] != '\0' ? HcclHostGetRecentErrMsg() : "some rank is not responding");
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
        fprintf(stderr, "hccl-doctor: rank %u: an AllGather over all ranks failed: %s\n", doc->rank,
                HcclGetErrorString(res));
    if (rc == 0)
        memcpy(all, recv, bytes * doc->size);
    (void)aclrtFree(send);
    (void)aclrtFree(recv);
    return rc;
}

/* The library's last error line without its "hostccl[...] error: " prefix, its ranks (those of the
 * pair's communicator, 0 and 1) written as the job's ranks a and b. */
static void library_reason(uint32_t a, uint32_t b, char *buf, size_t len)
{
    const char *last = HcclHostGetRecentErrMsg(), *text = strstr(last, "] error: ");
    size_t used = 0;

    text = text != NULL ? text + 9 : last;
    while (*text != '\0' && used + 1 < len) {
        if (strncmp(text, "rank ", 5) == 0 && (text[5] == '0' || text[5] == '1') &&
            (text[6] == ' ' || text[6] == ')' || text[6] == ',' || text[6] == '\0')) {
            int w = snprintf(buf + used, len - used, "rank %u", text[5] == '0' ? a : b);
            used += w > 0 && (size_t)w < len - used ? (size_t)w : len - used - 1;
            text += 6;
            continue;
        }
        buf[used++] = *text++;
    }
    buf[used] = '\0';
}

/* The stream and communicator of the current pair are left alone from now on. */
static void abandon(doctor_t *doc)
{
    ctx.comm[ctx.peer] = NULL;
    doc->abandoned = 1;
    if (aclrtCreateStream(&ctx.stream) != ACL_SUCCESS)
        ctx.stream = NULL;
}

/*
 * A step of the pair; once one failed the rest of the pair's steps are skipped. The wait itself is
 * the plain one: a bounded synchronisation hands the stream to its worker thread, and that hand-off
 * (10 us and more) would be what the latency loop measures instead of the link's 1 us. It is bounded
 * all the same, by the pair communicator's HCCL_EXEC_TIMEOUT, which the doctor sets to op_s before
 * it creates them (main.c): a step that gets no answer fails with HCCL_E_TIMEOUT and leaves nothing
 * queued. The stream's error is cleared by the synchronisation that reports it.
 */
static int pair_sync(doctor_t *doc)
{
    (void)doc;
    if (ctx.broken)
        return -1;
    if (aclrtSynchronizeStream(ctx.stream) == ACL_SUCCESS)
        return 0;
    ctx.broken = 1;
    ctx.comm[ctx.peer] = NULL; /* its errors are sticky: no later step may use it */
    return -1;
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

/* Send then receive (first) or receive then send back what came, 8 bytes each way. The first
 * rank's word tells the other how many more round trips follow (0: this was the last). */
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

/* Step 1: 0 if the pair's communicator was made and the peer answered in time; else why. */
static int probe(doctor_t *doc, uint32_t a, uint32_t b, HcclComm *comm_p, char *why, size_t len)
{
    aclError err;
    HcclResult async = HCCL_SUCCESS;
    const char *msg;

    if (pair_comm(doc, a, b, comm_p) != 0) {
        char reason[160];
        library_reason(a, b, reason, sizeof(reason));
        snprintf(why, len, "not connected within %.0f s (%s)", doc->create_s, reason);
        return -1;
    }
    memset(ctx.small, 0, 8); /* "no more round trips" */
    if (ping(*comm_p, doc->rank == a) != HCCL_SUCCESS) {
        snprintf(why, len, "the probe could not be issued");
        return -1;
    }
    err = aclrtSynchronizeStreamWithTimeout(ctx.stream, (int32_t)(doc->timeout_s * 1000));
    if (err == ACL_SUCCESS)
        return 0;
    if (err == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        snprintf(why, len, "no answer within %.1f s", doc->timeout_s);
        abandon(doc);
        return -1;
    }
    /* The library's own account names the cause (a peer that left, a send that never came); its
     * ranks are those of the pair's communicator: 0 is the pair's first rank. */
    (void)HcclGetCommAsyncError(*comm_p, &async);
    msg = HcclHostGetRecentErrMsg();
    snprintf(why, len, "the probe failed (%s)%s%s", HcclGetErrorString(async != HCCL_SUCCESS ? async : HCCL_E_INTERNAL),
             msg[0] != '\0' ? ": " : "", msg);
    ctx.comm[ctx.peer] = NULL;
    return -1;
}

/* One timed round trip; the first rank says how many follow. Returns seconds, < 0 on failure. */
static double round_trip(doctor_t *doc, HcclComm comm, int first, uint64_t more)
{
    double t0 = now_s();

    if (ctx.broken) /* never issue anything on a pair that was abandoned */
        return -1.0;
    if (first)
        memcpy(ctx.small, &more, sizeof(more));
    if (ping(comm, first) != HCCL_SUCCESS || pair_sync(doc) != 0)
        return -1.0;
    return now_s() - t0;
}

/* The first rank: a round trip to size the loop, then as many as fit LAT_BUDGET_S (at least
 * LAT_MIN, at most WARMUP + lat_iters), the first WARMUP (or a quarter) not counted. */
static double latency_first(doctor_t *doc, HcclComm comm)
{
    double rtt0 = round_trip(doc, comm, 1, 1), med = 0.0, *rtt;
    uint64_t total = LAT_MIN, warm, k = 0;

    if (rtt0 < 0)
        return 0.0;
    if (rtt0 * (WARMUP + doc->lat_iters) <= LAT_BUDGET_S)
        total = WARMUP + doc->lat_iters;
    else if (LAT_BUDGET_S / rtt0 > LAT_MIN)
        total = (uint64_t)(LAT_BUDGET_S / rtt0);
    warm = total / 4 < WARMUP ? total / 4 : WARMUP;
    rtt = calloc(total, sizeof(double));
    for (uint64_t i = 0; i < total && rtt != NULL; i++) {
        double t = round_trip(doc, comm, 1, total - 1 - i);
        if (t < 0)
            break;
        if (i >= warm)
            rtt[k++] = t;
    }
    med = rtt != NULL && k > 0 ? doc_median(rtt, (uint32_t)k) : 0.0;
    free(rtt);
    return med * 0.5e6;
}

/* The other rank answers until told that none follow. */
static void latency_second(doctor_t *doc, HcclComm comm)
{
    uint64_t more = 1;

    while (more > 0 && round_trip(doc, comm, 0, 0) >= 0)
        memcpy(&more, ctx.small, sizeof(more));
}

/* One trial: the plan (k messages; 0 ends the direction), then k messages and an 8-byte
 * acknowledgement. The sender returns the seconds the messages took, < 0 on failure. */
static double trial_send(doctor_t *doc, HcclComm comm, uint64_t k)
{
    double t0;

    if (ctx.broken)
        return -1.0;
    memcpy(ctx.small + 8, &k, sizeof(k));
    if (HcclSend(ctx.small + 8, 1, HCCL_DATA_TYPE_UINT64, ctx.other, comm, ctx.stream) != HCCL_SUCCESS ||
        pair_sync(doc) != 0)
        return -1.0;
    if (k == 0)
        return 0.0;
    t0 = now_s();
    for (uint64_t i = 0; i < k; i++)
        (void)HcclSend(ctx.big, doc->bw_bytes, HCCL_DATA_TYPE_UINT8, ctx.other, comm, ctx.stream);
    (void)HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_UINT64, ctx.other, comm, ctx.stream);
    return pair_sync(doc) == 0 ? now_s() - t0 : -1.0;
}

/* The receiver's side of every trial of one direction. */
static void trials_recv(doctor_t *doc, HcclComm comm)
{
    while (!ctx.broken) {
        uint64_t k = 0;
        if (HcclRecv(ctx.small + 8, 1, HCCL_DATA_TYPE_UINT64, ctx.other, comm, ctx.stream) != HCCL_SUCCESS ||
            pair_sync(doc) != 0)
            return;
        memcpy(&k, ctx.small + 8, sizeof(k));
        if (k == 0 || k > doc->bw_iters)
            return;
        for (uint64_t i = 0; i < k; i++)
            (void)HcclRecv(ctx.big, doc->bw_bytes, HCCL_DATA_TYPE_UINT8, ctx.other, comm, ctx.stream);
        (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_UINT64, ctx.other, comm, ctx.stream);
        if (pair_sync(doc) != 0)
            return;
    }
}

/* The sender's side of one direction: GB/s as it saw it. A first message alone sizes the trials
 * (and warms the path up); when it already took half the budget, it is the result. */
static double trials_send(doctor_t *doc, HcclComm comm)
{
    double t = trial_send(doc, comm, 1), best = 0.0, spent = t;
    uint64_t k;

    if (t <= 0)
        return 0.0;
    best = (double)doc->bw_bytes / t / 1e9;
    k = (uint64_t)(BW_BUDGET_S / BW_TRIALS / t);
    k = k < 1 ? 1 : k > doc->bw_iters ? doc->bw_iters : k;
    if (t < BW_BUDGET_S / 2) {
        best = 0.0;
        for (int i = 0; i < BW_TRIALS && (i == 0 || spent < BW_BUDGET_S); i++) {
            double gbps;
            t = trial_send(doc, comm, k);
            if (t <= 0)
                return 0.0;
            spent += t;
            gbps = (double)doc->bw_bytes * (double)k / t / 1e9;
            best = gbps > best ? gbps : best;
        }
    }
    (void)trial_send(doc, comm, 0);
    return best;
}

/* Step 3 for the pair's two ranks. In the pair communicator a is rank 0 and b rank 1. */
static void measure(doctor_t *doc, uint32_t a, uint32_t b, HcclComm comm)
{
    doc_pair_t *p = doc_pair(doc, a, b);
    double theirs = 0.0;

    ctx.step = "the latency measurement";
    if (doc->rank == a)
        p->lat_us = latency_first(doc, comm);
    else
        latency_second(doc, comm);
    ctx.step = "the bandwidth measurement";
    if (doc->rank == a) {
        p->bw_ab = trials_send(doc, comm);
        trials_recv(doc, comm);
        if (!ctx.broken && HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_FP64, 1, comm, ctx.stream) == HCCL_SUCCESS &&
            pair_sync(doc) == 0)
            memcpy(&theirs, ctx.small, sizeof(theirs));
        p->bw_ba = theirs;
    } else {
        trials_recv(doc, comm);
        theirs = trials_send(doc, comm);
        memcpy(ctx.small, &theirs, sizeof(theirs));
        if (!ctx.broken && HcclSend(ctx.small, 1, HCCL_DATA_TYPE_FP64, 0, comm, ctx.stream) == HCCL_SUCCESS)
            (void)pair_sync(doc);
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

/* Steps 1-2 on every rank: did the pair answer? Into *down_p; only rank a records the pair (its
 * row of results is what the others receive, and what rank 0 reports). */
static int probe_verdict(doctor_t *doc, uint32_t a, uint32_t b, int *down_buf, HcclComm *comm_p, int *down_p)
{
    doc_pair_t *p = doc_pair(doc, a, b);
    int member = doc->rank == a || doc->rank == b, failed = 0;
    char why[sizeof(p->why)] = "";

    if (member && ctx.stream != NULL)
        failed = probe(doc, a, b, comm_p, why, sizeof(why)) != 0;
    else if (member)
        failed = 1;
    *down_buf = failed;
    if (HcclAllReduce(down_buf, down_buf, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, doc->world, doc->stream) !=
            HCCL_SUCCESS ||
        world_sync(doc, "the probe verdict") != 0)
        return -1;
    *down_p = *down_buf != 0;
    if (doc->rank != a)
        return 0;
    p->measured = 1;
    p->down = *down_p;
    if (p->down)
        snprintf(p->why, sizeof(p->why), "%s", why[0] != '\0' ? why : "the other rank got no answer");
    return 0;
}

/* One pair, steps 1-4; every rank calls it for every pair in the same order. */
static int one_pair(doctor_t *doc, uint32_t a, uint32_t b, int *down_buf)
{
    doc_pair_t *p = doc_pair(doc, a, b);
    HcclComm comm = NULL;
    int down = 0;

    ctx.broken = 0;
    ctx.peer = doc->rank == a ? b : a;
    ctx.other = doc->rank == a ? 1 : 0;
    if (probe_verdict(doc, a, b, down_buf, &comm, &down) != 0) {
        snprintf(doc->stopped + strlen(doc->stopped), sizeof(doc->stopped) - strlen(doc->stopped),
                 " (while pair %u-%u was probed)", a, b);
        return -1;
    }
    if ((doc->rank == a || doc->rank == b) && !down) {
        measure(doc, a, b, comm);
        if (ctx.broken && doc->rank == a) {
            p->down = 1;
            snprintf(p->why, sizeof(p->why), "stopped answering during %s (no step within %.0f s)", ctx.step,
                     doc->op_s);
        }
    }
    if (HcclBarrier(doc->world, doc->stream) != HCCL_SUCCESS || world_sync(doc, "the barrier after a pair") != 0) {
        snprintf(doc->stopped + strlen(doc->stopped), sizeof(doc->stopped) - strlen(doc->stopped),
                 " (after pair %u-%u)", a, b);
        return -1;
    }
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

/* One timestamp exchange between rank 0 and k; rank 0 gets k's clock reading and the round trip.
 * 0 on success. */
static int clock_exchange(doctor_t *doc, HcclComm comm, double *offset_p, double *rtt_p)
{
    double t0 = realtime_s(), theirs, t1;

    if (ctx.broken || ctx.stream == NULL)
        return -1;
    if (doc->rank != 0) {
        (void)HcclRecv(ctx.small, 1, HCCL_DATA_TYPE_FP64, 0, comm, ctx.stream);
        if (pair_sync(doc) != 0)
            return -1;
        theirs = realtime_s();
        memcpy(ctx.small, &theirs, sizeof(theirs));
        (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_FP64, 0, comm, ctx.stream);
        return pair_sync(doc);
    }
    (void)HcclSend(ctx.small, 1, HCCL_DATA_TYPE_FP64, 1, comm, ctx.stream);
    (void)HcclRecv(ctx.small + 8, 1, HCCL_DATA_TYPE_FP64, 1, comm, ctx.stream);
    if (pair_sync(doc) != 0)
        return -1;
    t1 = realtime_s();
    memcpy(&theirs, ctx.small + 8, sizeof(theirs));
    *offset_p = theirs - 0.5 * (t0 + t1);
    *rtt_p = t1 - t0;
    return 0;
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
        ctx.broken = 0;
        ctx.peer = doc->rank == 0 ? k : 0;
        ctx.other = doc->rank == 0 ? 1 : 0;
        for (int i = 0; i < 16; i++) {
            double off = 0.0, rtt = 1e9;
            if (clock_exchange(doc, comm, &off, &rtt) != 0)
                break;
            if (rtt < best_rtt) {
                best_rtt = rtt;
                offset = off;
            }
        }
        if (doc->rank == 0 && best_rtt < 1e9) {
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
