/*
 * Rooted schedules (Broadcast, Reduce, Scatter), AlltoAllV and Barrier. Trees are binomial over
 * ranks relative to the root; large broadcasts are a scatter followed by a ring all-gather (van de
 * Geijn), which moves each byte out of the root once instead of log2(n) times.
 */
#include <stdlib.h>
#include <string.h>

#include "algo_internal.h"
#include "hc_copy.h"
#include "hc_check.h"
#include "hc_reduce.h"

static uint32_t abs_rank(const hc_sched_t *s, uint32_t rel, uint32_t root)
{
    return (rel + root) % s->n;
}

HcclResult hc_sched_bcast_tree(hc_sched_t *s, void *buf, uint64_t count, uint32_t root)
{
    uint32_t n = s->n, rel = (s->me + n - root) % n, mask = 1, step = s->step++;
    uint64_t bytes = count * s->esize;

    while (mask < n) {
        if (rel & mask) {
            HC_CHECK(hc_sched_recv(s, abs_rank(s, rel - mask, root), buf, bytes, step));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < n)
            HC_CHECK(hc_sched_send(s, abs_rank(s, rel + mask, root), buf, bytes, step));
    return HCCL_SUCCESS;
}

/* Blocks in ranks relative to the root: relative rank i owns block i. */
static HcclResult relative_blocks(const hc_sched_t *s, uint64_t count, uint32_t root, uint64_t **counts_p,
                                  uint64_t **displs_p)
{
    uint64_t *counts = malloc(2 * s->n * sizeof(*counts));

    if (counts == NULL) {
        HC_ERROR("out of memory planning a schedule over %u ranks", s->n);
        return HCCL_E_MEMORY;
    }
    for (uint32_t r = 0; r < s->n; r++)
        hc_sched_block(count, s->n, (r + s->n - root) % s->n, &counts[s->n + r], &counts[r]);
    *counts_p = counts;
    *displs_p = counts + s->n;
    return HCCL_SUCCESS;
}

HcclResult hc_sched_bcast_scatter_allgather(hc_sched_t *s, void *buf, uint64_t count, uint32_t root)
{
    uint64_t *counts, *displs;
    HcclResult res;

    HC_CHECK(relative_blocks(s, count, root, &counts, &displs));
    res = hc_sched_scatterv(s, buf, hc_sched_at(buf, displs[s->me], s->esize), counts, displs, root);
    if (res == HCCL_SUCCESS)
        res = hc_sched_allgatherv_ring(s, hc_sched_at(buf, displs[s->me], s->esize), buf, counts, displs);
    free(counts);
    return res;
}

HcclResult hc_sched_scatterv(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                             const uint64_t *displs, uint32_t root)
{
    uint32_t step = s->step++, total = 0, k = 0;
    hc_chan_req_t *reqs;
    HcclResult res = HCCL_SUCCESS;

    if (s->me != root)
        return hc_sched_recv(s, root, recvbuf, counts[s->me] * s->esize, step);
    if (recvbuf != hc_sched_at(sendbuf, displs[root], s->esize))
        hc_move(recvbuf, hc_sched_at(sendbuf, displs[root], s->esize), counts[root] * s->esize);
    for (uint32_t j = 0; j < s->n; j++)
        if (j != root)
            total += hc_sched_nseg(counts[j] * s->esize);
    reqs = malloc((total ? total : 1) * sizeof(*reqs));
    if (reqs == NULL) {
        HC_ERROR("out of memory posting %u messages", total);
        return HCCL_E_MEMORY;
    }
    for (uint32_t d = 1; d < s->n && res == HCCL_SUCCESS; d++) {
        uint32_t j = (root + d) % s->n;
        res = hc_sched_send_block(s, j, step, hc_sched_at(sendbuf, displs[j], s->esize), counts[j] * s->esize, reqs + k);
        k += hc_sched_nseg(counts[j] * s->esize);
    }
    if (res == HCCL_SUCCESS)
        res = hc_sched_wait_array(s, reqs, total);
    free(reqs);
    return res;
}

HcclResult hc_sched_reduce_tree(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count, uint32_t root)
{
    uint32_t n = s->n, rel = (s->me + n - root) % n, step = s->step++;
    uint64_t bytes = count * s->esize;
    const uint8_t *acc = sendbuf; /* this rank's partial result so far */
    uint8_t *work = NULL;

    for (uint32_t mask = 1; mask < n; mask <<= 1) {
        if (rel & mask)
            return hc_sched_send(s, abs_rank(s, rel - mask, root), acc, bytes, step);
        if (rel + mask < n) {
            /* Children's subtrees hold higher relative ranks: theirs comes after this rank's. */
            uint8_t *dst = recvbuf;
            if (rel != 0) {
                if (work == NULL)
                    HC_CHECK(hc_sched_buf(s->work, bytes + 1, &work));
                dst = work;
            }
            HC_CHECK(hc_sched_recv_reduce(s, abs_rank(s, rel + mask, root), dst, acc, count, 0, 0, NULL, 0, step));
            acc = dst;
        }
    }
    if (acc != recvbuf) /* a root without children (n == 1) */
        hc_move(recvbuf, acc, bytes);
    return HCCL_SUCCESS;
}

HcclResult hc_sched_reduce_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count, uint32_t root)
{
    uint64_t *counts = malloc(2 * s->n * sizeof(*counts)), *displs;
    uint8_t *mine = NULL;
    uint32_t step;
    HcclResult res;

    if (counts == NULL) {
        HC_ERROR("out of memory planning a reduce over %u ranks", s->n);
        return HCCL_E_MEMORY;
    }
    displs = counts + s->n;
    for (uint32_t b = 0; b < s->n; b++)
        hc_sched_block(count, s->n, b, &displs[b], &counts[b]);
    /* Each rank reduces its block (in rank order) into the root's recvbuf on the root, into a
     * buffer of its own elsewhere, then sends it to the root. */
    if (s->me == root) {
        mine = hc_sched_at(recvbuf, displs[s->me], s->esize);
        res = HCCL_SUCCESS;
    } else {
        mine = malloc(counts[s->me] * s->esize + 1);
        res = mine != NULL ? HCCL_SUCCESS : HCCL_E_MEMORY;
    }
    if (res == HCCL_SUCCESS)
        res = hc_sched_reduce_scatterv_direct(s, sendbuf, mine, counts, displs);
    step = s->step++;
    if (res == HCCL_SUCCESS && s->me != root)
        res = hc_sched_send(s, root, mine, counts[s->me] * s->esize, step);
    for (uint32_t j = 0; res == HCCL_SUCCESS && s->me == root && j < s->n; j++)
        if (j != root)
            res = hc_sched_recv(s, j, hc_sched_at(recvbuf, displs[j], s->esize), counts[j] * s->esize, step);
    if (s->me != root)
        free(mine);
    free(counts);
    return res;
}

