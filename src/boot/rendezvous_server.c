/*
 * The rendezvous server: one per root info, run by a thread of the process that called
 * HcclGetRootInfo (or stepped directly, by the fuzz target).
 *
 * Phases: JOIN (accept ranks, check each hello against the first: token, nRanks, rank range,
 * repeats), SERVE (peer table sent; relay all-gathers until every rank has left), FAILED (a
 * job-level error was found: every rank that is or becomes connected receives the same
 * explanation, until every rank was told or the deadline passed). A wrong token is not a job-level
 * error: that client alone is refused.
 *
 * Nothing a client does holds up the others: sockets are non-blocking and each client's message is
 * assembled as its bytes arrive. The listener is open to anyone who can reach it, so a client that
 * has not presented the token yet ("pre-auth") is bounded: it must complete its hello within
 * HELLO_BOUND_NS of connecting, and at most MAX_PREAUTH such clients are kept (a new one displaces
 * the oldest, so idle connections cannot lock the ranks out). Replies to pre-auth clients are
 * written without waiting; ranks that joined get theirs within SEND_BOUND_NS.
 *
 * A library destructor stops and joins servers that are still running at exit, so no thread
 * outlives the library.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "boot_proto.h"
#include "hc_check.h"
#include "hc_config.h"
#include "hc_time.h"

#define SEND_BOUND_NS (5 * HC_NS_PER_S)  /* for one reply to one rank that joined */
#define HELLO_BOUND_NS (2 * HC_NS_PER_S) /* a connected client must complete its hello this fast */
/* Clients that have not presented the token yet. Ranks send their hello right after connecting,
 * so even a burst of thousands of ranks joining passes through a few at a time. */
#define MAX_PREAUTH 128u
#define ACCEPTS_PER_STEP 64

typedef enum { PHASE_JOIN, PHASE_SERVE, PHASE_FAILED } phase_t;

/* The largest payload a client may send: a hello or an all-gather contribution. */
#define MAX_PAYLOAD (sizeof(hc_boot_hello_t) > HC_BOOT_MAX_GATHER ? sizeof(hc_boot_hello_t) : HC_BOOT_MAX_GATHER)

typedef struct {
    int fd;
    int64_t rank;       /* -1 until its hello was accepted (pre-auth) */
    hc_peer_t peer;
    int64_t since_ns;   /* accepted at */
    hc_boot_hdr_t hdr;  /* the message being received */
    uint32_t got;       /* bytes of it received: header, then payload */
    uint8_t *payload;   /* MAX_PAYLOAD bytes, allocated while a payload is being received */
} client_t;

struct hc_boot_server {
    uint8_t token[HC_TOKEN_BYTES];
    /* Guards listen_fd and the descriptors in clients[] against fork(): the server changes them
     * under it, and a child closes its copies under it (hc_boot_server_fork_child). */
    pthread_mutex_t fds_lock;
    int listen_fd;
    int stop_fd;           /* readable: stop now (-1: none) */

    client_t *clients;
    size_t nclients, cap;
    uint32_t npreauth;
    phase_t phase;
    int64_t deadline_ns;
    atomic_int explaining; /* FAILED: still telling late ranks why */
    uint32_t nranks;       /* from the first hello */
    uint32_t first_rank;
    int32_t first_pid;
    uint32_t joined;
    uint32_t told;         /* ranks told about a failure */
    uint32_t left;         /* ranks gone after SERVE */
    HcclResult error;
    char error_msg[HC_BOOT_MAX_ERROR];
    uint8_t *gather;       /* nranks * gather_len */
    uint32_t gather_len, gather_count;
    uint8_t *gathered;     /* per rank: contributed to the current round */
    struct pollfd *pfds;
    size_t pfds_cap;
};

/* ---- clients ---------------------------------------------------------------------------------- */

static void drop_client(hc_boot_server_t *s, size_t i)
{
    pthread_mutex_lock(&s->fds_lock);
    if (s->clients[i].fd >= 0)
        close(s->clients[i].fd);
    s->npreauth -= s->clients[i].rank < 0;
    free(s->clients[i].payload);
    s->clients[i] = s->clients[--s->nclients];
    pthread_mutex_unlock(&s->fds_lock);
}

