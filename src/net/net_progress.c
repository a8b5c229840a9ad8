/*
 * Progress of the TCP transport: the send queues, the receive state machine of each socket, the
 * matching of chunks to posted receives (or to early data), and the poll loop. Everything here
 * runs under the transport's progress lock.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_copy.h"
#include "hc_dtype.h"
#include "hc_time.h"
#include "net_internal.h"

net_send_t *hc_net_send_alloc(hc_net_t *net)
{
    net_send_t *s = net->free_sends;

    if (s != NULL)
        net->free_sends = s->next;
    else if ((s = malloc(sizeof(*s))) == NULL)
        return NULL;
    memset(s, 0, sizeof(*s));
    return s;
}

void hc_net_send_free(hc_net_t *net, net_send_t *s)
{
    free(s->owned);
    s->owned = NULL;
    s->next = net->free_sends;
    net->free_sends = s;
}

void hc_net_sock_enqueue(net_sock_t *sock, net_send_t *s)
{
    s->next = NULL;
    if (sock->tail != NULL)
        sock->tail->next = s;
    else
        sock->head = s;
    sock->tail = s;
}

/* A socket of peer ended: in order after its last byte (err 0) or broken (err: errno). A broken
 * control socket breaks the whole connection; a broken data socket alone may be the peer giving up
 * a stream after a failed op (its abort notice comes on the control socket). */
static void sock_lost(hc_net_t *net, uint32_t peer, net_sock_t *sock, int err)
{
    net_peer_t *p = &net->peers[peer];
    int whole = err != 0 && sock == hc_net_ctl_sock(net, peer);

    for (uint32_t s = 0; s <= net->nsocks; s++) {
        net_sock_t *each = &p->socks[s];
        if (each->fd < 0 || (!whole && each != sock))
            continue;
        hc_sock_close(&each->fd);
        if (s < net->nsocks)
            p->data_open--;
    }
    if (err != 0 && p->lost_errno == 0)
        p->lost_errno = err;
}

/* Write what the socket's queue holds until the kernel takes no more. 1 if anything moved. */
static int write_sock(hc_net_t *net, uint32_t peer, net_sock_t *sock)
{
    int moved = 0;

    while (sock->head != NULL && sock->fd >= 0) {
        net_send_t *s = sock->head;
        uint64_t total = sizeof(s->hdr) + s->hdr.len;
        struct iovec iov[2];
        int n = 0;
        ssize_t w;

        if (s->sent < sizeof(s->hdr))
            iov[n++] = (struct iovec){(uint8_t *)&s->hdr + s->sent, sizeof(s->hdr) - s->sent};
        if (s->hdr.len > 0) {
            uint64_t off = s->sent > sizeof(s->hdr) ? s->sent - sizeof(s->hdr) : 0;
            iov[n++] = (struct iovec){(void *)(uintptr_t)(s->payload + off), s->hdr.len - off};
        }
        w = sendmsg(sock->fd, &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n}, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                sock_lost(net, peer, sock, errno);
            break;
        }
        moved = 1;
        s->sent += (uint64_t)w;
        if (s->sent < total)
            break; /* the kernel's buffer is full */
        sock->head = s->next;
        if (sock->head == NULL)
            sock->tail = NULL;
        if (s->req != NULL) {
            s->req->placed += s->hdr.len;
            if (--s->req->frames_left == 0)
                s->req->complete = 1;
        }
        hc_net_send_free(net, s);
    }
    return moved;
}

static int tag_equal(const hc_net_tag_t *a, uint32_t kind, uint32_t step, uint64_t seq)
{
    return a->kind == kind && a->step == step && a->seq == seq;
}

static net_early_t *find_early(hc_net_t *net, uint32_t src, uint32_t kind, uint32_t step, uint64_t seq)
{
    for (net_early_t *e = net->early; e != NULL; e = e->next)
        if (e->src == src && tag_equal(&e->tag, kind, step, seq))
            return e;
    return NULL;
}

