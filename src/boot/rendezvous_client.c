/* The rank's side of the rendezvous: join, relayed all-gather, leave. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
};

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

HcclResult hc_boot_join(const HcclRootInfo *info, uint32_t nranks, uint32_t rank, const hc_peer_t *self,
                        hc_boot_t **boot_p, hc_peer_t **peers_p)
{
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
    res = hc_sock_connect(&addr, deadline, &boot->fd);
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
