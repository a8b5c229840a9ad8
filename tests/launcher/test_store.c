/*
 * The rendezvous store: client calls against a server thread, and raw clients that break the
 * protocol in every way the server promises to survive.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hc_store.h"
#include "hc_time.h"
#include "store_fixture.h"

#define TEST_DEADLINE_NS (10 * HC_NS_PER_S)

static int setup(void **state)
{
    (void)state;
    setenv("HCCL_CONNECT_TIMEOUT", "10", 1);
    return store_fixture_start();
}

static int teardown(void **state)
{
    (void)state;
    store_fixture_stop();
    return 0;
}

static HcclResult get_now(const char *key, void *buf, size_t cap, size_t *len_p)
{
    return hc_store_get(key, buf, cap, len_p, hc_now_ns() + TEST_DEADLINE_NS);
}

/* ---- raw clients ------------------------------------------------------------------------------ */

static int raw_connect(void)
{
    int fd = -1;

    assert_int_equal(hc_sock_connect(store_fixture_addr(), hc_now_ns() + TEST_DEADLINE_NS, &fd), HCCL_SUCCESS);
    return fd;
}

static hc_store_req_t good_req(uint16_t type, uint32_t key_len, uint32_t value_len)
{
    hc_store_req_t req = {.magic = HC_STORE_MAGIC, .version = HC_STORE_VERSION, .type = type,
                          .key_len = key_len, .value_len = value_len};

    memcpy(req.token, store_fixture_token, sizeof(req.token));
    return req;
}