static hc_net_req_t *find_posted(hc_net_t *net, uint32_t src, uint32_t kind, uint32_t step, uint64_t seq,
                                 hc_net_req_t ***link_p)
{
    for (hc_net_req_t **link = &net->posted; *link != NULL; link = &(*link)->next) {
        hc_net_req_t *r = *link;
        if (r->peer == src && tag_equal(&r->tag, kind, step, seq)) {
            *link_p = link;
            return r;
        }
    }
    return NULL;
}

int hc_net_p2p_differs(const hc_op_sig_t *sent, const hc_op_sig_t *received)
{
    return sent->count != received->count || sent->dtype != received->dtype;
}

HcclResult hc_net_report_mismatch(hc_net_t *net, uint32_t src, uint32_t kind, uint64_t seq, const hc_op_sig_t *theirs,
                                  uint64_t total, const hc_net_req_t *req)
{
    char mine_text[160], their_text[160];
    uint32_t me = hc_group_my_rank(&net->world);

    net->blame = (hc_net_blame_t){.kind = kind, .partner = src, .seq = seq};
    if (kind == HC_NET_P2P) {
        HC_ERROR("%s #%llu mismatch: rank %u sends %llu %s (message %llu), rank %u receives %llu %s (message %llu)",
                 hc_coll_name((hc_coll_t)net->cur_sig.coll), (unsigned long long)net->cur_number, src,
                 (unsigned long long)theirs->count, hc_dtype_name((HcclDataType)theirs->dtype),
                 (unsigned long long)seq, me, (unsigned long long)req->what.count,
                 hc_dtype_name((HcclDataType)req->what.dtype), (unsigned long long)seq);
        return HCCL_E_PARA;
    }
    hc_op_sig_format(&net->cur_sig, mine_text, sizeof(mine_text));
    hc_op_sig_format(theirs, their_text, sizeof(their_text));
    if (req != NULL && total != req->bytes && net->cur_sig.coll == HC_COLL_ALLTOALLV && theirs->coll == HC_COLL_ALLTOALLV)
        HC_ERROR("%s #%llu mismatch: rank %u sends %llu bytes to rank %u, which expects %llu from it (the ranks' "
                 "send and receive counts disagree)",
                 hc_coll_name((hc_coll_t)net->cur_sig.coll), (unsigned long long)seq, src, (unsigned long long)total,
                 me, (unsigned long long)req->bytes);
    else if (req != NULL && total != req->bytes)
        HC_ERROR("%s #%llu mismatch: rank %u called %s, rank %u called %s (it sends %llu bytes, this rank receives "
                 "%llu)",
                 hc_coll_name((hc_coll_t)net->cur_sig.coll), (unsigned long long)seq, me, mine_text, src, their_text,
                 (unsigned long long)total, (unsigned long long)req->bytes);
    else
        HC_ERROR("%s #%llu mismatch: rank %u called %s, rank %u called %s",
                 hc_coll_name((hc_coll_t)net->cur_sig.coll), (unsigned long long)seq, me, mine_text, src, their_text);
    return HCCL_E_PARA;
}

/* The smallest pooled buffer that holds bytes, or a new one; its size in *cap_p. */
static uint8_t *early_buf_get(hc_net_t *net, uint64_t bytes, uint64_t *cap_p)
{
    net_early_buf_t *best = NULL;
    uint8_t *buf;

    for (int i = 0; i < HC_NET_EARLY_POOL; i++) {
        net_early_buf_t *b = &net->early_pool[i];
        if (b->buf != NULL && b->cap >= bytes && (best == NULL || b->cap < best->cap))
            best = b;
    }
    if (best == NULL) {
        *cap_p = bytes;
        return malloc(bytes);
    }
    buf = best->buf;
    *cap_p = best->cap;
    *best = (net_early_buf_t){0};
    return buf;
}

