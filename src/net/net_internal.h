/* Private structures of the TCP transport (hc_net.h has the protocol). */
#ifndef HC_NET_INTERNAL_H
#define HC_NET_INTERNAL_H

#include <poll.h>
#include <pthread.h>

#include "hc_net.h"
#include "hc_sock.h"
#include "net_wire.h"

/* A frame queued on a socket: header, then payload (user memory, or `owned`). */
typedef struct net_send {
    hc_net_frame_t hdr;
    const uint8_t *payload;
    uint8_t *owned;          /* freed once sent (control frames) */
    uint64_t sent;           /* bytes of header + payload written */
    hc_net_req_t *req;       /* DATA: the send to credit with hdr.len once written */
    uint32_t peer;           /* control frames waiting in ctl_queue: whom for */
    struct net_send *next;
} net_send_t;

/* Data that arrived before its receive was posted. */
typedef struct net_early {
    uint32_t src;
    hc_net_tag_t tag;
    uint64_t total;
    uint64_t got;            /* bytes placed */
    uint8_t *data;           /* total bytes (of cap: it may come from the pool) */
    uint64_t cap;
    uint64_t sig_hash;
    hc_op_sig_t sig;
    hc_net_req_t *claimed;   /* the receive that took it while chunks were still arriving */
    uint64_t seen[4];        /* which chunks arrived (one bit each) */
    struct net_early *next;
} net_early_t;

/* A buffer kept for the next early message: a fresh malloc of a large one is a fresh mmap, and
 * faulting its pages in cost more than the copy out of it (4 MiB AllReduce on 2 ranks over TCP:
 * 1170 ms of CPU for 100 ops with 26k page faults, 363 ms with 3.6k when reused). */
#define HC_NET_EARLY_POOL 8
#define HC_NET_EARLY_POOL_BYTES (64ull << 20) /* larger buffers are freed, not kept */
typedef struct {
    uint8_t *buf;
    uint64_t cap;
} net_early_buf_t;

typedef struct net_sock {
    int fd;                  /* -1: not connected (or closed) */
    net_send_t *head, *tail; /* send queue */
    /* Receive state: a header is read into `hdr`; then its payload goes to `dst`. */
    hc_net_frame_t hdr;
    uint32_t hdr_got;
    int have_hdr;
    int parked;              /* hdr is a chunk of a later collective: read no further for now */
    uint8_t *dst;            /* where the payload goes (a receive, early data or ctl_buf) */
    uint64_t payload_got;
    hc_net_req_t *dst_req;   /* the receive being filled, if any */
    net_early_t *dst_early;  /* the early data being filled, if any */
    int lowat;               /* the socket's SO_RCVLOWAT (0: the kernel's default, 1) */
} net_sock_t;

/* What a failure was about, as an abort notice tells it: a collective (kind COLL, its number) or a
 * point-to-point message (kind P2P, its number in the pair), and the other rank involved (the rank a
 * timeout waited for, the partner of a mismatched message; UINT32_MAX: none). */
typedef struct {
    uint32_t kind;
    uint32_t partner;
    uint64_t seq;
} hc_net_blame_t;

/* What this rank knows of a peer. A goodbye (PEER_BYE) only says that the data already sent is all
 * there will be. The peer is gone once its control socket ended, and, if that end was in order,
 * once its data sockets did too (`data_open` 0): the control socket carries the abort notice or the
 * goodbye before its end, so an orderly end is never judged before what the peer had to say, nor
 * before the data it sent. */
static inline int hc_net_peer_gone(const struct hc_net *net, uint32_t r);
typedef enum { PEER_OK = 0, PEER_BYE, PEER_FAILED } net_peer_state_t;

typedef struct {
    net_sock_t *socks;       /* nsocks data sockets, then the control socket; NULL: not connected */
    char addr[HC_SOCKADDR_STR_BYTES];
    net_peer_state_t state;
    uint32_t data_open;      /* data sockets still open */
    int32_t lost_errno;      /* the first error a socket ended with (0: none) */
    int32_t fail_status;     /* PEER_FAILED: the HcclResult it reported */
    hc_net_blame_t fail;     /* PEER_FAILED: in what, and against whom */
    char *fail_text;         /* PEER_FAILED: its reason */
    uint64_t next_sock;      /* round robin over the data sockets */
    uint64_t heard_seq;      /* the last collective it sent this rank data for */
} net_peer_t;

/* A mailbox entry that arrived. */
typedef struct net_mail {
    uint32_t from;
    uint64_t tag;
    HcclRootInfo info;
    struct net_mail *next;
} net_mail_t;

