/*
 * Fuzz target: what a rendezvous client sends the root (DESIGN.md 4), in two ways.
 *
 * 1. The message check. The input is the bytes of one message as they arrive on the root's socket:
 *    a 16-byte hc_boot_hdr_t (zero-padded when the input is shorter) and everything after it as the
 *    payload. hc_boot_msg_check, the pure check the server runs on every message before it looks at
 *    it, must accept exactly what a model written from boot_proto.h accepts, and refuse the rest with
 *    HCCL_E_PARA. hc_boot_format_ranks, which turns rank numbers into the text of the errors every
 *    rank prints, gets the payload as the rank list: the text must be terminated, inside its buffer,
 *    and name the given ranks in order (see check_rank_list for what is not checked yet).
 *
 * 2. The server, end to end. A fresh server per input (an object stepped by this thread, no thread
 *    of its own) on a loopback ephemeral port, with the token the seed corpus uses; one client writes
 *    the whole input (any number of messages), shuts down its sending side and reads what comes back.
 *    The server must not crash, must be done with the client (close it) within FINISH_BOUND_NS, and
 *    everything it sends must be well-formed messages of the types a root sends.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot_proto.h"
#include "fuzz_target.h"
#include "hc_check.h"
#include "hc_time.h"

#define MAX_RANKS_LISTED 1024u
#define MAX_LIST_BYTES 600u

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_logs_default_off();
    return 0;
}

/* The protocol as boot_proto.h states it, written independently of the server. */
static int model_accepts(const hc_boot_hdr_t *hdr, const uint8_t *payload, size_t len)
{
    hc_boot_hello_t hello;

    if (hdr->magic != HC_BOOT_MAGIC || hdr->version != HC_BOOT_VERSION || hdr->len != len)
        return 0;
    if (hdr->type == HC_BOOT_DONE)
        return len == 0;
    if (hdr->type == HC_BOOT_GATHER)
        return len <= HC_BOOT_MAX_GATHER;
    if (hdr->type != HC_BOOT_HELLO || len != sizeof(hello))
        return 0;
    memcpy(&hello, payload, sizeof(hello));
    return hello.nranks >= 1 && hello.nranks <= HC_BOOT_MAX_RANKS && hello.rank < hello.nranks &&
           memchr(hello.self.hostname, '\0', sizeof(hello.self.hostname)) != NULL;
}

/* Expand "1, 3-5" back into ranks; returns how many, or -1 when the text is not such a list. Runs
 * follow uint32_t arithmetic, as the formatter's do. */
static long parse_rank_list(const char *text, uint32_t *ranks, size_t cap)
{
    size_t n = 0;
    const char *p = text;

    while (*p != '\0') {
        char *end;
        unsigned long first = strtoul(p, &end, 10), last;
        if (end == p)
            return -1;
        last = first;
        p = end;
        if (*p == '-') {
            last = strtoul(p + 1, &end, 10);
            if (end == p + 1)
                return -1;
            p = end;
        }
        for (uint32_t r = (uint32_t)first;; r++) {
            if (n == cap)
                return -1;
            ranks[n++] = r;
            if (r == (uint32_t)last)
                break;
        }
        if (*p == ',' && p[1] == ' ')
            p += 2;
        else if (*p != '\0')
            return -1;
    }
    return (long)n;
}

/*
 * The text must name the given ranks, in order, with nothing invented. A list cut short ends in
 * " ..." and its last item may itself be cut, so only the items before it are compared.
 *
 * CHECK_CUT_MARKED: a list that leaves ranks out must say so with " ...". This target found that
 * hc_boot_format_ranks wrote the marker past the terminator when the text ended early (so "ranks
 * 1, 3, 5 of 9 did not join" could silently leave out rank 7); fixed in root_info.c.
 */
#define CHECK_CUT_MARKED 1

static void check_rank_list(const uint8_t *bytes, size_t len, uint32_t list_bytes)
{
    uint32_t n = (uint32_t)(len / sizeof(uint32_t)), ranks[MAX_RANKS_LISTED], parsed[MAX_RANKS_LISTED + 1];
    char *buf = malloc(list_bytes); /* exactly list_bytes, so that the sanitizer sees any overrun */
    size_t text_len;
    long count;
    int cut;

    hc_assert(buf != NULL);
    if (n > MAX_RANKS_LISTED)
        n = MAX_RANKS_LISTED;
    memcpy(ranks, bytes, (size_t)n * sizeof(uint32_t));
    hc_boot_format_ranks(ranks, n, buf, list_bytes);
    hc_assert(memchr(buf, '\0', list_bytes) != NULL);
    text_len = strlen(buf);
    cut = text_len >= 4 && strcmp(buf + text_len - 4, " ...") == 0;
    if (cut) {
        char *last_separator;
        buf[text_len - 4] = '\0';
        last_separator = strstr(buf, ", ") != NULL ? strrchr(buf, ',') : NULL;
        if (last_separator != NULL)
            *last_separator = '\0';
        else
            buf[0] = '\0'; /* the only item may be cut: nothing to compare */
    }
    count = parse_rank_list(buf, parsed, MAX_RANKS_LISTED + 1);
    hc_assert(count >= 0 && (uint32_t)count <= n);
    hc_assert(memcmp(parsed, ranks, (size_t)count * sizeof(uint32_t)) == 0);
    if (CHECK_CUT_MARKED && !cut)
        hc_assert((uint32_t)count == n);
    free(buf);
}