/* Keep buf for the next early message: in a free place, or instead of a smaller one. */
static void early_buf_put(hc_net_t *net, uint8_t *buf, uint64_t cap)
{
    net_early_buf_t *smallest = NULL;

    if (cap <= HC_NET_EARLY_POOL_BYTES) {
        for (int i = 0; i < HC_NET_EARLY_POOL; i++) {
            net_early_buf_t *b = &net->early_pool[i];
            if (smallest == NULL || b->buf == NULL || (smallest->buf != NULL && b->cap < smallest->cap))
                smallest = b;
        }
    }
    if (smallest == NULL || (smallest->buf != NULL && smallest->cap >= cap)) {
        free(buf);
        return;
    }
    free(smallest->buf);
    *smallest = (net_early_buf_t){.buf = buf, .cap = cap};
}

void hc_net_early_pool_free(hc_net_t *net)
{
    for (int i = 0; i < HC_NET_EARLY_POOL; i++) {
        free(net->early_pool[i].buf);
        net->early_pool[i] = (net_early_buf_t){0};
    }
}

/* Early data for a chunk nobody posted a receive for yet. */
static HcclResult early_for(hc_net_t *net, const hc_net_frame_t *f, net_early_t **early_p)
{
    net_early_t *e = find_early(net, f->src, f->kind, f->step, f->seq);

    if (e == NULL) {
        e = calloc(1, sizeof(*e));
        if (e == NULL || (e->data = early_buf_get(net, f->total ? f->total : 1, &e->cap)) == NULL) {
            free(e);
            HC_ERROR("out of memory keeping %llu bytes from rank %u that arrived early", (unsigned long long)f->total,
                     f->src);
            return HCCL_E_MEMORY;
        }
        e->src = f->src;
        e->tag = (hc_net_tag_t){.kind = f->kind, .step = f->step, .seq = f->seq};
        e->total = f->total;
        e->sig = f->sig;
        e->sig_hash = f->sig_hash;
        e->next = net->early;
        net->early = e;
    } else if (e->total != f->total) {
        HC_ERROR("rank %u sent chunks of one message with different lengths (%llu and %llu bytes)", f->src,
                 (unsigned long long)e->total, (unsigned long long)f->total);
        return HCCL_E_TCP_TRANSFER;
    }
    *early_p = e;
    return HCCL_SUCCESS;
}

/* Mark the chunk of f in `seen`; HCCL_E_TCP_TRANSFER (logged) when it came before. The frame check
 * made sure it is one of its message's chunks, so its index is below HC_NET_MAX_CHUNKS. */
static HcclResult chunk_once(hc_net_t *net, uint64_t seen[4], const hc_net_frame_t *f)
{
    uint64_t k = f->offset / hc_net_chunk_bytes(f->total, net->chunk_bytes);
    uint64_t bit = 1ull << (k % 64);

    if (seen[k / 64] & bit) {
        HC_ERROR("rank %u sent chunk %llu of a message twice", f->src, (unsigned long long)k);
        return HCCL_E_TCP_TRANSFER;
    }
    seen[k / 64] |= bit;
    return HCCL_SUCCESS;
}

