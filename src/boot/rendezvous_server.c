/*
 * The rendezvous server: one thread per root info, in the process that called HcclGetRootInfo.
 *
 * Phases: JOIN (accept ranks, check each hello against the first: token, nRanks, rank range,
 * repeats), SERVE (peer table sent; relay all-gathers until every rank has left), FAILED (a
 * job-level error was found: every rank that is or becomes connected receives the same
 * explanation, until every rank was told or the deadline passed). A wrong token is not a job-level
 * error: that client alone is refused.
 *
 * The thread polls its sockets and a stop pipe; a library destructor stops and joins servers that
 * are still running at exit, so no thread outlives the library.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot_proto.h"
#include "hc_check.h"
#include "hc_config.h"
#include "hc_time.h"

#define SEND_BOUND_NS (5 * HC_NS_PER_S)   /* for one reply to one client */
#define HELLO_BOUND_NS (2 * HC_NS_PER_S)  /* a connected client must say hello this fast */

typedef enum { PHASE_JOIN, PHASE_SERVE, PHASE_FAILED } phase_t;

typedef struct {
    int fd;
    int64_t rank;  /* -1 until its hello was accepted */
    hc_peer_t peer;
} client_t;

typedef struct server {
    uint8_t token[HC_TOKEN_BYTES];
    /* Guards listen_fd and the descriptors in clients[] against fork(): the server thread changes
     * them under it, and a child closes its copies under it (hc_boot_server_fork_child). */
    pthread_mutex_t fds_lock;
    int listen_fd;
    int stop_pipe[2];
    pthread_t thread;
    atomic_int finished;
    atomic_int explaining; /* FAILED: still telling late ranks why */
    struct server *next;

    client_t *clients;
    size_t nclients, cap;
    phase_t phase;
    int64_t deadline_ns;
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
} server_t;

static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;
static server_t *servers;

static void drop_client(server_t *s, size_t i)
{
    pthread_mutex_lock(&s->fds_lock);
    if (s->clients[i].fd >= 0)
        close(s->clients[i].fd);
    s->clients[i] = s->clients[--s->nclients];
    pthread_mutex_unlock(&s->fds_lock);
}

static int add_client(server_t *s, int fd)
{
    int res = 0;

    pthread_mutex_lock(&s->fds_lock);
    if (s->nclients == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        client_t *grown = realloc(s->clients, cap * sizeof(*grown));
        if (grown != NULL) {
            s->clients = grown;
            s->cap = cap;
        }
    }
    if (s->nclients < s->cap)
        s->clients[s->nclients++] = (client_t){.fd = fd, .rank = -1};
    else
        res = -1;
    pthread_mutex_unlock(&s->fds_lock);
    return res;
}

static void send_error(int fd, HcclResult err, const char *msg)
{
    hc_boot_send_msg(fd, HC_BOOT_ERROR, (uint32_t)err, msg, (uint32_t)strlen(msg) + 1,
                     hc_now_ns() + SEND_BOUND_NS);
}

/* A job-level failure: tell every connected rank, remember it for those still to come. */
static void fail_all(server_t *s, HcclResult err, const char *msg)
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

static void fail_missing(server_t *s)
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

static void send_table(server_t *s)
{
    hc_peer_t *table = calloc(s->nranks, sizeof(*table));

    if (table == NULL) {
        fail_all(s, HCCL_E_MEMORY, "the root ran out of memory building the peer table");
        return;
    }
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].rank >= 0)
            table[s->clients[i].rank] = s->clients[i].peer;
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

static const client_t *client_of_rank(const server_t *s, uint32_t rank)
{
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].rank == (int64_t)rank)
            return &s->clients[i];
    return NULL;
}

/* Check a hello against what the first rank said; returns 0 to accept it. */
static int check_hello(server_t *s, const hc_boot_hello_t *hello)
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

static ssize_t index_of_fd(const server_t *s, int fd)
{
    for (size_t i = 0; i < s->nclients; i++)
        if (s->clients[i].fd == fd)
            return (ssize_t)i;
    return -1;
}

/* Refuse the client on fd with the job's failure (it may have moved in the array). */
static void tell_failure(server_t *s, int fd)
{
    ssize_t i = index_of_fd(s, fd);

    send_error(fd, s->error, s->error_msg);
    s->told++;
    if (i >= 0)
        drop_client(s, (size_t)i);
}

