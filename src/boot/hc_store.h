/*
 * The rendezvous store: a tiny key-value server that a launcher (hccl-run) serves on loopback and
 * that ranks use to exchange what MPI programs would MPI_Bcast, chiefly the root info
 * (DESIGN.md 4, "Launch without MPI"). torchrun's TCPStore is the model: SET stores a value, GET
 * blocks on the server until the key exists or the client's wait expires. Every request carries
 * the job's 128-bit token; the wire format is in store_proto.h and docs/hccl-run.md.
 */
#ifndef HC_STORE_H
#define HC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

#include "hc_sock.h"
#include "store_proto.h"

/* ---- client: talks to the store named by HOSTCCL_STORE with HOSTCCL_STORE_TOKEN -------------- */

/* 1 when HOSTCCL_STORE is set (the client calls below need it). */
int hc_store_client_configured(void);

/*
 * Store value under key (overwriting an older value) and wake every GET waiting for it.
 * Connecting is retried until HCCL_CONNECT_TIMEOUT. A key is 1..256 printable ASCII characters,
 * a value at most 64 KiB: longer ones are HCCL_E_PARA. A refused token is HCCL_E_UNAVAIL.
 */
HcclResult hc_store_set(const char *key, const void *value, size_t len);

/*
 * Copy the value of key into buf (cap bytes), waiting on the server until some client sets it or
 * the deadline passes (CLOCK_MONOTONIC ns, 0 = wait forever). *len_p receives the value's length.
 * A deadline that passes is HCCL_E_TIMEOUT and is not logged here: only the caller knows what the
 * key means and who should have set it. A value longer than cap is HCCL_E_PARA.
 */
HcclResult hc_store_get(const char *key, void *buf, size_t cap, size_t *len_p, int64_t deadline_ns);

/* A store named explicitly rather than by HOSTCCL_STORE (a store a rank found another way, e.g. the
 * Slurm one-node store of launch_slurm.c): the same calls, with the same rules. */
typedef struct {
    hc_sockaddr_t addr;
    char addr_text[HC_SOCKADDR_STR_BYTES];
    uint8_t token[HC_STORE_TOKEN_BYTES];
} hc_store_endpoint_t;

HcclResult hc_store_set_at(const hc_store_endpoint_t *ep, const char *key, const void *value, size_t len);
HcclResult hc_store_get_at(const hc_store_endpoint_t *ep, const char *key, void *buf, size_t cap, size_t *len_p,
                           int64_t deadline_ns);

/*
 * Rank exits. The launcher that serves the store sets "exit/R" (hc_store_exit_key) to a sentence
 * such as "exited with status 1" when rank R ends, so that ranks waiting for something only R would
 * have set (rank 0's root info) learn at once that it will never come.
 */
#define HC_STORE_EXIT_KEY_BYTES 24
void hc_store_exit_key(uint32_t rank, char key_p[HC_STORE_EXIT_KEY_BYTES]);

/* ---- server: a poll-driven object that a single-threaded event loop embeds -------------------- */

typedef struct hc_store_server hc_store_server_t;

/*
 * Listen on addr (port 0: ephemeral) and accept requests that carry token. The listener and every
 * connection are close-on-exec and non-blocking, so the embedding process may fork/exec freely.
 */
HcclResult hc_store_server_create(const hc_sockaddr_t *addr, const uint8_t token[HC_STORE_TOKEN_BYTES],
                                  hc_store_server_t **server_p);

/* Close every connection and the listener and free the keys. NULL is ignored. */
void hc_store_server_destroy(hc_store_server_t *server);

/* The address the server listens on (with the actual port). */
const hc_sockaddr_t *hc_store_server_addr(const hc_store_server_t *server);

/* One descriptor for the embedder's poll set: readable whenever the server has work to do. */
int hc_store_server_fd(const hc_store_server_t *server);

/* The earliest time (CLOCK_MONOTONIC ns) at which the server must run even if its descriptor stays
 * quiet (a GET's wait ends, a stalled client is dropped); 0 when there is none. */
int64_t hc_store_server_deadline(const hc_store_server_t *server);

/* Do all the work that is ready without blocking: accept, read, answer, expire waits. */
void hc_store_server_progress(hc_store_server_t *server);

/* Set key to value from the embedding process itself, answering the GETs parked on it (hccl-run
 * records rank exits this way: key "exit/R", hc_store_exit_key). */
HcclResult hc_store_server_put(hc_store_server_t *server, const char *key, const void *value, size_t len);

/* Number of GET requests currently held for keys nobody has set (for tests and diagnostics). */
size_t hc_store_server_waiting(const hc_store_server_t *server);

#endif /* HC_STORE_H */