/* A data header arrived on sock: decide where its payload goes (or park the socket). */
static HcclResult route_data(hc_net_t *net, net_sock_t *sock)
{
    const hc_net_frame_t *f = &sock->hdr;
    hc_net_req_t *req, **link = NULL;
    net_early_t *e;

    if (f->kind == HC_NET_COLL) {
        if (f->seq > net->cur_coll) {
            sock->parked = 1; /* a later collective: its turn comes */
            return HCCL_SUCCESS;
        }
        if (f->seq < net->cur_coll) {
            HC_ERROR("rank %u sent data for collective #%llu, which this rank has finished (now in #%llu)", f->src,
                     (unsigned long long)f->seq, (unsigned long long)net->cur_coll);
            return HCCL_E_TCP_TRANSFER;
        }
        if (f->sig_hash != net->cur_hash)
            return hc_net_report_mismatch(net, f->src, f->kind, f->seq, &f->sig, f->total, NULL);
        net->peers[f->src].heard_seq = f->seq;
    }
    sock->parked = 0;
    e = find_early(net, f->src, f->kind, f->step, f->seq);
    req = e == NULL ? find_posted(net, f->src, f->kind, f->step, f->seq, &link) : NULL;
    if (req != NULL) {
        if (f->total != req->bytes || (f->kind == HC_NET_P2P && hc_net_p2p_differs(&f->sig, &req->what)))
            return hc_net_report_mismatch(net, f->src, f->kind, f->seq, &f->sig, f->total, req);
        HC_CHECK(chunk_once(net, req->seen, f));
        req->matched += f->len;
        if (req->matched == req->bytes)
            *link = req->next; /* every chunk is matched: no longer a candidate */
        sock->dst = req->buf + f->offset;
        sock->dst_req = req;
        sock->dst_early = NULL;
        return HCCL_SUCCESS;
    }
    if (e == NULL && f->total > net->early_max) {
        sock->parked = 1; /* too large to keep aside: wait for its receive to be posted */
        return HCCL_SUCCESS;
    }
    if (e == NULL)
        HC_CHECK(early_for(net, f, &e));
    HC_CHECK(chunk_once(net, e->seen, f));
    sock->dst = e->data + f->offset;
    sock->dst_req = NULL;
    sock->dst_early = e;
    return HCCL_SUCCESS;
}

void hc_net_early_deliver(hc_net_t *net, net_early_t *e)
{
    hc_net_req_t *req = e->claimed;

    if (e->total > 0) /* a message of 0 bytes may come with no buffer on either side */
        hc_copy(req->buf, e->data, e->total);
    req->placed = req->matched = req->bytes;
    req->complete = 1;
    for (net_early_t **link = &net->early; *link != NULL; link = &(*link)->next) {
        if (*link == e) {
            *link = e->next;
            break;
        }
    }
    early_buf_put(net, e->data, e->cap);
    free(e);
}

/* The payload of sock's current frame is complete. */
static void payload_done(hc_net_t *net, uint32_t peer, net_sock_t *sock)
{
    const hc_net_frame_t *f = &sock->hdr;

    if (f->type != HC_NET_FRAME_DATA) {
        hc_net_ctl_received(net, peer, f, net->ctl_buf);
    } else if (sock->dst_req != NULL) {
        hc_net_req_t *req = sock->dst_req;
        req->placed += f->len;
        if (req->placed == req->bytes && req->matched == req->bytes)
            req->complete = 1;
    } else if (sock->dst_early != NULL) {
        net_early_t *e = sock->dst_early;
        e->got += f->len;
        if (e->got == e->total && e->claimed != NULL)
            hc_net_early_deliver(net, e);
    }
    sock->have_hdr = 0;
    sock->hdr_got = 0;
    sock->dst_req = NULL;
    sock->dst_early = NULL;
}

/* A complete header: check it and route it. */
static HcclResult header_done(hc_net_t *net, uint32_t peer, net_sock_t *sock)
{
    HC_CHECK(hc_net_frame_check(&sock->hdr, net->comm_id, hc_group_my_rank(&net->world), net->world.comm_size,
                                net->chunk_bytes));
    if (sock->hdr.src != peer) {
        HC_ERROR("rank %u's connection carries a message claiming to come from rank %u", peer, sock->hdr.src);
        return HCCL_E_TCP_TRANSFER;
    }
    sock->have_hdr = 1;
    sock->payload_got = 0;
    if (sock->hdr.type != HC_NET_FRAME_DATA) {
        sock->dst = net->ctl_buf;
        return HCCL_SUCCESS;
    }
    return route_data(net, sock);
}

/* A frame that failed its checks leaves the socket's stream where nothing more can be read from it
 * safely: close it (the peer learns why from the abort notice this rank sends). */
