/*
 * Wire formats of the rendezvous. Integers are little-endian host order (hostccl runs on x86_64
 * and aarch64 Linux, both little-endian); every length read from the wire is checked against the
 * bound of its message type before anything is allocated.
 */
#ifndef HC_BOOT_PROTO_H
#define HC_BOOT_PROTO_H

#include <stdint.h>

#include "hc_boot.h"
#include "hc_comm.h"
#include "hc_sock.h"

#define HC_ROOT_MAGIC 0x49524348u /* "HCRI" */
#define HC_BOOT_MAGIC 0x42524348u /* "HCRB" */
#define HC_BOOT_VERSION 1u
#define HC_BOOT_MAX_RANKS 65536u
#define HC_BOOT_MAX_GATHER 4096u   /* bytes one rank contributes to a relayed all-gather */
#define HC_BOOT_MAX_ERROR 1024u

/* The first bytes of HcclRootInfo.internal. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t token[HC_TOKEN_BYTES];
    uint16_t family;   /* AF_INET or AF_INET6 */
    uint16_t port;     /* host order */
    uint8_t addr[16];
    int32_t root_pid;
    char root_host[HC_HOSTNAME_BYTES];
    /* Random, for the default communicator name: the name goes into every log line, so it must
     * not be made of the token. */
    uint8_t comm_id[8];
    /* The root's host identity (hc_peer_t.host_id): a rank on the same host can tell whether the
     * root's process still exists instead of retrying until HCCL_CONNECT_TIMEOUT. */
    uint8_t root_host_id[HC_HOST_ID_BYTES];
} hc_root_wire_t;

typedef enum {
    HC_BOOT_HELLO = 1,    /* client -> root: hc_boot_hello_t */
    HC_BOOT_TABLE = 2,    /* root -> client: nranks * hc_peer_t */
    HC_BOOT_ERROR = 3,    /* root -> client: status + message text */
    HC_BOOT_GATHER = 4,   /* client -> root: contribution to the next relayed all-gather */
    HC_BOOT_GATHERED = 5, /* root -> client: nranks contributions */
    HC_BOOT_DONE = 6      /* client -> root: leaving normally */
} hc_boot_type_t;

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t status;  /* HcclResult for HC_BOOT_ERROR */
    uint32_t len;     /* payload bytes that follow */
} hc_boot_hdr_t;

typedef struct {
    uint8_t token[HC_TOKEN_BYTES];
    uint32_t nranks;
    uint32_t rank;
    hc_peer_t self;
} hc_boot_hello_t;

/* Send a header and payload / receive a header, both before the deadline. */
HcclResult hc_boot_send_msg(int fd, hc_boot_type_t type, uint32_t status, const void *payload, uint32_t len,
                            int64_t deadline_ns);
HcclResult hc_boot_recv_hdr(int fd, hc_boot_hdr_t *hdr_p, int64_t deadline_ns);

/* Format a list of rank numbers ("1, 3, 5-7") into buf, which holds len >= 6 bytes (room for the
 * " ..." that marks a list cut short). */
void hc_boot_format_ranks(const uint32_t *ranks, uint32_t n, char *buf, size_t len);

/*
 * Check a message a client sent the root: magic and version, a type a client may send (HELLO,
 * GATHER, DONE), a payload of len bytes that matches hdr->len and the bound of its type, and for a
 * hello nRanks in 1..HC_BOOT_MAX_RANKS, rank below nRanks and a NUL-terminated host name. Pure
 * (no socket, no server state) so that the fuzz target can drive it; logs what is wrong at warning
 * level and returns HCCL_E_PARA. What depends on the server's state (token, phase, repeats) is
 * checked by the server afterwards.
 */
HcclResult hc_boot_msg_check(const hc_boot_hdr_t *hdr, const void *payload, size_t len);

/* Decode and check a root info; logs what is wrong with it. */
HcclResult hc_boot_root_decode(const HcclRootInfo *info, hc_root_wire_t *wire_p, hc_sockaddr_t *addr_p);

/*
 * The server as an object (rendezvous_server.c): made on an already listening socket (which it owns
 * from then on), stepped by its owner, freed. hc_boot_server_start runs one on a thread of its own;
 * the fuzz target steps one directly.
 */
typedef struct hc_boot_server hc_boot_server_t;

/* stop_fd: a descriptor whose becoming readable stops the server (-1: none). */
HcclResult hc_boot_server_new(int listen_fd, const uint8_t token[HC_TOKEN_BYTES], int stop_fd,
                              hc_boot_server_t **server_p);
/* Wait for sockets at most max_wait_ms (-1: until the server's own next deadline), handle what is
 * ready. Returns 1 once the server is done (every rank left, the failure was told, or stopped). */
int hc_boot_server_step(hc_boot_server_t *server, int max_wait_ms);
void hc_boot_server_free(hc_boot_server_t *server);
/* Clients connected that have not presented the token yet (tests). */
size_t hc_boot_server_preauth(const hc_boot_server_t *server);

/* Start a server on a thread of its own, on an already listening socket. */
HcclResult hc_boot_server_start(int listen_fd, const uint8_t token[HC_TOKEN_BYTES]);

/* Wait for the server with this token if it runs in this process (no-op otherwise). */
void hc_boot_server_join(const uint8_t token[HC_TOKEN_BYTES]);

#endif /* HC_BOOT_PROTO_H */
