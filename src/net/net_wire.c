/* Wire formats of the TCP transport: the MAC, the hello, the frame header check. */
#include <string.h>

#include "hc_check.h"
#include "net_wire.h"

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, 8); /* little-endian hosts only (net_wire.h) */
    return v;
}

#define SIPROUND(v0, v1, v2, v3)                                                                        \
    do {                                                                                                \
        v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                                       \
        v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                                          \
        v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                                          \
        v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                                       \
    } while (0)

/* SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed PRF, short-input fast, a real MAC. */
uint64_t hc_net_siphash(const uint8_t key[16], const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    size_t words = len / 8;

    for (size_t i = 0; i < words; i++, p += 8) {
        uint64_t m = load_le64(p);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    for (size_t i = 0; i < (len & 7); i++)
        last |= (uint64_t)p[i] << (8 * i);
    v3 ^= last;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t hc_net_comm_id(const uint8_t token[16])
{
    static const char what[] = "hostccl communicator id";

    return hc_net_siphash(token, what, sizeof(what) - 1);
}

void hc_net_hello_seal(hc_net_hello_t *hello, const uint8_t token[16])
{
    hello->mac = hc_net_siphash(token, hello, offsetof(hc_net_hello_t, mac));
}

uint64_t hc_net_chunk_bytes(uint64_t total, uint64_t base)
{
    uint64_t least = total / HC_NET_MAX_CHUNKS + (total % HC_NET_MAX_CHUNKS != 0);

    return least > base ? least : base;
}

HcclResult hc_net_hello_check(const hc_net_hello_t *hello, const uint8_t token[16], uint64_t comm_id, uint32_t me,
                              uint32_t nranks, uint32_t nsocks, uint32_t chunk_bytes)
{
    const char *what = NULL;

    if (hello->magic != HC_NET_HELLO_MAGIC)
        what = "not a hostccl connection (bad magic)";
    else if (hello->version != HC_NET_VERSION)
        what = "another hostccl version";
    else if (hello->comm_id != comm_id)
        what = "a connection for another communicator";
    else if (hello->to != me || hello->from >= me || hello->from >= nranks)
        what = "ranks out of place";
    else if (hello->nsocks != nsocks || hello->sock >= nsocks)
        what = "a socket count that differs from this rank's (HOSTCCL_NSOCKS must be the same on every rank)";
    else if (hello->chunk_bytes != chunk_bytes)
        what = "a chunk size that differs from this rank's (HOSTCCL_NET_CHUNK_BYTES must be the same on every rank)";
    else if (hc_net_siphash(token, hello, offsetof(hc_net_hello_t, mac)) != hello->mac)
        what = "a hello that does not prove the communicator's token";
    if (what == NULL)
        return HCCL_SUCCESS;
    HC_WARN("refusing a connection to this rank's listener: %s (from rank %u, socket %u of %u)", what, hello->from,
            hello->sock, hello->nsocks);
    return HCCL_E_PARA;
}

/* The most a payload of each type may hold (DATA: checked against its chunk instead). */
static uint64_t max_payload(uint16_t type)
{
    switch (type) {
    case HC_NET_FRAME_DATA:
        return UINT32_MAX;
    case HC_NET_FRAME_ABORT:
        return HC_NET_MAX_TEXT;
    case HC_NET_FRAME_MAILBOX:
        return sizeof(HcclRootInfo);
    default:
        return 0;
    }
}

static const char *data_problem(const hc_net_frame_t *f, uint64_t chunk_bytes)
{
    uint64_t chunk;

    if (f->kind < 1 || f->kind > 3)
        return "unknown message kind";
    if (f->total > (uint64_t)1 << 56)
        return "message length out of range";
    chunk = hc_net_chunk_bytes(f->total, chunk_bytes);
    if (f->offset > f->total || f->offset % chunk != 0 ||
        f->len != (f->total - f->offset < chunk ? f->total - f->offset : chunk) || (f->len == 0 && f->offset != 0))
        return "chunk outside its message";
    return NULL;
}

HcclResult hc_net_frame_check(const hc_net_frame_t *f, uint64_t comm_id, uint32_t me, uint32_t nranks,
                              uint64_t chunk_bytes)
{
    const char *what = NULL;

    if (f->magic != HC_NET_MAGIC)
        what = "bad magic (the stream lost its framing)";
    else if (f->type < HC_NET_FRAME_DATA || f->type > HC_NET_FRAME_BYE)
        what = "unknown frame type";
    else if (f->comm_id != comm_id)
        what = "frame of another communicator";
    else if (f->src >= nranks || f->src == me)
        what = "source rank out of range";
    else if (f->len > max_payload(f->type) || (f->type == HC_NET_FRAME_MAILBOX && f->len != sizeof(HcclRootInfo)))
        what = "payload length out of bounds";
    else if (f->type == HC_NET_FRAME_DATA)
        what = data_problem(f, chunk_bytes);
    if (what == NULL)
        return HCCL_SUCCESS;
    HC_ERROR("malformed message from rank %u: %s (type %u, length %u)", f->src, what, f->type, f->len);
    return HCCL_E_TCP_TRANSFER;
}