HcclResult hc_sched_alltoallv_pairwise(hc_sched_t *s, const void *sendbuf, const uint64_t *send_counts,
                                       const uint64_t *send_displs, void *recvbuf, const uint64_t *recv_counts,
                                       const uint64_t *recv_displs)
{
    uint32_t n = s->n, me = s->me, base = s->step;

    s->step += n;
    hc_move(hc_sched_at(recvbuf, recv_displs[me], s->esize), hc_sched_at(sendbuf, send_displs[me], s->esize),
            send_counts[me] * s->esize);
    for (uint32_t k = 1; k < n; k++) {
        uint32_t to = (me + k) % n, from = (me + n - k) % n;
        HC_CHECK(hc_sched_sendrecv(s, to, hc_sched_at(sendbuf, send_displs[to], s->esize), send_counts[to] * s->esize, from,
                                   hc_sched_at(recvbuf, recv_displs[from], s->esize), recv_counts[from] * s->esize, base + k));
    }
    return HCCL_SUCCESS;
}

HcclResult hc_sched_barrier(hc_sched_t *s)
{
    uint32_t base = s->step;

    s->step += 32;
    for (uint32_t dist = 1, k = 0; dist < s->n; dist <<= 1, k++)
        HC_CHECK(hc_sched_sendrecv(s, (s->me + dist) % s->n, NULL, 0, (s->me + s->n - dist) % s->n, NULL, 0,
                                   base + k));
    return HCCL_SUCCESS;
}
