/*
 * Fuzz target: what a peer sends over the TCP transport (src/net). Rank 0 of a two-rank
 * communicator gets its connection to rank 1 as socketpairs; the input is written into them as if
 * rank 1 had sent it, with receives posted (or not) by the input, and the transport runs its
 * progress until nothing moves.
 *
 * Input: byte 0: data sockets - 1 (bit 0); byte 1: receives to post before progress (bit 0: a
 * collective's step 0, 8192 bytes in two chunks; bit 1: a point-to-point message 1 of 100 bytes; bit 2: post the
 * collective one after a first round of progress instead, so that early data is claimed); byte 2:
 * the collective this rank is in (0-3); then records "u16 length, u8 socket, bytes" written in
 * order to the sockets (socket = data sockets means the control socket).
 *
 * Properties: nothing crashes or hangs; a receive never writes outside its buffer (guard bytes); a
 * receive reported complete has all its bytes; an error leaves the transport usable for the
 * progress, cancel and destroy that follow. Seeds (make_corpus.py) hold valid frames under the comm
 * id and signature hash set here.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "hc_check.h"
#include "net_internal.h"

#define GUARD 64
#define COLL_BYTES 8192 /* two chunks of HOSTCCL_NET_CHUNK_BYTES=4096 */
#define P2P_BYTES 100
#define SIG_HASH 0x1122334455667788ull
#define MAX_SOCKS 3

static const uint8_t token[16] = "hostccl-fuzz-net";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_logs_default_off();
    return 0;
}

typedef struct {
    uint8_t *mem;   /* guard, buffer, guard */
    uint64_t bytes;
    hc_net_req_t req;
    int posted;
} recv_t;

static void guard_check(const recv_t *r)
{
    for (size_t i = 0; i < GUARD; i++) {
        hc_assert(r->mem[i] == 0xa5);
        hc_assert(r->mem[GUARD + r->bytes + i] == 0xa5);
    }
    if (r->posted && r->req.complete)
        hc_assert(r->req.placed == r->bytes);
}

static void recv_init(recv_t *r, uint8_t *mem, uint64_t bytes)
{
    memset(mem, 0xa5, bytes + 2 * GUARD);
    r->mem = mem;
    r->bytes = bytes;
    r->posted = 0;
}

/* Write the records to the peer ends; what does not fit is dropped (the buffers are large). */
static void feed(int *ends, uint32_t nsocks, const uint8_t *data, size_t size)
{
    while (size >= 3) {
        size_t len = (size_t)(data[0] | data[1] << 8);
        uint32_t sock = data[2] % (nsocks + 1);
        data += 3, size -= 3;
        len = len < size ? len : size;
        if (write(ends[sock], data, len) < 0) { /* full: the rest of this record is dropped */
        }
        data += len, size -= len;
    }
}

static void progress_until_quiet(hc_net_t *net)
{
    for (int round = 0; round < 64; round++) {
        pthread_mutex_lock(&net->progress_lock);
        (void)hc_net_progress(net, 0);
        pthread_mutex_unlock(&net->progress_lock);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t coll_mem[COLL_BYTES + 2 * GUARD], p2p_mem[P2P_BYTES + 2 * GUARD], after[sizeof(coll_mem)];
    hc_peer_t peers[2] = {{.pid = 1}, {.pid = 2}};
    hc_comm_settings_t settings = {.exec_timeout_s = 1, .peer_check_ms = 10};
    atomic_int aborting = 0;
    hc_issue_lock_t lock = HC_ISSUE_LOCK_INITIALIZER;
    uint32_t ranks[2] = {0, 1}, nsocks;
    hc_group_t world = {.size = 2, .me = 0, .ranks = ranks, .comm_size = 2, .peers = peers,
                        .settings = &settings, .aborting = &aborting, .lock = &lock, .token = token};
    hc_op_t op = {.sig = {.coll = HC_COLL_ALLREDUCE, .count = 1024, .dtype = HCCL_DATA_TYPE_FP32},
                  .sig_hash = SIG_HASH};
    hc_op_sig_t p2p_what = {.coll = HC_COLL_RECV, .count = P2P_BYTES / 4, .dtype = HCCL_DATA_TYPE_FP32, .root = 1};
    int ends[MAX_SOCKS];
    recv_t coll, p2p;
    hc_net_t *net;

    if (size < 3)
        return 0;
    nsocks = 1 + (data[0] & 1);
    setenv("HOSTCCL_NSOCKS", nsocks == 1 ? "1" : "2", 1);
    setenv("HOSTCCL_NET_EARLY_MAX_BYTES", "65536", 1); /* what a peer may make this rank allocate */
    setenv("HOSTCCL_NET_CHUNK_BYTES", "4096", 1);
    hc_assert(hc_net_alloc(&world, &net) == HCCL_SUCCESS && hc_net_peer_alloc(net, 1) == HCCL_SUCCESS);
    for (uint32_t s = 0; s <= nsocks; s++) {
        int pair[2];
        hc_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
        fcntl(pair[0], F_SETFL, O_NONBLOCK);
        fcntl(pair[1], F_SETFL, O_NONBLOCK);
        net->peers[1].socks[s].fd = pair[0];
        ends[s] = pair[1];
    }
    op.coll_seq = data[2] & 3;
    hc_net_op_begin(net, &op);
    recv_init(&coll, coll_mem, COLL_BYTES);
    recv_init(&p2p, p2p_mem, P2P_BYTES);
    if ((data[1] & 1) && !(data[1] & 4))
        coll.posted = hc_net_irecv(net, 1, (hc_net_tag_t){.kind = HC_NET_COLL, .seq = op.coll_seq},
                                   coll.mem + GUARD, COLL_BYTES, &coll.req) == HCCL_SUCCESS;
    if (data[1] & 2)
        p2p.posted = hc_net_irecv_p2p(net, 1, 1, &p2p_what, p2p.mem + GUARD, P2P_BYTES, &p2p.req) == HCCL_SUCCESS;
    feed(ends, nsocks, data + 3, size - 3);
    for (uint32_t s = 0; s <= nsocks; s++)
        shutdown(ends[s], SHUT_WR); /* the peer said everything: EOF after the input */
    progress_until_quiet(net);
    if ((data[1] & 1) && (data[1] & 4))
        coll.posted = hc_net_irecv(net, 1, (hc_net_tag_t){.kind = HC_NET_COLL, .seq = op.coll_seq},
                                   coll.mem + GUARD, COLL_BYTES, &coll.req) == HCCL_SUCCESS;
    progress_until_quiet(net);
    guard_check(&coll);
    guard_check(&p2p);
    /* After a cancel nothing may land in the receives' memory any more. */
    hc_net_cancel(net);
    memcpy(after, coll_mem, sizeof(coll_mem));
    progress_until_quiet(net);
    hc_assert(memcmp(after, coll_mem, sizeof(coll_mem)) == 0);
    guard_check(&coll);
    guard_check(&p2p);
    net->nconnected = 0; /* no goodbyes to a peer that is only a test */
    hc_net_destroy(net);
    for (uint32_t s = 0; s <= nsocks; s++)
        close(ends[s]);
    return 0;
}
