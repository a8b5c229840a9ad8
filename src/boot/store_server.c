/*
 * The rendezvous store's server: one epoll set holding the listener and every client, driven by
 * whoever embeds it (hccl-run's poll loop, or a test thread) through hc_store_server_progress.
 *
 * Nothing here ever blocks on one client: sockets are non-blocking, every client has its own
 * receive and send buffers and a small state machine, and a GET for a missing key parks its client
 * (WAITING) until a SET for that key or the end of the client's wait. Nothing from the wire is
 * trusted: magic, version and token are checked on every request and both lengths are bounded
 * before anything is allocated; a client that breaks the protocol is dropped, the others go on.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_log.h"
#include "hc_store.h"
#include "hc_time.h"

/* Limits against a misbehaving client that knows the token (or many that do not). A job keeps a
 * handful of keys of a few KiB each; these are orders of magnitude above that. */
#define MAX_CLIENTS 4096u
#define MAX_KEYS 65536u
#define MAX_STORED_BYTES (64u * 1024u * 1024u)

/* A client must finish a request (from connecting, or from its previous reply) and read its reply
 * within this time; otherwise it holds a slot for nothing and is dropped. */
#define STALL_NS (30 * HC_NS_PER_S)

/* A refused client's connection lingers this long, and swallows at most this much, after the
 * refusal: closing a socket with unread input makes the kernel send RST, and an RST that overtakes
 * the reply destroys it before the client reads why it was refused. */
#define LINGER_NS (2 * HC_NS_PER_S)
#define LINGER_BYTES (HC_STORE_MAX_KEY + HC_STORE_MAX_VALUE + HC_STORE_REQ_HEADER_BYTES)

#define EVENT_BATCH 64

typedef enum {
    CLIENT_RECV_HEADER, /* reading a request header */
    CLIENT_RECV_BODY,   /* reading key and value */
    CLIENT_WAITING,     /* GET parked until its key is set */
    CLIENT_SEND,        /* writing a reply */
    CLIENT_LINGER,      /* refused: reply sent, our side shut down, discarding input until EOF */
    CLIENT_DEAD         /* closed; freed at the end of the current progress call */
} client_state_t;

typedef struct client {
    struct client *next;
    int fd;
    client_state_t state;
    char peer[HC_SOCKADDR_STR_BYTES];
    uint8_t header[HC_STORE_REQ_HEADER_BYTES];
    size_t got;           /* bytes of the header or of the body received so far */
    hc_store_req_t req;
    uint8_t *body;        /* key_len key bytes, then value_len value bytes */
    uint8_t *out;         /* the reply being sent */
    size_t out_len;
    size_t out_sent;
    int close_after_send; /* the reply refuses the request: linger, then close, once it is out */
    size_t discarded;     /* LINGER: input bytes thrown away */
    int64_t deadline_ns;  /* WAITING: end of the GET's wait; LINGER: end of it; else the stall limit */
} client_t;

typedef struct {
    uint8_t *key;
    size_t key_len;
    uint8_t *value;
    size_t value_len;
} entry_t;

struct hc_store_server {
    int listen_fd;
    int epoll_fd;
    hc_sockaddr_t addr;
    uint8_t token[HC_STORE_TOKEN_BYTES];
    client_t *clients;    /* live clients */
    client_t *dead;       /* closed during this progress call, freed at its end */
    size_t n_clients;
    int warned_full;      /* the client limit was reported once */
    entry_t *entries;
    size_t n_entries;
    size_t cap_entries;
    size_t stored_bytes;
};

/* ---- key-value table --------------------------------------------------------------------------- */

static entry_t *find_entry(hc_store_server_t *server, const uint8_t *key, size_t key_len)
{
    for (size_t i = 0; i < server->n_entries; i++) {
        entry_t *e = &server->entries[i];
        if (e->key_len == key_len && memcmp(e->key, key, key_len) == 0)
            return e;
    }
    return NULL;
}

