/*
 * The port check: can every rank open TCP connections to the ports the library listens on, on
 * every other host? A firewall that drops or rejects them stops communicators from being created,
 * or only some of them (a range opened too narrowly, a stateful firewall that lets the established
 * connections through but no new ones).
 *
 * The library's own listeners are closed once a communicator is connected, so the doctor opens its
 * own, where the library would: on the address each host's ranks listen on (as their peers' links
 * name it), on every free port of HCCL_IF_BASE_PORT's range (the TCP transport takes the first free
 * of the 32 ports from the base; the root info's listener the base itself), or on one ephemeral port
 * when no base is set. The lowest rank of each host listens; every rank connects to every other
 * host's listeners at once (non-blocking, bounded by one wait), and the results are gathered, which
 * is also what keeps the listeners open until everyone has tried. Nothing is sent: a connection that
 * completes its handshake is enough, and the kernel's backlog completes it without an accept.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "doctor.h"

#define MAX_INFLIGHT 256 /* connection attempts at once: stays well under the default 1024 fds */

static int listeners[DOC_PORT_RANGE];
static uint32_t nlisteners;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* host (IPv4 or IPv6 text) and port as a socket address; 0 on success. */
static int make_addr(const char *host, uint32_t port, struct sockaddr_storage *ss, socklen_t *len_p)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *len_p = sizeof(*in);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len_p = sizeof(*in6);
        return 0;
    }
    return -1;
}

/* One listener on host:port (0: ephemeral); the bound port, 0 when in use, -1 on another error. */
static int listen_on(const char *host, uint32_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1, fd;

    if (make_addr(host, port, &ss, &len) != 0 || nlisteners == DOC_PORT_RANGE)
        return -1;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as the library does */
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        return err == EADDRINUSE ? 0 : -1;
    }
    len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    listeners[nlisteners++] = fd;
    return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* The lowest rank of each host opens the listeners its host's ranks would use. */
static void open_listeners(const doctor_t *doc, doc_listen_t *mine)
{
    const doc_info_t *me = &doc->infos[doc->rank];
    long base = atol(me->env_base_port);

    memset(mine, 0, sizeof(*mine));
    snprintf(mine->addr, sizeof(mine->addr), "%s", me->ifaddr);
    if (base <= 0 || base > 65535) {
        int port = listen_on(me->ifaddr, 0);
        mine->base = port > 0 ? (uint32_t)port : 0;
        mine->open_mask = port > 0;
        return;
    }
    mine->base = (uint32_t)base;
    for (uint32_t i = 0; i < DOC_PORT_RANGE && base + i <= 65535; i++) {
        int port = listen_on(me->ifaddr, (uint32_t)base + i);
        if (port > 0)
            mine->open_mask |= 1u << i;
        else if (port == 0)
            mine->busy_mask |= 1u << i;
    }
}

typedef struct {
    int fd;
    uint32_t to, port;
    uint32_t bit;         /* port - the listener's base */
} attempt_t;

static void record(doc_reach_t *r, const attempt_t *a, int err)
{
    uint32_t k = 0;

    if (err == 0)
        return;
    r->failed++;
    while (k < r->nfail && r->fail[k].to != a->to)
        k++;
    if (k == DOC_PORT_FAILS)
        return; /* counted, not itemised */
    if (k == r->nfail) {
        r->fail[k].to = a->to;
        r->fail[k].err = err;
        r->nfail++;
    }
    r->fail[k].mask |= 1u << a->bit;
}

/* Wait for a batch of non-blocking connections until each has an answer or the deadline passes. */
static void settle(attempt_t *at, uint32_t n, double deadline, doc_reach_t *r)
{
    struct pollfd pfd[MAX_INFLIGHT];
    uint32_t left = n;

    for (uint32_t i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = at[i].fd, .events = POLLOUT};
    while (left > 0) {
        double wait = deadline - now_s();
        int ready = wait > 0 ? poll(pfd, n, (int)(wait * 1000) + 1) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        for (uint32_t i = 0; i < n; i++) {
            int err = 0;
            socklen_t len = sizeof(err);
            if (pfd[i].fd < 0 || pfd[i].revents == 0)
                continue;
            getsockopt(pfd[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
            record(r, &at[i], err);
            pfd[i].fd = -1;
            left--;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (pfd[i].fd >= 0)
            record(r, &at[i], ETIMEDOUT);
        close(at[i].fd);
    }
}

/* Start one attempt; 0 when it is in flight (or already failed and recorded). */
static int start_attempt(const doc_listen_t *l, uint32_t to, uint32_t port, attempt_t *a, doc_reach_t *r)
{
    struct sockaddr_storage ss;
    socklen_t len;

    a->to = to;
    a->port = port;
    a->bit = port - l->base;
    a->fd = -1;
    if (make_addr(l->addr, port, &ss, &len) != 0)
        return -1;
    a->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (a->fd < 0)
        return -1;
    r->tried++;
    if (connect(a->fd, (struct sockaddr *)&ss, len) == 0 || errno == EINPROGRESS)
        return 0;
    record(r, a, errno);
    close(a->fd);
    return -1;
}

/* Connect to every open port of every other host's listener, MAX_INFLIGHT at a time. */
static void try_all(const doctor_t *doc, const uint32_t *host_of, doc_reach_t *r)
{
    attempt_t *at = calloc(MAX_INFLIGHT, sizeof(*at));
    uint32_t n = 0;

    memset(r, 0, sizeof(*r));
    if (at == NULL)
        return;
    for (uint32_t to = 0; to < doc->size; to++) {
        const doc_listen_t *l = &doc->listen[to];
        if (host_of[to] == host_of[doc->rank] || l->open_mask == 0)
            continue;
        for (uint32_t i = 0; i < DOC_PORT_RANGE; i++) {
            if (!(l->open_mask & (1u << i)) || start_attempt(l, to, l->base + i, &at[n], r) != 0)
                continue;
            if (++n == MAX_INFLIGHT) {
                settle(at, n, now_s() + doc->port_wait_s, r);
                n = 0;
            }
        }
    }
    if (n > 0)
        settle(at, n, now_s() + doc->port_wait_s, r);
    free(at);
}

static int first_of_host(const uint32_t *host_of, uint32_t r)
{
    for (uint32_t i = 0; i < r; i++)
        if (host_of[i] == host_of[r])
            return 0;
    return 1;
}

int doc_ports_check(doctor_t *doc, uint32_t *host_of)
{
    doc_listen_t mine;
    doc_reach_t reach;
    int rc;

    memset(&mine, 0, sizeof(mine));
    if (first_of_host(host_of, doc->rank))
        open_listeners(doc, &mine);
    doc->listen = calloc(doc->size, sizeof(doc_listen_t));
    doc->reach = calloc(doc->size, sizeof(doc_reach_t));
    if (doc->listen == NULL || doc->reach == NULL)
        return -1;
    rc = doc_gather(doc, &mine, doc->listen, sizeof(mine));
    if (rc == 0) {
        try_all(doc, host_of, &reach);
        rc = doc_gather(doc, &reach, doc->reach, sizeof(reach));
    }
    doc_ports_fini();
    return rc;
}

void doc_ports_fini(void)
{
    for (uint32_t i = 0; i < nlisteners; i++)
        close(listeners[i]);
    nlisteners = 0;
}
