/* Building blocks of the schedules: blocks, segments, exchanges, receive-and-reduce. */
#include <stdlib.h>
#include <string.h>

#include "algo_internal.h"
#include "hc_check.h"
#include "hc_reduce.h"

#define STACK_REQS 8

HcclResult hc_sched_buf(hc_sched_buf_t *b, uint64_t bytes, uint8_t **buf_p)
{
    if (b->bytes < bytes) {
        uint8_t *grown = malloc(bytes);
        if (grown == NULL) {
            HC_ERROR("out of memory: %llu bytes of scratch for a schedule", (unsigned long long)bytes);
            return HCCL_E_MEMORY;
        }
        free(b->buf);
        b->buf = grown;
        b->bytes = bytes;
    }
    *buf_p = b->buf;
    return HCCL_SUCCESS;
}

void hc_sched_block(uint64_t count, uint32_t n, uint32_t b, uint64_t *off_p, uint64_t *len_p)
{
    uint64_t q = count / n, r = count % n;

    *off_p = b * q + (b < r ? b : r);
    *len_p = q + (b < r ? 1 : 0);
}

/* Bytes per segment of a block: HC_SCHED_SEGMENT, or more when the block has more segments than a
 * step can number; a multiple of 8 so that every element type divides it. */
static uint64_t seg_bytes(uint64_t bytes)
{
    uint64_t per = (bytes + (1u << HC_SCHED_SEGMENT_BITS) - 1) >> HC_SCHED_SEGMENT_BITS;

    per = (per + 7) & ~(uint64_t)7;
    return per > HC_SCHED_SEGMENT ? per : HC_SCHED_SEGMENT;
}

uint32_t hc_sched_nseg(uint64_t bytes)
{
    uint64_t seg = seg_bytes(bytes);

    return bytes == 0 ? 1 : (uint32_t)((bytes + seg - 1) / seg);
}

static uint32_t msg_step(uint32_t step, uint32_t seg)
{
    return step << HC_SCHED_SEGMENT_BITS | seg;
}

HcclResult hc_sched_send_block(hc_sched_t *s, uint32_t peer, uint32_t step, const void *buf, uint64_t bytes,
                               hc_chan_req_t *reqs)
{
    uint64_t seg = seg_bytes(bytes);
    uint32_t nseg = hc_sched_nseg(bytes);

    for (uint32_t j = 0; j < nseg; j++) {
        uint64_t off = j * seg, len = bytes - off < seg ? bytes - off : seg;
        HC_CHECK(hc_chan_isend(s->ch, peer, msg_step(step, j), (const uint8_t *)buf + off, len, &reqs[j]));
    }
    return HCCL_SUCCESS;
}

HcclResult hc_sched_recv_block(hc_sched_t *s, uint32_t peer, uint32_t step, void *buf, uint64_t bytes,
                               hc_chan_req_t *reqs)
{
    uint64_t seg = seg_bytes(bytes);
    uint32_t nseg = hc_sched_nseg(bytes);

    for (uint32_t j = 0; j < nseg; j++) {
        uint64_t off = j * seg, len = bytes - off < seg ? bytes - off : seg;
        HC_CHECK(hc_chan_irecv(s->ch, peer, msg_step(step, j), (uint8_t *)buf + off, len, &reqs[j]));
    }
    return HCCL_SUCCESS;
}

HcclResult hc_sched_wait_array(hc_sched_t *s, hc_chan_req_t *reqs, uint32_t n)
{
    hc_chan_req_t *stack[STACK_REQS] = {NULL}, **ptrs = n <= STACK_REQS ? stack : malloc(n * sizeof(*ptrs));
    HcclResult res;

    if (ptrs == NULL) {
        HC_ERROR("out of memory waiting for %u messages", n);
        return HCCL_E_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++)
        ptrs[i] = &reqs[i];
    res = hc_chan_wait(s->ch, ptrs, n);
    if (ptrs != stack)
        free(ptrs);
    return res;
}

/* n requests, on the stack when few. */
static hc_chan_req_t *reqs_get(uint32_t n, hc_chan_req_t *stack)
{
    hc_chan_req_t *reqs = n <= STACK_REQS ? stack : malloc(n * sizeof(*reqs));

    if (reqs == NULL)
        HC_ERROR("out of memory posting %u messages", n);
    return reqs;
}

static void reqs_put(hc_chan_req_t *reqs, hc_chan_req_t *stack)
{
    if (reqs != stack)
        free(reqs);
}