/* ---- 2: the server end to end ------------------------------------------------------------------ */

/* The token of tests/fuzz/make_corpus.py's hellos: bytes 0x10 .. 0x1f. */
static const uint8_t fuzz_token[HC_TOKEN_BYTES] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
                                                   0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f};

/* Inputs above this are cut: the socket buffers hold them whole, so the exchange never depends on
 * who reads first. */
#define MAX_INPUT_BYTES (64u * 1024u)
/* A loopback exchange of at most 64 KiB takes well under a millisecond; ten seconds means a hang. */
#define FINISH_BOUND_NS (10 * HC_NS_PER_S)
/* A client alone makes at most a few replies (a refusal, a one-rank table, small relays). */
#define MAX_REPLY_BYTES (1u << 20)
static uint8_t replies[MAX_REPLY_BYTES];

/* Every reply a root sends: a header of ours and a payload of a root's message type. */
static void check_replies(const uint8_t *bytes, size_t len)
{
    size_t at = 0;

    while (at < len) {
        hc_boot_hdr_t hdr;
        hc_assert(len - at >= sizeof(hdr));
        memcpy(&hdr, bytes + at, sizeof(hdr));
        at += sizeof(hdr);
        hc_assert(hdr.magic == HC_BOOT_MAGIC && hdr.version == HC_BOOT_VERSION);
        hc_assert(hdr.type == HC_BOOT_TABLE || hdr.type == HC_BOOT_ERROR || hdr.type == HC_BOOT_GATHERED);
        hc_assert(hdr.len <= len - at);
        if (hdr.type == HC_BOOT_ERROR)
            hc_assert(hdr.len > 0 && hdr.len <= HC_BOOT_MAX_ERROR && bytes[at + hdr.len - 1] == '\0');
        if (hdr.type == HC_BOOT_TABLE)
            hc_assert(hdr.len % sizeof(hc_peer_t) == 0 && hdr.len > 0);
        at += hdr.len;
    }
}

/* Read what the server sent so far into out (at most MAX_REPLY_BYTES); 1 once it closed. */
static int read_replies(int fd, uint8_t *out, size_t *len)
{
    for (;;) {
        ssize_t n = recv(fd, out + *len, MAX_REPLY_BYTES - *len, MSG_DONTWAIT);
        if (n > 0) {
            *len += (size_t)n;
            hc_assert(*len < MAX_REPLY_BYTES);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
}

static void drive_server(const uint8_t *data, size_t size)
{
    hc_sockaddr_t any, addr;
    hc_boot_server_t *server;
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    int64_t deadline = hc_now_ns() + FINISH_BOUND_NS;
    size_t got = 0, sent = 0;
    int listen_fd, fd, closed = 0, shut = 0;

    if (size > MAX_INPUT_BYTES)
        size = MAX_INPUT_BYTES;
    hc_assert(hc_sockaddr_parse("127.0.0.1:0", &any) == HCCL_SUCCESS);
    hc_assert(hc_sock_listen(&any, 16, &listen_fd, &addr) == HCCL_SUCCESS);
    hc_assert(hc_boot_server_new(listen_fd, fuzz_token, -1, &server) == HCCL_SUCCESS);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    hc_assert(fd >= 0);
    /* Reset on close instead of TIME_WAIT: a minute of fuzzing makes ~10^5 connections. */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    hc_assert(connect(fd, (const struct sockaddr *)&addr.ss, addr.len) == 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (!closed) {
        hc_assert(!hc_deadline_passed(deadline));
        if (sent < size) {
            ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            sent += n > 0 ? (size_t)n : 0;
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                sent = size; /* the server has closed already */
        }
        if (sent == size && !shut) {
            shutdown(fd, SHUT_WR);
            shut = 1;
        }
        hc_boot_server_step(server, sent < size ? 0 : 10);
        closed = read_replies(fd, replies, &got);
    }
    check_replies(replies, got);
    close(fd);
    hc_boot_server_free(server);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hc_boot_hdr_t hdr;
    size_t len = size > sizeof(hdr) ? size - sizeof(hdr) : 0;
    uint8_t *payload = malloc(len > 0 ? len : 1); /* own copy, exactly len bytes */
    HcclResult res;

    hc_assert(payload != NULL);
    memset(&hdr, 0, sizeof(hdr));
    memcpy(&hdr, data, size < sizeof(hdr) ? size : sizeof(hdr));
    memcpy(payload, data + (size - len), len);
    res = hc_boot_msg_check(&hdr, payload, len);
    hc_assert(res == HCCL_SUCCESS || res == HCCL_E_PARA);
    hc_assert((res == HCCL_SUCCESS) == model_accepts(&hdr, payload, len));
    /* The header's status field picks the text buffer: callers pass at least 6 bytes (boot_proto.h). */
    check_rank_list(payload, len, 6 + hdr.status % MAX_LIST_BYTES);
    free(payload);
    drive_server(data, size);
    return 0;
}
