/*
 * Point-to-point in the hierarchical engine: to a rank on this host through the intra-host engine,
 * to any other over TCP, where messages of a pair are numbered in issue order on each side (the
 * n-th send to a peer matches its n-th receive from this rank). A batch runs its items on this
 * host first and waits for the TCP ones after: its local part needs only local peers' batches, so
 * every rank gets through it, and then every rank waits only for TCP messages.
 *
 * A TCP send completes when the receiver has matched and checked the message and said so (an empty
 * reply): as inside a host, a count or type mismatch then fails both sides, not only the receiver.
 */
#include <stdlib.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "hier_internal.h"

static int local_peer(const hier_engine_t *eng, uint32_t r)
{
    return eng->local != NULL && eng->hierarchical &&
           eng->host_of[r] == eng->host_of[hc_group_my_rank(&eng->base.group)];
}

static HcclResult post_item(hier_engine_t *eng, const HcclSendRecvItem *it, hc_net_req_t *req, uint64_t *seq_p)
{
    uint64_t bytes = it->count * hc_dtype_size(it->dataType);
    uint32_t peer = it->remoteRank;
    hc_op_sig_t what = {.coll = it->sendRecvType == HCCL_SEND ? HC_COLL_SEND : HC_COLL_RECV,
                        .dtype = (uint32_t)it->dataType, .count = it->count, .root = peer};

    if (it->sendRecvType == HCCL_SEND) {
        *seq_p = ++eng->p2p_sent[peer];
        return hc_net_isend_p2p(eng->net, peer, *seq_p, &what, it->buf, bytes, req);
    }
    *seq_p = ++eng->p2p_recv[peer];
    return hc_net_irecv_p2p(eng->net, peer, *seq_p, &what, it->buf, bytes, req);
}

/* The replies: every receiver acknowledges, every sender waits for its acknowledgement. */
static HcclResult acknowledge(hier_engine_t *eng, const hc_op_t *op, const HcclSendRecvItem *const *remote,
                              const uint64_t *seqs, hc_net_req_t *reqs, hc_net_req_t **ptrs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        hc_net_tag_t tag = {.kind = HC_NET_P2P_ACK, .seq = seqs[i]};
        HC_CHECK(remote[i]->sendRecvType == HCCL_SEND
                     ? hc_net_irecv(eng->net, remote[i]->remoteRank, tag, NULL, 0, &reqs[i])
                     : hc_net_isend(eng->net, remote[i]->remoteRank, tag, NULL, 0, &reqs[i]));
    }
    return hc_net_wait(eng->net, ptrs, n, op);
}

/* Run items (communicator ranks) of op: the local ones as one batch on the intra-host engine, the
 * others over TCP. */
static HcclResult run_items(hier_engine_t *eng, const hc_op_t *op, const HcclSendRecvItem *items, uint32_t n)
{
    HcclSendRecvItem *local = calloc(n ? n : 1, sizeof(*local));
    hc_net_req_t *reqs = calloc(n ? n : 1, sizeof(*reqs));
    hc_net_req_t **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    const HcclSendRecvItem **remote = calloc(n ? n : 1, sizeof(*remote));
    uint64_t *seqs = calloc(n ? n : 1, sizeof(*seqs));
    uint32_t nlocal = 0, nremote = 0;
    HcclResult res = HCCL_SUCCESS;

    if (local == NULL || reqs == NULL || ptrs == NULL || remote == NULL || seqs == NULL) {
        HC_ERROR("out of memory running %u send/receive items", n);
        res = HCCL_E_MEMORY;
        goto out;
    }
    for (uint32_t i = 0; i < n && res == HCCL_SUCCESS; i++) {
        if (local_peer(eng, items[i].remoteRank)) {
            local[nlocal] = items[i];
            local[nlocal++].remoteRank = eng->local_of[items[i].remoteRank];
        } else {
            ptrs[nremote] = &reqs[nremote];
            remote[nremote] = &items[i];
            res = post_item(eng, &items[i], &reqs[nremote], &seqs[nremote]);
            nremote++;
        }
    }
    if (res == HCCL_SUCCESS && nlocal > 0) {
        hc_op_t sub = {.items = local, .nitems = nlocal};
        res = hc_hier_run_local(eng, op, HC_COLL_BATCH_SENDRECV, &sub);
    }
    if (res == HCCL_SUCCESS && nremote > 0)
        res = hc_net_wait(eng->net, ptrs, nremote, op);
    if (res == HCCL_SUCCESS && nremote > 0)
        res = acknowledge(eng, op, remote, seqs, reqs, ptrs, nremote);
out:
    free(local);
    free(reqs);
    free(ptrs);
    free(remote);
    free(seqs);
    return res;
}

static HcclResult one_item(hc_engine_t *engine, hc_op_t *op, HcclSendRecvType type)
{
    HcclSendRecvItem item = {.sendRecvType = type, .buf = type == HCCL_SEND ? op->sendbuf : op->recvbuf,
                             .count = op->count, .dataType = op->dtype, .remoteRank = op->root};
    hier_engine_t *eng = hier_of(engine);

    if (local_peer(eng, op->root)) {
        hc_op_t sub = {.sendbuf = op->sendbuf, .recvbuf = op->recvbuf, .count = op->count, .dtype = op->dtype,
                       .root = eng->local_of[op->root]};
        return hc_hier_run_local(eng, op, type == HCCL_SEND ? HC_COLL_SEND : HC_COLL_RECV, &sub);
    }
    return run_items(eng, op, &item, 1);
}

HcclResult hc_hier_send(hc_engine_t *engine, hc_op_t *op)
{
    return one_item(engine, op, HCCL_SEND);
}

HcclResult hc_hier_recv(hc_engine_t *engine, hc_op_t *op)
{
    return one_item(engine, op, HCCL_RECV);
}

HcclResult hc_hier_batch(hc_engine_t *engine, hc_op_t *op)
{
    return run_items(hier_of(engine), op, op->items, op->nitems);
}