static void on_hello(server_t *s, size_t i, const hc_boot_hello_t *hello)
{
    client_t *c = &s->clients[i];
    int fd = c->fd;

    if (memcmp(hello->token, s->token, HC_TOKEN_BYTES) != 0) {
        HC_WARN("refused rank %u (pid %d on %s): wrong token", hello->rank, hello->self.pid,
                hello->self.hostname);
        send_error(fd, HCCL_E_PARA,
                   "the root refused this rank: wrong token (the root info belongs to another communicator "
                   "or was altered)");
        drop_client(s, i);
        return;
    }
    if (s->phase == PHASE_SERVE) {
        send_error(fd, HCCL_E_PARA,
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
    if (++s->joined == s->nranks)
        send_table(s);
}

static void on_gather(server_t *s, size_t i, const void *data, uint32_t len)
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
static void on_gone(server_t *s, size_t i, int said_done)
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

static void on_readable(server_t *s, size_t i)
{
    int64_t deadline = hc_now_ns() + HELLO_BOUND_NS;
    hc_boot_hdr_t hdr;
    _Alignas(hc_boot_hello_t) uint8_t
        payload[sizeof(hc_boot_hello_t) > HC_BOOT_MAX_GATHER ? sizeof(hc_boot_hello_t) : HC_BOOT_MAX_GATHER];
    int64_t rank = s->clients[i].rank;

    if (hc_boot_recv_hdr(s->clients[i].fd, &hdr, deadline) != HCCL_SUCCESS) {
        on_gone(s, i, 0);
        return;
    }
    if (hdr.len > payload_bound(hdr.type) ||
        hc_sock_recv_all(s->clients[i].fd, payload, hdr.len, deadline) != HCCL_SUCCESS) {
        HC_WARN("dropped a rendezvous client (rank %lld): malformed message type %u length %u", (long long)rank,
                hdr.type, hdr.len);
        on_gone(s, i, 0);
        return;
    }
    if (hc_boot_msg_check(&hdr, payload, hdr.len) != HCCL_SUCCESS) {
        /* A client that has not joined learns why it was refused; a joined rank that sends garbage
         * has broken the rendezvous and is treated as gone. */
        if (hdr.type == HC_BOOT_HELLO && rank < 0)
            send_error(s->clients[i].fd, HCCL_E_PARA,
                       "the root refused this rank: nRanks or rank out of range, or a malformed hello");
        on_gone(s, i, 0);
        return;
    }
    if (hdr.type == HC_BOOT_HELLO && rank < 0)
        on_hello(s, i, (const hc_boot_hello_t *)(const void *)payload);
    else if (hdr.type == HC_BOOT_GATHER && rank >= 0 && s->phase == PHASE_SERVE)
        on_gather(s, i, payload, hdr.len);
    else if (hdr.type == HC_BOOT_DONE && rank >= 0)
        on_gone(s, i, 1);
    else
        on_gone(s, i, 0);
}

static int finished(const server_t *s)
{
    if (s->phase == PHASE_SERVE)
        return s->left == s->nranks;
    if (s->phase == PHASE_FAILED)
        return (s->nranks > 0 && s->told >= s->nranks) || hc_deadline_passed(s->deadline_ns);
    return 0;
}

static void serve(server_t *s)
{
    struct pollfd *pfds = NULL;

    while (!finished(s)) {
        size_t n = 0;
        struct pollfd *grown = realloc(pfds, (s->nclients + 2) * sizeof(*pfds));
        if (grown == NULL)
            break;
        pfds = grown;
        if (s->phase == PHASE_JOIN && hc_deadline_passed(s->deadline_ns)) {
            fail_missing(s);
            continue;
        }
        pfds[n++] = (struct pollfd){.fd = s->stop_pipe[0], .events = POLLIN};
        pfds[n++] = (struct pollfd){.fd = s->phase == PHASE_SERVE ? -1 : s->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < s->nclients; i++)
            pfds[n++] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLIN};
        if (poll(pfds, n, hc_deadline_ms_left(s->deadline_ns)) < 0 && errno != EINTR)
            break;
        if (pfds[0].revents)
            break;
        /* Handlers may drop and reorder clients: find each ready socket by descriptor. */
        for (size_t k = 2; k < n; k++) {
            ssize_t i = pfds[k].revents ? index_of_fd(s, pfds[k].fd) : -1;
            if (i >= 0)
                on_readable(s, (size_t)i);
        }
        if (pfds[1].revents) {
            int fd;
            if (hc_sock_accept(s->listen_fd, hc_now_ns(), &fd) == HCCL_SUCCESS && add_client(s, fd) != 0)
                close(fd);
        }
    }
    free(pfds);
}

static void *server_main(void *arg)
{
    server_t *s = arg;

    serve(s);
    while (s->nclients > 0)
        drop_client(s, s->nclients - 1);
    pthread_mutex_lock(&s->fds_lock);
    free(s->clients);
    s->clients = NULL;
    close(s->listen_fd);
    s->listen_fd = -1;
    pthread_mutex_unlock(&s->fds_lock);
    free(s->gather);
    free(s->gathered);
    s->gather = s->gathered = NULL;
    atomic_store(&s->finished, 1);
    return NULL;
}

static void server_free(server_t *s)
{
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->fds_lock);
    free(s);
}

