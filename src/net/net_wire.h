/*
 * Wire formats of the TCP transport. Integers are little-endian host order (hostccl runs on
 * little-endian Linux only: x86_64 and aarch64). Everything read from a socket is checked by the
 * pure functions here before it is used, so that the fuzz target can drive them.
 */
#ifndef HC_NET_WIRE_H
#define HC_NET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

#include "hc_op.h"

#define HC_NET_MAGIC 0x544e4348u /* "HCNT" */
#define HC_NET_HELLO_MAGIC 0x4c454848u /* "HHEL" */
#define HC_NET_VERSION 1u
#define HC_NET_MAX_SOCKS 16u
#define HC_NET_MAX_CHUNKS 256u /* a message is at most this many chunks (hc_net_chunk_bytes) */
#define HC_NET_MAX_TEXT 1024u /* abort reasons */

typedef enum {
    HC_NET_FRAME_DATA = 1,    /* a chunk of a message; payload: `len` bytes */
    HC_NET_FRAME_ABORT = 2,   /* the sender failed: status, text payload */
    HC_NET_FRAME_MAILBOX = 3, /* seq: the tag; payload: an HcclRootInfo */
    HC_NET_FRAME_BYE = 4      /* the sender destroys the communicator: no payload */
} hc_net_frame_type_t;

typedef struct {
    uint32_t magic;
    uint16_t type;
    uint16_t kind;     /* DATA: hc_net_kind_t */
    uint32_t src;      /* the sender's communicator rank */
    uint32_t step;     /* DATA: the schedule's step */
    uint64_t comm_id;
    uint64_t seq;      /* DATA: collective or pair message number; ABORT: the failed op's; MAILBOX: tag */
    uint64_t offset;   /* DATA: bytes of the message before this chunk */
    uint64_t total;    /* DATA: bytes of the whole message */
    uint32_t len;      /* payload bytes that follow */
    int32_t status;    /* ABORT: the HcclResult */
    uint64_t sig_hash; /* DATA, ABORT: the sender's op */
    hc_op_sig_t sig;
} hc_net_frame_t;

_Static_assert(sizeof(hc_net_frame_t) == 96, "wire frame header layout");

/* The first bytes on every connection, from the connecting (lower) rank. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint64_t comm_id;
    uint32_t from;     /* communicator ranks */
    uint32_t to;
    uint32_t sock;     /* index of this socket among the pair's */
    uint32_t nsocks;
    uint32_t chunk_bytes; /* HOSTCCL_NET_CHUNK_BYTES: both ends cut messages alike */
    uint32_t reserved;
    uint64_t nonce;    /* random, so that equal hellos never repeat */
    uint64_t mac;      /* SipHash-2-4 under the token of everything above */
} hc_net_hello_t;

_Static_assert(sizeof(hc_net_hello_t) == 56, "wire hello layout");

/* The chunk size of a message of `total` bytes: HOSTCCL_NET_CHUNK_BYTES (`base`), or larger so that
 * the message has at most HC_NET_MAX_CHUNKS chunks. Chunk k covers [k * size, min((k + 1) * size,
 * total)); a zero-byte message is one empty chunk. Both ends compute it, so a receiver can tell each
 * chunk's place and refuse one that does not fit it or comes twice. */
uint64_t hc_net_chunk_bytes(uint64_t total, uint64_t base);

/* SipHash-2-4 of len bytes under a 128-bit key. */
uint64_t hc_net_siphash(const uint8_t key[16], const void *data, size_t len);

/* The communicator's id on the wire (not secret: a keyed hash of nothing). */
uint64_t hc_net_comm_id(const uint8_t token[16]);

/* Fill the MAC of a hello under token; check one that arrived (magic, version, comm id, ranks,
 * socket index against what this rank expects: `to` is this rank, `from` below it). Logs what is
 * wrong at warning level (a stranger, not an error of ours) and returns HCCL_E_PARA. */
void hc_net_hello_seal(hc_net_hello_t *hello, const uint8_t token[16]);
HcclResult hc_net_hello_check(const hc_net_hello_t *hello, const uint8_t token[16], uint64_t comm_id, uint32_t me,
                              uint32_t nranks, uint32_t nsocks, uint32_t chunk_bytes);

/* Check a frame header: magic, a known type, the communicator, a source rank in range (not this
 * one), a payload length within the bound of its type, and for DATA a kind and a chunk that is one
 * of its message's (hc_net_chunk_bytes with base `chunk_bytes`). Logs at error level what is wrong
 * (HCCL_E_TCP_TRANSFER): a peer of this communicator sent it. */
HcclResult hc_net_frame_check(const hc_net_frame_t *frame, uint64_t comm_id, uint32_t me, uint32_t nranks,
                              uint64_t chunk_bytes);

#endif /* HC_NET_WIRE_H */
