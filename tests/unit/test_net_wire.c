/* The TCP transport's wire: SipHash against its reference vectors, the sealed hello, the chunk
 * layout and the frame check, and HCCL_ALGO's parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_select.h"
#include "hc_log.h"
#include "net_wire.h"

static const uint8_t key[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* The first, the 16th and the last of the 64 vectors of the SipHash paper (key 00..0f, message
 * 00..len-1). */
static void test_siphash_vectors(void **state)
{
    uint8_t msg[64];

    (void)state;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    assert_true(hc_net_siphash(key, msg, 0) == 0x726fdb47dd0e0e31ull);
    assert_true(hc_net_siphash(key, msg, 15) == 0xa129ca6149be45e5ull);
    assert_true(hc_net_siphash(key, msg, 63) == 0x958a324ceb064572ull);
}

static hc_net_hello_t sealed(void)
{
    hc_net_hello_t h = {.magic = HC_NET_HELLO_MAGIC, .version = HC_NET_VERSION, .comm_id = hc_net_comm_id(key),
                        .from = 1, .to = 3, .sock = 2, .nsocks = 3, .chunk_bytes = 524288, .nonce = 42};

    hc_net_hello_seal(&h, key);
    return h;
}

static void test_hello(void **state)
{
    uint64_t id = hc_net_comm_id(key);
    uint8_t other[16] = {1};
    hc_net_hello_t h;

    (void)state;
    h = sealed();
    assert_int_equal(hc_net_hello_check(&h, key, id, 3, 4, 3, 524288), HCCL_SUCCESS);
    assert_int_equal(hc_net_hello_check(&h, other, id, 3, 4, 3, 524288), HCCL_E_PARA); /* another token */
    assert_int_equal(hc_net_hello_check(&h, key, id, 2, 4, 3, 524288), HCCL_E_PARA);   /* not for this rank */
    assert_int_equal(hc_net_hello_check(&h, key, id, 3, 4, 2, 524288), HCCL_E_PARA);   /* HOSTCCL_NSOCKS */
    assert_int_equal(hc_net_hello_check(&h, key, id, 3, 4, 3, 4096), HCCL_E_PARA);     /* chunk size */
    h.from = 0; /* any field changed after sealing breaks the MAC */
    assert_int_equal(hc_net_hello_check(&h, key, id, 3, 4, 3, 524288), HCCL_E_PARA);
    h = sealed();
    h.from = 3; /* from must be below to */
    hc_net_hello_seal(&h, key);
    assert_int_equal(hc_net_hello_check(&h, key, id, 3, 4, 3, 524288), HCCL_E_PARA);
}

static void test_chunk_bytes(void **state)
{
    (void)state;
    assert_true(hc_net_chunk_bytes(0, 4096) == 4096);
    assert_true(hc_net_chunk_bytes(1 << 20, 4096) == 4096);
    assert_true(hc_net_chunk_bytes((uint64_t)HC_NET_MAX_CHUNKS * 4096 + 1, 4096) == 4097);
    assert_true(hc_net_chunk_bytes((uint64_t)64 << 30, 524288) == ((uint64_t)64 << 30) / HC_NET_MAX_CHUNKS);
}

static hc_net_frame_t frame(uint64_t offset, uint64_t total, uint32_t len)
{
    return (hc_net_frame_t){.magic = HC_NET_MAGIC, .type = HC_NET_FRAME_DATA, .kind = 1, .src = 1,
                            .comm_id = 7, .seq = 1, .offset = offset, .total = total, .len = len};
}

static void test_frame_check(void **state)
{
    hc_net_frame_t f;

    (void)state;
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "4", 1);
    hc_log_reload();
    f = frame(0, 8192, 4096);
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_SUCCESS);
    f = frame(4096, 8192, 4096);
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_SUCCESS);
    f = frame(0, 0, 0); /* an empty message is one empty chunk */
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_SUCCESS);
    f = frame(2048, 8192, 4096); /* not on a chunk boundary */
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_E_TCP_TRANSFER);
    f = frame(4096, 8192, 100); /* shorter than its chunk */
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_E_TCP_TRANSFER);
    f = frame(8192, 8192, 0); /* past the end */
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_E_TCP_TRANSFER);
    f = frame(0, 8192, 4096);
    assert_int_equal(hc_net_frame_check(&f, 8, 0, 2, 4096), HCCL_E_TCP_TRANSFER); /* another communicator */
    assert_int_equal(hc_net_frame_check(&f, 7, 1, 2, 4096), HCCL_E_TCP_TRANSFER); /* from this rank itself */
    f.magic = 0;
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_E_TCP_TRANSFER);
    f = (hc_net_frame_t){.magic = HC_NET_MAGIC, .type = HC_NET_FRAME_MAILBOX, .src = 1, .comm_id = 7, .len = 10};
    assert_int_equal(hc_net_frame_check(&f, 7, 0, 2, 4096), HCCL_E_TCP_TRANSFER); /* not a root info */
    unsetenv("ASCEND_GLOBAL_LOG_LEVEL");
    hc_log_reload();
}