/* Join and free servers that ended (called with servers_lock held). */
static void reap_finished(void)
{
    for (server_t **link = &servers; *link != NULL;) {
        server_t *s = *link;
        if (atomic_load(&s->finished)) {
            pthread_join(s->thread, NULL);
            *link = s->next;
            server_free(s);
        } else {
            link = &s->next;
        }
    }
}

HcclResult hc_boot_server_start(int listen_fd, const uint8_t token[HC_TOKEN_BYTES])
{
    server_t *s = calloc(1, sizeof(*s));
    int err;

    if (s == NULL) {
        HC_ERROR("out of memory starting the rendezvous server");
        return HCCL_E_MEMORY;
    }
    memcpy(s->token, token, HC_TOKEN_BYTES);
    pthread_mutex_init(&s->fds_lock, NULL);
    s->listen_fd = listen_fd;
    s->phase = PHASE_JOIN;
    s->deadline_ns = hc_deadline_after_s(hc_config_int(HC_CFG_CONNECT_TIMEOUT));
    if (pipe2(s->stop_pipe, O_CLOEXEC) != 0) {
        err = errno;
        HC_ERROR("pipe2 failed: %s", strerror(err));
        pthread_mutex_destroy(&s->fds_lock);
        free(s);
        return hc_result_from_errno(err);
    }
    pthread_mutex_lock(&servers_lock);
    reap_finished();
    err = pthread_create(&s->thread, NULL, server_main, s);
    if (err == 0) {
        s->next = servers;
        servers = s;
    }
    pthread_mutex_unlock(&servers_lock);
    if (err != 0) {
        HC_ERROR("cannot start the rendezvous thread: %s", strerror(err));
        server_free(s);
        return HCCL_E_SYSCALL;
    }
    return HCCL_SUCCESS;
}

void hc_boot_server_join(const uint8_t token[HC_TOKEN_BYTES])
{
    server_t *found = NULL;

    pthread_mutex_lock(&servers_lock);
    for (server_t **link = &servers; *link != NULL; link = &(*link)->next) {
        if (memcmp((*link)->token, token, HC_TOKEN_BYTES) == 0) {
            found = *link;
            *link = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&servers_lock);
    if (found == NULL)
        return;
    pthread_join(found->thread, NULL);
    server_free(found);
}

/*
 * At unload: stop every server still running and join it. A server that is explaining a failed
 * rendezvous is left to finish (it ends once every rank was told, or at its deadline): otherwise a
 * root process that exits right after its own HcclCommInitRootInfo failed would leave the late
 * ranks with a closed connection instead of the reason.
 */
__attribute__((destructor)) static void stop_servers(void)
{
    pthread_mutex_lock(&servers_lock);
    for (server_t *s = servers; s != NULL; s = s->next)
        if (!atomic_load(&s->explaining) && write(s->stop_pipe[1], "x", 1) < 0)
            HC_DEBUG("cannot signal a rendezvous server to stop: %s", strerror(errno));
    while (servers != NULL) {
        server_t *s = servers;
        servers = s->next;
        pthread_join(s->thread, NULL);
        server_free(s);
    }
    pthread_mutex_unlock(&servers_lock);
}

/* ---- fork() ---------------------------------------------------------------------------------- */

void hc_boot_server_fork_prepare(void)
{
    pthread_mutex_lock(&servers_lock);
    for (server_t *s = servers; s != NULL; s = s->next)
        pthread_mutex_lock(&s->fds_lock);
}

void hc_boot_server_fork_parent(void)
{
    for (server_t *s = servers; s != NULL; s = s->next)
        pthread_mutex_unlock(&s->fds_lock);
    pthread_mutex_unlock(&servers_lock);
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
    for (server_t *s = servers; s != NULL; s = s->next) {
        for (size_t i = 0; i < s->nclients; i++)
            if (s->clients[i].fd >= 0)
                close(s->clients[i].fd);
        if (s->listen_fd >= 0)
            close(s->listen_fd);
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
        pthread_mutex_unlock(&s->fds_lock);
    }
    servers = NULL;
    pthread_mutex_unlock(&servers_lock);
}
