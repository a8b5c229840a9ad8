/*
 * Connection setup of the TCP transport. Every rank listens, the listeners' addresses go round
 * through the bootstrap, then for every wanted pair the lower rank opens nsocks + 1 connections to
 * the higher one (the last is the control socket) and presents a sealed hello on each. Connecting
 * never waits for the peer to accept (the listener's backlog holds the connection), so each rank
 * first connects to all its higher peers, then accepts from all its lower ones: no cycle. A last
 * exchange makes any failure fail every rank alike.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hc_boot.h"
#include "hc_check.h"
#include "hc_config.h"
#include "hc_time.h"
#include "net_internal.h"

/* An address as it travels through the bootstrap. */
typedef struct {
    uint16_t family;
    uint16_t port;     /* host order */
    int32_t status;    /* HcclResult of this rank's listen */
    uint8_t addr[16];
} wire_addr_t;

/* How long an accepted connection may take to present its hello: a stranger that connects and says
 * nothing costs the others at most this much. Long enough for TCP to retransmit a lost hello a
 * few times: a connection whose SYN was retransmitted has no RTT sample and starts with a 1 s
 * retransmission timeout, so two losses already take 3 s. With 2 s, netns.engine's 1% loss case
 * failed once in five CI runs: the acceptor closed a legitimate connection whose hello was late,
 * its connector never knew, and the acceptor waited for it until HCCL_CONNECT_TIMEOUT. */
#define HELLO_WAIT_NS (10 * HC_NS_PER_S)

static void to_wire(const hc_sockaddr_t *a, wire_addr_t *w)
{
    memset(w, 0, sizeof(*w));
    w->family = a->ss.ss_family;
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
        w->port = ntohs(in->sin_port);
        memcpy(w->addr, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
        w->port = ntohs(in6->sin6_port);
        memcpy(w->addr, &in6->sin6_addr, 16);
    }
}

static void from_wire(const wire_addr_t *w, hc_sockaddr_t *a)
{
    memset(a, 0, sizeof(*a));
    if (w->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&a->ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(w->port);
        memcpy(&in->sin_addr, w->addr, 4);
        a->len = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(w->port);
        memcpy(&in6->sin6_addr, w->addr, 16);
        a->len = sizeof(*in6);
    }
}

/* Listen on the interface the configuration picks (hc_sock_pick_addr), on an ephemeral port or the
 * first free one of HCCL_IF_BASE_PORT's range (CANN's 32 ports from the base). */
#define BASE_PORT_RANGE 32

static HcclResult listen_here(const hc_group_t *world, int *fd_p, hc_sockaddr_t *bound_p)
{
    int64_t base = hc_config_int(HC_CFG_IF_BASE_PORT);
    hc_sockaddr_t addr;
    HcclResult res = HCCL_E_UNAVAIL;
    int one_host = 1;

    /* Ranks that all share this host (TCP forced between them) need no interface but loopback. */
    for (uint32_t r = 1; r < world->comm_size; r++)
        one_host &= hc_group_same_host(world, 0, r);
    HC_CHECK(hc_sock_pick_addr(&addr, one_host));
    if (base == 0)
        return hc_sock_listen(&addr, SOMAXCONN, fd_p, bound_p);
    for (int64_t port = base; port < base + BASE_PORT_RANGE && port <= 65535; port++) {
        hc_sockaddr_set_port(&addr, (uint16_t)port);
        res = hc_sock_listen_free(&addr, SOMAXCONN, fd_p, bound_p);
        if (res != HCCL_E_UNAVAIL)
            return res;
    }
    HC_ERROR("no free port in HCCL_IF_BASE_PORT's range %lld-%lld for the TCP transport", (long long)base,
             (long long)(base + BASE_PORT_RANGE - 1));
    return res;
}

/* Non-blocking, Nagle off, and keepalive tight enough that a vanished host is noticed within
 * HOSTCCL_NET_TIMEOUT_S: idle probes after a third of it, and TCP_USER_TIMEOUT for unacknowledged
 * data (a receiver that is merely busy keeps acknowledging window probes, so it is not dropped). */
