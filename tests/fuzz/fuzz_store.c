/*
 * Fuzz target: the rendezvous store server (hccl-run's store, DESIGN.md 4; wire format in
 * store_proto.h), driven end to end. The input is what one client writes on one connection: any
 * number of requests, well-formed or not. Each input gets a fresh server on a loopback ephemeral
 * port, so that nothing carries from one input to the next and a failure reproduces from its input
 * alone; a client connection writes the input, shuts down its sending side and reads every reply,
 * while this thread runs the server's progress until the server has closed the connection.
 *
 * Properties: the server never crashes; it finishes with a client that has said everything within
 * FINISH_BOUND_NS (a hang becomes a failure here, never a stuck run); and the reply stream is exactly
 * what a model of the protocol, written from store_proto.h, answers to the same requests. The only
 * freedom the model allows: a GET parked for a missing key may either end with the connection (the
 * server saw the hang-up first) or with a TIMEOUT reply (its short wait ended first).
 *
 * The store's address and token also reach hostccl from outside, in HOSTCCL_STORE and
 * HOSTCCL_STORE_TOKEN: the first bytes of each input, as text, go through those two parsers.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "hc_check.h"
#include "hc_store.h"
#include "hc_time.h"

/* Inputs above this are skipped: the replies to a stream of GETs grow with the square of its
 * length (each GET of 37 bytes can fetch a value as long as half the input), and 64 KiB keeps them
 * under 30 MiB. It also stays below what the server swallows from a refused client before it resets
 * the connection, which would make the replies depend on timing. */
#define MAX_INPUT_BYTES (64u * 1024u)

/* A loopback exchange of at most 64 KiB takes well under a millisecond; ten seconds means a hang. */
#define FINISH_BOUND_NS (10 * HC_NS_PER_S)
#define POLL_MS 100

static const uint8_t fuzz_token[HC_STORE_TOKEN_BYTES] = "hostccl-fuzz-tok";

typedef struct {
    uint8_t *bytes;
    size_t len, cap;
} buffer_t;

typedef struct {
    const uint8_t *key, *value;
    size_t key_len, value_len;
} model_entry_t;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_logs_default_off();
    return 0;
}

/* ---- the exchange ------------------------------------------------------------------------------ */

static void buffer_reserve(buffer_t *b, size_t more)
{
    size_t cap = b->cap ? b->cap : 4096;

    while (cap - b->len < more)
        cap *= 2;
    if (cap != b->cap) {
        b->bytes = realloc(b->bytes, cap);
        hc_assert(b->bytes != NULL);
        b->cap = cap;
    }
}

