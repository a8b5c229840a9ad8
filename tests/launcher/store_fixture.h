/*
 * A rendezvous store served from a background thread, for tests of the store client and of
 * HcclHostBroadcastRootInfo. The server object is single-threaded: only the fixture's thread
 * touches it; tests learn how many GETs are parked through store_fixture_wait_parked.
 */
#ifndef STORE_FIXTURE_H
#define STORE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "hc_store.h"

/* The token the fixture's server accepts, and its text form. */
extern const uint8_t store_fixture_token[HC_STORE_TOKEN_BYTES];
extern const char store_fixture_token_hex[];

/* Start a server on 127.0.0.1 (ephemeral port) and point HOSTCCL_STORE/HOSTCCL_STORE_TOKEN at it.
 * Returns 0 on success. */
int store_fixture_start(void);

/* Stop the server, free it and unset the two variables. */
void store_fixture_stop(void);

/* The server's address (valid between start and stop). */
const hc_sockaddr_t *store_fixture_addr(void);

/* Block until at least n GETs are parked on the server, or timeout_ms passes: 0 when reached. */
int store_fixture_wait_parked(size_t n, int timeout_ms);

#endif /* STORE_FIXTURE_H */
