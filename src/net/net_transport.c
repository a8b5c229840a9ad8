/* The TCP transport object: creation, posting sends and receives, waiting, diagnosis. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_time.h"
#include "net_internal.h"

static void free_sockets(hc_net_t *net)
{
    for (uint32_t r = 0; net->peers != NULL && r < net->world.comm_size; r++) {
        net_peer_t *p = &net->peers[r];
        for (uint32_t s = 0; p->socks != NULL && s <= net->nsocks; s++) {
            hc_sock_close(&p->socks[s].fd);
            while (p->socks[s].head != NULL) {
                net_send_t *q = p->socks[s].head;
                p->socks[s].head = q->next;
                free(q->owned);
                free(q);
            }
        }
        free(p->socks);
        free(p->fail_text);
    }
}

void hc_net_destroy(hc_net_t *net)
{
    if (net == NULL)
        return;
    if (net->nconnected > 0)
        hc_net_say_bye(net);
    free_sockets(net);
    while (net->early != NULL) {
        net_early_t *e = net->early;
        net->early = e->next;
        free(e->data);
        free(e);
    }
    hc_net_early_pool_free(net);
    while (net->free_sends != NULL) {
        net_send_t *s = net->free_sends;
        net->free_sends = s->next;
        free(s);
    }
    hc_net_ctl_fini(net);
    pthread_mutex_destroy(&net->progress_lock);
    free(net->peers);
    free(net->pfds);
    free(net->pfd_peer);
    free(net->pfd_sock);
    free(net->ctl_buf);
    hc_group_fini(&net->world);
    free(net);
}

HcclResult hc_net_alloc(const hc_group_t *world, hc_net_t **net_p)
{
    hc_net_t *net = calloc(1, sizeof(*net));
    uint32_t n = world->comm_size;

    if (net == NULL)
        goto oom;
    net->wake_fd = -1;
    if (hc_group_init(&net->world, world, world->ranks, world->size) != HCCL_SUCCESS) {
        free(net);
        return HCCL_E_MEMORY;
    }
    pthread_mutex_init(&net->progress_lock, NULL);
    net->nsocks = (uint32_t)hc_config_int(HC_CFG_NSOCKS);
    net->chunk_bytes = (uint64_t)hc_config_int(HC_CFG_NET_CHUNK_BYTES);
    net->early_max = (uint64_t)hc_config_int(HC_CFG_NET_EARLY_MAX);
    memcpy(net->token, world->token, sizeof(net->token));
    net->comm_id = hc_net_comm_id(net->token);
    net->peers = calloc(n, sizeof(*net->peers));
    net->pfds = calloc((size_t)n * (net->nsocks + 1) + 1, sizeof(*net->pfds));
    net->pfd_peer = calloc((size_t)n * (net->nsocks + 1) + 1, sizeof(*net->pfd_peer));
    net->pfd_sock = calloc((size_t)n * (net->nsocks + 1) + 1, sizeof(*net->pfd_sock));
    net->ctl_buf = malloc(sizeof(HcclRootInfo) > HC_NET_MAX_TEXT ? sizeof(HcclRootInfo) : HC_NET_MAX_TEXT);
    if (net->peers == NULL || net->pfds == NULL || net->pfd_peer == NULL || net->pfd_sock == NULL || net->ctl_buf == NULL || hc_net_ctl_init(net) != HCCL_SUCCESS) {
        hc_net_destroy(net);
        goto oom;
    }
    *net_p = net;
    return HCCL_SUCCESS;
oom:
    HC_ERROR("out of memory creating the TCP transport");
    return HCCL_E_MEMORY;
}

HcclResult hc_net_create(const hc_group_t *world, hc_boot_t *boot, hc_net_want_fn want, const void *ctx,
                         hc_net_t **net_p)
{
    hc_net_t *net;
    HcclResult res;

    HC_CHECK(hc_net_alloc(world, &net));
    res = hc_net_connect_all(net, boot, want, ctx);
    if (res != HCCL_SUCCESS) {
        net->nconnected = 0; /* no goodbyes: the peers fail their creation too */
        hc_net_destroy(net);
        return res;
    }
    *net_p = net;
    return HCCL_SUCCESS;
}