/* The pre-auth client that connected first (there is one: npreauth > 0). */
static size_t oldest_preauth(const hc_boot_server_t *s)
{
    size_t oldest = s->nclients;

    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].rank < 0 && (oldest == s->nclients || s->clients[i].since_ns < s->clients[oldest].since_ns))
            oldest = i;
    return oldest;
}

static int add_client(hc_boot_server_t *s, int fd)
{
    int res = 0;

    if (s->npreauth >= MAX_PREAUTH) {
        HC_DEBUG("rendezvous: %u clients have not presented the token; dropping the oldest", s->npreauth);
        drop_client(s, oldest_preauth(s));
    }
    pthread_mutex_lock(&s->fds_lock);
    if (s->nclients == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        client_t *grown = realloc(s->clients, cap * sizeof(*grown));
        if (grown != NULL) {
            s->clients = grown;
            s->cap = cap;
        }
    }
    if (s->nclients < s->cap) {
        s->clients[s->nclients++] = (client_t){.fd = fd, .rank = -1, .since_ns = hc_now_ns()};
        s->npreauth++;
    } else {
        res = -1;
    }
    pthread_mutex_unlock(&s->fds_lock);
    return res;
}

static ssize_t index_of_fd(const hc_boot_server_t *s, int fd)
{
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].fd == fd)
            return (ssize_t)i;
    return -1;
}

/* ---- replies ---------------------------------------------------------------------------------- */

/* To a client that has not joined: only what fits the socket now (an error is a few hundred bytes,
 * which always does); a client that does not read holds up nobody. */
static void send_refusal(int fd, HcclResult err, const char *msg)
{
    hc_boot_send_msg(fd, HC_BOOT_ERROR, (uint32_t)err, msg, (uint32_t)strlen(msg) + 1, hc_now_ns());
}

static void send_error(int fd, HcclResult err, const char *msg)
{
    hc_boot_send_msg(fd, HC_BOOT_ERROR, (uint32_t)err, msg, (uint32_t)strlen(msg) + 1,
                     hc_now_ns() + SEND_BOUND_NS);
}

/* A job-level failure: tell every connected rank, remember it for those still to come. */
static void fail_all(hc_boot_server_t *s, HcclResult err, const char *msg)
{
    if (s->phase == PHASE_FAILED)
        return;
    s->phase = PHASE_FAILED;
    atomic_store(&s->explaining, 1);
    s->error = err;
    snprintf(s->error_msg, sizeof(s->error_msg), "%s", msg);
    HC_ERROR("rendezvous failed: %s", msg);
    for (size_t i = s->nclients; i-- > 0;) {
        if (s->clients[i].rank < 0)
            continue;
        send_error(s->clients[i].fd, err, msg);
        s->told++;
        drop_client(s, i);
    }
}

static void fail_missing(hc_boot_server_t *s)
{
    uint32_t *missing = calloc(s->nranks ? s->nranks : 1, sizeof(*missing));
    uint8_t *present = calloc(s->nranks ? s->nranks : 1, 1);
    char list[512], msg[HC_BOOT_MAX_ERROR];
    uint32_t n = 0;

    if (missing == NULL || present == NULL) {
        fail_all(s, HCCL_E_TIMEOUT, "some ranks did not join before HCCL_CONNECT_TIMEOUT");
    } else {
        for (size_t i = 0; i < s->nclients; i++)
            if (s->clients[i].rank >= 0)
                present[s->clients[i].rank] = 1;
        for (uint32_t r = 0; r < s->nranks; r++)
            if (!present[r])
                missing[n++] = r;
        hc_boot_format_ranks(missing, n, list, sizeof(list));
        snprintf(msg, sizeof(msg),
                 "rank%s %s of %u did not join within HCCL_CONNECT_TIMEOUT=%lld s (%u joined): check that every "
                 "rank calls HcclCommInitRootInfo with this root info",
                 n > 1 ? "s" : "", list, s->nranks, (long long)hc_config_int(HC_CFG_CONNECT_TIMEOUT), s->joined);
        fail_all(s, HCCL_E_TIMEOUT, msg);
    }
    free(missing);
    free(present);
}

