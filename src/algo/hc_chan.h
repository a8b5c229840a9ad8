/*
 * What a schedule needs of a transport (DESIGN.md 5): post a send or a receive to a peer of its
 * group, then wait for a set of them. Peers are group indices; `step` tells the messages of one op
 * apart (a schedule numbers its steps, the channel adds a base so that several schedules can run in
 * one op). Every transport gives the same guarantees: messages between two peers with distinct
 * steps never mix, a receive's length must equal the send's (else the op fails on both sides as a
 * mismatch), waits are bounded and fail when a peer dies.
 *
 * recv-reduce (receive a peer's data and combine it with this rank's) is built on these two by the
 * schedules (algo_util.c), segment by segment, so that reducing one segment overlaps the arrival of
 * the next.
 */
#ifndef HC_CHAN_H
#define HC_CHAN_H

#include <stdint.h>

#include "hc_group.h"
#include "hc_op.h"

#define HC_CHAN_REQ_BYTES 160

/* A posted send or receive: storage for the transport's request. */
typedef struct {
    _Alignas(8) uint8_t opaque[HC_CHAN_REQ_BYTES];
} hc_chan_req_t;

typedef struct hc_chan hc_chan_t;

typedef struct {
    HcclResult (*isend)(hc_chan_t *ch, uint32_t peer, uint32_t step, const void *buf, uint64_t bytes,
                        hc_chan_req_t *req);
    HcclResult (*irecv)(hc_chan_t *ch, uint32_t peer, uint32_t step, void *buf, uint64_t bytes, hc_chan_req_t *req);
    HcclResult (*wait)(hc_chan_t *ch, hc_chan_req_t *const *reqs, uint32_t n);
} hc_chan_ops_t;

struct hc_chan {
    const hc_chan_ops_t *ops;
    const hc_group_t *group;  /* peers are indices of this group */
    const hc_op_t *op;        /* the op the messages belong to (numbers, messages) */
    uint64_t seq;             /* the collective number every member agrees on */
    uint32_t step_base;       /* added to each step */
    void *transport;
};

static inline HcclResult hc_chan_isend(hc_chan_t *ch, uint32_t peer, uint32_t step, const void *buf, uint64_t bytes,
                                       hc_chan_req_t *req)
{
    return ch->ops->isend(ch, peer, step, buf, bytes, req);
}

static inline HcclResult hc_chan_irecv(hc_chan_t *ch, uint32_t peer, uint32_t step, void *buf, uint64_t bytes,
                                       hc_chan_req_t *req)
{
    return ch->ops->irecv(ch, peer, step, buf, bytes, req);
}

static inline HcclResult hc_chan_wait(hc_chan_t *ch, hc_chan_req_t *const *reqs, uint32_t n)
{
    return ch->ops->wait(ch, reqs, n);
}

#endif /* HC_CHAN_H */
