/* Rendezvous store wire format: header codecs, key rule, token text. */
#include <stdio.h>
#include <string.h>

#include "hc_store.h"
#include "store_proto.h"

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | (unsigned)p[1]);
}

void hc_store_req_encode(const hc_store_req_t *req, uint8_t buf[HC_STORE_REQ_HEADER_BYTES])
{
    put_u32(buf + 0, req->magic);
    put_u16(buf + 4, req->version);
    put_u16(buf + 6, req->type);
    memcpy(buf + 8, req->token, HC_STORE_TOKEN_BYTES);
    put_u32(buf + 24, req->key_len);
    put_u32(buf + 28, req->value_len);
    put_u32(buf + 32, req->wait_ms);
}

void hc_store_req_decode(const uint8_t buf[HC_STORE_REQ_HEADER_BYTES], hc_store_req_t *req_p)
{
    req_p->magic = get_u32(buf + 0);
    req_p->version = get_u16(buf + 4);
    req_p->type = get_u16(buf + 6);
    memcpy(req_p->token, buf + 8, HC_STORE_TOKEN_BYTES);
    req_p->key_len = get_u32(buf + 24);
    req_p->value_len = get_u32(buf + 28);
    req_p->wait_ms = get_u32(buf + 32);
}

void hc_store_reply_encode(const hc_store_reply_t *reply, uint8_t buf[HC_STORE_REPLY_HEADER_BYTES])
{
    put_u32(buf + 0, reply->magic);
    put_u32(buf + 4, reply->status);
    put_u32(buf + 8, reply->value_len);
}

void hc_store_reply_decode(const uint8_t buf[HC_STORE_REPLY_HEADER_BYTES], hc_store_reply_t *reply_p)
{
    reply_p->magic = get_u32(buf + 0);
    reply_p->status = get_u32(buf + 4);
    reply_p->value_len = get_u32(buf + 8);
}

int hc_store_key_valid(const uint8_t *key, size_t len)
{
    if (len == 0 || len > HC_STORE_MAX_KEY)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (key[i] < 0x21 || key[i] > 0x7e)
            return 0;
    }
    return 1;
}

const char *hc_store_status_str(uint32_t status)
{
    switch (status) {
    case HC_STORE_STATUS_OK:
        return "ok";
    case HC_STORE_STATUS_TIMEOUT:
        return "key not set in time";
    case HC_STORE_STATUS_DENIED:
        return "wrong token";
    case HC_STORE_STATUS_BAD_VERSION:
        return "protocol version mismatch";
    case HC_STORE_STATUS_TOO_LARGE:
        return "key or value too large";
    case HC_STORE_STATUS_BAD_REQUEST:
        return "malformed request";
    case HC_STORE_STATUS_FULL:
        return "store full";
    default:
        return "unknown status";
    }
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hc_store_token_parse(const char *hex, uint8_t token_p[HC_STORE_TOKEN_BYTES])
{
    uint8_t token[HC_STORE_TOKEN_BYTES];

    if (hex == NULL || strlen(hex) != 2 * HC_STORE_TOKEN_BYTES)
        return -1;
    for (size_t i = 0; i < HC_STORE_TOKEN_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        token[i] = (uint8_t)(hi << 4 | lo);
    }
    memcpy(token_p, token, sizeof(token));
    return 0;
}

void hc_store_token_format(const uint8_t token[HC_STORE_TOKEN_BYTES], char hex_p[HC_STORE_TOKEN_HEX_BYTES])
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < HC_STORE_TOKEN_BYTES; i++) {
        hex_p[2 * i] = digits[token[i] >> 4];
        hex_p[2 * i + 1] = digits[token[i] & 0xf];
    }
    hex_p[2 * HC_STORE_TOKEN_BYTES] = '\0';
}

int hc_store_token_equal(const uint8_t a[HC_STORE_TOKEN_BYTES], const uint8_t b[HC_STORE_TOKEN_BYTES])
{
    volatile uint8_t diff = 0;

    for (size_t i = 0; i < HC_STORE_TOKEN_BYTES; i++)
        diff = (uint8_t)(diff | (a[i] ^ b[i]));
    return diff == 0;
}

void hc_store_exit_key(uint32_t rank, char key_p[HC_STORE_EXIT_KEY_BYTES])
{
    snprintf(key_p, HC_STORE_EXIT_KEY_BYTES, "exit/%u", rank);
}
