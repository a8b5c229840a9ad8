/* ReduceScatterV and AllGatherV schedules: ring and direct (every pair at once, rank-ordered); the
 * one-step AllReduce of small vectors, which shares the direct plan. */
#include <stdlib.h>
#include <string.h>

#include "algo_internal.h"
#include "hc_copy.h"
#include "hc_check.h"
#include "hc_reduce.h"

static uint64_t max_count(const uint64_t *counts, uint32_t n)
{
    uint64_t m = 0;

    for (uint32_t i = 0; i < n; i++)
        m = counts[i] > m ? counts[i] : m;
    return m;
}

/* Per-peer messages of a direct schedule: to j, bytes_out[j] from out[j]; from j, bytes_in[j] into
 * in[j] (entry `me` unused). */
typedef struct {
    uint64_t *bytes_out, *bytes_in;
    const uint8_t **out;
    uint8_t **in;
} plan_t;

static HcclResult plan_alloc(plan_t *p, uint32_t n)
{
    p->bytes_out = calloc(2 * (size_t)n, sizeof(uint64_t));
    p->out = calloc(n, sizeof(*p->out));
    p->in = calloc(n, sizeof(*p->in));
    if (p->bytes_out == NULL || p->out == NULL || p->in == NULL) {
        free(p->bytes_out), free(p->out), free(p->in);
        HC_ERROR("out of memory planning a schedule over %u ranks", n);
        return HCCL_E_MEMORY;
    }
    p->bytes_in = p->bytes_out + n;
    return HCCL_SUCCESS;
}

static void plan_free(plan_t *p)
{
    free(p->bytes_out), free(p->out), free(p->in);
}

/* Post every message of the plan in one step, then wait for all of them. Receives first, so that
 * chunks find them; sends start after this rank, so that not everyone sends to rank 0 first. */
static HcclResult run_plan(hc_sched_t *s, const plan_t *p)
{
    uint32_t total = 0, k = 0, step = s->step++;
    hc_chan_req_t *reqs;
    HcclResult res = HCCL_SUCCESS;

    for (uint32_t j = 0; j < s->n; j++)
        if (j != s->me)
            total += hc_sched_nseg(p->bytes_out[j]) + hc_sched_nseg(p->bytes_in[j]);
    reqs = malloc((total ? total : 1) * sizeof(*reqs));
    if (reqs == NULL) {
        HC_ERROR("out of memory posting %u messages", total);
        return HCCL_E_MEMORY;
    }
    for (uint32_t d = 1; d < s->n && res == HCCL_SUCCESS; d++) {
        uint32_t j = (s->me + s->n - d) % s->n;
        res = hc_sched_recv_block(s, j, step, p->in[j], p->bytes_in[j], reqs + k);
        k += hc_sched_nseg(p->bytes_in[j]);
    }
    for (uint32_t d = 1; d < s->n && res == HCCL_SUCCESS; d++) {
        uint32_t j = (s->me + d) % s->n;
        res = hc_sched_send_block(s, j, step, p->out[j], p->bytes_out[j], reqs + k);
        k += hc_sched_nseg(p->bytes_out[j]);
    }
    if (res == HCCL_SUCCESS)
        res = hc_sched_wait_array(s, reqs, total);
    free(reqs);
    return res;
}

/* One step in which every rank sends each peer j its block (out_counts[j] elements at out_displs[j]
 * of sendbuf; NULL arrays: the first `mine` elements to everyone), receives `mine` elements from
 * each, and combines all n inputs in rank order into recvbuf, its own from sendbuf + own_displ. */
static HcclResult combine_from_all(hc_sched_t *s, const void *sendbuf, const uint64_t *out_counts,
                                   const uint64_t *out_displs, uint64_t mine, uint64_t own_displ, void *recvbuf)
{
    uint64_t bytes = mine * s->esize;
    const void **srcs = malloc(s->n * sizeof(*srcs));
    uint8_t *work = NULL;
    plan_t p;
    HcclResult res;

    if (srcs == NULL || plan_alloc(&p, s->n) != HCCL_SUCCESS) {
        free(srcs);
        return HCCL_E_MEMORY;
    }
    res = hc_sched_buf(s->work, bytes * s->n + 1, &work);
    for (uint32_t j = 0; j < s->n && res == HCCL_SUCCESS; j++) {
        p.bytes_out[j] = (out_counts != NULL ? out_counts[j] : mine) * s->esize;
        p.out[j] = hc_sched_at(sendbuf, out_displs != NULL ? out_displs[j] : 0, s->esize);
        p.bytes_in[j] = bytes;
        p.in[j] = work + j * bytes;
        srcs[j] = j == s->me ? hc_sched_at(sendbuf, own_displ, s->esize) : p.in[j];
    }
    if (res == HCCL_SUCCESS)
        res = run_plan(s, &p);
    if (res == HCCL_SUCCESS && mine > 0)
        hc_reduce_multi(s->dtype, s->redop, recvbuf, srcs, s->n, mine);
    plan_free(&p);
    free(srcs);
    return res;
}