/* Read what the server sent so far; 1 once it has closed the connection. */
static int drain_replies(int fd, buffer_t *out)
{
    for (;;) {
        ssize_t n;
        buffer_reserve(out, 65536);
        n = recv(fd, out->bytes + out->len, out->cap - out->len, MSG_DONTWAIT);
        if (n > 0) {
            out->len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        /* End of file, or a reset: the server dropped a client that was not finished. */
        hc_assert(n == 0 || errno == ECONNRESET);
        return 1;
    }
}

/* Write what the socket takes; 1 once everything was written (or the server stopped listening). */
static int send_input(int fd, const uint8_t *data, size_t size, size_t *sent)
{
    while (*sent < size) {
        ssize_t n = send(fd, data + *sent, size - *sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            *sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        hc_assert(errno == EPIPE || errno == ECONNRESET);
        return 1;
    }
    /* The hang-up is part of what the client says: it lets the server finish with it. */
    shutdown(fd, SHUT_WR);
    return 1;
}

static int connect_client(const hc_store_server_t *server)
{
    const hc_sockaddr_t *addr = hc_store_server_addr(server);
    /* Reset on close instead of TIME_WAIT: a minute of fuzzing makes ~10^5 connections. */
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    hc_assert(fd >= 0);
    /* A loopback connect completes from the listener's backlog, before the server accepts. */
    hc_assert(connect(fd, (const struct sockaddr *)&addr->ss, addr->len) == 0);
    hc_assert(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) == 0);
    hc_assert(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
    return fd;
}

static void exchange(const uint8_t *data, size_t size, buffer_t *out)
{
    hc_sockaddr_t loopback;
    hc_store_server_t *server;
    int64_t deadline = hc_now_ns() + FINISH_BOUND_NS;
    size_t sent = 0;
    int fd, written = 0;

    hc_assert(hc_sockaddr_parse("127.0.0.1:0", &loopback) == HCCL_SUCCESS);
    hc_assert(hc_store_server_create(&loopback, fuzz_token, &server) == HCCL_SUCCESS);
    fd = connect_client(server);
    for (;;) {
        struct pollfd pfds[2] = {{.fd = hc_store_server_fd(server), .events = POLLIN},
                                 {.fd = fd, .events = POLLIN}};
        if (!written)
            written = send_input(fd, data, size, &sent);
        hc_store_server_progress(server);
        if (drain_replies(fd, out))
            break;
        if (hc_now_ns() >= deadline) {
            fprintf(stderr, "fuzz_store: the server kept a finished client for %lld s (%zu of %zu bytes sent, "
                    "%zu received)\n", (long long)(FINISH_BOUND_NS / HC_NS_PER_S), sent, size, out->len);
            abort();
        }
        pfds[1].events = (short)(pfds[1].events | (written ? 0 : POLLOUT));
        poll(pfds, 2, POLL_MS);
    }
    close(fd);
    hc_store_server_destroy(server);
}

/* ---- the model --------------------------------------------------------------------------------- */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* The status of a request header whose magic is right, in the order the server checks. */
static uint32_t header_status(const uint8_t *h)
{
    uint16_t type = be16(h + 6);
    uint32_t key_len = be32(h + 24), value_len = be32(h + 28);

    if (be16(h + 4) != HC_STORE_VERSION)
        return HC_STORE_STATUS_BAD_VERSION;
    if (memcmp(h + 8, fuzz_token, HC_STORE_TOKEN_BYTES) != 0)
        return HC_STORE_STATUS_DENIED;
    if (key_len > HC_STORE_MAX_KEY || value_len > HC_STORE_MAX_VALUE)
        return HC_STORE_STATUS_TOO_LARGE;
    if ((type != HC_STORE_REQ_SET && type != HC_STORE_REQ_GET) || key_len == 0 ||
        (type == HC_STORE_REQ_GET && value_len != 0))
        return HC_STORE_STATUS_BAD_REQUEST;
    return HC_STORE_STATUS_OK;
}

static int key_printable(const uint8_t *key, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (key[i] <= ' ' || key[i] > '~')
            return 0;
    return 1;
}

static model_entry_t *model_find(model_entry_t *entries, size_t n, const uint8_t *key, size_t key_len)
{
    for (size_t i = 0; i < n; i++)
        if (entries[i].key_len == key_len && memcmp(entries[i].key, key, key_len) == 0)
            return &entries[i];
    return NULL;
}

/* The next reply in out must be (status, value); advances *pos past it. */
static void expect_reply(const buffer_t *out, size_t *pos, size_t request, uint32_t status, const uint8_t *value,
                         size_t value_len)
{
    const uint8_t *r = out->bytes + *pos;
    size_t left = out->len - *pos;

    if (left < HC_STORE_REPLY_HEADER_BYTES + value_len || be32(r) != HC_STORE_MAGIC || be32(r + 4) != status ||
        be32(r + 8) != value_len || (value_len > 0 && memcmp(r + 12, value, value_len) != 0)) {
        fprintf(stderr, "fuzz_store: request %zu: expected status %u (%s) with %zu value bytes; got %s", request,
                status, hc_store_status_str(status), value_len, left < HC_STORE_REPLY_HEADER_BYTES ? "no reply\n" : "");
        if (left >= HC_STORE_REPLY_HEADER_BYTES)
            fprintf(stderr, "magic 0x%08x status %u value_len %u\n", be32(r), be32(r + 4), be32(r + 8));
        abort();
    }
    *pos += HC_STORE_REPLY_HEADER_BYTES + value_len;
}

static void check_replies(const uint8_t *in, size_t in_len, const buffer_t *out)
{
    model_entry_t *entries = calloc(in_len / HC_STORE_REQ_HEADER_BYTES + 1, sizeof(*entries));
    size_t n_entries = 0, in_pos = 0, out_pos = 0;

    hc_assert(entries != NULL);
    for (size_t request = 0;; request++) {
        const uint8_t *h = in + in_pos, *key, *value;
        uint32_t status, key_len, value_len;
        model_entry_t *e;

        /* A connection that ends inside a header, or whose first bytes are not our magic, ends
         * without a reply: the latter is not a store client at all. */
        if (in_len - in_pos < HC_STORE_REQ_HEADER_BYTES || be32(h) != HC_STORE_MAGIC)
            break;
        status = header_status(h);
        if (status != HC_STORE_STATUS_OK) {
            expect_reply(out, &out_pos, request, status, NULL, 0);
            break;
        }
        key_len = be32(h + 24);
        value_len = be32(h + 28);
        in_pos += HC_STORE_REQ_HEADER_BYTES;
        if (in_len - in_pos < (size_t)key_len + value_len)
            break; /* cut inside the body */
        key = in + in_pos;
        value = key + key_len;
        in_pos += (size_t)key_len + value_len;
        if (!key_printable(key, key_len)) {
            expect_reply(out, &out_pos, request, HC_STORE_STATUS_BAD_REQUEST, NULL, 0);
            break;
        }
        e = model_find(entries, n_entries, key, key_len);
        if (be16(h + 6) == HC_STORE_REQ_SET) {
            if (e == NULL)
                e = &entries[n_entries++];
            *e = (model_entry_t){.key = key, .key_len = key_len, .value = value, .value_len = value_len};
            expect_reply(out, &out_pos, request, HC_STORE_STATUS_OK, NULL, 0);
        } else if (e != NULL) {
            expect_reply(out, &out_pos, request, HC_STORE_STATUS_OK, e->value, e->value_len);
        } else if (be32(h + 32) == 0 || out_pos < out->len) {
            expect_reply(out, &out_pos, request, HC_STORE_STATUS_TIMEOUT, NULL, 0);
        } else {
            break; /* parked, then dropped at the hang-up */
        }
    }
    if (out_pos != out->len) {
        fprintf(stderr, "fuzz_store: %zu bytes of replies beyond the %zu the model expects\n", out->len - out_pos,
                out_pos);
        abort();
    }
    free(entries);
}

/* ---- the environment's text -------------------------------------------------------------------- */

static int is_token_text(const char *text)
{
    size_t n = strlen(text);

    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)text[i]))
            return 0;
    return n == 2 * HC_STORE_TOKEN_BYTES;
}

static void check_env_text(const uint8_t *data, size_t size)
{
    char text[96], hex[HC_STORE_TOKEN_HEX_BYTES], printed[HC_SOCKADDR_STR_BYTES];
    uint8_t token[HC_STORE_TOKEN_BYTES];
    hc_sockaddr_t addr, again;
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;

    memcpy(text, data, n);
    text[n] = '\0';
    hc_assert((hc_store_token_parse(text, token) == 0) == is_token_text(text));
    if (is_token_text(text)) {
        hc_store_token_format(token, hex);
        hc_assert(strcasecmp(hex, text) == 0);
    }
    if (hc_sockaddr_parse(text, &addr) == HCCL_SUCCESS) {
        hc_sockaddr_str(&addr, printed, sizeof(printed));
        hc_assert(hc_sockaddr_parse(printed, &again) == HCCL_SUCCESS);
        hc_assert(again.len == addr.len && memcmp(&again.ss, &addr.ss, addr.len) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    buffer_t out = {0};

    if (size > MAX_INPUT_BYTES)
        return 0;
    check_env_text(data, size);
    exchange(data, size, &out);
    check_replies(data, size, &out);
    free(out.bytes);
    return 0;
}