static void tune(int fd)
{
    int one = 1;
    int timeout_s = (int)hc_config_int(HC_CFG_NET_TIMEOUT_S);
    int idle = timeout_s / 3 > 0 ? timeout_s / 3 : 1, count = 2;
    unsigned user_ms = (unsigned)timeout_s * 1000u;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

HcclResult hc_net_peer_alloc(hc_net_t *net, uint32_t peer)
{
    net_peer_t *p = &net->peers[peer];

    p->socks = calloc(net->nsocks + 1, sizeof(*p->socks));
    if (p->socks == NULL) {
        HC_ERROR("out of memory connecting to rank %u", peer);
        return HCCL_E_MEMORY;
    }
    for (uint32_t s = 0; s <= net->nsocks; s++)
        p->socks[s].fd = -1;
    p->data_open = net->nsocks;
    return HCCL_SUCCESS;
}

static HcclResult connect_peer(hc_net_t *net, uint32_t peer, const hc_sockaddr_t *addr, int64_t deadline)
{
    uint32_t me = hc_group_my_rank(&net->world);

    HC_CHECK(hc_net_peer_alloc(net, peer));
    hc_sockaddr_str(addr, net->peers[peer].addr, sizeof(net->peers[peer].addr));
    for (uint32_t s = 0; s <= net->nsocks; s++) {
        hc_net_hello_t hello = {.magic = HC_NET_HELLO_MAGIC, .version = HC_NET_VERSION, .comm_id = net->comm_id,
                                .from = me, .to = peer, .sock = s, .nsocks = net->nsocks + 1,
                                .chunk_bytes = (uint32_t)net->chunk_bytes};
        int fd = -1;
        HcclResult res = hc_sock_connect(addr, deadline, &fd);
        if (res != HCCL_SUCCESS) {
            HC_ERROR("TCP transport: cannot connect to rank %u (%s) at %s", peer, net->world.peers[peer].hostname,
                     net->peers[peer].addr);
            return res == HCCL_E_TIMEOUT ? HCCL_E_TCP_CONNECT : res;
        }
        hello.nonce = hc_net_siphash(net->token, &(uint64_t[2]){(uint64_t)hc_now_ns(), (uint64_t)fd}, 16);
        hc_net_hello_seal(&hello, net->token);
        net->peers[peer].socks[s].fd = fd;
        res = hc_sock_send_all(fd, &hello, sizeof(hello), deadline);
        if (res != HCCL_SUCCESS) {
            HC_ERROR("TCP transport: rank %u (%s) closed the connection during the hello", peer,
                     net->peers[peer].addr);
            return HCCL_E_TCP_CONNECT;
        }
        tune(fd);
    }
    net->nconnected++;
    return HCCL_SUCCESS;
}

/* Accept one connection and place it by its hello; a stranger's is closed and not counted. */
static HcclResult accept_one(hc_net_t *net, int listen_fd, int64_t deadline, uint32_t *placed_p)
{
    uint32_t me = hc_group_my_rank(&net->world);
    int64_t hello_deadline;
    hc_net_hello_t hello;
    int fd = -1;
    net_peer_t *p;

    *placed_p = 0;
    HC_CHECK(hc_sock_accept(listen_fd, deadline, &fd));
    hello_deadline = hc_now_ns() + HELLO_WAIT_NS;
    if (deadline != 0 && deadline < hello_deadline)
        hello_deadline = deadline;
    if (hc_sock_recv_all(fd, &hello, sizeof(hello), hello_deadline) != HCCL_SUCCESS ||
        hc_net_hello_check(&hello, net->token, net->comm_id, me, net->world.comm_size, net->nsocks + 1,
                           (uint32_t)net->chunk_bytes) !=
            HCCL_SUCCESS) {
        close(fd);
        return HCCL_SUCCESS;
    }
    p = &net->peers[hello.from];
    if (p->socks == NULL && hc_net_peer_alloc(net, hello.from) != HCCL_SUCCESS) {
        close(fd);
        return HCCL_E_MEMORY;
    }
    if (p->socks[hello.sock].fd >= 0) {
        HC_WARN("refusing a second connection for socket %u from rank %u", hello.sock, hello.from);
        close(fd);
        return HCCL_SUCCESS;
    }
    p->socks[hello.sock].fd = fd;
    tune(fd);
    *placed_p = 1;
    return HCCL_SUCCESS;
}

/* Accept until every wanted lower peer has all its sockets. */
static HcclResult accept_all(hc_net_t *net, int listen_fd, uint32_t expected, int64_t deadline)
{
    uint32_t me = hc_group_my_rank(&net->world);

    while (expected > 0) {
        uint32_t placed = 0;
        HcclResult res = accept_one(net, listen_fd, deadline, &placed);
        if (res == HCCL_E_TIMEOUT) {
            for (uint32_t r = 0; r < me; r++)
                if (net->peers[r].socks != NULL && net->peers[r].socks[net->nsocks].fd < 0)
                    HC_ERROR("TCP transport: rank %u (%s) did not connect within HCCL_CONNECT_TIMEOUT", r,
                             net->world.peers[r].hostname);
            HC_ERROR("TCP transport: %u connections from lower ranks never came", expected);
            return HCCL_E_TCP_CONNECT;
        }
        HC_CHECK(res);
        expected -= placed;
    }
    return HCCL_SUCCESS;
}

/* Every rank's status after connecting: the first failure, the same on every rank. */
static HcclResult agree(hc_net_t *net, hc_boot_t *boot, HcclResult mine)
{
    uint32_t n = net->world.comm_size;
    int32_t *all = calloc(n, sizeof(*all)), status = (int32_t)mine;
    HcclResult res;

    if (all == NULL)
        return HCCL_E_MEMORY;
    res = hc_boot_allgather(boot, &status, sizeof(status), all);
    for (uint32_t r = 0; r < n && res == HCCL_SUCCESS; r++) {
        if (all[r] != HCCL_SUCCESS) {
            if (r != hc_group_my_rank(&net->world))
                HC_ERROR("TCP transport: rank %u (%s) could not connect to its peers (%s)", r,
                         net->world.peers[r].hostname, hc_result_name((HcclResult)all[r]));
            res = (HcclResult)all[r];
        }
    }
    free(all);
    return res;
}

static HcclResult exchange_addrs(hc_net_t *net, hc_boot_t *boot, const wire_addr_t *mine, wire_addr_t *all)
{
    HC_CHECK(hc_boot_allgather(boot, mine, sizeof(*mine), all));
    for (uint32_t r = 0; r < net->world.comm_size; r++) {
        if (all[r].status != HCCL_SUCCESS) {
            if (r != hc_group_my_rank(&net->world))
                HC_ERROR("TCP transport: rank %u (%s) could not listen (%s)", r, net->world.peers[r].hostname,
                         hc_result_name((HcclResult)all[r].status));
            return (HcclResult)all[r].status;
        }
    }
    return HCCL_SUCCESS;
}

/* Connect to every wanted higher peer, then accept from every wanted lower one. */
static HcclResult connect_and_accept(hc_net_t *net, int listen_fd, const wire_addr_t *all, hc_net_want_fn want,
                                     const void *ctx)
{
    uint32_t me = hc_group_my_rank(&net->world), expected = 0;
    int64_t deadline = hc_deadline_after_s(hc_config_int(HC_CFG_CONNECT_TIMEOUT));

    for (uint32_t r = me + 1; r < net->world.comm_size; r++) {
        hc_sockaddr_t addr;
        if (!want(ctx, me, r))
            continue;
        from_wire(&all[r], &addr);
        HC_CHECK(connect_peer(net, r, &addr, deadline));
    }
    for (uint32_t r = 0; r < me; r++) {
        if (!want(ctx, r, me))
            continue;
        HC_CHECK(hc_net_peer_alloc(net, r));
        expected += net->nsocks + 1;
    }
    HC_CHECK(accept_all(net, listen_fd, expected, deadline));
    for (uint32_t r = 0; r < me; r++) {
        if (net->peers[r].socks == NULL || net->peers[r].socks[0].fd < 0)
            continue;
        hc_sockaddr_t addr;
        from_wire(&all[r], &addr);
        hc_sockaddr_str(&addr, net->peers[r].addr, sizeof(net->peers[r].addr));
        net->nconnected++;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_net_connect_all(hc_net_t *net, hc_boot_t *boot, hc_net_want_fn want, const void *ctx)
{
    uint32_t n = net->world.comm_size;
    wire_addr_t mine, *all = calloc(n, sizeof(*all));
    hc_sockaddr_t bound;
    int listen_fd = -1;
    HcclResult res;

    if (all == NULL) {
        HC_ERROR("out of memory connecting the TCP transport");
        return HCCL_E_MEMORY;
    }
    memset(&mine, 0, sizeof(mine));
    mine.status = (int32_t)listen_here(&net->world, &listen_fd, &bound);
    if (mine.status == HCCL_SUCCESS)
        to_wire(&bound, &mine);
    res = exchange_addrs(net, boot, &mine, all);
    if (res == HCCL_SUCCESS)
        res = agree(net, boot, connect_and_accept(net, listen_fd, all, want, ctx));
    hc_sock_close(&listen_fd);
    free(all);
    return res;
}