static void send_table(hc_boot_server_t *s)
{
    hc_peer_t *table = calloc(s->nranks, sizeof(*table));

    if (table == NULL) {
        fail_all(s, HCCL_E_MEMORY, "the root ran out of memory building the peer table");
        return;
    }
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].rank >= 0)
            table[s->clients[i].rank] = s->clients[i].peer;
    /* Every rank is in, so nobody else may join: stop listening, before any rank has the table. A
     * rank that goes on to create the next communicator of the same rank table (same address) is
     * then refused and retries until that communicator's root listens, instead of waiting in this
     * listener's backlog; and that root can bind the address. Closed after the table was sent, the
     * listener could still hold it when the ranks returned (a unit test re-binding the address
     * failed with EADDRINUSE once in a CI run). */
    pthread_mutex_lock(&s->fds_lock);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    pthread_mutex_unlock(&s->fds_lock);
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].rank >= 0)
            hc_boot_send_msg(s->clients[i].fd, HC_BOOT_TABLE, 0, table, (uint32_t)(s->nranks * sizeof(*table)),
                             hc_now_ns() + SEND_BOUND_NS);
    free(table);
    s->gather = NULL;
    s->gathered = calloc(s->nranks, 1);
    s->phase = PHASE_SERVE;
    s->deadline_ns = hc_deadline_after_s(hc_config_int(HC_CFG_CONNECT_TIMEOUT));
    if (s->gathered == NULL)
        fail_all(s, HCCL_E_MEMORY, "the root ran out of memory");
}

/* ---- messages --------------------------------------------------------------------------------- */

static const client_t *client_of_rank(const hc_boot_server_t *s, uint32_t rank)
{
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].rank == (int64_t)rank)
            return &s->clients[i];
    return NULL;
}

/* Check a hello against what the first rank said; returns 0 to accept it. */
static int check_hello(hc_boot_server_t *s, const hc_boot_hello_t *hello)
{
    char msg[HC_BOOT_MAX_ERROR];
    const client_t *twin;

    if (hello->nranks != s->nranks) {
        snprintf(msg, sizeof(msg),
                 "ranks disagree on nRanks: rank %u (pid %d) passed %u, rank %u (pid %d on %s) passed %u",
                 s->first_rank, s->first_pid, s->nranks, hello->rank, hello->self.pid, hello->self.hostname,
                 hello->nranks);
        fail_all(s, HCCL_E_PARA, msg);
        return -1;
    }
    if (hello->rank >= s->nranks) {
        snprintf(msg, sizeof(msg), "rank %u (pid %d on %s) is out of range for nRanks %u", hello->rank,
                 hello->self.pid, hello->self.hostname, s->nranks);
        fail_all(s, HCCL_E_PARA, msg);
        return -1;
    }
    twin = client_of_rank(s, hello->rank);
    if (twin != NULL) {
        snprintf(msg, sizeof(msg), "rank %u was claimed twice: by pid %d on %s and by pid %d on %s", hello->rank,
                 twin->peer.pid, twin->peer.hostname, hello->self.pid, hello->self.hostname);
        fail_all(s, HCCL_E_PARA, msg);
        return -1;
    }
    return 0;
}

/* Refuse the client on fd with the job's failure (it may have moved in the array). */
static void tell_failure(hc_boot_server_t *s, int fd)
{
    ssize_t i = index_of_fd(s, fd);

    send_refusal(fd, s->error, s->error_msg);
    s->told++;
    if (i >= 0)
        drop_client(s, (size_t)i);
}

/* Whether the token matches, in time independent of where a guess first differs. */
static int token_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;

    for (size_t k = 0; k < HC_TOKEN_BYTES; k++)
        diff |= (uint8_t)(a[k] ^ b[k]);
    return diff == 0;
}