static HcclResult abandon(hc_net_t *net, uint32_t peer, net_sock_t *sock, HcclResult res)
{
    if (sock != hc_net_ctl_sock(net, peer) && sock->fd >= 0)
        net->peers[peer].data_open--;
    hc_sock_close(&sock->fd);
    sock->have_hdr = 0;
    sock->parked = 0;
    sock->hdr_got = 0;
    sock->dst = NULL;
    sock->dst_req = NULL;
    sock->dst_early = NULL;
    return res;
}

/* Before poll waits for sock: while at least LOWAT_MIN_BYTES of a payload are still to come, poll
 * wakes only once all of them are here (SO_RCVLOWAT; the kernel grows the receive buffer to fit and
 * still wakes early under memory pressure or a closed window); else at the first byte. Woken at
 * every 64 KiB segment, the receiver read a chunk in pieces while the sender was still writing it,
 * and that slowed the sender: on two network-namespace hosts of the reference VM (2 x 1 AllReduce
 * of 1 MiB, 512 KiB chunks), a chunk's sendmsg took a median 119-184 us instead of 59-60, and the
 * op 752-759 us instead of 308-359 (bench/results/2026-12-06-multihost-tcp-log.md). */
#define LOWAT_MIN_BYTES (64u << 10)

static void set_lowat(net_sock_t *sock)
{
    uint64_t left = sock->have_hdr && !sock->parked ? sock->hdr.len - sock->payload_got : 0;
    int want = left < LOWAT_MIN_BYTES ? 1 : left > INT_MAX ? INT_MAX : (int)left; /* the kernel caps it */

    if (want != (sock->lowat > 0 ? sock->lowat : 1) &&
        setsockopt(sock->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
        sock->lowat = want;
}

/* Read what the socket has, frame by frame, until it would block or parks. 1 if anything moved. */
static HcclResult read_sock(hc_net_t *net, uint32_t peer, net_sock_t *sock, int *moved_p)
{
    HcclResult res;

    for (;;) {
        ssize_t n;
        if (sock->fd < 0)
            return HCCL_SUCCESS;
        if (sock->have_hdr && sock->parked) {
            if ((res = route_data(net, sock)) != HCCL_SUCCESS) /* the collective may have begun */
                return abandon(net, peer, sock, res);
            if (sock->parked)
                return HCCL_SUCCESS;
        }
        if (!sock->have_hdr) {
            n = recv(sock->fd, (uint8_t *)&sock->hdr + sock->hdr_got, sizeof(sock->hdr) - sock->hdr_got, MSG_DONTWAIT);
        } else if (sock->payload_got < sock->hdr.len) {
            n = recv(sock->fd, sock->dst + sock->payload_got, sock->hdr.len - sock->payload_got, MSG_DONTWAIT);
        } else {
            payload_done(net, peer, sock);
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            sock_lost(net, peer, sock, n == 0 ? 0 : errno);
            return HCCL_SUCCESS;
        }
        if (n < 0) {
            set_lowat(sock);
            return HCCL_SUCCESS;
        }
        *moved_p = 1;
        if (!sock->have_hdr) {
            sock->hdr_got += (uint32_t)n;
            if (sock->hdr_got == sizeof(sock->hdr) && (res = header_done(net, peer, sock)) != HCCL_SUCCESS)
                return abandon(net, peer, sock, res);
        } else {
            sock->payload_got += (uint64_t)n;
        }
    }
}

/* Non-blocking I/O on every socket of every connected peer; the control socket first, so that a
 * peer's abort notice is read before the broken data connection that may follow it. Once this
 * rank failed (hc_net_cancel) only the control sockets move. */
static HcclResult io_round(hc_net_t *net, int *moved_p)
{
    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        net_peer_t *p = &net->peers[r];
        if (p->socks == NULL)
            continue;
        for (uint32_t k = 0; k <= (net->broken ? 0 : net->nsocks); k++) {
            uint32_t s = (k + net->nsocks) % (net->nsocks + 1);
            *moved_p |= write_sock(net, r, &p->socks[s]);
            HC_CHECK(read_sock(net, r, &p->socks[s], moved_p));
        }
    }
    return HCCL_SUCCESS;
}

/* Fill the pollfd scratch: every open socket (reading unless parked, writing if queued), each
 * peer's control socket first, and the control doorbell (last); pfd_sock says whose each is. */
static nfds_t fill_pollfds(hc_net_t *net)
{
    nfds_t n = 0;

    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        net_peer_t *p = &net->peers[r];
        for (uint32_t k = 0; p->socks != NULL && k <= net->nsocks; k++) {
            uint32_t s = (k + net->nsocks) % (net->nsocks + 1);
            net_sock_t *sock = &p->socks[s];
            /* A parked socket is not watched for reading: poll would report its hang-up at once,
             * again and again, while nothing reads it. Neither are data sockets after a failure. */
            if (sock->fd < 0 || (sock->parked && sock->head == NULL) || (net->broken && s < net->nsocks))
                continue;
            net->pfds[n] = (struct pollfd){.fd = sock->fd,
                                           .events = (short)((sock->parked ? 0 : POLLIN) |
                                                             (sock->head != NULL ? POLLOUT : 0))};
            net->pfd_peer[n] = r;
            net->pfd_sock[n] = sock;
            n++;
        }
    }
    net->pfds[n++] = (struct pollfd){.fd = net->wake_fd, .events = POLLIN};
    return n;
}