void hc_net_op_begin(hc_net_t *net, const hc_op_t *op)
{
    pthread_mutex_lock(&net->progress_lock);
    if (op->coll_seq != 0)
        net->cur_coll = op->coll_seq;
    net->cur_hash = op->sig_hash;
    net->cur_sig = op->sig;
    net->cur_number = hc_op_number(op);
    net->blame = (hc_net_blame_t){0};
    pthread_mutex_unlock(&net->progress_lock);
}

static HcclResult check_peer_arg(const hc_net_t *net, uint32_t peer)
{
    if (peer < net->world.comm_size && net->peers[peer].socks != NULL)
        return HCCL_SUCCESS;
    HC_ERROR("internal error: rank %u is not connected over TCP", peer);
    return HCCL_E_INTERNAL;
}

static HcclResult post_send(hc_net_t *net, uint32_t peer, hc_net_tag_t tag, const hc_op_sig_t *what,
                            const void *buf, uint64_t bytes, hc_net_req_t *req)
{
    uint64_t chunk = hc_net_chunk_bytes(bytes, net->chunk_bytes), nframes = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
    net_peer_t *p = &net->peers[peer];
    HcclResult res = HCCL_SUCCESS;

    HC_CHECK(check_peer_arg(net, peer));
    *req = (hc_net_req_t){.peer = peer, .is_send = 1, .tag = tag, .buf = (uint8_t *)(uintptr_t)buf, .bytes = bytes,
                          .frames_left = (uint32_t)nframes};
    pthread_mutex_lock(&net->progress_lock);
    req->what = what != NULL ? *what : net->cur_sig;
    for (uint64_t i = 0; i < nframes; i++) {
        uint64_t off = i * chunk;
        net_send_t *s = hc_net_send_alloc(net);
        if (s == NULL) {
            HC_ERROR("out of memory queueing a send to rank %u", peer);
            res = HCCL_E_MEMORY; /* the frames queued so far still go: the op fails on both sides */
            break;
        }
        s->hdr = (hc_net_frame_t){.magic = HC_NET_MAGIC, .type = HC_NET_FRAME_DATA, .kind = (uint16_t)tag.kind,
                                  .src = hc_group_my_rank(&net->world), .step = tag.step, .comm_id = net->comm_id,
                                  .seq = tag.seq, .offset = off, .total = bytes,
                                  .len = (uint32_t)(bytes - off < chunk ? bytes - off : chunk),
                                  .sig_hash = net->cur_hash, .sig = req->what};
        s->payload = (const uint8_t *)buf + off;
        s->req = req;
        hc_net_sock_enqueue(&p->socks[p->next_sock++ % net->nsocks], s);
    }
    pthread_mutex_unlock(&net->progress_lock);
    return res;
}

HcclResult hc_net_isend(hc_net_t *net, uint32_t peer, hc_net_tag_t tag, const void *buf, uint64_t bytes,
                        hc_net_req_t *req)
{
    return post_send(net, peer, tag, NULL, buf, bytes, req);
}

HcclResult hc_net_isend_p2p(hc_net_t *net, uint32_t peer, uint64_t seq, const hc_op_sig_t *what, const void *buf,
                            uint64_t bytes, hc_net_req_t *req)
{
    return post_send(net, peer, (hc_net_tag_t){.kind = HC_NET_P2P, .seq = seq}, what, buf, bytes, req);
}

/* Claim early data for a receive that is posted now. */
static HcclResult claim_early(hc_net_t *net, net_early_t *e, hc_net_req_t *req)
{
    if (e->total != req->bytes || (e->tag.kind == HC_NET_P2P && hc_net_p2p_differs(&e->sig, &req->what)))
        return hc_net_report_mismatch(net, e->src, e->tag.kind, e->tag.seq, &e->sig, e->total, req);
    e->claimed = req;
    req->matched = req->bytes;
    if (e->got == e->total)
        hc_net_early_deliver(net, e); /* everything is here already */
    return HCCL_SUCCESS;
}

