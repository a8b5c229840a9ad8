/*
 * The rendezvous store's client. Each call is one short connection (connect, request, reply,
 * close): a job makes a handful of calls, and a connection that lives only as long as its request
 * can never be left half-used by an error.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_log.h"
#include "hc_store.h"
#include "hc_time.h"

/* How long after the end of a GET's wait the client still waits for the server's answer: the
 * server answers at the end of the wait, so this only covers scheduling and loopback latency. */
#define REPLY_GRACE_NS (2 * HC_NS_PER_S)

typedef hc_store_endpoint_t endpoint_t;

int hc_store_client_configured(void)
{
    return hc_config_str(HC_CFG_STORE) != NULL;
}

/* The store's address and token from HOSTCCL_STORE and HOSTCCL_STORE_TOKEN. */
static HcclResult load_endpoint(endpoint_t *ep_p)
{
    const char *store = hc_config_str(HC_CFG_STORE);
    const char *token = hc_config_str(HC_CFG_STORE_TOKEN);

    if (store == NULL) {
        HC_ERROR("HOSTCCL_STORE is not set: no rendezvous store to talk to");
        return HCCL_E_NOT_SUPPORT;
    }
    if (hc_sockaddr_parse(store, &ep_p->addr) != HCCL_SUCCESS) {
        HC_ERROR("HOSTCCL_STORE=\"%s\" is not a numeric host:port", store);
        return HCCL_E_PARA;
    }
    if (hc_store_token_parse(token, ep_p->token) != 0) {
        HC_ERROR("HOSTCCL_STORE_TOKEN must be 32 hex digits when HOSTCCL_STORE is set (it is %s)",
                 token == NULL ? "unset" : "malformed");
        return HCCL_E_PARA;
    }
    hc_sockaddr_str(&ep_p->addr, ep_p->addr_text, sizeof(ep_p->addr_text));
    return HCCL_SUCCESS;
}

