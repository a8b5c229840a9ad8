/*
 * AllReduce schedules: ring (bandwidth-optimal, n-1 steps each way), recursive halving-doubling
 * (Rabenseifner: log2 steps, with the fold of the ranks beyond the largest power of two), and the
 * rank-ordered direct schedule (reduce-scatter by every block's owner combining all n inputs in rank
 * order, then all-gather).
 */
#include <stdlib.h>
#include <string.h>

#include "algo_internal.h"
#include "hc_copy.h"
#include "hc_check.h"

HcclResult hc_sched_allreduce_ring(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count)
{
    uint32_t n = s->n, me = s->me, next = (me + 1) % n, prev = (me + n - 1) % n;
    uint32_t base = s->step;

    if (n == 1) {
        if (sendbuf != recvbuf)
            hc_copy(recvbuf, sendbuf, count * s->esize);
        return HCCL_SUCCESS;
    }
    s->step += 2 * (n - 1);
    /* Reduce-scatter: at step k this rank sends block me - k (raw from sendbuf at k = 0, its partial
     * sum after) and combines block me - k - 1 with its own input; every block is combined into by
     * each rank once, so the own input always comes from sendbuf and in place needs no copy. */
    for (uint32_t k = 0; k + 1 < n; k++) {
        uint32_t out = (me + n - k) % n, in = (me + 2 * n - k - 1) % n;
        uint64_t out_off, out_len, in_off, in_len;
        hc_sched_block(count, n, out, &out_off, &out_len);
        hc_sched_block(count, n, in, &in_off, &in_len);
        HC_CHECK(hc_sched_recv_reduce(s, prev, hc_sched_at(recvbuf, in_off, s->esize), hc_sched_at(sendbuf, in_off, s->esize), in_len,
                                      1, next, hc_sched_at(k == 0 ? sendbuf : recvbuf, out_off, s->esize),
                                      out_len * s->esize, base + k));
    }
    /* All-gather: this rank's complete block is me + 1. */
    for (uint32_t k = 0; k + 1 < n; k++) {
        uint32_t out = (me + 1 + n - k) % n, in = (me + n - k) % n;
        uint64_t out_off, out_len, in_off, in_len;
        hc_sched_block(count, n, out, &out_off, &out_len);
        hc_sched_block(count, n, in, &in_off, &in_len);
        HC_CHECK(hc_sched_sendrecv(s, next, hc_sched_at(recvbuf, out_off, s->esize), out_len * s->esize, prev,
                                   hc_sched_at(recvbuf, in_off, s->esize), in_len * s->esize, base + n - 1 + k));
    }
    return HCCL_SUCCESS;
}

/* Recursive halving-doubling among p = 2^k "new" ranks, after folding the first 2 * rem ranks in
 * pairs (the even one hands its vector to the odd one and waits for the result). */
static uint32_t real_rank(uint32_t newrank, uint32_t rem)
{
    return newrank < rem ? 2 * newrank + 1 : newrank + rem;
}

/* The first halving step reads this rank's input from `in` (sendbuf, or buf itself) and writes buf;
 * every later step works in buf. */
static HcclResult rhd_core(hc_sched_t *s, const uint8_t *in, uint8_t *buf, uint64_t count, uint32_t newrank,
                           uint32_t p, uint32_t rem, uint32_t base)
{
    uint64_t lo = 0, hi = count;
    uint32_t mask, k = 0;
    uint64_t los[32], his[32];
    int lowers[32];

    /* Halving: keep one half, give the other to the partner, combine what it gives back. */
    for (mask = p / 2; mask > 0; mask /= 2, k++) {
        uint32_t partner = real_rank(newrank ^ mask, rem);
        uint64_t mid = lo + (hi - lo) / 2;
        int lower = (newrank & mask) == 0;
        uint64_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
        uint64_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
        los[k] = lo, his[k] = hi, lowers[k] = lower;
        HC_CHECK(hc_sched_recv_reduce(s, partner, buf + keep_lo * s->esize, in + keep_lo * s->esize,
                                      keep_hi - keep_lo, !lower, partner, in + give_lo * s->esize,
                                      (give_hi - give_lo) * s->esize, base + k));
        lo = keep_lo, hi = keep_hi;
        in = buf;
    }
    /* Doubling: the same pairs in reverse order, each sending the part it completed. */
    for (mask = 1; mask < p; mask *= 2) {
        uint32_t partner = real_rank(newrank ^ mask, rem);
        uint64_t plo, phi;
        k--;
        plo = lowers[k] ? hi : los[k]; /* the partner's completed part is the other half */
        phi = lowers[k] ? his[k] : lo;
        HC_CHECK(hc_sched_sendrecv(s, partner, buf + lo * s->esize, (hi - lo) * s->esize, partner,
                                   buf + plo * s->esize, (phi - plo) * s->esize, base + 32 + k));
        lo = los[k], hi = his[k];
    }
    return HCCL_SUCCESS;
}

HcclResult hc_sched_allreduce_rhd(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count)
{
    uint32_t n = s->n, me = s->me, p = 1, rem, base = s->step;
    uint64_t bytes = count * s->esize;
    uint8_t *buf = recvbuf;

    while (p * 2 <= n)
        p *= 2;
    rem = n - p;
    s->step += 66; /* fold, 32 halving and 32 doubling steps, unfold */
    /* Without a fold, no copy of sendbuf into recvbuf first: the first halving step reads one and
     * writes the other (a 16 MiB memcpy alone takes 0.6-0.7 ms on the reference VM). */
    if (rem == 0 && p > 1)
        return rhd_core(s, sendbuf, buf, count, me, p, rem, base);
    if (sendbuf != recvbuf)
        hc_copy(recvbuf, sendbuf, bytes);
    if (me < 2 * rem && me % 2 == 0) { /* hand the vector over, wait for the result */
        HC_CHECK(hc_sched_send(s, me + 1, buf, bytes, base + 64));
        return hc_sched_recv(s, me + 1, buf, bytes, base + 65);
    }
    if (me < 2 * rem)
        HC_CHECK(hc_sched_recv_reduce(s, me - 1, buf, buf, count, 1, 0, NULL, 0, base + 64));
    if (p > 1)
        HC_CHECK(rhd_core(s, buf, buf, count, me < 2 * rem ? me / 2 : me - rem, p, rem, base));
    if (me < 2 * rem)
        HC_CHECK(hc_sched_send(s, me - 1, buf, bytes, base + 65));
    return HCCL_SUCCESS;
}

HcclResult hc_sched_allreduce_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count)
{
    uint64_t *counts = malloc(2 * s->n * sizeof(*counts)), *displs = counts + s->n;
    HcclResult res;

    if (counts == NULL) {
        HC_ERROR("out of memory planning an allreduce over %u ranks", s->n);
        return HCCL_E_MEMORY;
    }
    for (uint32_t b = 0; b < s->n; b++)
        hc_sched_block(count, s->n, b, &displs[b], &counts[b]);
    res = hc_sched_reduce_scatterv_direct(s, sendbuf, hc_sched_at(recvbuf, displs[s->me], s->esize), counts, displs);
    if (res == HCCL_SUCCESS)
        res = hc_sched_allgatherv_direct(s, hc_sched_at(recvbuf, displs[s->me], s->esize), recvbuf, counts, displs);
    free(counts);
    return res;
}
