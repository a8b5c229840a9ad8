/*
 * Wire format of the rendezvous store (torchrun's TCPStore pattern, much reduced).
 *
 * A client sends requests, one at a time, each a fixed header followed by key_len key bytes and
 * value_len value bytes:
 *
 *     offset  0  u32 magic      HC_STORE_MAGIC
 *             4  u16 version    HC_STORE_VERSION
 *             6  u16 type       HC_STORE_REQ_SET or HC_STORE_REQ_GET
 *             8  u8  token[16]  the job's secret (HOSTCCL_STORE_TOKEN)
 *            24  u32 key_len    1..HC_STORE_MAX_KEY, printable ASCII without spaces
 *            28  u32 value_len  0..HC_STORE_MAX_VALUE (0 for GET)
 *            32  u32 wait_ms    GET: how long the server may hold the request for the key
 *
 * and receives, for each request, a reply header followed by value_len value bytes (GET only):
 *
 *     offset  0  u32 magic      HC_STORE_MAGIC
 *             4  u32 status     hc_store_status_t
 *             8  u32 value_len
 *
 * All integers are big-endian. The server checks magic, version and token on every request and
 * bounds both lengths before it allocates anything; a request that fails a check gets an error
 * reply (when the peer looks like a store client at all) and the connection is closed.
 */
#ifndef HC_STORE_PROTO_H
#define HC_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define HC_STORE_MAGIC 0x48435354u /* "HCST" */
#define HC_STORE_VERSION 1u

#define HC_STORE_TOKEN_BYTES 16u
#define HC_STORE_TOKEN_HEX_BYTES (2u * HC_STORE_TOKEN_BYTES + 1u) /* with the NUL */

#define HC_STORE_MAX_KEY 256u
#define HC_STORE_MAX_VALUE (64u * 1024u)

/* The longest a server holds one GET. A client that wants to wait longer (or forever) asks again
 * when the reply says HC_STORE_STATUS_TIMEOUT; the bound keeps a forgotten request from pinning a
 * connection for days. */
#define HC_STORE_MAX_WAIT_MS (10u * 60u * 1000u)

#define HC_STORE_REQ_HEADER_BYTES 36u
#define HC_STORE_REPLY_HEADER_BYTES 12u

typedef enum {
    HC_STORE_REQ_SET = 1,
    HC_STORE_REQ_GET = 2
} hc_store_req_type_t;

typedef enum {
    HC_STORE_STATUS_OK = 0,
    HC_STORE_STATUS_TIMEOUT = 1,     /* GET: the key was not set within wait_ms */
    HC_STORE_STATUS_DENIED = 2,      /* wrong token */
    HC_STORE_STATUS_BAD_VERSION = 3, /* the server speaks another protocol version */
    HC_STORE_STATUS_TOO_LARGE = 4,   /* key or value longer than the limits */
    HC_STORE_STATUS_BAD_REQUEST = 5, /* unknown type, empty or unprintable key, GET with a value */
    HC_STORE_STATUS_FULL = 6         /* the server holds as many keys or bytes as it accepts */
} hc_store_status_t;

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint8_t token[HC_STORE_TOKEN_BYTES];
    uint32_t key_len;
    uint32_t value_len;
    uint32_t wait_ms;
} hc_store_req_t;

typedef struct {
    uint32_t magic;
    uint32_t status;
    uint32_t value_len;
} hc_store_reply_t;

/* Serialise and parse the fixed headers (no validation: that is the receiver's job). */
void hc_store_req_encode(const hc_store_req_t *req, uint8_t buf[HC_STORE_REQ_HEADER_BYTES]);
void hc_store_req_decode(const uint8_t buf[HC_STORE_REQ_HEADER_BYTES], hc_store_req_t *req_p);
void hc_store_reply_encode(const hc_store_reply_t *reply, uint8_t buf[HC_STORE_REPLY_HEADER_BYTES]);
void hc_store_reply_decode(const uint8_t buf[HC_STORE_REPLY_HEADER_BYTES], hc_store_reply_t *reply_p);

/* A key is 1..HC_STORE_MAX_KEY bytes of printable ASCII without spaces, so that it can be logged. */
int hc_store_key_valid(const uint8_t *key, size_t len);

/* Name of a status for log lines ("wrong token"). */
const char *hc_store_status_str(uint32_t status);

/* Token <-> 32 lowercase hex characters. Parsing accepts either case and returns -1 unless the
 * text is exactly 32 hex digits. */
int hc_store_token_parse(const char *hex, uint8_t token_p[HC_STORE_TOKEN_BYTES]);
void hc_store_token_format(const uint8_t token[HC_STORE_TOKEN_BYTES], char hex_p[HC_STORE_TOKEN_HEX_BYTES]);

/* Constant-time comparison: 1 when equal. A store reachable by other local users must not leak
 * how many leading bytes of a guess were right. */
int hc_store_token_equal(const uint8_t a[HC_STORE_TOKEN_BYTES], const uint8_t b[HC_STORE_TOKEN_BYTES]);

#endif /* HC_STORE_PROTO_H */
