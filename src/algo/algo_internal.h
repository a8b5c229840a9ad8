/*
 * Schedules over a channel (hc_chan.h). Every schedule runs on the members of one group (indices
 * 0..n-1, this rank `me`), takes consecutive step numbers from its context, and works on buffers in
 * this process; reductions go through hc_reduce_multi. Counts, displacements and roots are in
 * elements and group indices.
 */
#ifndef HC_ALGO_INTERNAL_H
#define HC_ALGO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hc_chan.h"

/* Memory an engine keeps for its schedules between ops: fresh pages cost a fault each on first
 * touch (11 us on the reference VM), so per-op buffers are not allocated per op. */
typedef struct {
    uint8_t *buf;
    uint64_t bytes;
} hc_sched_buf_t;

/* Where a schedule runs: channel, group shape, data type, and the engine's buffers: `seg` for the
 * segments of hc_sched_recv_reduce, `work` for the schedule itself. */
typedef struct {
    hc_chan_t *ch;
    uint32_t n, me;
    uint32_t step;           /* the next step this schedule may use */
    HcclDataType dtype;
    HcclReduceOp redop;
    size_t esize;            /* bytes per element */
    hc_sched_buf_t *seg;
    hc_sched_buf_t *work;
} hc_sched_t;

/* Segments: a block of a schedule step travels as messages of at most this many bytes, numbered
 * within the step, so that a receiver can reduce one while the next arrives. */
#define HC_SCHED_SEGMENT (1u << 20)
#define HC_SCHED_SEGMENT_BITS 12 /* segments per step: 4096 (larger blocks get larger segments) */

/* Element `elems` of a buffer of `esize`-byte elements. */
static inline uint8_t *hc_sched_at(const void *base, uint64_t elems, size_t esize)
{
    return (uint8_t *)(uintptr_t)base + elems * esize;
}

/* At least `bytes` of one of the engine's buffers (HCCL_E_MEMORY, logged, if not). */
HcclResult hc_sched_buf(hc_sched_buf_t *b, uint64_t bytes, uint8_t **buf_p);

/* Elements [off, off + len) of block b when `count` elements are cut into n near-equal blocks. */
void hc_sched_block(uint64_t count, uint32_t n, uint32_t b, uint64_t *off_p, uint64_t *len_p);

/* Post the sends (or receives) of one step's block to (from) peer, cut into segments. reqs must
 * hold hc_sched_nseg(bytes) entries. */
uint32_t hc_sched_nseg(uint64_t bytes);
HcclResult hc_sched_send_block(hc_sched_t *s, uint32_t peer, uint32_t step, const void *buf, uint64_t bytes,
                               hc_chan_req_t *reqs);
HcclResult hc_sched_recv_block(hc_sched_t *s, uint32_t peer, uint32_t step, void *buf, uint64_t bytes,
                               hc_chan_req_t *reqs);
/* Send (receive) one step's block and wait for it. */
HcclResult hc_sched_send(hc_sched_t *s, uint32_t peer, const void *buf, uint64_t bytes, uint32_t step);
HcclResult hc_sched_recv(hc_sched_t *s, uint32_t peer, void *buf, uint64_t bytes, uint32_t step);
/* Wait for n requests of an array. */
HcclResult hc_sched_wait_array(hc_sched_t *s, hc_chan_req_t *reqs, uint32_t n);

/* Exchange with one peer in one step: send `out` and receive `in` (either may be 0 bytes but both
 * are posted, the other side doing the mirror image). */
HcclResult hc_sched_sendrecv(hc_sched_t *s, uint32_t peer_out, const void *out, uint64_t out_bytes, uint32_t peer_in,
                             void *in, uint64_t in_bytes, uint32_t step);

/* Receive `elems` elements from peer (step) and combine them into dst with this rank's `own`:
 * dst = own op theirs (own may be dst), segment by segment while sending `out_bytes` of `out` to
 * peer_out in the same step (out may be NULL). `their_first` puts the peer's input first in the
 * reduction (rank order). */
HcclResult hc_sched_recv_reduce(hc_sched_t *s, uint32_t peer_in, void *dst, const void *own, uint64_t elems,
                                int their_first, uint32_t peer_out, const void *out, uint64_t out_bytes, uint32_t step);

/* The schedules (sched_*.c). Reducing ones read sendbuf and write recvbuf (the same buffer for
 * in place). */
HcclResult hc_sched_allreduce_ring(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count);
HcclResult hc_sched_allreduce_rhd(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count);
/* Rank-ordered: every block's owner combines all n inputs in rank order, rounding once: the same
 * bits as the intra-host engine and as any other group shape (HCCL_DETERMINISTIC). */
HcclResult hc_sched_allreduce_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count);
HcclResult hc_sched_allreduce_oneshot(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count);

/* ReduceScatterV: member i gets counts[i] elements reduced from displs[i] of every sendbuf. */
HcclResult hc_sched_reduce_scatterv_ring(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                                         const uint64_t *displs);
HcclResult hc_sched_reduce_scatterv_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf,
                                           const uint64_t *counts, const uint64_t *displs);
/* AllGatherV: member i's counts[i] elements (its sendbuf) land at displs[i] of every recvbuf.
 * sendbuf may be recvbuf + displs[me] (in place). */
HcclResult hc_sched_allgatherv_ring(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                                    const uint64_t *displs);
HcclResult hc_sched_allgatherv_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                                      const uint64_t *displs);

/* Broadcast `count` elements of buf from root: binomial tree, or scatter + ring all-gather for
 * large messages (chosen by the caller). */
HcclResult hc_sched_bcast_tree(hc_sched_t *s, void *buf, uint64_t count, uint32_t root);
HcclResult hc_sched_bcast_scatter_allgather(hc_sched_t *s, void *buf, uint64_t count, uint32_t root);
/* Reduce to root: binomial tree (combining in tree order), or rank-ordered (reduce-scatter direct +
 * gather to root). recvbuf matters on root only. */
HcclResult hc_sched_reduce_tree(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count, uint32_t root);
HcclResult hc_sched_reduce_direct(hc_sched_t *s, const void *sendbuf, void *recvbuf, uint64_t count, uint32_t root);
/* Scatter: member i gets counts[i] elements from displs[i] of root's sendbuf. */
HcclResult hc_sched_scatterv(hc_sched_t *s, const void *sendbuf, void *recvbuf, const uint64_t *counts,
                             const uint64_t *displs, uint32_t root);
/* AlltoAllV: to member j: send_counts[j] elements at send_displs[j]; from j: recv_counts[j] at
 * recv_displs[j]. Pairwise exchange in n-1 rounds (round k: to me+k, from me-k). */
HcclResult hc_sched_alltoallv_pairwise(hc_sched_t *s, const void *sendbuf, const uint64_t *send_counts,
                                       const uint64_t *send_displs, void *recvbuf, const uint64_t *recv_counts,
                                       const uint64_t *recv_displs);
/* Dissemination barrier: ceil(log2 n) rounds of empty messages. */
HcclResult hc_sched_barrier(hc_sched_t *s);

#endif /* HC_ALGO_INTERNAL_H */