static int grow_entries(hc_store_server_t *server)
{
    size_t cap = server->cap_entries == 0 ? 16 : 2 * server->cap_entries;
    entry_t *grown;

    if (server->n_entries < server->cap_entries)
        return 0;
    grown = realloc(server->entries, cap * sizeof(*grown));
    if (grown == NULL)
        return -1;
    server->entries = grown;
    server->cap_entries = cap;
    return 0;
}

/* Store a copy of value under key: HC_STORE_STATUS_OK or HC_STORE_STATUS_FULL. */
static uint32_t put_entry(hc_store_server_t *server, const uint8_t *key, size_t key_len, const uint8_t *value,
                          size_t value_len)
{
    entry_t *e = find_entry(server, key, key_len);
    size_t old_bytes = e != NULL ? e->key_len + e->value_len : 0;
    uint8_t *copy;

    if (server->stored_bytes - old_bytes + key_len + value_len > MAX_STORED_BYTES ||
        (e == NULL && server->n_entries >= MAX_KEYS))
        return HC_STORE_STATUS_FULL;
    copy = malloc(value_len > 0 ? value_len : 1);
    if (copy == NULL)
        return HC_STORE_STATUS_FULL;
    memcpy(copy, value, value_len);
    if (e == NULL) {
        uint8_t *key_copy = malloc(key_len);
        if (key_copy == NULL || grow_entries(server) != 0) {
            free(key_copy);
            free(copy);
            return HC_STORE_STATUS_FULL;
        }
        memcpy(key_copy, key, key_len);
        e = &server->entries[server->n_entries++];
        e->key = key_copy;
        e->key_len = key_len;
        e->value = NULL;
    }
    free(e->value);
    e->value = copy;
    e->value_len = value_len;
    server->stored_bytes = server->stored_bytes - old_bytes + key_len + value_len;
    return HC_STORE_STATUS_OK;
}

/* ---- client bookkeeping ------------------------------------------------------------------------ */

static void watch(hc_store_server_t *server, client_t *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};

    /* MOD on a descriptor we registered fails only without memory; the client's deadline then
     * drops it, so a warning is all this needs. */
    if (epoll_ctl(server->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        HC_WARN("store: epoll_ctl for client %s failed: %s", c->peer, strerror(errno));
}

static void drop_client(hc_store_server_t *server, client_t *c)
{
    client_t **link = &server->clients;

    if (c->state == CLIENT_DEAD)
        return;
    while (*link != NULL && *link != c)
        link = &(*link)->next;
    if (*link == c)
        *link = c->next;
    /* Closing the descriptor removes it from the epoll set; events already fetched for it in this
     * batch see CLIENT_DEAD and are skipped, which is why the memory lives until the batch ends. */
    close(c->fd);
    c->fd = -1;
    c->state = CLIENT_DEAD;
    c->next = server->dead;
    server->dead = c;
    server->n_clients--;
}

static void free_client(client_t *c)
{
    free(c->body);
    free(c->out);
    free(c);
}

static void free_dead(hc_store_server_t *server)
{
    while (server->dead != NULL) {
        client_t *c = server->dead;
        server->dead = c->next;
        free_client(c);
    }
}

/* Back to reading the next request on a connection that stays open. */
static void reset_for_request(hc_store_server_t *server, client_t *c)
{
    free(c->body);
    free(c->out);
    c->body = NULL;
    c->out = NULL;
    c->got = 0;
    c->out_len = c->out_sent = 0;
    c->state = CLIENT_RECV_HEADER;
    c->deadline_ns = hc_now_ns() + STALL_NS;
    watch(server, c, EPOLLIN | EPOLLRDHUP);
}

/* ---- replies ----------------------------------------------------------------------------------- */

/* After a refusal: tell the client we are done (FIN after the reply) and wait for its close. */
static void start_linger(hc_store_server_t *server, client_t *c)
{
    if (shutdown(c->fd, SHUT_WR) != 0) {
        drop_client(server, c);
        return;
    }
    c->state = CLIENT_LINGER;
    c->discarded = 0;
    c->deadline_ns = hc_now_ns() + LINGER_NS;
    watch(server, c, EPOLLIN | EPOLLRDHUP);
}

static void linger_read(hc_store_server_t *server, client_t *c)
{
    uint8_t sink[4096];

    for (;;) {
        ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n > 0) {
            c->discarded += (size_t)n;
            if (c->discarded <= LINGER_BYTES)
                continue;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        drop_client(server, c); /* end of file, error, or more input than any request has */
        return;
    }
}

/* Send what the socket takes now; finish the reply or wait for EPOLLOUT. */
static void send_pending(hc_store_server_t *server, client_t *c)
{
    while (c->out_sent < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch(server, c, EPOLLOUT);
            return;
        }
        HC_DEBUG("store: client %s went away before its reply: %s", c->peer, strerror(errno));
        drop_client(server, c);
        return;
    }
    if (c->close_after_send)
        start_linger(server, c);
    else
        reset_for_request(server, c);
}