static void on_hello(hc_boot_server_t *s, size_t i, const hc_boot_hello_t *hello)
{
    client_t *c = &s->clients[i];
    int fd = c->fd;

    if (!token_equal(hello->token, s->token)) {
        HC_WARN("refused rank %u (pid %d on %s): wrong token", hello->rank, hello->self.pid,
                hello->self.hostname);
        send_refusal(fd, HCCL_E_PARA,
                     "the root refused this rank: wrong token (the root info belongs to another communicator "
                     "or was altered)");
        drop_client(s, i);
        return;
    }
    if (s->phase == PHASE_SERVE) {
        send_refusal(fd, HCCL_E_PARA,
                     "every rank of this communicator has already joined: this rank number was used twice or "
                     "the root info was reused");
        drop_client(s, i);
        return;
    }
    if (s->phase == PHASE_FAILED) {
        tell_failure(s, fd);
        return;
    }
    if (s->nranks == 0) {
        s->nranks = hello->nranks;
        s->first_rank = hello->rank;
        s->first_pid = hello->self.pid;
    }
    c->peer = hello->self;
    c->peer.hostname[HC_HOSTNAME_BYTES - 1] = '\0';
    if (check_hello(s, hello) != 0) {
        tell_failure(s, fd); /* check_hello failed the job; this client still has rank -1 */
        return;
    }
    c->rank = hello->rank;
    s->npreauth--;
    if (++s->joined == s->nranks)
        send_table(s);
}

static void on_gather(hc_boot_server_t *s, size_t i, const void *data, uint32_t len)
{
    uint32_t rank = (uint32_t)s->clients[i].rank;

    if (s->gather_count == 0) {
        free(s->gather);
        s->gather = malloc((size_t)s->nranks * len + 1);
        s->gather_len = len;
        if (s->gather == NULL) {
            fail_all(s, HCCL_E_MEMORY, "the root ran out of memory relaying an all-gather");
            return;
        }
    }
    if (len != s->gather_len || s->gathered[rank]) {
        fail_all(s, HCCL_E_INTERNAL, "ranks disagree on the bootstrap all-gather sequence");
        return;
    }
    if (len > 0) /* an empty contribution comes without a payload buffer */
        memcpy(s->gather + (size_t)rank * len, data, len);
    s->gathered[rank] = 1;
    if (++s->gather_count < s->nranks)
        return;
    for (size_t k = 0; k < s->nclients; k++)
        hc_boot_send_msg(s->clients[k].fd, HC_BOOT_GATHERED, 0, s->gather, s->nranks * len,
                         hc_now_ns() + SEND_BOUND_NS);
    memset(s->gathered, 0, s->nranks);
    s->gather_count = 0;
}

/* A client's socket closed or broke. */
static void on_gone(hc_boot_server_t *s, size_t i, int said_done)
{
    char msg[HC_BOOT_MAX_ERROR];
    client_t c = s->clients[i];

    drop_client(s, i);
    if (c.rank < 0)
        return;
    if (s->phase == PHASE_SERVE && said_done) {
        s->left++;
        return;
    }
    if (s->phase == PHASE_FAILED)
        return;
    snprintf(msg, sizeof(msg), "rank %lld (pid %d on %s) left before the communicator was complete",
             (long long)c.rank, c.peer.pid, c.peer.hostname);
    fail_all(s, HCCL_E_REMOTE, msg);
}

/* The most payload a client may send after a header of this type (0 for types it never sends). */
static uint32_t payload_bound(uint16_t type)
{
    switch (type) {
    case HC_BOOT_HELLO:
        return sizeof(hc_boot_hello_t);
    case HC_BOOT_GATHER:
        return HC_BOOT_MAX_GATHER;
    default:
        return 0;
    }
}

