/* The rank's side of the rendezvous: join, relayed all-gather, leave. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot_proto.h"
#include "hc_check.h"
#include "hc_config.h"
#include "hc_time.h"

/* Grace beyond HCCL_CONNECT_TIMEOUT for the root's own verdict to arrive: the root times out at
 * the connect timeout and then explains; a rank only gives up on its own when the root is gone. */
#define VERDICT_GRACE_S 10

struct hc_boot {
    int fd;
    uint32_t nranks;
    uint32_t rank;
    uint8_t token[HC_TOKEN_BYTES];
    int64_t timeout_s;
    int32_t root_pid;
    int root_same_host;  /* the root runs on this host: its pid can be looked at */
    char root_host[HC_HOSTNAME_BYTES];
};

static int process_running(int32_t pid);

/* After the root closed the connection: has its process ended? A process that closes its sockets on
 * the way out is not a zombie yet for a moment, so a closed connection gives it a short grace. */
#define ROOT_EXIT_GRACE_NS (500 * HC_NS_PER_MS)

static int root_exited(const hc_boot_t *boot)
{
    int64_t until = hc_now_ns() + ROOT_EXIT_GRACE_NS;
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 10 * HC_NS_PER_MS};

    if (!boot->root_same_host)
        return 0;
    while (process_running(boot->root_pid)) {
        if (hc_deadline_passed(until))
            return 0;
        nanosleep(&pause, NULL);
    }
    return 1;
}

/* Read an HC_BOOT_ERROR payload and log the root's explanation. */
static HcclResult report_root_error(int fd, const hc_boot_hdr_t *hdr, int64_t deadline_ns, const char *stage)
{
    char msg[HC_BOOT_MAX_ERROR + 1] = "";
    HcclResult err = hdr->status > HCCL_SUCCESS && hdr->status < HCCL_E_RESERVED ? (HcclResult)hdr->status
                                                                                   : HCCL_E_INTERNAL;

    if (hdr->len <= HC_BOOT_MAX_ERROR && hc_sock_recv_all(fd, msg, hdr->len, deadline_ns) == HCCL_SUCCESS)
        msg[hdr->len] = '\0';
    else
        snprintf(msg, sizeof(msg), "(unreadable explanation)");
    HC_ERROR("%s failed: %s", stage, msg);
    return err;
}

/* Receive a message of `type` whose payload is exactly `len` bytes into buf. */
static HcclResult recv_expected(hc_boot_t *boot, hc_boot_type_t type, void *buf, size_t len, int64_t deadline_ns,
                                const char *stage)
{
    hc_boot_hdr_t hdr;
    HcclResult res = hc_boot_recv_hdr(boot->fd, &hdr, deadline_ns);

    if (res == HCCL_E_TIMEOUT) {
        HC_ERROR("%s failed: no answer from the root within %lld s", stage, (long long)boot->timeout_s + VERDICT_GRACE_S);
        return HCCL_E_TIMEOUT;
    }
    if (res != HCCL_SUCCESS && root_exited(boot)) {
        HC_ERROR("%s failed: the root, the process that called HcclGetRootInfo (pid %d on %s), has exited", stage,
                 boot->root_pid, boot->root_host);
        return HCCL_E_REMOTE;
    }
    if (res != HCCL_SUCCESS) {
        HC_ERROR("%s failed: the root closed the connection or sent garbage (did the root process exit?)", stage);
        return HCCL_E_TCP_TRANSFER;
    }
    if (hdr.type == HC_BOOT_ERROR)
        return report_root_error(boot->fd, &hdr, deadline_ns, stage);
    if (hdr.type != type || hdr.len != len) {
        HC_ERROR("%s failed: unexpected message type %u length %u from the root (expected %u, %zu)", stage,
                 hdr.type, hdr.len, type, len);
        return HCCL_E_INTERNAL;
    }
    if (hc_sock_recv_all(boot->fd, buf, len, deadline_ns) != HCCL_SUCCESS) {
        HC_ERROR("%s failed: the root's message was cut short", stage);
        return HCCL_E_TCP_TRANSFER;
    }
    return HCCL_SUCCESS;
}

/* Whether process pid exists and has not ended (a zombie has: its parent has not reaped it yet). */
static int process_running(int32_t pid)
{
    char path[64], text[512];
    const char *state;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT && errno != ESRCH;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return 1; /* cannot tell: assume it runs */
    text[n] = '\0';
    state = strrchr(text, ')'); /* the command name may contain anything, but ends at the last ')' */
    return state == NULL || state[1] != ' ' || (state[2] != 'Z' && state[2] != 'X');
}

typedef struct {
    const hc_root_wire_t *wire;
    int same_host;
} root_watch_t;

/* hc_sock_connect_while's question: is the root still worth waiting for? Only a root on this host
 * (same boot, network and pid namespaces) can be looked at. */
static int root_may_come(void *ctx)
{
    const root_watch_t *w = ctx;

    return !w->same_host || process_running(w->wire->root_pid);
}

