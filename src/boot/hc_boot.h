/*
 * Bootstrap (DESIGN.md 4): the root info, the rendezvous that turns N ranks into a peer table, and
 * a small all-gather relayed by the root that engines use while they set up (e.g. to agree on a
 * shared segment). The rendezvous server runs in a thread of the process that called
 * HcclGetRootInfo and ends by itself once every rank has left or its deadline passed.
 */
#ifndef HC_BOOT_H
#define HC_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

#include "hc_comm.h"
#include "hc_sock.h"

#define HC_TOKEN_BYTES 16

typedef struct hc_boot hc_boot_t;

/* Bind a listener, start the rendezvous server and describe it in *info. local_only: every rank
 * runs on this host, so the listener binds loopback unless HCCL_IF_IP or HCCL_SOCKET_IFNAME say
 * otherwise (hc_sock_pick_addr). */
HcclResult hc_boot_root_create(HcclRootInfo *info, int local_only);

/* The default communicator name of a root info ("hccl_" and 12 hex digits of its random
 * communicator id, never of its token). */
void hc_boot_root_name(const HcclRootInfo *info, char *name, size_t len);

/*
 * A root info for a rendezvous whose address and token every rank knows in advance (rank tables):
 * with serve set, bind addr and start the server here (the lowest rank); otherwise only describe
 * it. root_host names the root in messages (the rank table's server_id).
 */
HcclResult hc_boot_root_at(const hc_sockaddr_t *addr, const uint8_t token[HC_TOKEN_BYTES], int serve,
                           const char *root_host, HcclRootInfo *info);

/* Read the token of a root info (HCCL_E_PARA when the bytes are not a hostccl root info). */
HcclResult hc_boot_root_token(const HcclRootInfo *info, uint8_t token[HC_TOKEN_BYTES]);

/*
 * Join the communicator of `info` as rank `rank` of `nranks`: present self, wait for the peer
 * table. Every failure the root detects (wrong token, nRanks disagreement, repeated rank, missing
 * ranks) comes back with the root's explanation, logged here.
 */
HcclResult hc_boot_join(const HcclRootInfo *info, uint32_t nranks, uint32_t rank, const hc_peer_t *self,
                        hc_boot_t **boot_p, hc_peer_t **peers_p);

/* Every rank contributes len bytes; all receives nranks*len bytes in rank order. Also a barrier. */
HcclResult hc_boot_allgather(hc_boot_t *boot, const void *mine, size_t len, void *all);

/* Leave the rendezvous; if this process serves it, wait for the server to finish. */
void hc_boot_close(hc_boot_t *boot);

/* This process's identity on the host (boot id, network and pid namespaces) and hostname. */
HcclResult hc_boot_self(int32_t device, hc_peer_t *self_p);

/* fork(): the rendezvous servers are the parent's; a child closes its copies of their sockets and
 * forgets them (rendezvous_server.c). */
void hc_boot_server_fork_prepare(void);
void hc_boot_server_fork_parent(void);
void hc_boot_server_fork_child(void);

#endif /* HC_BOOT_H */