static HcclResult check_hello_fields(const void *payload)
{
    hc_boot_hello_t hello;

    /* A copy: the payload comes from a byte buffer and need not be aligned for the struct. */
    memcpy(&hello, payload, sizeof(hello));
    if (hello.nranks == 0 || hello.nranks > HC_BOOT_MAX_RANKS || hello.rank >= hello.nranks) {
        HC_WARN("rendezvous: refused a hello with nRanks %u and rank %u (pid %d): out of range (nRanks 1..%u)",
                hello.nranks, hello.rank, hello.self.pid, HC_BOOT_MAX_RANKS);
        return HCCL_E_PARA;
    }
    /* The host name goes into log lines and error messages of every rank: it must end inside its
     * field. hostccl's own clients always send it terminated (hc_boot_self). */
    if (memchr(hello.self.hostname, '\0', sizeof(hello.self.hostname)) == NULL) {
        HC_WARN("rendezvous: refused a hello from rank %u (pid %d): its host name is not terminated", hello.rank,
                hello.self.pid);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_boot_msg_check(const hc_boot_hdr_t *hdr, const void *payload, size_t len)
{
    if (hdr->magic != HC_BOOT_MAGIC || hdr->version != HC_BOOT_VERSION) {
        HC_WARN("rendezvous: not a hostccl message (magic 0x%08x version %u)", hdr->magic, hdr->version);
        return HCCL_E_PARA;
    }
    if ((hdr->type != HC_BOOT_HELLO && hdr->type != HC_BOOT_GATHER && hdr->type != HC_BOOT_DONE) ||
        hdr->len != len || len > payload_bound(hdr->type) || (len > 0 && payload == NULL)) {
        HC_WARN("rendezvous: malformed message: type %u announcing %u bytes, %zu received (at most %u)", hdr->type,
                hdr->len, len, payload_bound(hdr->type));
        return HCCL_E_PARA;
    }
    if (hdr->type != HC_BOOT_HELLO)
        return HCCL_SUCCESS;
    if (len != sizeof(hc_boot_hello_t)) {
        HC_WARN("rendezvous: malformed hello of %zu bytes (a hello has %zu)", len, sizeof(hc_boot_hello_t));
        return HCCL_E_PARA;
    }
    return check_hello_fields(payload);
}

/* A message from client i (`len` payload bytes received): check it, then act on it. */
static void on_message(hc_boot_server_t *s, size_t i, uint32_t len)
{
    client_t *c = &s->clients[i];
    hc_boot_hdr_t hdr = c->hdr;
    int64_t rank = c->rank;

    if (hc_boot_msg_check(&hdr, c->payload, len) != HCCL_SUCCESS) {
        /* A client that has not joined learns why it was refused; a joined rank that sends garbage
         * has broken the rendezvous and is treated as gone. */
        if (hdr.type == HC_BOOT_HELLO && rank < 0)
            send_refusal(c->fd, HCCL_E_PARA,
                         "the root refused this rank: nRanks or rank out of range, or a malformed hello");
        on_gone(s, i, 0);
        return;
    }
    if (hdr.type == HC_BOOT_HELLO && rank < 0)
        on_hello(s, i, (const hc_boot_hello_t *)(const void *)c->payload);
    else if (hdr.type == HC_BOOT_GATHER && rank >= 0 && s->phase == PHASE_SERVE)
        on_gather(s, i, c->payload, hdr.len);
    else if (hdr.type == HC_BOOT_DONE && rank >= 0)
        on_gone(s, i, 1);
    else
        on_gone(s, i, 0);
}

/*
 * Receive what client i has sent, without waiting: the header, then (once the header says how much,
 * within its type's bound) the payload. Returns 1 when a message is complete, or its header alone is
 * enough to refuse it (the caller handles it and resets `got`), 0 when more is to come, -1 when the
 * client is gone (the caller drops it).
 */
static int receive_some(client_t *c)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        ssize_t n;

        if (c->got < sizeof(c->hdr)) {
            dst = (uint8_t *)&c->hdr + c->got;
            want = sizeof(c->hdr) - c->got;
        } else {
            if (c->hdr.len == 0)
                return 1;
            if (c->payload == NULL && (c->payload = malloc(MAX_PAYLOAD)) == NULL)
                return -1;
            dst = c->payload + (c->got - sizeof(c->hdr));
            want = sizeof(c->hdr) + c->hdr.len - c->got;
        }
        n = recv(c->fd, dst, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        c->got += (uint32_t)n;
        if (c->got == sizeof(c->hdr) &&
            (c->hdr.magic != HC_BOOT_MAGIC || c->hdr.version != HC_BOOT_VERSION || c->hdr.len > payload_bound(c->hdr.type)))
            return 1; /* complete enough to be refused: hc_boot_msg_check says why */
        if (c->got == sizeof(c->hdr) + c->hdr.len)
            return 1;
    }
}

static void on_readable(hc_boot_server_t *s, int fd)
{
    ssize_t i;

    /* A client may have sent several messages at once; each handler may drop or move it. */
    while ((i = index_of_fd(s, fd)) >= 0) {
        client_t *c = &s->clients[i];
        int rc = receive_some(c);

        if (rc < 0) {
            if (c->got > 0 && c->got < sizeof(c->hdr) + c->hdr.len)
                HC_DEBUG("rendezvous: a client (rank %lld) left in the middle of a message", (long long)c->rank);
            on_gone(s, (size_t)i, 0);
            return;
        }
        if (rc == 0)
            return;
        on_message(s, (size_t)i, c->got - (uint32_t)sizeof(c->hdr));
        i = index_of_fd(s, fd);
        if (i < 0)
            return;
        s->clients[i].got = 0;
        free(s->clients[i].payload);
        s->clients[i].payload = NULL;
    }
}

/* ---- the loop --------------------------------------------------------------------------------- */

static int finished(const hc_boot_server_t *s)
{
    if (s->phase == PHASE_SERVE)
        return s->left == s->nranks;
    if (s->phase == PHASE_FAILED)
        return (s->nranks > 0 && s->told >= s->nranks) || hc_deadline_passed(s->deadline_ns);
    return 0;
}

/* Drop the clients that did not present the token in time; returns the next such deadline (0: none). */
static int64_t expire_preauth(hc_boot_server_t *s)
{
    int64_t now = hc_now_ns(), next = 0;

    for (size_t i = s->nclients; i-- > 0;) {
        int64_t due = s->clients[i].since_ns + HELLO_BOUND_NS;
        if (s->clients[i].rank >= 0)
            continue;
        if (now >= due) {
            HC_DEBUG("rendezvous: dropped a client that did not complete its hello within %d s",
                     (int)(HELLO_BOUND_NS / HC_NS_PER_S));
            drop_client(s, i);
        } else if (next == 0 || due < next) {
            next = due;
        }
    }
    return next;
}

static void accept_clients(hc_boot_server_t *s)
{
    for (int k = 0; k < ACCEPTS_PER_STEP; k++) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;

        if (fd < 0)
            return; /* EAGAIN: nobody else is waiting; anything else: try again next step */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (add_client(s, fd) != 0)
            close(fd);
    }
}