static HcclResult post_recv(hc_net_t *net, uint32_t peer, hc_net_tag_t tag, const hc_op_sig_t *what, void *buf,
                            uint64_t bytes, hc_net_req_t *req)
{
    HcclResult res = HCCL_SUCCESS;
    net_early_t *e;

    HC_CHECK(check_peer_arg(net, peer));
    *req = (hc_net_req_t){.peer = peer, .tag = tag, .buf = buf, .bytes = bytes};
    pthread_mutex_lock(&net->progress_lock);
    req->what = what != NULL ? *what : net->cur_sig;
    for (e = net->early; e != NULL; e = e->next)
        if (e->src == peer && e->tag.kind == tag.kind && e->tag.step == tag.step && e->tag.seq == tag.seq)
            break;
    if (e != NULL) {
        res = claim_early(net, e, req);
    } else {
        req->next = net->posted;
        net->posted = req;
    }
    pthread_mutex_unlock(&net->progress_lock);
    return res;
}

HcclResult hc_net_irecv(hc_net_t *net, uint32_t peer, hc_net_tag_t tag, void *buf, uint64_t bytes,
                        hc_net_req_t *req)
{
    return post_recv(net, peer, tag, NULL, buf, bytes, req);
}

HcclResult hc_net_irecv_p2p(hc_net_t *net, uint32_t peer, uint64_t seq, const hc_op_sig_t *what, void *buf,
                            uint64_t bytes, hc_net_req_t *req)
{
    return post_recv(net, peer, (hc_net_tag_t){.kind = HC_NET_P2P, .seq = seq}, what, buf, bytes, req);
}

/* Forget receives of reqs still posted (a failed wait leaves nothing pointing at them). */
static void unpost(hc_net_t *net, hc_net_req_t *const *reqs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        for (hc_net_req_t **link = &net->posted; *link != NULL; link = &(*link)->next) {
            if (*link == reqs[i]) {
                *link = reqs[i]->next;
                break;
            }
        }
        for (net_early_t *e = net->early; e != NULL; e = e->next)
            if (e->claimed == reqs[i])
                e->claimed = NULL;
    }
}

/*
 * What a peer's failure means for this rank's op: a mismatch of this very collective, or of a
 * message between the two of them, is this rank's mismatch too (HCCL_E_PARA on every rank, as inside
 * a host); a timeout of this collective is this rank's timeout too unless this rank is what the
 * peer waited for; anything else is another rank's failure (HCCL_E_REMOTE).
 */
static HcclResult shared_failure(const hc_net_t *net, const net_peer_t *p, const hc_op_t *op)
{
    uint32_t me = hc_group_my_rank(&net->world);
    int this_coll = p->fail.kind == HC_NET_COLL && p->fail.seq != 0 && p->fail.seq == op->coll_seq;

    if (p->fail_status == HCCL_E_PARA && (this_coll || (p->fail.kind == HC_NET_P2P && p->fail.partner == me)))
        return HCCL_E_PARA;
    if (p->fail_status == HCCL_E_TIMEOUT && this_coll && p->fail.partner != me)
        return HCCL_E_TIMEOUT;
    return HCCL_E_REMOTE;
}

/* Is a peer this op needs gone? Logs why (naming rank, host and address) and returns the code. */
static HcclResult peer_problem(hc_net_t *net, uint32_t r, const hc_op_t *op)
{
    net_peer_t *p = &net->peers[r];
    char sig[160];

    hc_op_sig_format(&op->sig, sig, sizeof(sig));
    if (p->state == PEER_FAILED) {
        HcclResult code = shared_failure(net, p, op);
        if (net->blame.kind == 0)
            net->blame = p->fail; /* this rank's notice tells the same story */
        HC_ERROR("%s #%llu failed: rank %u (%s) failed with %s: %s", sig, hc_op_number(op), r,
                 net->world.peers[r].hostname, hc_result_name((HcclResult)p->fail_status),
                 p->fail_text != NULL ? p->fail_text : "");
        return code;
    }
    if (!hc_net_peer_gone(net, r))
        return HCCL_SUCCESS;
    if (p->state == PEER_BYE)
        HC_ERROR("%s #%llu failed: rank %u (%s) destroyed the communicator while this rank waited for it", sig,
                 hc_op_number(op), r, net->world.peers[r].hostname);
    else
        HC_ERROR("%s #%llu failed: the connection to rank %u (host %s, %s) broke (%s): the rank exited, or its "
                 "host or the link went down",
                 sig, hc_op_number(op), r, net->world.peers[r].hostname, p->addr,
                 p->lost_errno != 0 ? strerror(p->lost_errno) : "closed by the peer");
    return HCCL_E_REMOTE;
}