static void raw_send_header(int fd, const hc_store_req_t *req)
{
    uint8_t buf[HC_STORE_REQ_HEADER_BYTES];

    hc_store_req_encode(req, buf);
    assert_int_equal(hc_sock_send_all(fd, buf, sizeof(buf), hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
}

/* Read one reply header and expect `status`, then the server's close. */
static void expect_refusal_then_close(int fd, uint32_t status)
{
    uint8_t buf[HC_STORE_REPLY_HEADER_BYTES];
    hc_store_reply_t reply;
    char byte;

    assert_int_equal(hc_sock_recv_all(fd, buf, sizeof(buf), hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
    hc_store_reply_decode(buf, &reply);
    assert_int_equal(reply.magic, HC_STORE_MAGIC);
    assert_int_equal(reply.status, status);
    assert_int_equal(reply.value_len, 0);
    assert_int_equal(hc_sock_recv_all(fd, &byte, 1, hc_now_ns() + TEST_DEADLINE_NS), HCCL_E_TCP_TRANSFER);
}

static void expect_close(int fd)
{
    char byte;

    assert_int_equal(hc_sock_recv_all(fd, &byte, 1, hc_now_ns() + TEST_DEADLINE_NS), HCCL_E_TCP_TRANSFER);
}

/* ---- cases ------------------------------------------------------------------------------------ */

static void test_set_get(void **state)
{
    char buf[64];
    size_t len = 0;

    (void)state;
    assert_int_equal(hc_store_set("job/a", "hello", 5), HCCL_SUCCESS);
    assert_int_equal(get_now("job/a", buf, sizeof(buf), &len), HCCL_SUCCESS);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);

    /* A second SET replaces the value. */
    assert_int_equal(hc_store_set("job/a", "bye", 3), HCCL_SUCCESS);
    assert_int_equal(get_now("job/a", buf, sizeof(buf), &len), HCCL_SUCCESS);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "bye", 3);

    /* Empty values are values. */
    assert_int_equal(hc_store_set("job/empty", NULL, 0), HCCL_SUCCESS);
    len = 99;
    assert_int_equal(get_now("job/empty", buf, sizeof(buf), &len), HCCL_SUCCESS);
    assert_int_equal(len, 0);

    /* A buffer too small is the caller's error, not a truncation. */
    assert_int_equal(get_now("job/a", buf, 2, &len), HCCL_E_PARA);
}

static void test_large_value(void **state)
{
    uint8_t *value = malloc(HC_STORE_MAX_VALUE), *back = malloc(HC_STORE_MAX_VALUE);
    size_t len = 0;

    (void)state;
    for (size_t i = 0; i < HC_STORE_MAX_VALUE; i++)
        value[i] = (uint8_t)(i * 131u + 7u);
    assert_int_equal(hc_store_set("big", value, HC_STORE_MAX_VALUE), HCCL_SUCCESS);
    assert_int_equal(get_now("big", back, HC_STORE_MAX_VALUE, &len), HCCL_SUCCESS);
    assert_int_equal(len, HC_STORE_MAX_VALUE);
    assert_memory_equal(back, value, HC_STORE_MAX_VALUE);
    free(value);
    free(back);
}

typedef struct {
    const char *key;
    HcclResult res;
    char value[32];
    size_t len;
} getter_t;

static void *getter_main(void *arg)
{
    getter_t *g = arg;

    g->res = hc_store_get(g->key, g->value, sizeof(g->value), &g->len, hc_now_ns() + TEST_DEADLINE_NS);
    return NULL;
}

static void test_blocking_get(void **state)
{
    getter_t getters[3];
    pthread_t threads[3];

    (void)state;
    for (int i = 0; i < 3; i++) {
        getters[i] = (getter_t){.key = "late", .res = HCCL_E_INTERNAL};
        assert_int_equal(pthread_create(&threads[i], NULL, getter_main, &getters[i]), 0);
    }
    /* Set only once all three are parked on the server, so the wake-up path is what is tested. */
    assert_int_equal(store_fixture_wait_parked(3, 10000), 0);
    assert_int_equal(hc_store_set("late", "value!", 6), HCCL_SUCCESS);
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(getters[i].res, HCCL_SUCCESS);
        assert_int_equal(getters[i].len, 6);
        assert_memory_equal(getters[i].value, "value!", 6);
    }
}

static void test_get_timeout(void **state)
{
    char buf[8];
    size_t len = 0;
    int64_t start = hc_now_ns(), elapsed;

    (void)state;
    assert_int_equal(hc_store_get("never", buf, sizeof(buf), &len, start + 300 * HC_NS_PER_MS), HCCL_E_TIMEOUT);
    elapsed = hc_now_ns() - start;
    assert_true(elapsed >= 300 * HC_NS_PER_MS);
    assert_true(elapsed < 5 * HC_NS_PER_S);

    /* A deadline already passed still asks once, without waiting. */
    assert_int_equal(hc_store_get("never", buf, sizeof(buf), &len, hc_now_ns()), HCCL_E_TIMEOUT);
}

static void test_wrong_token(void **state)
{
    char buf[8];
    size_t len = 0;

    (void)state;
    setenv("HOSTCCL_STORE_TOKEN", "ffeeddccbbaa99887766554433221100", 1);
    assert_int_equal(hc_store_set("secret", "x", 1), HCCL_E_UNAVAIL);
    assert_int_equal(hc_store_get("secret", buf, sizeof(buf), &len, hc_now_ns()), HCCL_E_UNAVAIL);
    setenv("HOSTCCL_STORE_TOKEN", "not-hex", 1);
    assert_int_equal(hc_store_set("secret", "x", 1), HCCL_E_PARA);
    unsetenv("HOSTCCL_STORE_TOKEN");
    assert_int_equal(hc_store_set("secret", "x", 1), HCCL_E_PARA);
    setenv("HOSTCCL_STORE_TOKEN", store_fixture_token_hex, 1);
    /* The refused SET stored nothing. */
    assert_int_equal(hc_store_get("secret", buf, sizeof(buf), &len, hc_now_ns()), HCCL_E_TIMEOUT);
}

static void test_client_limits(void **state)
{
    char key[HC_STORE_MAX_KEY + 2];
    static uint8_t value[HC_STORE_MAX_VALUE + 1];
    char buf[8];
    size_t len;

    (void)state;
    memset(key, 'k', sizeof(key));
    key[HC_STORE_MAX_KEY] = '\0';
    assert_int_equal(hc_store_set(key, "v", 1), HCCL_SUCCESS);
    key[HC_STORE_MAX_KEY] = 'k';
    key[HC_STORE_MAX_KEY + 1] = '\0';
    assert_int_equal(hc_store_set(key, "v", 1), HCCL_E_PARA);
    assert_int_equal(hc_store_set("has space", "v", 1), HCCL_E_PARA);
    assert_int_equal(hc_store_set("", "v", 1), HCCL_E_PARA);
    assert_int_equal(hc_store_set("ok", value, sizeof(value)), HCCL_E_PARA);
    assert_int_equal(hc_store_get(NULL, buf, sizeof(buf), &len, 0), HCCL_E_PARA);
    assert_int_equal(hc_store_get("ok", buf, sizeof(buf), NULL, 0), HCCL_E_PTR);
}

/* The server bounds lengths before allocating: a header claiming 4 GiB is refused at once. */
static void test_server_refuses_oversize(void **state)
{
    const uint32_t lengths[][2] = {{HC_STORE_MAX_KEY + 1, 0}, {4, HC_STORE_MAX_VALUE + 1}, {0xffffffffu, 0xffffffffu}};
    char buf[8];
    size_t len;

    (void)state;
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        int fd = raw_connect();
        hc_store_req_t req = good_req(HC_STORE_REQ_SET, lengths[i][0], lengths[i][1]);
        raw_send_header(fd, &req);
        expect_refusal_then_close(fd, HC_STORE_STATUS_TOO_LARGE);
        close(fd);
    }
    assert_int_equal(hc_store_set("after", "ok", 2), HCCL_SUCCESS);
    assert_int_equal(get_now("after", buf, sizeof(buf), &len), HCCL_SUCCESS);
}