/* The poll set: the stop descriptor, the listener (closed to newcomers in SERVE; in FAILED a rank
 * that arrives late is still told why), then every client. */
static size_t build_poll_set(hc_boot_server_t *s)
{
    size_t n = 0;

    if (s->pfds_cap < s->nclients + 2) {
        size_t cap = s->nclients + 2 > 2 * s->pfds_cap ? s->nclients + 2 : 2 * s->pfds_cap;
        struct pollfd *grown = realloc(s->pfds, cap * sizeof(*grown));
        if (grown == NULL)
            return 0;
        s->pfds = grown;
        s->pfds_cap = cap;
    }
    s->pfds[n++] = (struct pollfd){.fd = s->stop_fd, .events = POLLIN};
    s->pfds[n++] = (struct pollfd){.fd = s->phase == PHASE_SERVE ? -1 : s->listen_fd, .events = POLLIN};
    for (size_t i = 0; i < s->nclients; i++)
        s->pfds[n++] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLIN};
    return n;
}

int hc_boot_server_step(hc_boot_server_t *s, int max_wait_ms)
{
    int64_t next_expiry, wake;
    size_t n;
    int timeout;

    if (finished(s))
        return 1;
    if (s->phase == PHASE_JOIN && hc_deadline_passed(s->deadline_ns)) {
        fail_missing(s);
        return finished(s);
    }
    next_expiry = expire_preauth(s);
    n = build_poll_set(s);
    if (n == 0)
        return 1; /* out of memory: give up serving */
    wake = next_expiry != 0 && next_expiry < s->deadline_ns ? next_expiry : s->deadline_ns;
    timeout = hc_deadline_ms_left(wake);
    if (max_wait_ms >= 0 && (timeout < 0 || timeout > max_wait_ms))
        timeout = max_wait_ms;
    if (poll(s->pfds, n, timeout) < 0 && errno != EINTR)
        return 1;
    if (s->pfds[0].revents)
        return 1;
    /* Clients first: a hello that has arrived is read before its sender could expire. Handlers may
     * drop and reorder clients: each ready socket is found by descriptor. */
    for (size_t k = 2; k < n; k++)
        if (s->pfds[k].revents)
            on_readable(s, s->pfds[k].fd);
    if (s->pfds[1].revents)
        accept_clients(s);
    return finished(s);
}