/* A root info made by this version names the root's host; an all-zero id says nothing. */
static int root_on_this_host(const hc_root_wire_t *wire, const hc_peer_t *self)
{
    static const uint8_t none[HC_HOST_ID_BYTES];

    return memcmp(wire->root_host_id, none, sizeof(none)) != 0 &&
           memcmp(wire->root_host_id, self->host_id, HC_HOST_ID_BYTES) == 0;
}

HcclResult hc_boot_join(const HcclRootInfo *info, uint32_t nranks, uint32_t rank, const hc_peer_t *self,
                        hc_boot_t **boot_p, hc_peer_t **peers_p)
{
    root_watch_t watch;
    hc_root_wire_t wire;
    hc_sockaddr_t addr;
    hc_boot_hello_t hello;
    hc_boot_t *boot;
    hc_peer_t *peers = NULL;
    int64_t deadline;
    HcclResult res;

    HC_CHECK(hc_boot_root_decode(info, &wire, &addr));
    boot = calloc(1, sizeof(*boot));
    peers = calloc(nranks, sizeof(*peers));
    if (boot == NULL || peers == NULL) {
        HC_ERROR("out of memory joining a communicator of %u ranks", nranks);
        res = HCCL_E_MEMORY;
        goto err_free;
    }
    boot->fd = -1;
    boot->nranks = nranks;
    boot->rank = rank;
    boot->timeout_s = hc_config_int(HC_CFG_CONNECT_TIMEOUT);
    memcpy(boot->token, wire.token, HC_TOKEN_BYTES);
    deadline = hc_deadline_after_s(boot->timeout_s);
    watch = (root_watch_t){.wire = &wire, .same_host = root_on_this_host(&wire, self)};
    boot->root_pid = wire.root_pid;
    boot->root_same_host = watch.same_host;
    snprintf(boot->root_host, sizeof(boot->root_host), "%s", wire.root_host);
    res = hc_sock_connect_while(&addr, deadline, root_may_come, &watch, &boot->fd);
    if (res == HCCL_E_REMOTE) {
        HC_ERROR("cannot reach the root: the process that called HcclGetRootInfo (pid %d on %s) has exited, "
                 "so this communicator can never be created", wire.root_pid, wire.root_host);
        goto err_free;
    }
    if (res != HCCL_SUCCESS) {
        HC_ERROR("cannot reach the root (pid %d on %s) within HCCL_CONNECT_TIMEOUT=%lld s: is the process that "
                 "called HcclGetRootInfo still running?",
                 wire.root_pid, wire.root_host, (long long)boot->timeout_s);
        res = HCCL_E_TCP_CONNECT;
        goto err_free;
    }
    memset(&hello, 0, sizeof(hello));
    memcpy(hello.token, wire.token, HC_TOKEN_BYTES);
    hello.nranks = nranks;
    hello.rank = rank;
    hello.self = *self;
    HC_CHECK_GOTO(hc_boot_send_msg(boot->fd, HC_BOOT_HELLO, 0, &hello, sizeof(hello), deadline), res, err_close);
    res = recv_expected(boot, HC_BOOT_TABLE, peers, (size_t)nranks * sizeof(*peers),
                        hc_deadline_after_s(boot->timeout_s + VERDICT_GRACE_S), "communicator rendezvous");
    if (res != HCCL_SUCCESS)
        goto err_close;
    for (uint32_t r = 0; r < nranks; r++)
        peers[r].hostname[HC_HOSTNAME_BYTES - 1] = '\0';
    *boot_p = boot;
    *peers_p = peers;
    return HCCL_SUCCESS;

err_close:
    hc_sock_close(&boot->fd);
err_free:
    free(peers);
    free(boot);
    return res;
}

HcclResult hc_boot_allgather(hc_boot_t *boot, const void *mine, size_t len, void *all)
{
    int64_t deadline = hc_deadline_after_s(boot->timeout_s + VERDICT_GRACE_S);

    hc_assert(len <= HC_BOOT_MAX_GATHER);
    if (hc_boot_send_msg(boot->fd, HC_BOOT_GATHER, 0, mine, (uint32_t)len, deadline) != HCCL_SUCCESS) {
        HC_ERROR("bootstrap all-gather failed: cannot send to the root");
        return HCCL_E_TCP_TRANSFER;
    }
    return recv_expected(boot, HC_BOOT_GATHERED, all, len * boot->nranks, deadline, "bootstrap all-gather");
}

void hc_boot_close(hc_boot_t *boot)
{
    if (boot == NULL)
        return;
    if (boot->fd >= 0)
        hc_boot_send_msg(boot->fd, HC_BOOT_DONE, 0, NULL, 0, hc_now_ns() + HC_NS_PER_S);
    hc_sock_close(&boot->fd);
    /* If this process serves the rendezvous, its thread ends once every rank has said DONE or the
     * rendezvous failed; waiting here keeps a successful init from leaving a thread behind. */
    hc_boot_server_join(boot->token);
    free(boot);
}