/* The first problem among the peers the pending requests need, or a peer that failed in this
 * collective or an earlier one. */
HcclResult hc_net_explain(hc_net_t *net, const hc_op_t *op, HcclResult res)
{
    pthread_mutex_lock(&net->progress_lock);
    (void)hc_net_progress(net, 0);
    for (uint32_t r = 0; r < net->world.comm_size && res == HCCL_E_REMOTE; r++)
        if (net->peers[r].state == PEER_FAILED && shared_failure(net, &net->peers[r], op) != HCCL_E_REMOTE)
            res = peer_problem(net, r, op);
    pthread_mutex_unlock(&net->progress_lock);
    return res;
}

/* A peer that failed in this collective (or an earlier one): this rank fails too, even when its
 * own messages are all here (a one-step schedule needs nothing more from the others), so that no
 * rank goes on to the next op as if this one had succeeded. */
static HcclResult check_collective(hc_net_t *net, const hc_op_t *op)
{
    for (uint32_t r = 0; net->nfailed > 0 && op->coll_seq != 0 && r < net->world.comm_size; r++) {
        net_peer_t *p = &net->peers[r];
        if (p->state == PEER_FAILED && p->fail.kind == HC_NET_COLL && p->fail.seq != 0 && p->fail.seq <= op->coll_seq)
            return peer_problem(net, r, op);
    }
    return HCCL_SUCCESS;
}

static HcclResult check_peers(hc_net_t *net, hc_net_req_t *const *reqs, uint32_t n, const hc_op_t *op)
{
    for (uint32_t i = 0; i < n; i++)
        if (!reqs[i]->complete)
            HC_CHECK(peer_problem(net, reqs[i]->peer, op));
    return check_collective(net, op);
}

static int all_complete(hc_net_req_t *const *reqs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!reqs[i]->complete)
            return 0;
    return 1;
}

static HcclResult report_timeout(hc_net_t *net, hc_net_req_t *const *reqs, uint32_t n, const hc_op_t *op)
{
    char sig[160];

    for (uint32_t i = 0; i < n; i++) {
        hc_net_req_t *q = reqs[i];
        if (q->complete)
            continue;
        net->blame = (hc_net_blame_t){.kind = HC_NET_COLL, .partner = q->peer, .seq = op->coll_seq};
        HC_ERROR("%s #%llu timed out after HCCL_EXEC_TIMEOUT=%lld s waiting for rank %u (%s): %s %llu of %llu "
                 "bytes of step %u",
                 hc_op_sig_format(&op->sig, sig, sizeof(sig)), hc_op_number(op),
                 (long long)net->world.settings->exec_timeout_s, q->peer, net->world.peers[q->peer].hostname,
                 q->is_send ? "sent" : "received", (unsigned long long)q->placed, (unsigned long long)q->bytes,
                 q->tag.step);
        break;
    }
    return HCCL_E_TIMEOUT;
}

HcclResult hc_net_wait(hc_net_t *net, hc_net_req_t *const *reqs, uint32_t n, const hc_op_t *op)
{
    int64_t deadline = hc_deadline_after_s(net->world.settings->exec_timeout_s);
    int slice_ms = (int)net->world.settings->peer_check_ms, first = 1;
    HcclResult res = HCCL_SUCCESS;

    pthread_mutex_lock(&net->progress_lock);
    for (;;) {
        int wait_ms = slice_ms;
        hc_net_ctl_drain(net);
        if (all_complete(reqs, n)) {
            res = check_collective(net, op);
            break;
        }
        if ((res = check_peers(net, reqs, n, op)) != HCCL_SUCCESS)
            break;
        if (atomic_load(net->world.aborting)) {
            HC_ERROR("%s #%llu aborted: the communicator is being destroyed", hc_coll_name((hc_coll_t)op->sig.coll),
                     hc_op_number(op));
            res = HCCL_E_INTERNAL;
            break;
        }
        if (hc_deadline_passed(deadline)) {
            res = report_timeout(net, reqs, n, op);
            break;
        }
        if (deadline != 0 && hc_deadline_ms_left(deadline) < wait_ms)
            wait_ms = hc_deadline_ms_left(deadline);
        res = hc_net_progress_ready(net, wait_ms > 0 ? wait_ms : 1, first);
        first = 0;
        if (res != HCCL_SUCCESS)
            break;
    }
    if (res != HCCL_SUCCESS)
        unpost(net, reqs, n);
    pthread_mutex_unlock(&net->progress_lock);
    return res;
}