HcclResult hc_sched_sendrecv(hc_sched_t *s, uint32_t peer_out, const void *out, uint64_t out_bytes, uint32_t peer_in,
                             void *in, uint64_t in_bytes, uint32_t step)
{
    uint32_t nout = hc_sched_nseg(out_bytes), nin = hc_sched_nseg(in_bytes);
    hc_chan_req_t stack[STACK_REQS], *reqs = reqs_get(nout + nin, stack);
    HcclResult res;

    if (reqs == NULL)
        return HCCL_E_MEMORY;
    res = hc_sched_send_block(s, peer_out, step, out, out_bytes, reqs);
    if (res == HCCL_SUCCESS)
        res = hc_sched_recv_block(s, peer_in, step, in, in_bytes, reqs + nout);
    if (res == HCCL_SUCCESS)
        res = hc_sched_wait_array(s, reqs, nout + nin);
    reqs_put(reqs, stack);
    return res;
}

HcclResult hc_sched_send(hc_sched_t *s, uint32_t peer, const void *buf, uint64_t bytes, uint32_t step)
{
    uint32_t nseg = hc_sched_nseg(bytes);
    hc_chan_req_t stack[STACK_REQS], *reqs = reqs_get(nseg, stack);
    HcclResult res;

    if (reqs == NULL)
        return HCCL_E_MEMORY;
    res = hc_sched_send_block(s, peer, step, buf, bytes, reqs);
    if (res == HCCL_SUCCESS)
        res = hc_sched_wait_array(s, reqs, nseg);
    reqs_put(reqs, stack);
    return res;
}

HcclResult hc_sched_recv(hc_sched_t *s, uint32_t peer, void *buf, uint64_t bytes, uint32_t step)
{
    uint32_t nseg = hc_sched_nseg(bytes);
    hc_chan_req_t stack[STACK_REQS], *reqs = reqs_get(nseg, stack);
    HcclResult res;

    if (reqs == NULL)
        return HCCL_E_MEMORY;
    res = hc_sched_recv_block(s, peer, step, buf, bytes, reqs);
    if (res == HCCL_SUCCESS)
        res = hc_sched_wait_array(s, reqs, nseg);
    reqs_put(reqs, stack);
    return res;
}

static void combine(hc_sched_t *s, void *dst, const void *own, const void *theirs, uint64_t elems, int their_first)
{
    const void *srcs[2] = {their_first ? theirs : own, their_first ? own : theirs};

    hc_reduce_multi(s->dtype, s->redop, dst, srcs, 2, elems);
}

/* Receive and reduce segment by segment. Every segment's receive is posted at once, into scratch
 * the size of the block (kept by the engine): the peer sends them all at once, and a segment with no
 * receive posted would be kept aside as early data (a fresh buffer and a second copy). */
static HcclResult reduce_segments(hc_sched_t *s, uint32_t peer, uint8_t *dst, const uint8_t *own, uint64_t elems,
                                  int their_first, uint32_t step)
{
    uint64_t bytes = elems * s->esize, seg = seg_bytes(bytes);
    uint32_t nseg = hc_sched_nseg(bytes);
    hc_chan_req_t stack[STACK_REQS], *reqs = reqs_get(nseg, stack);
    uint8_t *buf = NULL;
    HcclResult res;

    if (reqs == NULL)
        return HCCL_E_MEMORY;
    res = hc_sched_buf(s->seg, bytes + 1, &buf);
    if (res == HCCL_SUCCESS)
        res = hc_sched_recv_block(s, peer, step, buf, bytes, reqs);
    for (uint32_t j = 0; j < nseg && res == HCCL_SUCCESS; j++) {
        uint64_t off = j * seg, len = bytes - off < seg ? bytes - off : seg;
        hc_chan_req_t *req = &reqs[j];
        res = hc_chan_wait(s->ch, &req, 1);
        if (res == HCCL_SUCCESS)
            combine(s, dst + off, own + off, buf + off, len / s->esize, their_first);
    }
    reqs_put(reqs, stack);
    return res;
}

HcclResult hc_sched_recv_reduce(hc_sched_t *s, uint32_t peer_in, void *dst, const void *own, uint64_t elems,
                                int their_first, uint32_t peer_out, const void *out, uint64_t out_bytes, uint32_t step)
{
    uint32_t nout = out != NULL ? hc_sched_nseg(out_bytes) : 0;
    hc_chan_req_t stack[STACK_REQS], *reqs = nout > 0 ? reqs_get(nout, stack) : stack;
    HcclResult res = HCCL_SUCCESS;

    if (reqs == NULL)
        return HCCL_E_MEMORY;
    if (nout > 0)
        res = hc_sched_send_block(s, peer_out, step, out, out_bytes, reqs);
    if (res == HCCL_SUCCESS)
        res = reduce_segments(s, peer_in, dst, own, elems, their_first, step);
    if (res == HCCL_SUCCESS && nout > 0)
        res = hc_sched_wait_array(s, reqs, nout);
    reqs_put(reqs, stack);
    return res;
}
