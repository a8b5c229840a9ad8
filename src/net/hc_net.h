/*
 * The inter-host transport (DESIGN.md 5): TCP between the ranks of a communicator.
 *
 * Connections. Every pair of ranks that the engine asks for is connected when the transport is
 * created, with HOSTCCL_NSOCKS sockets (TCP_NODELAY, keepalive), the lower rank connecting to the
 * higher one's listener; each connection opens with a hello that proves knowledge of the
 * communicator's token (SipHash MAC), so a stranger cannot join. Addresses are exchanged through
 * the bootstrap; listeners close once everyone is connected.
 *
 * Messages. A message is identified by (source rank, kind, sequence, step): kind COLL with the
 * collective's number and the schedule's step, or kind P2P with the pair's message number. It is
 * cut into chunks of at most HOSTCCL_NET_CHUNK_BYTES, spread over the pair's sockets; every chunk
 * carries a header with the communicator id, the op's signature hash and signature, and its offset
 * and length, all checked before a byte of payload is placed. A chunk with nowhere to go yet is
 * kept aside (an early chunk of the current op, or a point-to-point message), and a socket whose
 * next chunk belongs to a later collective is not read further until that collective runs, so
 * buffered data is bounded by one op.
 *
 * Progress. There is no thread: whoever waits (hc_net_wait) drives every socket under the
 * transport's progress lock, with non-blocking I/O and poll() (which wakes for a large payload once
 * all of it has arrived, not at each segment). A sub-communicator's mailbox and the notice of a
 * failed rank are control messages that any thread may queue; the progressing thread (or the
 * caller itself when none is) sends them.
 *
 * Failures. A peer that exits closes its sockets (seen at once); a host that vanishes is found by
 * TCP keepalive and TCP_USER_TIMEOUT (HOSTCCL_NET_TIMEOUT_S); a rank whose op fails tells every
 * peer (an abort message with the reason), so nobody waits for it; a chunk with another signature
 * than this rank's op is a mismatch, reported with both calls.
 */
#ifndef HC_NET_H
#define HC_NET_H

#include <stddef.h>
#include <stdint.h>

#include "hc_engine.h"

typedef struct hc_net hc_net_t;

/* COLL: a collective's message; P2P: a Send's; P2P_ACK: the receiver's empty reply to a P2P message
 * it matched and checked (a Send completes with it, as inside a host). */
typedef enum { HC_NET_COLL = 1, HC_NET_P2P = 2, HC_NET_P2P_ACK = 3 } hc_net_kind_t;

/* A message's identity (see above). For P2P, seq is the pair's message number and step 0. */
typedef struct {
    uint32_t kind;
    uint32_t step;
    uint64_t seq;
} hc_net_tag_t;

/* A posted send or receive; the caller owns the memory until hc_net_wait returns. */
typedef struct hc_net_req {
    uint32_t peer;       /* communicator rank */
    uint32_t is_send;
    hc_net_tag_t tag;
    uint8_t *buf;
    uint64_t bytes;
    uint64_t placed;     /* send: bytes written to the kernel; receive: bytes placed in buf */
    uint64_t matched;    /* receive: bytes of the chunks matched to it so far */
    uint32_t frames_left; /* send: chunks not yet written */
    int complete;
    hc_op_sig_t what;    /* point-to-point: this side's call (send / recv, count, type, peer) */
    uint64_t seen[4];    /* receive: which chunks of the message were matched (one bit each) */
    struct hc_net_req *next; /* the transport's list of posted receives */
} hc_net_req_t;

/*
 * Create the transport of `world` (the whole communicator) on this rank and connect the pairs
 * `want(ctx, a, b)` says (called with a < b, the same answer on every rank). Collective over the
 * communicator (bootstrap exchanges). HCCL_E_TCP_CONNECT or HCCL_E_TIMEOUT name the peer.
 */
typedef int (*hc_net_want_fn)(const void *ctx, uint32_t a, uint32_t b);
HcclResult hc_net_create(const hc_group_t *world, hc_boot_t *boot, hc_net_want_fn want, const void *ctx,
                         hc_net_t **net_p);
void hc_net_destroy(hc_net_t *net);

/* The op whose messages this rank sends and expects now (its signature goes in every chunk). */
void hc_net_op_begin(hc_net_t *net, const hc_op_t *op);

/* Post a send or receive (communicator ranks); neither blocks. Their chunks carry the current op's
 * signature; a point-to-point message instead says what this side called (`what`: send or recv,
 * count, type, peer), which the receiver compares with its own call. */
HcclResult hc_net_isend(hc_net_t *net, uint32_t peer, hc_net_tag_t tag, const void *buf, uint64_t bytes,
                        hc_net_req_t *req);
HcclResult hc_net_irecv(hc_net_t *net, uint32_t peer, hc_net_tag_t tag, void *buf, uint64_t bytes,
                        hc_net_req_t *req);
HcclResult hc_net_isend_p2p(hc_net_t *net, uint32_t peer, uint64_t seq, const hc_op_sig_t *what, const void *buf,
                            uint64_t bytes, hc_net_req_t *req);
HcclResult hc_net_irecv_p2p(hc_net_t *net, uint32_t peer, uint64_t seq, const hc_op_sig_t *what, void *buf,
                            uint64_t bytes, hc_net_req_t *req);

/* Drive the transport until every request in reqs is complete: bounded by HCCL_EXEC_TIMEOUT, by
 * the peers' liveness and by the abort flag; a failure is logged here, naming the peer and op. */
HcclResult hc_net_wait(hc_net_t *net, hc_net_req_t *const *reqs, uint32_t n, const hc_op_t *op);

/* This rank's op failed with res: tell every connected peer (best effort, bounded), so that they
 * fail at once instead of waiting. `why` is the text they log. */
void hc_net_fail(hc_net_t *net, const hc_op_t *op, HcclResult res, const char *why);

/* After a failed op: forget every posted receive and queued send (they point at the op's memory),
 * closing the data sockets whose stream is in the middle of a frame; the control sockets stay, for
 * the abort notices and goodbyes. The communicator is unusable afterwards (its errors are sticky). */
void hc_net_cancel(hc_net_t *net);

/* Mailbox (HcclCreateSubCommConfig across hosts). */
HcclResult hc_net_mailbox_post(hc_net_t *net, uint64_t tag, const HcclRootInfo *info, const uint32_t *members,
                               uint32_t nmembers);
HcclResult hc_net_mailbox_fetch(hc_net_t *net, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                HcclRootInfo *info_p);

/* This rank's op failed with res, seen by another engine (a local peer that left): if a peer's
 * notice already here says the failure is this collective's mismatch (or timeout), that code,
 * logged; else res. Reads what has arrived, never waits. */
HcclResult hc_net_explain(hc_net_t *net, const hc_op_t *op, HcclResult res);

/* After this rank's op failed: whether it prints the n-rank diagnosis, so that one rank does, the
 * lowest failing one. A lower rank that is alive may still fail (its abort notice may be on its
 * way): wait up to settle_ns for one; a lower rank that is gone cannot print. */
int hc_net_report_turn(hc_net_t *net, int64_t settle_ns);

/* Is communicator rank r connected? "tcp 10.0.0.2:41000 x2" into buf. */
int hc_net_connected(const hc_net_t *net, uint32_t r);
void hc_net_describe_link(const hc_net_t *net, uint32_t r, char *buf, size_t len);
/* One line per peer this rank heard from: the last collective it sent data for, for diagnosis. */
void hc_net_describe(const hc_net_t *net, char *buf, size_t len);

#endif /* HC_NET_H */
