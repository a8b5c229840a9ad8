/*
 * SHA-256 (FIPS 180-4), for tokens that every rank derives from what it shares with the others
 * (the rank table and an optional secret) instead of receiving them: a stranger without those
 * bytes cannot compute the token.
 */
#ifndef HC_SHA256_H
#define HC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define HC_SHA256_BYTES 32

typedef struct {
    uint32_t state[8];
    uint64_t total;       /* bytes hashed so far */
    uint8_t block[64];
    size_t used;          /* bytes waiting in block */
} hc_sha256_t;

void hc_sha256_init(hc_sha256_t *ctx);
void hc_sha256_update(hc_sha256_t *ctx, const void *data, size_t len);
void hc_sha256_final(hc_sha256_t *ctx, uint8_t digest[HC_SHA256_BYTES]);

#endif /* HC_SHA256_H */