/* I/O on the sockets poll found ready (in fill_pollfds' order: control before data). */
static HcclResult io_ready(hc_net_t *net, nfds_t n, int *moved_p)
{
    for (nfds_t i = 0; i + 1 < n; i++) {
        net_sock_t *sock = net->pfd_sock[i];
        short ev = net->pfds[i].revents;
        if (ev == 0 || sock->fd != net->pfds[i].fd)
            continue; /* nothing, or closed since the poll */
        if (ev & POLLOUT)
            *moved_p |= write_sock(net, net->pfd_peer[i], sock);
        if (ev & (POLLIN | POLLHUP | POLLERR))
            HC_CHECK(read_sock(net, net->pfd_peer[i], sock, moved_p));
    }
    return HCCL_SUCCESS;
}

static HcclResult poll_once(hc_net_t *net, int wait_ms, int *moved_p)
{
    nfds_t n = fill_pollfds(net);

    if (poll(net->pfds, n, wait_ms) <= 0)
        return HCCL_SUCCESS;
    if (net->pfds[n - 1].revents & POLLIN) {
        uint64_t drained;
        (void)!read(net->wake_fd, &drained, sizeof(drained));
    }
    return io_ready(net, n, moved_p);
}

HcclResult hc_net_progress(hc_net_t *net, int wait_ms)
{
    int moved = 0;

    HC_CHECK(io_round(net, &moved));
    if (moved || wait_ms <= 0)
        return HCCL_SUCCESS;
    return poll_once(net, wait_ms, &moved);
}

/* What a wait must do before it polls: write the frames queued since the last pass, and route the
 * parked sockets again (the collective they wait for may have begun; poll does not watch them).
 * Sockets with data to read are left to poll: a recv on every idle socket costs a system call each. */
static HcclResult io_start(hc_net_t *net, int *moved_p)
{
    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        net_peer_t *p = &net->peers[r];
        for (uint32_t k = 0; p->socks != NULL && k <= (net->broken ? 0 : net->nsocks); k++) {
            net_sock_t *sock = &p->socks[(k + net->nsocks) % (net->nsocks + 1)];
            if (sock->head != NULL)
                *moved_p |= write_sock(net, r, sock);
            if (sock->parked && sock->have_hdr)
                HC_CHECK(read_sock(net, r, sock, moved_p));
        }
    }
    return HCCL_SUCCESS;
}

HcclResult hc_net_progress_ready(hc_net_t *net, int wait_ms, int first)
{
    int moved = 0;

    if (first)
        HC_CHECK(io_start(net, &moved));
    return poll_once(net, moved ? 0 : wait_ms, &moved);
}