HcclResult hc_sched_reduce_scatterv_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf,
                                           const uint64_t *counts, const uint64_t *displs)
{
    return combine_from_all(s, sendbuf, counts, displs, counts[s->me], displs[s->me], recvbuf);
}

HcclResult hc_sched_allgatherv_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                                      const uint64_t *displs)
{
    uint8_t *own = hc_sched_at(recvbuf, displs[s->me], s->esize);
    plan_t p;
    HcclResult res;

    HC_CHECK(plan_alloc(&p, s->n));
    if (sendbuf != own)
        hc_move(own, sendbuf, counts[s->me] * s->esize);
    for (uint32_t j = 0; j < s->n; j++) {
        p.bytes_out[j] = counts[s->me] * s->esize;
        p.out[j] = own;
        p.bytes_in[j] = counts[j] * s->esize;
        p.in[j] = hc_sched_at(recvbuf, displs[j], s->esize);
    }
    res = run_plan(s, &p);
    plan_free(&p);
    return res;
}

HcclResult hc_sched_allgatherv_ring(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                                    const uint64_t *displs)
{
    uint32_t n = s->n, me = s->me, next = (me + 1) % n, prev = (me + n - 1) % n, base = s->step;
    uint8_t *own = hc_sched_at(recvbuf, displs[me], s->esize);

    if (sendbuf != own)
        hc_move(own, sendbuf, counts[me] * s->esize);
    s->step += n;
    /* Step k: pass on block me - k, receive block me - k - 1. */
    for (uint32_t k = 0; k + 1 < n; k++) {
        uint32_t out = (me + n - k) % n, in = (me + 2 * n - k - 1) % n;
        HC_CHECK(hc_sched_sendrecv(s, next, hc_sched_at(recvbuf, displs[out], s->esize), counts[out] * s->esize, prev,
                                   hc_sched_at(recvbuf, displs[in], s->esize), counts[in] * s->esize, base + k));
    }
    return HCCL_SUCCESS;
}

HcclResult hc_sched_reduce_scatterv_ring(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                                         const uint64_t *displs)
{
    uint32_t n = s->n, me = s->me, next = (me + 1) % n, prev = (me + n - 1) % n, base = s->step;
    uint64_t most = max_count(counts, n) * s->esize;
    uint8_t *work, *partial[2];

    if (n == 1) {
        if (recvbuf != sendbuf)
            hc_move(recvbuf, sendbuf, counts[0] * s->esize);
        return HCCL_SUCCESS;
    }
    HC_CHECK(hc_sched_buf(s->work, 2 * most + 1, &work));
    partial[0] = work, partial[1] = work + most;
    s->step += n;
    /* Step k: pass on the partial sum of block me - k - 1 (this rank's raw input at k = 0), receive
     * the partial of block me - k - 2 and add this rank's input; the last step lands in recvbuf. */
    for (uint32_t k = 0; k + 1 < n; k++) {
        uint32_t out = (me + 2 * n - k - 1) % n, in = (me + 2 * n - k - 2) % n;
        const uint8_t *send = k == 0 ? hc_sched_at(sendbuf, displs[out], s->esize) : partial[(k - 1) & 1];
        uint8_t *dst = k + 2 == n ? recvbuf : partial[k & 1];
        HC_CHECK(hc_sched_recv_reduce(s, prev, dst, hc_sched_at(sendbuf, displs[in], s->esize), counts[in], 1, next, send,
                                      counts[out] * s->esize, base + k));
    }
    return HCCL_SUCCESS;
}

/* AllReduce of a small vector in one step: every rank sends its whole vector to every other and
 * combines all n in rank order, as the direct reduce-scatter does block by block (the same bits).
 * One latency instead of the two steps of direct (or 2 log2 n of H-D_R), for n - 1 times the bytes. */
HcclResult hc_sched_allreduce_oneshot(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count)
{
    return combine_from_all(s, sendbuf, NULL, NULL, count, 0, recvbuf);
}