static void reply(hc_store_server_t *server, client_t *c, uint32_t status, const uint8_t *value, size_t value_len)
{
    hc_store_reply_t hdr = {.magic = HC_STORE_MAGIC, .status = status, .value_len = (uint32_t)value_len};

    free(c->out);
    c->out = malloc(HC_STORE_REPLY_HEADER_BYTES + value_len);
    if (c->out == NULL) {
        HC_WARN("store: out of memory replying to %s; dropping it", c->peer);
        drop_client(server, c);
        return;
    }
    hc_store_reply_encode(&hdr, c->out);
    if (value_len > 0)
        memcpy(c->out + HC_STORE_REPLY_HEADER_BYTES, value, value_len);
    c->out_len = HC_STORE_REPLY_HEADER_BYTES + value_len;
    c->out_sent = 0;
    c->close_after_send = status != HC_STORE_STATUS_OK && status != HC_STORE_STATUS_TIMEOUT;
    c->state = CLIENT_SEND;
    c->deadline_ns = hc_now_ns() + STALL_NS;
    send_pending(server, c);
}

/* Answer every client parked on key with its new value. */
static void wake_waiters(hc_store_server_t *server, const entry_t *e)
{
    client_t *c = server->clients;

    while (c != NULL) {
        client_t *next = c->next; /* reply() may drop c */
        if (c->state == CLIENT_WAITING && c->req.key_len == e->key_len && memcmp(c->body, e->key, e->key_len) == 0)
            reply(server, c, HC_STORE_STATUS_OK, e->value, e->value_len);
        c = next;
    }
}

/* The embedder's own SET (hccl-run records that a rank exited): stored and answered like a
 * client's, without a connection. */
HcclResult hc_store_server_put(hc_store_server_t *server, const char *key, const void *value, size_t len)
{
    size_t key_len = strlen(key);

    if (!hc_store_key_valid((const uint8_t *)key, key_len) || len > HC_STORE_MAX_VALUE)
        return HCCL_E_PARA;
    if (put_entry(server, (const uint8_t *)key, key_len, value, len) != HC_STORE_STATUS_OK)
        return HCCL_E_MEMORY;
    wake_waiters(server, find_entry(server, (const uint8_t *)key, key_len));
    free_dead(server);
    return HCCL_SUCCESS;
}

/* ---- requests ---------------------------------------------------------------------------------- */

static void handle_set(hc_store_server_t *server, client_t *c)
{
    const uint8_t *key = c->body;
    size_t key_len = c->req.key_len;
    uint32_t status = put_entry(server, key, key_len, c->body + key_len, c->req.value_len);
    const entry_t *e;

    if (status != HC_STORE_STATUS_OK) {
        HC_WARN("store: refused to store key \"%.*s\" from %s: the store holds %zu keys and %zu bytes already",
                (int)key_len, (const char *)key, c->peer, server->n_entries, server->stored_bytes);
        reply(server, c, status, NULL, 0);
        return;
    }
    HC_DEBUG("store: %s set \"%.*s\" (%u bytes)", c->peer, (int)key_len, (const char *)key, c->req.value_len);
    /* Look the entry up before replying: the reply frees the request body that `key` points into. */
    e = find_entry(server, key, key_len);
    reply(server, c, HC_STORE_STATUS_OK, NULL, 0);
    wake_waiters(server, e);
}