struct hc_net {
    hc_group_t world;        /* the whole communicator; world.me is this rank */
    uint8_t token[16];
    uint64_t comm_id;
    uint32_t nsocks;         /* data sockets per pair (the control socket is one more) */
    uint64_t chunk_bytes;
    uint64_t early_max;      /* largest message kept aside before its receive is posted */
    net_peer_t *peers;       /* by communicator rank */
    uint32_t nconnected;
    uint32_t nfailed;        /* peers in PEER_FAILED */
    /* Only the holder of progress_lock touches sockets, queues, posted receives and early data. */
    pthread_mutex_t progress_lock;
    net_send_t *free_sends;
    hc_net_req_t *posted;    /* receives not yet matched to a chunk's whole message */
    net_early_t *early;
    net_early_buf_t early_pool[HC_NET_EARLY_POOL]; /* buffers of delivered early data, for reuse */
    uint64_t cur_coll;       /* the collective this rank runs (or last ran) */
    uint64_t cur_hash;       /* its signature hash */
    uint64_t cur_number;     /* the current op's number, for messages */
    hc_net_blame_t blame;    /* what this rank's current op failed on, for its abort notice */
    int broken;              /* an op failed: data streams are abandoned (hc_net_cancel) */
    hc_op_sig_t cur_sig;
    uint8_t *ctl_buf;        /* payload of control frames (abort text, mailbox) */
    /* Control work for the progressing thread, from any thread (ctl_lock). */
    pthread_mutex_t ctl_lock;
    pthread_cond_t ctl_cv;
    net_send_t *ctl_queue;   /* frames to move onto control sockets (->peer says whose) */
    net_mail_t *mail;        /* mailbox entries that arrived */
    int wake_fd;             /* eventfd: control work queued */
    struct pollfd *pfds;     /* scratch for poll: every socket + wake_fd */
    uint32_t *pfd_peer;      /* whose socket each pfds entry is */
    net_sock_t **pfd_sock;
};

/* The control socket of a peer. */
static inline net_sock_t *hc_net_ctl_sock(hc_net_t *net, uint32_t peer)
{
    return &net->peers[peer].socks[net->nsocks];
}

static inline int hc_net_peer_gone(const struct hc_net *net, uint32_t r)
{
    const net_peer_t *p = &net->peers[r];

    return p->socks[net->nsocks].fd < 0 && (p->data_open == 0 || p->lost_errno != 0);
}

/* The transport of `world` with nobody connected yet (net_transport.c), and room for a peer's
 * sockets, all closed (net_conn.c). The fuzz target builds a transport from these and socketpairs. */
HcclResult hc_net_alloc(const hc_group_t *world, hc_net_t **net_p);
HcclResult hc_net_peer_alloc(hc_net_t *net, uint32_t peer);

/* Connection setup (net_conn.c): listen, exchange addresses, connect the wanted pairs. */
HcclResult hc_net_connect_all(hc_net_t *net, hc_boot_t *boot, hc_net_want_fn want, const void *ctx);

/* Queues (net_progress.c). */
net_send_t *hc_net_send_alloc(hc_net_t *net);
void hc_net_send_free(hc_net_t *net, net_send_t *s);
void hc_net_sock_enqueue(net_sock_t *sock, net_send_t *s);

/* Does a point-to-point message's description differ from the receive's in count or type? */
int hc_net_p2p_differs(const hc_op_sig_t *sent, const hc_op_sig_t *received);
/* Log that src's call differs from this rank's (theirs: what its chunk says; total: its message's
 * bytes; req: this rank's receive, NULL when the signature hash alone differed). HCCL_E_PARA. */
HcclResult hc_net_report_mismatch(hc_net_t *net, uint32_t src, uint32_t kind, uint64_t seq, const hc_op_sig_t *theirs,
                                  uint64_t total, const hc_net_req_t *req);

/* Early data complete and claimed by a receive: copy it there, complete the receive, free it. */
void hc_net_early_deliver(hc_net_t *net, net_early_t *e);
void hc_net_early_pool_free(hc_net_t *net);

/* One round of progress under progress_lock: non-blocking I/O on every socket, then, if nothing
 * moved and wait_ms > 0, poll() up to wait_ms and I/O again. Returns HCCL_SUCCESS or a failure of
 * the stream itself (a malformed frame: logged). Peers that close or abort are recorded in their
 * net_peer_t, not returned. */
HcclResult hc_net_progress(hc_net_t *net, int wait_ms);
/* The same for a wait, driven by poll: the sockets poll finds ready within wait_ms; on a wait's
 * first round, queued frames are written and parked sockets routed again first. */
HcclResult hc_net_progress_ready(hc_net_t *net, int wait_ms, int first);

/* Control frames (net_ctl.c): handle one that arrived (payload in ctl_buf); move queued ones onto
 * control sockets. Under progress_lock. */
void hc_net_ctl_received(hc_net_t *net, uint32_t peer, const hc_net_frame_t *hdr, const uint8_t *payload);
void hc_net_ctl_drain(hc_net_t *net);
HcclResult hc_net_ctl_init(hc_net_t *net);
void hc_net_ctl_fini(hc_net_t *net);
/* Queue a goodbye on every control socket and flush it, bounded (destroy). */
void hc_net_say_bye(hc_net_t *net);

#endif /* HC_NET_INTERNAL_H */