/* ---- creation and the serving thread ------------------------------------------------------------ */

HcclResult hc_boot_server_new(int listen_fd, const uint8_t token[HC_TOKEN_BYTES], int stop_fd,
                              hc_boot_server_t **server_p)
{
    hc_boot_server_t *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        HC_ERROR("out of memory starting the rendezvous server");
        return HCCL_E_MEMORY;
    }
    memcpy(s->token, token, HC_TOKEN_BYTES);
    pthread_mutex_init(&s->fds_lock, NULL);
    fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
    s->listen_fd = listen_fd;
    s->stop_fd = stop_fd;
    s->phase = PHASE_JOIN;
    s->deadline_ns = hc_deadline_after_s(hc_config_int(HC_CFG_CONNECT_TIMEOUT));
    *server_p = s;
    return HCCL_SUCCESS;
}

/* Close every client and the listener; the object stays (for the thread's owner to free). */
static void server_close(hc_boot_server_t *s)
{
    while (s->nclients > 0)
        drop_client(s, s->nclients - 1);
    pthread_mutex_lock(&s->fds_lock);
    free(s->clients);
    s->clients = NULL;
    s->cap = 0;
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen_fd = -1;
    pthread_mutex_unlock(&s->fds_lock);
    free(s->gather);
    free(s->gathered);
    free(s->pfds);
    s->gather = s->gathered = NULL;
    s->pfds = NULL;
    s->pfds_cap = 0;
}

void hc_boot_server_free(hc_boot_server_t *s)
{
    if (s == NULL)
        return;
    server_close(s);
    pthread_mutex_destroy(&s->fds_lock);
    free(s);
}

size_t hc_boot_server_preauth(const hc_boot_server_t *s)
{
    return s->npreauth;
}

/* A server run by a thread of this process (hc_boot_server_start). */
typedef struct runner {
    hc_boot_server_t *server;
    uint8_t token[HC_TOKEN_BYTES];
    int stop_pipe[2];
    pthread_t thread;
    atomic_int finished;
    struct runner *next;
} runner_t;

static pthread_mutex_t runners_lock = PTHREAD_MUTEX_INITIALIZER;
static runner_t *runners;

static void *runner_main(void *arg)
{
    runner_t *r = arg;

    while (!hc_boot_server_step(r->server, -1))
        ;
    server_close(r->server);
    atomic_store(&r->finished, 1);
    return NULL;
}

static void runner_free(runner_t *r)
{
    close(r->stop_pipe[0]);
    close(r->stop_pipe[1]);
    hc_boot_server_free(r->server);
    free(r);
}

/* Join and free servers that ended (called with runners_lock held). */
static void reap_finished(void)
{
    for (runner_t **link = &runners; *link != NULL;) {
        runner_t *r = *link;
        if (atomic_load(&r->finished)) {
            pthread_join(r->thread, NULL);
            *link = r->next;
            runner_free(r);
        } else {
            link = &r->next;
        }
    }
}

