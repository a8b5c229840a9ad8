/* The channel over the TCP transport: group indices to communicator ranks, steps to message tags. */
#include "hier_internal.h"

_Static_assert(sizeof(hc_net_req_t) <= HC_CHAN_REQ_BYTES, "a channel request holds a TCP request");

static hc_net_tag_t tag_of(const hc_chan_t *ch, uint32_t step)
{
    return (hc_net_tag_t){.kind = HC_NET_COLL, .step = ch->step_base + step, .seq = ch->seq};
}

static HcclResult tcp_isend(hc_chan_t *ch, uint32_t peer, uint32_t step, const void *buf, uint64_t bytes,
                            hc_chan_req_t *req)
{
    return hc_net_isend(ch->transport, hc_group_rank(ch->group, peer), tag_of(ch, step), buf, bytes,
                        (hc_net_req_t *)(void *)req);
}

static HcclResult tcp_irecv(hc_chan_t *ch, uint32_t peer, uint32_t step, void *buf, uint64_t bytes,
                            hc_chan_req_t *req)
{
    return hc_net_irecv(ch->transport, hc_group_rank(ch->group, peer), tag_of(ch, step), buf, bytes,
                        (hc_net_req_t *)(void *)req);
}

static HcclResult tcp_wait(hc_chan_t *ch, hc_chan_req_t *const *reqs, uint32_t n)
{
    return hc_net_wait(ch->transport, (hc_net_req_t *const *)(const void *)reqs, n, ch->op);
}

static const hc_chan_ops_t tcp_chan_ops = {
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .wait = tcp_wait,
};

void hc_chan_tcp_init(hc_chan_t *ch, hc_net_t *net, const hc_group_t *group, const hc_op_t *op, uint32_t phase)
{
    *ch = (hc_chan_t){.ops = &tcp_chan_ops, .group = group, .op = op, .seq = op->coll_seq,
                      .step_base = phase << HC_CHAN_PHASE_SHIFT, .transport = net};
}