static void test_server_refuses_bad_requests(void **state)
{
    hc_store_req_t reqs[4];
    const uint32_t expected[4] = {HC_STORE_STATUS_BAD_VERSION, HC_STORE_STATUS_DENIED, HC_STORE_STATUS_BAD_REQUEST,
                                  HC_STORE_STATUS_BAD_REQUEST};

    (void)state;
    reqs[0] = good_req(HC_STORE_REQ_GET, 3, 0);
    reqs[0].version = HC_STORE_VERSION + 1;
    reqs[1] = good_req(HC_STORE_REQ_GET, 3, 0);
    reqs[1].token[5] ^= 1;
    reqs[2] = good_req(HC_STORE_REQ_GET, 3, 4); /* a GET carries no value */
    reqs[3] = good_req(7, 3, 0);
    for (int i = 0; i < 4; i++) {
        int fd = raw_connect();
        raw_send_header(fd, &reqs[i]);
        expect_refusal_then_close(fd, expected[i]);
        close(fd);
    }
}

static void test_server_refuses_unprintable_key(void **state)
{
    hc_store_req_t req = good_req(HC_STORE_REQ_SET, 3, 1);
    int fd = raw_connect();

    (void)state;
    raw_send_header(fd, &req);
    assert_int_equal(hc_sock_send_all(fd, "a\nbv", 4, hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
    expect_refusal_then_close(fd, HC_STORE_STATUS_BAD_REQUEST);
    close(fd);
}

/* Garbage is dropped; a client stalled inside a header or parked in a GET holds up nobody. */
static void test_garbage_and_stalled_clients(void **state)
{
    uint8_t header[HC_STORE_REQ_HEADER_BYTES];
    hc_store_req_t req = good_req(HC_STORE_REQ_SET, 4, 1);
    char garbage[64], buf[8];
    int stalled = raw_connect(), junk = raw_connect();
    getter_t parked = {.key = "nobody-sets-this", .res = HCCL_E_INTERNAL};
    pthread_t thread;
    size_t len;

    (void)state;
    hc_store_req_encode(&req, header);
    assert_int_equal(hc_sock_send_all(stalled, header, 10, hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
    memset(garbage, 'x', sizeof(garbage));
    assert_int_equal(hc_sock_send_all(junk, garbage, sizeof(garbage), hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
    expect_close(junk);
    close(junk);
    assert_int_equal(pthread_create(&thread, NULL, getter_main, &parked), 0);
    assert_int_equal(store_fixture_wait_parked(1, 10000), 0);

    assert_int_equal(hc_store_set("good", "g", 1), HCCL_SUCCESS);
    assert_int_equal(get_now("good", buf, sizeof(buf), &len), HCCL_SUCCESS);
    assert_int_equal(len, 1);

    /* The stalled client may still finish its request. */
    assert_int_equal(hc_sock_send_all(stalled, header + 10, sizeof(header) - 10, hc_now_ns() + TEST_DEADLINE_NS),
                     HCCL_SUCCESS);
    assert_int_equal(hc_sock_send_all(stalled, "slowv", 5, hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
    assert_int_equal(get_now("slow", buf, sizeof(buf), &len), HCCL_SUCCESS);
    assert_memory_equal(buf, "v", 1);
    close(stalled);

    assert_int_equal(hc_store_set("nobody-sets-this", "late", 4), HCCL_SUCCESS);
    pthread_join(thread, NULL);
    assert_int_equal(parked.res, HCCL_SUCCESS);
}

/* A client that gives up while parked is forgotten, and a later SET does not trip over it. */
static void test_parked_client_leaves(void **state)
{
    hc_store_req_t req = good_req(HC_STORE_REQ_GET, 4, 0);
    char buf[8];
    size_t len;
    int fd = raw_connect();

    (void)state;
    req.wait_ms = 60000;
    raw_send_header(fd, &req);
    assert_int_equal(hc_sock_send_all(fd, "gone", 4, hc_now_ns() + TEST_DEADLINE_NS), HCCL_SUCCESS);
    assert_int_equal(store_fixture_wait_parked(1, 10000), 0);
    close(fd);
    assert_int_equal(hc_store_set("gone", "x", 1), HCCL_SUCCESS);
    assert_int_equal(get_now("gone", buf, sizeof(buf), &len), HCCL_SUCCESS);
}

static void test_token_text(void **state)
{
    uint8_t token[HC_STORE_TOKEN_BYTES];
    char hex[HC_STORE_TOKEN_HEX_BYTES];

    (void)state;
    assert_int_equal(hc_store_token_parse("00112233445566778899AABBCCDDEEFF", token), 0);
    assert_memory_equal(token, store_fixture_token, sizeof(token));
    hc_store_token_format(token, hex);
    assert_string_equal(hex, store_fixture_token_hex);
    assert_int_equal(hc_store_token_parse("00112233445566778899aabbccddeef", token), -1);
    assert_int_equal(hc_store_token_parse("00112233445566778899aabbccddeefg", token), -1);
    assert_int_equal(hc_store_token_parse(NULL, token), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_set_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocking_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_oversize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_unprintable_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_and_stalled_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parked_client_leaves, setup, teardown),
        cmocka_unit_test(test_token_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