HcclResult hc_boot_server_start(int listen_fd, const uint8_t token[HC_TOKEN_BYTES])
{
    runner_t *r = calloc(1, sizeof(*r));
    HcclResult res;
    int err;

    if (r == NULL) {
        HC_ERROR("out of memory starting the rendezvous server");
        return HCCL_E_MEMORY;
    }
    memcpy(r->token, token, HC_TOKEN_BYTES);
    if (pipe2(r->stop_pipe, O_CLOEXEC) != 0) {
        err = errno;
        HC_ERROR("pipe2 failed: %s", strerror(err));
        free(r);
        return hc_result_from_errno(err);
    }
    res = hc_boot_server_new(listen_fd, token, r->stop_pipe[0], &r->server);
    if (res != HCCL_SUCCESS) {
        close(r->stop_pipe[0]);
        close(r->stop_pipe[1]);
        free(r);
        return res;
    }
    pthread_mutex_lock(&runners_lock);
    reap_finished();
    err = pthread_create(&r->thread, NULL, runner_main, r);
    if (err == 0) {
        r->next = runners;
        runners = r;
    }
    pthread_mutex_unlock(&runners_lock);
    if (err != 0) {
        HC_ERROR("cannot start the rendezvous thread: %s", strerror(err));
        r->server->listen_fd = -1; /* the caller closes it */
        runner_free(r);
        return HCCL_E_SYSCALL;
    }
    return HCCL_SUCCESS;
}

void hc_boot_server_join(const uint8_t token[HC_TOKEN_BYTES])
{
    runner_t *found = NULL;

    pthread_mutex_lock(&runners_lock);
    for (runner_t **link = &runners; *link != NULL; link = &(*link)->next) {
        if (memcmp((*link)->token, token, HC_TOKEN_BYTES) == 0) {
            found = *link;
            *link = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&runners_lock);
    if (found == NULL)
        return;
    pthread_join(found->thread, NULL);
    runner_free(found);
}

/*
 * At unload: stop every server still running and join it. A server that is explaining a failed
 * rendezvous is left to finish (it ends once every rank was told, or at its deadline): otherwise a
 * root process that exits right after its own HcclCommInitRootInfo failed would leave the late
 * ranks with a closed connection instead of the reason.
 */
__attribute__((destructor)) static void stop_servers(void)
{
    pthread_mutex_lock(&runners_lock);
    for (runner_t *r = runners; r != NULL; r = r->next)
        if (!atomic_load(&r->server->explaining) && write(r->stop_pipe[1], "x", 1) < 0)
            HC_DEBUG("cannot signal a rendezvous server to stop: %s", strerror(errno));
    while (runners != NULL) {
        runner_t *r = runners;
        runners = r->next;
        pthread_join(r->thread, NULL);
        runner_free(r);
    }
    pthread_mutex_unlock(&runners_lock);
}

/* ---- fork() ---------------------------------------------------------------------------------- */

void hc_boot_server_fork_prepare(void)
{
    pthread_mutex_lock(&runners_lock);
    for (runner_t *r = runners; r != NULL; r = r->next)
        pthread_mutex_lock(&r->server->fds_lock);
}

void hc_boot_server_fork_parent(void)
{
    for (runner_t *r = runners; r != NULL; r = r->next)
        pthread_mutex_unlock(&r->server->fds_lock);
    pthread_mutex_unlock(&runners_lock);
}

/*
 * The servers are the parent's: their threads do not exist in the child, and its exit must neither
 * join them nor wake them through the stop pipe they share with the parent. Its copies of their
 * sockets are closed, so that the parent's listener and connections close when the parent closes
 * them (a child holding a copy would keep a dead root's port accepting connections). The server
 * objects stay allocated and unused.
 */
void hc_boot_server_fork_child(void)
{
    for (runner_t *r = runners; r != NULL; r = r->next) {
        hc_boot_server_t *s = r->server;
        for (size_t i = 0; i < s->nclients; i++)
            if (s->clients[i].fd >= 0)
                close(s->clients[i].fd);
        if (s->listen_fd >= 0)
            close(s->listen_fd);
        close(r->stop_pipe[0]);
        close(r->stop_pipe[1]);
        pthread_mutex_unlock(&s->fds_lock);
    }
    runners = NULL;
    pthread_mutex_unlock(&runners_lock);
}