/* Drop a data socket's queued frames; 1 if the stream was left in the middle of one. */
static int drop_queue(hc_net_t *net, net_sock_t *sock)
{
    int torn = sock->head != NULL && sock->head->sent > 0;

    while (sock->head != NULL) {
        net_send_t *s = sock->head;
        sock->head = s->next;
        hc_net_send_free(net, s);
    }
    sock->tail = NULL;
    return torn || (sock->have_hdr && sock->dst_req != NULL);
}

void hc_net_cancel(hc_net_t *net)
{
    pthread_mutex_lock(&net->progress_lock);
    net->broken = 1;
    net->posted = NULL;
    for (net_early_t *e = net->early; e != NULL; e = e->next)
        e->claimed = NULL;
    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        net_peer_t *p = &net->peers[r];
        for (uint32_t s = 0; p->socks != NULL && s < net->nsocks; s++)
            if (drop_queue(net, &p->socks[s]) && p->socks[s].fd >= 0) {
                hc_sock_close(&p->socks[s].fd);
                p->data_open--;
            }
    }
    pthread_mutex_unlock(&net->progress_lock);
}

int hc_net_connected(const hc_net_t *net, uint32_t r)
{
    return r < net->world.comm_size && net->peers[r].socks != NULL;
}

void hc_net_describe_link(const hc_net_t *net, uint32_t r, char *buf, size_t len)
{
    if (!hc_net_connected(net, r))
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "tcp %s x%u", net->peers[r].addr, net->nsocks);
}

/* What a peer's data sockets hold back: a message waiting for a later collective (parked), frames
 * not yet written. Empty when nothing is held. */
static const char *describe_socks(const hc_net_t *net, const net_peer_t *p, char *text, size_t len)
{
    size_t used = 0;

    text[0] = '\0';
    for (uint32_t s = 0; s < net->nsocks && used + 1 < len; s++) {
        const net_sock_t *sock = &p->socks[s];
        uint64_t queued = 0;
        int w = 0;
        for (const net_send_t *q = sock->head; q != NULL; q = q->next)
            queued += sizeof(q->hdr) + q->hdr.len - q->sent;
        if (sock->parked)
            w = snprintf(text + used, len - used, "; socket %u holds a message of collective #%llu (step %u)", s,
                         (unsigned long long)sock->hdr.seq, sock->hdr.step);
        else if (queued > 0)
            w = snprintf(text + used, len - used, "; socket %u has %llu bytes to send", s, (unsigned long long)queued);
        if (w < 0)
            break;
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
    return text;
}

void hc_net_describe(const hc_net_t *net, char *buf, size_t len)
{
    static const char *const states[] = {"connected", "said goodbye", "failed"};
    char sock_text[256];
    size_t used = strlen(buf);

    for (uint32_t r = 0; r < net->world.comm_size && used + 1 < len; r++) {
        const net_peer_t *p = &net->peers[r];
        int w;
        if (p->socks == NULL)
            continue;
        w = snprintf(buf + used, len - used, "  rank %u (%s, %s over TCP): %s%s, last data for collective #%llu%s\n",
                     r, net->world.peers[r].hostname, p->addr, states[p->state],
                     p->data_open == 0 || p->lost_errno != 0 ? ", connection closed" : "",
                     (unsigned long long)p->heard_seq, describe_socks(net, p, sock_text, sizeof(sock_text)));
        if (w < 0)
            break;
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
}