static void test_algo_parse(void **state)
{
    hc_sched_kind_t req[HC_COLL_COUNT];

    (void)state;
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "4", 1);
    hc_log_reload();
    hc_algo_parse(NULL, req);
    assert_int_equal(req[HC_COLL_ALLREDUCE], HC_SCHED_AUTO);
    hc_algo_parse("level0:NA;level1:ring", req);
    assert_int_equal(req[HC_COLL_ALLREDUCE], HC_SCHED_RING);
    assert_int_equal(req[HC_COLL_BROADCAST], HC_SCHED_RING);
    hc_algo_parse("level0:NA;level1:H-D_R", req);
    assert_int_equal(req[HC_COLL_REDUCE_SCATTER], HC_SCHED_RHD);
    hc_algo_parse("allreduce=level0:NA;level1:ring/alltoall=level0:NA;level1:pairwise", req);
    assert_int_equal(req[HC_COLL_ALLREDUCE], HC_SCHED_RING);
    assert_int_equal(req[HC_COLL_ALLTOALLV], HC_SCHED_PAIRWISE);
    assert_int_equal(req[HC_COLL_ALLGATHER], HC_SCHED_AUTO);
    hc_algo_parse("level0:NA;level1:NHR", req); /* not in hostccl: automatic, with a warning */
    assert_int_equal(req[HC_COLL_ALLREDUCE], HC_SCHED_AUTO);
    hc_algo_parse("level0:NA;level1:pairwise", req); /* AlltoAll only */
    assert_int_equal(req[HC_COLL_ALLREDUCE], HC_SCHED_AUTO);
    assert_int_equal(req[HC_COLL_ALLTOALL], HC_SCHED_PAIRWISE);
    hc_algo_parse("allreduce=level1:ring/bogus=level1:ring", req);
    assert_int_equal(req[HC_COLL_ALLREDUCE], HC_SCHED_RING);
    unsetenv("ASCEND_GLOBAL_LOG_LEVEL");
    hc_log_reload();
}

static void test_cost_model(void **state)
{
    (void)state;
    /* Deterministic means rank order, whatever was asked: in one step while the vectors are small. */
    assert_int_equal(hc_algo_pick_allreduce(HC_SCHED_RING, 8, 1 << 20, 1), HC_SCHED_DIRECT);
    assert_int_equal(hc_algo_pick_allreduce(HC_SCHED_RING, 8, 1 << 10, 1), HC_SCHED_ONESHOT);
    /* Two ranks and a small message: one step, not H-D_R's two; a large one is not sent whole. */
    assert_int_equal(hc_algo_pick_allreduce(HC_SCHED_AUTO, 2, 8, 0), HC_SCHED_ONESHOT);
    assert_int_not_equal(hc_algo_pick_allreduce(HC_SCHED_AUTO, 2, 4 << 20, 0), HC_SCHED_ONESHOT);
    assert_int_not_equal(hc_algo_pick_allreduce(HC_SCHED_AUTO, 32, 8, 0), HC_SCHED_ONESHOT);
    assert_int_equal(hc_algo_pick_allreduce(HC_SCHED_RING, 8, 1 << 20, 0), HC_SCHED_RING);
    /* Many ranks and a small message: fewer latency steps than the ring. */
    assert_int_not_equal(hc_algo_pick_allreduce(HC_SCHED_AUTO, 64, 8, 0), HC_SCHED_RING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_vectors), cmocka_unit_test(test_hello),       cmocka_unit_test(test_chunk_bytes),
        cmocka_unit_test(test_frame_check),     cmocka_unit_test(test_algo_parse), cmocka_unit_test(test_cost_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