static void handle_get(hc_store_server_t *server, client_t *c)
{
    const entry_t *e = find_entry(server, c->body, c->req.key_len);
    uint32_t wait_ms = c->req.wait_ms < HC_STORE_MAX_WAIT_MS ? c->req.wait_ms : HC_STORE_MAX_WAIT_MS;

    if (e != NULL) {
        reply(server, c, HC_STORE_STATUS_OK, e->value, e->value_len);
    } else if (wait_ms == 0) {
        reply(server, c, HC_STORE_STATUS_TIMEOUT, NULL, 0);
    } else {
        c->state = CLIENT_WAITING;
        c->deadline_ns = hc_now_ns() + (int64_t)wait_ms * HC_NS_PER_MS;
        /* Only a hang-up is of interest while parked; reading more would let a client queue
         * unbounded requests behind one that cannot be answered yet. */
        watch(server, c, EPOLLRDHUP);
    }
}

static void handle_request(hc_store_server_t *server, client_t *c)
{
    if (!hc_store_key_valid(c->body, c->req.key_len)) {
        HC_WARN("store: refused a request from %s: the key is not printable ASCII", c->peer);
        reply(server, c, HC_STORE_STATUS_BAD_REQUEST, NULL, 0);
    } else if (c->req.type == HC_STORE_REQ_SET) {
        handle_set(server, c);
    } else {
        handle_get(server, c);
    }
}

/*
 * Check a complete header. Returns 0 when the body may be read, else -1 after refusing or dropping
 * the client. Anything that is not our magic gets no reply at all: it is not a store client.
 */
static int check_header(hc_store_server_t *server, client_t *c)
{
    const hc_store_req_t *req = &c->req;
    uint32_t status = HC_STORE_STATUS_OK;

    if (req->magic != HC_STORE_MAGIC) {
        HC_WARN("store: dropping client %s: not a store request (magic 0x%08x)", c->peer, req->magic);
        drop_client(server, c);
        return -1;
    }
    if (req->version != HC_STORE_VERSION) {
        HC_WARN("store: refused a request from %s: protocol version %u, this store speaks %u", c->peer,
                req->version, HC_STORE_VERSION);
        status = HC_STORE_STATUS_BAD_VERSION;
    } else if (!hc_store_token_equal(req->token, server->token)) {
        HC_WARN("store: refused a request from %s: wrong token (is HOSTCCL_STORE_TOKEN the launcher's?)",
                c->peer);
        status = HC_STORE_STATUS_DENIED;
    } else if (req->key_len > HC_STORE_MAX_KEY || req->value_len > HC_STORE_MAX_VALUE) {
        HC_WARN("store: refused a request from %s: key of %u bytes (max %u) or value of %u bytes (max %u)",
                c->peer, req->key_len, HC_STORE_MAX_KEY, req->value_len, HC_STORE_MAX_VALUE);
        status = HC_STORE_STATUS_TOO_LARGE;
    } else if ((req->type != HC_STORE_REQ_SET && req->type != HC_STORE_REQ_GET) || req->key_len == 0 ||
               (req->type == HC_STORE_REQ_GET && req->value_len != 0)) {
        HC_WARN("store: refused a request from %s: type %u with a key of %u and a value of %u bytes", c->peer,
                req->type, req->key_len, req->value_len);
        status = HC_STORE_STATUS_BAD_REQUEST;
    }
    if (status != HC_STORE_STATUS_OK) {
        reply(server, c, status, NULL, 0);
        return -1;
    }
    return 0;
}