static HcclResult check_key(const char *key)
{
    if (key == NULL || !hc_store_key_valid((const uint8_t *)key, strlen(key))) {
        HC_ERROR("store key \"%.64s\" is invalid: 1 to %u printable ASCII characters without spaces",
                 key != NULL ? key : "(null)", HC_STORE_MAX_KEY);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

static HcclResult send_request(int fd, const hc_store_req_t *req, const char *key, const void *value,
                               int64_t deadline_ns)
{
    uint8_t head[HC_STORE_REQ_HEADER_BYTES + HC_STORE_MAX_KEY];

    hc_store_req_encode(req, head);
    memcpy(head + HC_STORE_REQ_HEADER_BYTES, key, req->key_len);
    HC_CHECK(hc_sock_send_all(fd, head, HC_STORE_REQ_HEADER_BYTES + req->key_len, deadline_ns));
    if (req->value_len > 0)
        HC_CHECK(hc_sock_send_all(fd, value, req->value_len, deadline_ns));
    return HCCL_SUCCESS;
}

/* Turn a refusal into a result, logging what the server objected to. The end of a GET's wait is
 * HCCL_E_AGAIN here, distinct from a socket timeout: hc_store_get decides whether to ask again. */
static HcclResult status_result(const endpoint_t *ep, const char *key, uint32_t status)
{
    switch (status) {
    case HC_STORE_STATUS_OK:
        return HCCL_SUCCESS;
    case HC_STORE_STATUS_TIMEOUT:
        return HCCL_E_AGAIN;
    case HC_STORE_STATUS_DENIED:
        HC_ERROR("store %s refused key \"%s\": wrong token (HOSTCCL_STORE_TOKEN must be the one the launcher "
                 "gave this job)", ep->addr_text, key);
        return HCCL_E_UNAVAIL;
    case HC_STORE_STATUS_FULL:
        HC_ERROR("store %s refused key \"%s\": the store is full", ep->addr_text, key);
        return HCCL_E_MEMORY;
    default:
        HC_ERROR("store %s refused key \"%s\": %s", ep->addr_text, key, hc_store_status_str(status));
        return status == HC_STORE_STATUS_TOO_LARGE ? HCCL_E_PARA : HCCL_E_INTERNAL;
    }
}

/*
 * One request on a fresh connection. For a GET answered with a value, the value lands in
 * buf (cap bytes) and its length in *len_p. The reply header is validated before its length is
 * believed.
 */
static HcclResult transact(const endpoint_t *ep, const hc_store_req_t *req, const char *key, const void *value,
                           void *buf, size_t cap, size_t *len_p, int64_t connect_deadline_ns,
                           int64_t reply_deadline_ns)
{
    uint8_t raw[HC_STORE_REPLY_HEADER_BYTES];
    hc_store_reply_t rep;
    HcclResult res;
    int fd = -1;

    HC_CHECK(hc_sock_connect(&ep->addr, connect_deadline_ns, &fd));
    HC_CHECK_GOTO(send_request(fd, req, key, value, reply_deadline_ns), res, err_lost);
    HC_CHECK_GOTO(hc_sock_recv_all(fd, raw, sizeof(raw), reply_deadline_ns), res, err_lost);
    hc_store_reply_decode(raw, &rep);
    if (rep.magic != HC_STORE_MAGIC || rep.value_len > HC_STORE_MAX_VALUE ||
        (rep.status != HC_STORE_STATUS_OK && rep.value_len != 0)) {
        HC_ERROR("store %s sent a malformed reply for key \"%s\" (magic 0x%08x, %u bytes)", ep->addr_text, key,
                 rep.magic, rep.value_len);
        res = HCCL_E_INTERNAL;
        goto err_close;
    }
    HC_CHECK_GOTO(status_result(ep, key, rep.status), res, err_close);
    if (rep.value_len > cap) {
        HC_ERROR("value of store key \"%s\" is %u bytes; the caller's buffer holds %zu", key, rep.value_len, cap);
        res = HCCL_E_PARA;
        goto err_close;
    }
    if (rep.value_len > 0)
        HC_CHECK_GOTO(hc_sock_recv_all(fd, buf, rep.value_len, reply_deadline_ns), res, err_lost);
    hc_sock_close(&fd);
    if (len_p != NULL)
        *len_p = rep.value_len;
    return HCCL_SUCCESS;

err_lost:
    HC_ERROR("store %s: %s during the request for key \"%s\"", ep->addr_text,
             res == HCCL_E_TIMEOUT ? "no answer in time" : "connection lost", key);
err_close:
    hc_sock_close(&fd);
    return res;
}

HcclResult hc_store_set(const char *key, const void *value, size_t len)
{
    endpoint_t ep;

    HC_CHECK(load_endpoint(&ep));
    return hc_store_set_at(&ep, key, value, len);
}

HcclResult hc_store_get(const char *key, void *buf, size_t cap, size_t *len_p, int64_t deadline_ns)
{
    endpoint_t ep;

    HC_CHECK(load_endpoint(&ep));
    return hc_store_get_at(&ep, key, buf, cap, len_p, deadline_ns);
}

HcclResult hc_store_set_at(const hc_store_endpoint_t *ep, const char *key, const void *value, size_t len)
{
    int64_t deadline_ns = hc_deadline_after_s(hc_config_int(HC_CFG_CONNECT_TIMEOUT));
    hc_store_req_t req = {.magic = HC_STORE_MAGIC, .version = HC_STORE_VERSION, .type = HC_STORE_REQ_SET};

    HC_CHECK(check_key(key));
    if (value == NULL && len > 0) {
        HC_ERROR("store value for key \"%s\" is NULL with %zu bytes", key, len);
        return HCCL_E_PTR;
    }
    if (len > HC_STORE_MAX_VALUE) {
        HC_ERROR("store value for key \"%s\" is %zu bytes; the store takes at most %u", key, len,
                 HC_STORE_MAX_VALUE);
        return HCCL_E_PARA;
    }
    memcpy(req.token, ep->token, sizeof(req.token));
    req.key_len = (uint32_t)strlen(key);
    req.value_len = (uint32_t)len;
    return transact(ep, &req, key, value, NULL, 0, NULL, deadline_ns, deadline_ns);
}

/* The wait to ask the server for: what is left of the deadline, at most what a server holds. */
static uint32_t wait_for(int64_t deadline_ns)
{
    int64_t left_ms;

    if (deadline_ns == 0)
        return HC_STORE_MAX_WAIT_MS;
    left_ms = (deadline_ns - hc_now_ns()) / HC_NS_PER_MS;
    if (left_ms <= 0)
        return 0;
    return left_ms < HC_STORE_MAX_WAIT_MS ? (uint32_t)left_ms : HC_STORE_MAX_WAIT_MS;
}

HcclResult hc_store_get_at(const hc_store_endpoint_t *ep, const char *key, void *buf, size_t cap, size_t *len_p,
                           int64_t deadline_ns)
{
    hc_store_req_t req = {.magic = HC_STORE_MAGIC, .version = HC_STORE_VERSION, .type = HC_STORE_REQ_GET};

    HC_CHECK(check_key(key));
    if ((buf == NULL && cap > 0) || len_p == NULL) {
        HC_ERROR("store get of key \"%s\": NULL buffer or length", key);
        return HCCL_E_PTR;
    }
    memcpy(req.token, ep->token, sizeof(req.token));
    req.key_len = (uint32_t)strlen(key);
    for (;;) {
        int64_t now = hc_now_ns();
        int64_t connect_deadline = now + hc_config_int(HC_CFG_CONNECT_TIMEOUT) * HC_NS_PER_S;
        HcclResult res;

        req.wait_ms = wait_for(deadline_ns);
        if (deadline_ns != 0 && deadline_ns + REPLY_GRACE_NS < connect_deadline)
            connect_deadline = deadline_ns + REPLY_GRACE_NS;
        res = transact(ep, &req, key, NULL, buf, cap, len_p, connect_deadline,
                       now + (int64_t)req.wait_ms * HC_NS_PER_MS + REPLY_GRACE_NS);
        /* The server holds a GET for at most HC_STORE_MAX_WAIT_MS: ask again until our deadline. */
        if (res != HCCL_E_AGAIN)
            return res;
        if (deadline_ns != 0 && hc_deadline_passed(deadline_ns))
            return HCCL_E_TIMEOUT;
    }
}