/* Receive into [buf + *got, buf + want): 1 complete, 0 needs more, -1 closed or failed. */
static int recv_some(client_t *c, uint8_t *buf, size_t want)
{
    while (c->got < want) {
        ssize_t n = recv(c->fd, buf + c->got, want - c->got, MSG_DONTWAIT);
        if (n > 0) {
            c->got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
    return 1;
}

static void on_readable(hc_store_server_t *server, client_t *c)
{
    int rc;

    if (c->state == CLIENT_RECV_HEADER) {
        rc = recv_some(c, c->header, HC_STORE_REQ_HEADER_BYTES);
        if (rc < 0) {
            /* A close between requests is how every client says goodbye. */
            if (c->got > 0)
                HC_WARN("store: dropping client %s: connection closed inside a request header", c->peer);
            drop_client(server, c);
            return;
        }
        if (rc == 0)
            return;
        hc_store_req_decode(c->header, &c->req);
        if (check_header(server, c) != 0)
            return;
        c->body = malloc((size_t)c->req.key_len + c->req.value_len);
        if (c->body == NULL) {
            HC_WARN("store: out of memory for a request from %s; dropping it", c->peer);
            drop_client(server, c);
            return;
        }
        c->got = 0;
        c->state = CLIENT_RECV_BODY;
    }
    if (c->state != CLIENT_RECV_BODY)
        return;
    rc = recv_some(c, c->body, (size_t)c->req.key_len + c->req.value_len);
    if (rc < 0) {
        HC_WARN("store: dropping client %s: connection closed inside a request body", c->peer);
        drop_client(server, c);
    } else if (rc > 0) {
        handle_request(server, c);
    }
}

static void on_event(hc_store_server_t *server, client_t *c, uint32_t events)
{
    if (c->state == CLIENT_DEAD)
        return;
    if (c->state == CLIENT_WAITING) {
        /* The only event a parked client is watched for: it gave up or died. */
        HC_DEBUG("store: client %s left while waiting for \"%.*s\"", c->peer, (int)c->req.key_len,
                 (const char *)c->body);
        drop_client(server, c);
    } else if (c->state == CLIENT_LINGER) {
        linger_read(server, c);
    } else if (c->state == CLIENT_SEND) {
        if (events & (EPOLLERR | EPOLLHUP))
            drop_client(server, c);
        else
            send_pending(server, c);
    } else {
        /* Read first even on EPOLLHUP/EPOLLRDHUP: the request may be complete in the buffer. */
        on_readable(server, c);
    }
}

/* ---- accepting --------------------------------------------------------------------------------- */

static void add_client(hc_store_server_t *server, int fd, const hc_sockaddr_t *peer)
{
    client_t *c = calloc(1, sizeof(*c));
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
    int one = 1;

    if (c == NULL) {
        HC_WARN("store: out of memory for a new client; closing it");
        close(fd);
        return;
    }
    c->fd = fd;
    c->state = CLIENT_RECV_HEADER;
    c->deadline_ns = hc_now_ns() + STALL_NS;
    hc_sockaddr_str(peer, c->peer, sizeof(c->peer));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ev.data.ptr = c;
    if (epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        HC_WARN("store: cannot watch client %s: %s", c->peer, strerror(errno));
        close(fd);
        free(c);
        return;
    }
    c->next = server->clients;
    server->clients = c;
    server->n_clients++;
}

static void accept_clients(hc_store_server_t *server)
{
    for (;;) {
        hc_sockaddr_t peer = {.len = sizeof(peer.ss)};
        int fd = accept4(server->listen_fd, (struct sockaddr *)&peer.ss, &peer.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                HC_WARN("store: accept failed: %s", strerror(errno));
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        if (server->n_clients >= MAX_CLIENTS) {
            if (!server->warned_full)
                HC_WARN("store: %u clients connected; refusing more until some leave", MAX_CLIENTS);
            server->warned_full = 1;
            close(fd);
            continue;
        }
        add_client(server, fd, &peer);
    }
}

/* ---- deadlines --------------------------------------------------------------------------------- */

static void expire_clients(hc_store_server_t *server)
{
    int64_t now = hc_now_ns();
    client_t *c = server->clients;

    while (c != NULL) {
        client_t *next = c->next;
        if (c->deadline_ns != 0 && now >= c->deadline_ns) {
            if (c->state == CLIENT_WAITING) {
                HC_DEBUG("store: wait of %s for \"%.*s\" ended", c->peer, (int)c->req.key_len,
                         (const char *)c->body);
                reply(server, c, HC_STORE_STATUS_TIMEOUT, NULL, 0);
            } else {
                if (c->state != CLIENT_LINGER && (c->state != CLIENT_RECV_HEADER || c->got > 0))
                    HC_WARN("store: dropping client %s: stalled for %lld s inside a request or reply", c->peer,
                            (long long)(STALL_NS / HC_NS_PER_S));
                drop_client(server, c);
            }
        }
        c = next;
    }
}

int64_t hc_store_server_deadline(const hc_store_server_t *server)
{
    int64_t earliest = 0;

    for (const client_t *c = server->clients; c != NULL; c = c->next) {
        if (c->deadline_ns != 0 && (earliest == 0 || c->deadline_ns < earliest))
            earliest = c->deadline_ns;
    }
    return earliest;
}

size_t hc_store_server_waiting(const hc_store_server_t *server)
{
    size_t n = 0;

    for (const client_t *c = server->clients; c != NULL; c = c->next)
        n += c->state == CLIENT_WAITING;
    return n;
}

/* ---- object ------------------------------------------------------------------------------------ */

void hc_store_server_progress(hc_store_server_t *server)
{
    struct epoll_event events[EVENT_BATCH];
    int n;

    do {
        n = epoll_wait(server->epoll_fd, events, EVENT_BATCH, 0);
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL)
                accept_clients(server);
            else
                on_event(server, events[i].data.ptr, events[i].events);
        }
        free_dead(server);
    } while (n == EVENT_BATCH);
    expire_clients(server);
    free_dead(server);
}

HcclResult hc_store_server_create(const hc_sockaddr_t *addr, const uint8_t token[HC_STORE_TOKEN_BYTES],
                                  hc_store_server_t **server_p)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    hc_store_server_t *server = calloc(1, sizeof(*server));
    HcclResult res;

    if (server == NULL) {
        HC_ERROR("store: out of memory");
        return HCCL_E_MEMORY;
    }
    server->listen_fd = server->epoll_fd = -1;
    memcpy(server->token, token, HC_STORE_TOKEN_BYTES);
    /* Every rank of a job may connect at the same moment; the kernel caps this at somaxconn. */
    HC_CHECK_GOTO(hc_sock_listen(addr, (int)MAX_CLIENTS, &server->listen_fd, &server->addr), res, err_free_server);
    server->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (server->epoll_fd < 0 || fcntl(server->listen_fd, F_SETFL, O_NONBLOCK) != 0 ||
        epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, server->listen_fd, &ev) != 0) {
        HC_ERROR("store: cannot set up the event set: %s", strerror(errno));
        res = hc_result_from_errno(errno);
        goto err_close_fds;
    }
    *server_p = server;
    return HCCL_SUCCESS;

err_close_fds:
    hc_sock_close(&server->epoll_fd);
    hc_sock_close(&server->listen_fd);
err_free_server:
    free(server);
    return res;
}

void hc_store_server_destroy(hc_store_server_t *server)
{
    if (server == NULL)
        return;
    while (server->clients != NULL)
        drop_client(server, server->clients);
    free_dead(server);
    for (size_t i = 0; i < server->n_entries; i++) {
        free(server->entries[i].key);
        free(server->entries[i].value);
    }
    free(server->entries);
    hc_sock_close(&server->epoll_fd);
    hc_sock_close(&server->listen_fd);
    free(server);
}

const hc_sockaddr_t *hc_store_server_addr(const hc_store_server_t *server)
{
    return &server->addr;
}

int hc_store_server_fd(const hc_store_server_t *server)
{
    return server->epoll_fd;
}
